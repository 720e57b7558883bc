"""Finding runs: what Temporal says of one, which id a user meant, a conversation's runs.

    info = await run_info(client, run_id)                  # status, agent, task queue, ...
    run_id = await find_run(client, "0196...")             # a run id, or the UI's Run ID
    runs = await chained_runs(client, conversation_id)     # oldest first (visibility)
    messages = await conversation_messages(client, conversation_id)   # a conversation workflow's
    waiting = await awaiting_approval(client, run_id)      # which calls wait, and who answers

Each reads Temporal's description or its visibility store, no worker needed (but
``awaiting_approval`` asks a running run: a worker must be up).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client, WorkflowExecutionDescription, WorkflowQueryFailedError
from temporalio.service import RPCError, RPCStatusCode

from golem.client.listing import has, lacking
from golem.client.records import RunRecord, fetch_run, history_reader
from golem.messages import Message, ToolCall
from golem.wire import names
from golem.wire.lineage import AGENT, CONVERSATION_ID, OWNER, PARENT_RUN_ID, TURN_RUNS, WAITING
from golem.workflows.agent_run import AgentRunWorkflow
from golem.workflows.conversation import ConversationWorkflow


@dataclass(frozen=True)
class RunInfo:
    """What Temporal's description of a run (or a conversation workflow) says."""

    run_id: str
    status: str
    """running, completed, failed, canceled, terminated, timed_out, ... (unknown)"""
    workflow_type: str
    task_queue: str
    agent: str
    """The agent it runs (``GolemAgent``); empty when it is not golem's."""
    conversation_id: str
    parent_run_id: str
    parent_workflow_id: str
    """The workflow that started it as a child (a conversation, a user's workflow), or ""."""
    start_time: datetime | None
    description: WorkflowExecutionDescription = field(repr=False)
    owner: str = ""
    """Who owns it (``GolemOwner``, a conversation ``golem serve`` started with auth), or ""."""

    async def outcome(self) -> dict[str, Any]:
        """A closed run's outcome memo (``stopReason``, ``output`` shortened, counts); empty
        while it runs."""
        memo = await self.description.memo_value(names.OUTCOME_MEMO, None)
        return memo if isinstance(memo, dict) else {}


async def run_info(client: Client, run_id: str) -> RunInfo:
    """Temporal's description of workflow ``run_id`` (``RPCError`` NOT_FOUND when none)."""
    description = await client.get_workflow_handle(run_id).describe()
    attributes = description.typed_search_attributes
    return RunInfo(
        run_id=run_id,
        status=description.status.name.lower() if description.status else "unknown",
        workflow_type=description.workflow_type,
        task_queue=description.task_queue,
        agent=attributes.get(AGENT) or "",
        conversation_id=attributes.get(CONVERSATION_ID) or "",
        parent_run_id=attributes.get(PARENT_RUN_ID) or "",
        parent_workflow_id=description.parent_id or "",
        start_time=description.start_time,
        description=description,
        owner=attributes.get(OWNER) or "",
    )


async def existing_run(client: Client, workflow_id: str) -> RunInfo | None:
    """``run_info``, or ``None`` when no workflow has that id (a missing namespace raises)."""
    try:
        return await run_info(client, workflow_id)
    except RPCError as exc:
        if exc.status != RPCStatusCode.NOT_FOUND or "namespace" in exc.message.lower():
            raise
        return None


async def find_run(client: Client, given: str) -> str | None:
    """golem's run id (the Temporal Workflow ID) for ``given``, a run id or the UI's Run ID;
    ``None`` when it is neither."""
    if await existing_run(client, given):
        return given
    with contextlib.suppress(RPCError):  # not a UUID: no such Run ID either
        async for run in client.list_workflows(f'RunId = "{_quoted(given)}"', limit=1):
            return run.id
    return None


async def conversation_info(client: Client, conversation_id: str) -> RunInfo | None:
    """The ``ConversationWorkflow`` by that id (running or closed), or ``None``."""
    return as_conversation(await existing_run(client, conversation_id))


