"""Every live ``workflow.patched`` id golem's workflows use, with the ADR that explains it
and the release after which it can go (docs/adr/0015-wire-format.md, "Compatibility
policy").

    if patched(NEW_THING):               # golem.workflows.patches.patched, never the SDK's
        ...                              # directly: an id must be registered here

The first release (0.2.0) starts with none: until then the wire format changed freely and
the replay corpus was re-recorded.
"""

from __future__ import annotations

from dataclasses import dataclass

from temporalio import workflow


@dataclass(frozen=True)
class Patch:
    """A live patch: histories recorded before ``since`` take the old branch."""

    id: str
    adr: str
    """The decision record that explains the change."""
    since: str
    """The first release whose code takes the new branch."""
    removable_after: str
    """The last release whose in-flight runs may need the old branch."""


#: Durably, toolsets' tools reach the model in the agent's toolset order, as in process.
TOOLSETS_IN_AGENT_ORDER = "golem.toolsets-in-agent-order"

#: A run that waits for approvals says so in its timeline (a timer whose summary names the
#: calls and the command that answers them) and in the workflow list's GolemSummary.
VISIBLE_APPROVALS = "golem.visible-approvals"

#: A run a workflow starts (a delegate, a conversation's turn, ``run_agent``'s child) has
#: static details naming golem's ids, as a client-started run has.
CHILD_DETAILS = "golem.child-details"

#: A run that waits for calls (a person's decision, an application's result) counts them
#: in its ``GolemWaiting`` search attribute and names them in its memo while it waits.
PENDING_INBOX = "golem.pending-inbox"

#: The ``golem.approve`` update answers what the decisions did (the decisions recorded, and
#: the run paused again or its ``Completed`` outcome) instead of ``null`` once the run ends.
READABLE_APPROVALS = "golem.readable-approvals"

#: A conversation continuing as new gives the next run a memo naming its summary (the
#: static one does not cross continue-as-new).
CONTINUED_SUMMARY = "golem.continued-summary"

#: A client-run tool's call is bounded by its agent's ``external_timeout`` (none: it waits
#: for the application), not by the ``approval_timeout`` that bounds the approvals beside it.
EXTERNAL_TIMEOUT = "golem.external-timeout"

#: A run with an approval evaluator (on its own, a turn, a delegated run) waits for a
#: person while the evaluations run: whoever answers a call first decides it (a person's
#: answer cancels that call's evaluation at once).
EVALUATION_RACE = "golem.evaluation-race"

#: A conversation continuing as new after a handoff carries how many of its runs were
#: handed over to (``ConversationInput.handed``), so the UI counts the person's turns.
HANDED_RUNS = "golem.handed-runs"

#: A run's messages past a page in UTF-8 bytes (non-ASCII text), not only in characters,
#: are paged: carried by value they could pass Temporal's payload limit.
UTF8_PAGES = "golem.utf8-pages"

#: An inline conversation whose start carried ``GolemTurnRuns`` lists each inline turn's
#: run id there as the turn starts, up to the list's bound (golem.workflows.listed_turns).
TURN_RUNS_LISTED = "golem.turn-runs-listed"

#: A run drops a ``golem.decide`` or ``golem.paused`` signal of the wrong arity (logged)
#: instead of failing on its ``TypeError``.
SIGNAL_ARITY = "golem.signal-arity"

#: A run (or an inline turn) takes a ``golem.paused`` report only from a run it started that
#: still runs: any client may send the signal, and a forged one listed made-up calls.
REPORTS_FROM_CHILDREN = "golem.reports-from-children"

#: The live patches, by id.
PATCHES: dict[str, Patch] = {
    TOOLSETS_IN_AGENT_ORDER: Patch(
        TOOLSETS_IN_AGENT_ORDER,
        adr="docs/adr/0026-toolsets-tools-in-the-agents-order.md",
        since="0.3.0",
        removable_after="0.2.0",
    ),
    VISIBLE_APPROVALS: Patch(
        VISIBLE_APPROVALS,
        adr="docs/adr/0034-readable-workflow-list.md",
        since="0.3.0",
        removable_after="0.2.0",
    ),
    CHILD_DETAILS: Patch(
        CHILD_DETAILS,
        adr="docs/adr/0034-readable-workflow-list.md",
        since="0.3.0",
        removable_after="0.2.0",
    ),
    PENDING_INBOX: Patch(
        PENDING_INBOX,
        adr="docs/adr/0047-pending-inbox.md",
        since="0.3.0",
        removable_after="0.2.0",
    ),
    CONTINUED_SUMMARY: Patch(
        CONTINUED_SUMMARY,
        adr="docs/adr/0034-readable-workflow-list.md",
        since="0.3.0",
        removable_after="0.2.0",
    ),
    READABLE_APPROVALS: Patch(
        READABLE_APPROVALS,
        adr="docs/adr/0039-what-an-approval-answers.md",
        since="0.3.0",
        removable_after="0.2.0",
    ),
    EXTERNAL_TIMEOUT: Patch(
        EXTERNAL_TIMEOUT,
        adr="docs/adr/0030-decisions.md",
        since="0.3.0",
        removable_after="0.2.0",
    ),
    EVALUATION_RACE: Patch(
        EVALUATION_RACE,
        adr="docs/adr/0030-decisions.md",
        since="0.3.0",
        removable_after="0.2.0",
    ),
    UTF8_PAGES: Patch(
        UTF8_PAGES,
        adr="docs/adr/0005-durable-runs.md",
        since="0.3.0",
        removable_after="0.2.0",
    ),
    TURN_RUNS_LISTED: Patch(
        TURN_RUNS_LISTED,
        adr="docs/adr/0050-turns-inline.md",
        since="0.3.0",
        removable_after="0.2.0",
    ),
    HANDED_RUNS: Patch(
        HANDED_RUNS,
        adr="docs/adr/0019-agents-calling-agents.md",
        since="0.3.0",
        removable_after="0.2.0",
    ),
    SIGNAL_ARITY: Patch(
        SIGNAL_ARITY,
        adr="docs/adr/0005-durable-runs.md",
        since="0.3.0",
        removable_after="0.2.0",
    ),
    REPORTS_FROM_CHILDREN: Patch(
        REPORTS_FROM_CHILDREN,
        adr="docs/adr/0052-reports-from-children.md",
        since="0.3.0",
        removable_after="0.2.0",
    ),
}


def patched(patch_id: str) -> bool:
    """``workflow.patched`` for a registered patch (``KeyError`` for an unregistered id, so
    a patch cannot ship without its record)."""
    return workflow.patched(PATCHES[patch_id].id)
