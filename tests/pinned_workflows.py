"""A user workflow for tests/test_pinned_run_agent.py (a module of its own: the workflow
sandbox re-imports it)."""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from compose_workflows import helper

    from golem import RunError
    from golem.workflows import run_agent

__all__ = ["HistoryChildrenWorkflow", "helper"]


@workflow.defn(name="HistoryChildrenWorkflow")
class HistoryChildrenWorkflow:
    """Child runs that continue a history: one completes, the next fails."""

    @workflow.run
    async def run(self) -> dict[str, Any]:
        first = await run_agent("helper", "hi")
        second = await run_agent("helper", "again", history=first.messages)
        try:
            await run_agent("helper", "explode", history=second.messages)
        except RunError as exc:
            partial = exc.partial
            assert partial is not None
            return {
                "runs": [first.run_id, second.run_id, partial.run_id],
                "given": [m.model_dump(mode="json") for m in second.messages],
                "evidence": [m.model_dump(mode="json") for m in partial.messages],
                "stage": exc.stage,
            }
        raise AssertionError("the exploding run completed")
