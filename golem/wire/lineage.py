"""How runs and conversations are found in the Temporal UI: search attributes and summaries.

Shared by the client (standalone runs), the delegation activity and by workflows that
start runs as children (conversations, ``run_agent``; their workflow-only part is
golem.workflows.children), so every run carries the same lineage however it started.
"""

from __future__ import annotations

from typing import Any

from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

from golem.wire import names

CONVERSATION_ID = SearchAttributeKey.for_keyword(names.CONVERSATION_ID_ATTRIBUTE)
AGENT = SearchAttributeKey.for_keyword(names.AGENT_ATTRIBUTE)
PARENT_RUN_ID = SearchAttributeKey.for_keyword(names.PARENT_RUN_ID_ATTRIBUTE)
#: Who owns a conversation started by ``golem serve`` with auth (the token's subject).
OWNER = SearchAttributeKey.for_keyword(names.OWNER_ATTRIBUTE)
#: The run's summary again, as a column the UI's workflow list can show (the list has none
#: for a workflow's own summary). Optional: a namespace set up by 0.2.0 lacks it, and runs
#: there start without it (docs/adr/0034-readable-workflow-list.md).
SUMMARY = SearchAttributeKey.for_keyword(names.SUMMARY_ATTRIBUTE)
#: How many calls the run waits for now (a person's decision or an application's result),
#: 0 when none: the pending inbox's filter (golem.client.inbox). Optional like GolemSummary:
#: a run started where the namespace lacks it never sets it (docs/adr/0047-pending-inbox.md).
WAITING = SearchAttributeKey.for_int(names.WAITING_ATTRIBUTE)
#: The run ids of the inline turns a conversation's workflow run took (a closed run keeps
#: its own): ``GolemTurnRuns = 'ID'`` finds an inline turn's conversation. Optional like
#: GolemWaiting: only a conversation whose start carried it sets it (docs/adr/0050).
TURN_RUNS = SearchAttributeKey.for_keyword_list(names.TURN_RUNS_ATTRIBUTE)
#: Register these on a cluster once (``golem setup``); the dev server gets them from ``golem dev``.
SEARCH_ATTRIBUTES = (CONVERSATION_ID, AGENT, PARENT_RUN_ID, OWNER, SUMMARY, WAITING, TURN_RUNS)


def run_search_attributes(
    conversation_id: str,
    agent: str,
    parent_run_id: str = "",
    owner: str = "",
    *,
    summary: str | None = None,
    waiting: bool = False,
    turn_runs: bool = False,
) -> TypedSearchAttributes:
    """The lineage every run (and conversation workflow) carries; ``owner`` for a
    conversation someone owns; ``summary`` too, where the namespace has ``GolemSummary``;
    ``waiting``: ``GolemWaiting`` at 0, where the namespace has it (the run keeps it true);
    ``turn_runs``: ``GolemTurnRuns`` empty (the start fails where the namespace lacks it;
    Temporal keeps no empty list, so the conversation's memo says it was carried)."""
    pairs: list[SearchAttributePair[Any]] = [
        SearchAttributePair(CONVERSATION_ID, conversation_id),
        SearchAttributePair(AGENT, agent),
    ]
    if parent_run_id:
        pairs.append(SearchAttributePair(PARENT_RUN_ID, parent_run_id))
    if owner:
        pairs.append(SearchAttributePair(OWNER, owner))
    if summary is not None:
        pairs.append(SearchAttributePair(SUMMARY, summary))
    if waiting:
        pairs.append(SearchAttributePair(WAITING, 0))
    if turn_runs:
        pairs.append(SearchAttributePair(TURN_RUNS, []))
    return TypedSearchAttributes(pairs)


def details(run_id: str, conversation_id: str, agent: str) -> str:
    """The UI's static details of a run: golem's ids, which the UI's own labels blur."""
    # The UI shows Temporal's Run ID beside the Workflow ID: say which one is golem's.
    return (
        f"**golem run id** {run_id} (the Workflow ID; the Run ID is Temporal's)\n\n"
        f"**conversation** {conversation_id} · **agent** {agent}"
    )


def summary(agent: str, prompt: str | None) -> str:
    """The UI's one-line summary of a run: the agent and the prompt's first line."""
    text = (prompt or "").strip()
    first = text.splitlines()[0] if text else "(no prompt)"
    return f"{agent}: {first[:120]}"