def as_conversation(info: RunInfo | None) -> RunInfo | None:
    """``info`` when it describes a ``ConversationWorkflow``, else ``None``."""
    return (
        info if info is not None and info.workflow_type == ConversationWorkflow.__name__ else None
    )


def not_a_conversation(info: RunInfo) -> str:
    """What a workflow given as a conversation id is instead, and what to use."""
    given = info.run_id
    if info.workflow_type != AgentRunWorkflow.__name__:
        return f"{given} is a {info.workflow_type} workflow, not a conversation id"
    conversation = info.conversation_id
    if info.parent_workflow_id and info.parent_workflow_id == conversation:
        return (
            f"{given} is a run id (a turn of conversation {conversation}), not a conversation "
            f"id: attach to {conversation}"
        )
    return (
        f"{given} is a run id (a run of agent {info.agent!r}), not a conversation id: its "
        f"runs continue with `golem run --conversation-id {conversation}` (durable.resume "
        "or durable.run(history=...) from a client)"
    )


def inline_not_a_conversation(given: str, conversation_id: str) -> str:
    """``not_a_conversation`` for an inline turn's run id (no workflow bears it)."""
    return (
        f"{given} is a run id (a turn of conversation {conversation_id}, run inline), not a "
        f"conversation id: attach to {conversation_id}"
    )


async def inline_turn_conversation(client: Client, run_id: str) -> tuple[str, str] | None:
    """The conversation (its id, and the workflow run that took the turn) of inline turn
    ``run_id``, from visibility's ``GolemTurnRuns`` (docs/adr/0050-turns-inline.md); ``None``
    when none lists it, or the namespace lacks the attribute (set up by an older golem)."""
    if not has(client, TURN_RUNS.name):
        return None
    query = f'{TURN_RUNS.name} = "{_quoted(run_id)}"'
    try:
        async for found in client.list_workflows(query, limit=1):
            return found.id, found.run_id
    except RPCError as exc:
        if exc.status != RPCStatusCode.INVALID_ARGUMENT or TURN_RUNS.name not in exc.message:
            raise
        lacking(client, TURN_RUNS.name)  # asked once per client
    return None


async def is_conversation(client: Client, conversation_id: str) -> bool:
    """Whether ``conversation_id`` names a ``ConversationWorkflow`` (running or closed)."""
    return await conversation_info(client, conversation_id) is not None


async def conversation_messages(client: Client, conversation_id: str) -> list[Message]:
    """The whole transcript of conversation workflow ``conversation_id``, read from its
    history across continue-as-new (no worker needed)."""
    histories = history_reader(client)
    return await histories.messages(await histories.transcript(conversation_id))


@dataclass(frozen=True)
class ConversationListing:
    """One conversation workflow as the visibility store lists it."""

    conversation_id: str
    agent: str
    status: str
    """running, completed (closed or resting), failed, terminated, ..."""
    start_time: datetime | None


async def list_conversations(
    client: Client, *, agents: Sequence[str] = (), owner: str | None = None, limit: int = 100
) -> list[ConversationListing]:
    """The newest ``limit`` conversation workflows (of ``agents``, when given, and owned
    by ``owner``, when given), newest first, from the visibility store (no worker needed)."""
    query = f'WorkflowType = "{ConversationWorkflow.__name__}"'
    if owner is not None:
        query += f' AND GolemOwner = "{_quoted(owner)}"'
    if agents:
        query += " AND GolemAgent IN (" + ", ".join(f'"{_quoted(a)}"' for a in agents) + ")"
    found = []
    async for workflow in client.list_workflows(query, limit=limit):
        attributes = workflow.typed_search_attributes
        status = workflow.status.name.lower() if workflow.status else "unknown"
        agent = attributes.get(AGENT) or ""
        found.append(ConversationListing(workflow.id, agent, status, workflow.start_time))
    return found


