"""A worker that stops leaves nothing of its runs behind: each cached run is evicted on its
own event loop, so no ``finally`` of a run it held runs later inside another workflow.

temporalio 1.35 does not evict idle cached runs at shutdown (temporalio/sdk-python#1849):
the runs' suspended coroutines were closed by Python's garbage collector on whichever
thread collected them. A run waiting for approval clears its inbox listing in a
``finally``; collected inside another workflow's activation, that upsert became one of the
other workflow's commands (a nondeterminism error on its next replay).
"""

from __future__ import annotations

import gc
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import Worker
from test_durable_approvals import transfer_agent

from golem.client import DurableAgent
from golem.worker import GolemPlugin


@workflow.defn(sandboxed=False)
class Collecting:
    """Collects garbage inside its own activation (where a stray coroutine would land)."""

    @workflow.run
    async def run(self) -> int:
        return gc.collect()


@contextmanager
def no_automatic_gc() -> Iterator[None]:
    """Only ``Collecting`` collects: the automatic collector could run on the test's thread
    first, where a stray ``finally`` fails harmlessly and proves nothing."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


async def test_a_stopped_workers_waiting_run_issues_nothing_inside_another_workflow(
    temporal_client: Client,
) -> None:
    agent = transfer_agent([])
    task_queue = f"stop-{uuid.uuid4().hex[:12]}"
    with no_automatic_gc():
        async with Worker(temporal_client, task_queue=task_queue, plugins=[GolemPlugin(agent)]):
            paused = await DurableAgent(temporal_client, agent, task_queue=task_queue).run("pay")
        other = f"collect-{uuid.uuid4().hex[:12]}"
        async with Worker(temporal_client, task_queue=other, workflows=[Collecting]):
            handle = await temporal_client.start_workflow(
                Collecting.run, id=other, task_queue=other
            )
            await handle.result()
    events = [e.event_type async for e in handle.fetch_history_events()]
    assert paused.paused
    assert EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES not in events
    assert EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED not in events
