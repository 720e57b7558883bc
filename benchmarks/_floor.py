"""The floor any durable framework pays: a workflow running N no-op activities in a row,
and the same moving a payload of some size into and out of each activity."""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow


@activity.defn(name="bench.noop")
async def noop(n: int) -> int:
    return n


@activity.defn(name="bench.echo")
async def echo(data: str) -> str:
    return data


@workflow.defn(name="BareWorkflow")
class BareWorkflow:
    @workflow.run
    async def run(self, activities: int) -> int:
        for n in range(activities):
            await workflow.execute_activity(noop, n, start_to_close_timeout=timedelta(seconds=30))
        return activities


@workflow.defn(name="BareBytesWorkflow")
class BareBytesWorkflow:
    @workflow.run
    async def run(self, activities: int, size: int) -> int:
        for _ in range(activities):
            await workflow.execute_activity(
                echo, "x" * size, start_to_close_timeout=timedelta(seconds=30)
            )
        return activities
