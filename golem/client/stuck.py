"""A client waiting on a run or conversation that cannot go on says so, not waits for ever.

A workflow whose workflow task fails (a bug in workflow code, or a deploy whose code no
longer replays the workflow's history: a nondeterminism error) stays RUNNING while Temporal
retries the task, until a worker can complete it. A client waiting for a turn's answer or an
approval's would wait for ever, and silently. So while it waits, :func:`unless_stuck` looks
now and then (first after ``WATCH_AFTER``, then less often) whether the workflow, or a run
below it, has a task that failed more than once, and ends the wait with
``WorkflowTaskFailing`` naming the workflow and the failure. Nothing is lost: the workflow
goes on once a worker can run it, and the same call again finds it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, NoReturn, TypeVar

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType
from temporalio.api.workflowservice.v1 import GetWorkflowExecutionHistoryReverseRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from golem.errors import WorkflowTaskFailing

T = TypeVar("T")

#: How long a wait goes before its first look (a turn that answers sooner costs nothing).
WATCH_AFTER = 10.0
#: The longest pause between two looks.
WATCH_MAX = 120.0
#: Workflows looked at per look: the one waited on, then the runs below it, breadth first.
WATCH_WORKFLOWS = 20
#: What the server says when it gives up on an update to a workflow whose task fails.
FAILED_STATE = "Workflow Task in failed state"
#: Events read back for a failure: a failed task is among the last few.
FAILURE_PAGE = 20


async def unless_stuck(client: Client, workflow_id: str, work: Awaitable[T]) -> T:
    """``work``'s outcome; or ``WorkflowTaskFailing`` once workflow ``workflow_id`` or a run
    below it cannot go on. A coroutine is cancelled then; a future (shared with other
    readers) is left to go on."""
    owned = asyncio.iscoroutine(work)
    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(_watch(client, workflow_id))
    try:
        await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            try:
                return task.result()
            except RPCError as exc:
                if (said := await said_stuck(client, workflow_id, exc)) is exc:
                    raise
                raise said from exc
        return watch.result()  # raises what the watch found
    finally:
        watch.cancel()
        if not task.done():
            let_go(task, cancel=owned)


async def said_stuck(client: Client, workflow_id: str, error: RPCError) -> Exception:
    """What ``error`` means: the server gives up on an update (a stream's poll too) to a
    workflow whose task fails, after a while; ``WorkflowTaskFailing`` then, naming the one
    of workflow ``workflow_id`` and the runs below it that cannot go on; else ``error``."""
    if error.status != RPCStatusCode.FAILED_PRECONDITION or FAILED_STATE not in str(error):
        return error
    found = await failing_below(client, workflow_id)
    return error if found is None else WorkflowTaskFailing(*found)


def let_go(task: asyncio.Future[Any], cancel: bool = True) -> None:
    """Leave ``task`` behind (cancelled, with ``cancel``): its outcome is nobody's (the SDK
    turns a cancelled update's wait into an error of its own), so no "never retrieved"."""
    task.add_done_callback(lambda done: done.cancelled() or done.exception())
    if cancel:
        task.cancel()


async def _watch(client: Client, workflow_id: str) -> NoReturn:
    pause = WATCH_AFTER
    while True:
        await asyncio.sleep(pause)
        pause = min(pause * 2, WATCH_MAX)
        try:
            found = await failing_below(client, workflow_id)
        except Exception:  # only a diagnosis: a look that fails waits for the next
            continue
        if found is not None:
            raise WorkflowTaskFailing(*found)


async def failing_below(client: Client, workflow_id: str) -> tuple[str, str] | None:
    """The first of workflow ``workflow_id`` and the runs below it (its running children,
    theirs, ...) whose workflow task has failed more than once, with that failure."""
    todo, seen = [workflow_id], 0
    while todo and seen < WATCH_WORKFLOWS:
        current = todo.pop(0)
        seen += 1
        described = (await client.get_workflow_handle(current).describe()).raw_description
        if described.pending_workflow_task.attempt > 1:  # retried: not a passing failure
            failure = await failing_task(client, current)
            if failure:
                return current, failure
        todo += [child.workflow_id for child in described.pending_children]
    return None


async def failing_task(client: Client, workflow_id: str) -> str:
    """The failure of workflow ``workflow_id``'s latest workflow task when it failed (""
    when the latest completed, or none ran): its current run's, read newest first, a page
    at most."""
    request = GetWorkflowExecutionHistoryReverseRequest(
        namespace=client.namespace,
        execution=WorkflowExecution(workflow_id=workflow_id),
        maximum_page_size=FAILURE_PAGE,
    )
    page = await client.workflow_service.get_workflow_execution_history_reverse(request)
    for event in page.history.events:
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            return ""
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
            return str(event.workflow_task_failed_event_attributes.failure.message)
    return ""
