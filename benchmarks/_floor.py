"""The floor any durable framework pays: a workflow running N no-op activities in a row,
the same moving a payload of some size into and out of each activity, and a delegation's
shape (a tool call as a no-op activity or as a child workflow running one)."""

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


@workflow.defn(name="BareChild")
class BareChild:
    @workflow.run
    async def run(self, n: int) -> int:
        return await workflow.execute_activity(
            noop, n, start_to_close_timeout=timedelta(seconds=30)
        )


@workflow.defn(name="BareDelegation")
class BareDelegation:
    """A model call, the tool call (a no-op activity, or a child workflow running one), and
    the next model call: the shape of ``benchmarks/delegation.py``'s runs, bare."""

    @workflow.run
    async def run(self, child: bool) -> int:
        timeout = timedelta(seconds=30)
        await workflow.execute_activity(noop, 0, start_to_close_timeout=timeout)
        if child:
            await workflow.execute_child_workflow(BareChild.run, 1, id=str(workflow.uuid4()))
        else:
            await workflow.execute_activity(noop, 1, start_to_close_timeout=timeout)
        return await workflow.execute_activity(noop, 2, start_to_close_timeout=timeout)
