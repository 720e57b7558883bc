"""The floor any durable framework pays: a workflow running N no-op activities in a row."""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow


@activity.defn(name="bench.noop")
async def noop(n: int) -> int:
    return n


@workflow.defn(name="BareWorkflow")
class BareWorkflow:
    @workflow.run
    async def run(self, activities: int) -> int:
        for n in range(activities):
            await workflow.execute_activity(noop, n, start_to_close_timeout=timedelta(seconds=30))
        return activities
