"""An inline conversation's ``GolemTurnRuns``: the run ids of the inline turns this
workflow run took, so a visibility query ``GolemTurnRuns = 'ID'`` finds the conversation
run that took turn ``ID`` (docs/adr/0050-turns-inline.md).

    listed = ListedTurns()
    listed.take(run_id)         # as the turn starts: one upsert, in the task that starts it
    workflow.continue_as_new(..., search_attributes=listed.following())  # the next lists anew
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import TypedSearchAttributes

with workflow.unsafe.imports_passed_through():
    from temporalio.converter import encode_typed_search_attribute_value

    from golem.wire import names
    from golem.wire.lineage import TURN_RUNS
    from golem.workflows.patches import TURN_RUNS_LISTED, patched

#: The list's bound in bytes as Temporal measures it (its JSON): Temporal's default limit
#: on one search attribute value is 2,048 bytes, and an upsert past it fails the workflow
#: task for ever. About 49 uuid7 run ids fit; the turns after them in the same workflow
#: run stay unlisted: continuing as new to list them carries the transcript again (with
#: 60-turn conversations, 2.24x the floor's history bytes per turn, against 1.04x).
LIST_BYTES = 2000


def _size(run_ids: list[str]) -> int:
    return len(encode_typed_search_attribute_value(TURN_RUNS, run_ids).data)


class ListedTurns:
    """The run ids this workflow run has listed."""

    def __init__(self) -> None:
        self.run_ids: list[str] = []
        # Where the namespace lacks GolemTurnRuns its start carried none: nothing is listed.
        self._carried = bool(workflow.memo_value(names.TURN_RUNS_MEMO, False))

    def take(self, run_id: str) -> None:
        """List ``run_id`` (a turn run inline starts): only where the conversation's start
        carried ``GolemTurnRuns`` (its memo says so), and only under the bound."""
        if not self._carried or not patched(TURN_RUNS_LISTED):
            return
        listed = [*self.run_ids, run_id]
        if _size(listed) > LIST_BYTES:
            return
        self.run_ids = listed
        workflow.upsert_search_attributes([TURN_RUNS.value_set(listed)])

    def following(self) -> TypedSearchAttributes | None:
        """The next run's search attributes (continue-as-new): this run's without the list,
        which stays on this run; ``None`` (this run's) when it listed none."""
        if not self.run_ids:
            return None
        kept = workflow.info().typed_search_attributes
        return TypedSearchAttributes([p for p in kept if p.key.name != TURN_RUNS.name])