async def chained_runs(client: Client, conversation_id: str) -> list[str]:
    """The runs started under ``conversation_id`` (each with the history of the one before,
    not a ``ConversationWorkflow``'s turns), oldest first, from the visibility store."""
    query = (
        f'GolemConversationId = "{_quoted(conversation_id)}" '
        f'AND WorkflowType = "{AgentRunWorkflow.__name__}"'
    )
    runs = [run async for run in client.list_workflows(query)]
    runs.sort(key=lambda run: run.start_time)
    return [run.id for run in runs]


async def newest_run(client: Client, conversation_id: str) -> RunRecord | None:
    """The newest run chained under ``conversation_id``, read back (``None``: it has none)."""
    runs = await chained_runs(client, conversation_id)
    return await fetch_run(client, runs[-1]) if runs else None


@dataclass(frozen=True)
class Approvals:
    """Who waits for a person's decisions, and on which calls."""

    run_id: str
    """The run that waits (a conversation's turn in flight, for a conversation)."""
    conversation_id: str
    """The conversation workflow that answers for its turn (approve through it), or ""."""
    info: RunInfo
    """The run's description (its status, agent, task queue)."""
    calls: list[ToolCall]
    """The calls waiting now; empty when the run does not wait (or has ended)."""

    @property
    def answers(self) -> str:
        """The id ``golem approve`` reaches the calls through: the run's, or an inline
        turn's conversation (no workflow bears an inline turn's id)."""
        inline = self.info.workflow_type == ConversationWorkflow.__name__ and self.conversation_id
        return self.conversation_id if inline else self.run_id


async def awaiting_approval(
    client: Client, run_id: str, patience: timedelta | None = None, info: RunInfo | None = None
) -> Approvals:
    """The approvals run ``run_id`` waits for: a run's, or, for a conversation workflow, its
    turn in flight's. A conversation's turn is answered through its conversation. Asks the
    run (a query, waiting at most ``patience`` for a worker), so a worker must be up while
    it runs. ``info``: its description, when the caller has just read it (not asked again)."""
    info = info if info is not None else await run_info(client, run_id)
    conversation = ""
    if info.workflow_type == ConversationWorkflow.__name__:
        conversation = run_id
        # An inline turn (ADR 0050) lists its conversation as waiting (GolemWaiting, as a
        # child turn lists its own run): only then is the conversation asked for it.
        listed = info.description.typed_search_attributes.get(WAITING)
        inline = await _inline_pending(client, run_id, patience) if listed else None
        if inline is not None:
            turn, calls = inline
            return Approvals(turn or run_id, conversation, info, calls)
        children = info.description.raw_description.pending_children
        turn = next((c.workflow_id for c in children), "")
        if not turn:
            return Approvals(run_id, conversation, info, [])
        run_id, info = turn, await run_info(client, turn)
    elif info.parent_workflow_id and await is_conversation(client, info.parent_workflow_id):
        conversation = info.parent_workflow_id
    if info.status != "running":
        return Approvals(run_id, conversation, info, [])
    calls = await client.get_workflow_handle(run_id).query(
        AgentRunWorkflow.pending, rpc_timeout=patience
    )
    return Approvals(run_id, conversation, info, list(calls))


async def _inline_pending(
    client: Client, conversation_id: str, patience: timedelta | None
) -> tuple[str, list[ToolCall]] | None:
    """The turn in flight and its waiting calls, when conversation ``conversation_id`` runs
    its turns inline; ``None`` when they are child runs (or its worker predates inline
    turns: it knows no such query)."""
    handle = client.get_workflow_handle(conversation_id)
    try:
        calls = await handle.query(ConversationWorkflow.pending, rpc_timeout=patience)
    except (WorkflowQueryFailedError, RPCError):  # no worker answers: asked as before
        return None
    if calls is None:
        return None
    runs = await handle.query(ConversationWorkflow.runs, rpc_timeout=patience) if calls else []
    return (runs[-1] if runs else ""), list(calls)


async def has_worker(client: Client, task_queue: str) -> bool:
    """Whether a worker polls ``task_queue`` for workflow tasks now."""
    response = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    return len(response.pollers) > 0


def _quoted(value: str) -> str:
    """A value safe inside a visibility query's double quotes."""
    return value.replace("\\", "").replace('"', "")
