"""Reading runs back from Temporal: what a run was given, what it recorded, how it ended.

    record = await fetch_run(client, run_id)           # status, messages, output or error
    runs = await conversation_runs(client, conv_id)    # a conversation's turns, in order

A closed run is read from its history, no worker needed; a running one through a query.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
)
from temporalio.converter import DataConverter
from temporalio.exceptions import ApplicationError, FailureError

from golem.messages import Message
from golem.models.base import ModelResponse
from golem.results import RunError
from golem.tools import ToolOutcome
from golem.workflows.failures import golem_error
from golem.workflows.outcome import (
    FAILURE_MEMO,
    Logged,
    Recorded,
    RunSnapshot,
    content_digest,
    conversation,
    decode_result,
)
from golem.workflows.pages import MessagesPage, MessagesQuery, Pager, read_pages
from golem.workflows.shipping import ModelCallInput, RequestLog, ShippingError, chain_all
from golem.workflows.transcript import HistoryReader
from golem.workflows.types import AgentRunInput, ToolCallInput

__all__ = [
    "RunRecord",
    "conversation_runs",
    "fetch_run",
    "history_reader",
    "input_history",
    "recordings",
    "run_error",
    "run_pager",
]


@dataclass(frozen=True)
class RunRecord:
    """What Temporal holds of one run: its status and conversation, or why it failed."""

    run_id: str
    status: str
    """running, completed, failed, canceled, terminated, timed_out, ..."""
    messages: list[Message]
    """The conversation so far, the final one, or a failed run's partial evidence."""
    output: Any = None
    error: Exception | None = None


async def fetch_run(client: Client, run_id: str, *, base: bool = True) -> RunRecord:
    """Read a run from Temporal (a running one through a query, so a worker must be up; a
    closed one from its history, no worker needed).

    A conversation's turn got its history by reference: it is read from the conversation's
    history; ``base=False`` skips that, and ``messages`` are then only the turn's own
    (enough for its status and output)."""
    handle = client.get_workflow_handle(run_id)
    description = await handle.describe()
    status = description.status.name.lower() if description.status else "unknown"
    history, based = await run_input(client, handle, base)
    if description.status == WorkflowExecutionStatus.RUNNING:
        own = await read_pages(run_pager(handle))
        return RunRecord(run_id, status, [*history, *own] if based else own)
    try:
        raw = await handle.result()
    except WorkflowFailureError as exc:
        error = await run_error(exc, handle, history)
        partial = error.partial if isinstance(error, RunError) else None
        return RunRecord(run_id, status, partial.messages if partial else history, error=error)
    recorded, logged = recordings(client.data_converter, handle)
    result = await decode_result(raw, history, run_pager(handle), recorded=recorded, logged=logged)
    return RunRecord(run_id, status, result.messages, output=result.output)


def recordings(
    converter: DataConverter, handle: WorkflowHandle[Any, Any]
) -> tuple[Recorded, Logged]:
    """Reads what a run's model and tool activities recorded, from its history (no worker
    needed, read once): the contents its result names by reference, and its last model
    request rebuilt (``RequestLog``), which its result may leave out."""
    read: list[tuple[dict[str, str], list[Message] | None]] = []

    async def load() -> tuple[dict[str, str], list[Message] | None]:
        if not read:
            read.append(await read_activities(converter, handle))
        return read[0]

    async def contents() -> dict[str, str]:
        return (await load())[0]

    async def last_request() -> list[Message]:
        request = (await load())[1]
        if request is None:
            raise LookupError(f"run {handle.id}: its history does not hold its model requests")
        return request

    return contents, last_request


async def read_activities(
    converter: DataConverter, handle: WorkflowHandle[Any, Any]
) -> tuple[dict[str, str], list[Message] | None]:
    kinds: dict[str, type[Any]] = {"golem.model_request": ModelResponse, "golem.tool": ToolOutcome}
    scheduled: dict[int, Any] = {}  # event id -> the activity's decoded input
    contents: dict[str, str] = {}
    log: RequestLog | None = RequestLog()
    async for event in handle.fetch_history_events():
        if event.HasField("activity_task_scheduled_event_attributes"):
            attrs = event.activity_task_scheduled_event_attributes
            kind = attrs.activity_type.name
            if kind not in kinds:
                continue
            # The client's converter, so an encrypted payload is decrypted first.
            given = ModelCallInput if kind == "golem.model_request" else ToolCallInput
            [value] = await converter.decode(list(attrs.input.payloads), [given])
            scheduled[event.event_id] = value
            if log is not None and isinstance(value, ModelCallInput):
                try:
                    await log.request(value)
                except (ShippingError, LookupError):
                    log = None  # a request read by query: only the contents are of use
        elif event.HasField("activity_task_completed_event_attributes"):
            completed = event.activity_task_completed_event_attributes
            given_input = scheduled.get(completed.scheduled_event_id)
            if given_input is None:
                continue
            done = ModelResponse if isinstance(given_input, ModelCallInput) else ToolOutcome
            [value] = await converter.decode(list(completed.result.payloads), [done])
            if isinstance(value, ModelResponse):
                contents[content_digest(value.message.content)] = value.message.content
                if log is not None:
                    log.answered(value.message)
            else:
                contents[content_digest(value.content)] = value.content
                if log is not None:
                    log.called(given_input.call, value)
    return contents, log.last if log is not None else None


async def input_history(client: Client, handle: WorkflowHandle[Any, Any]) -> list[Message]:
    """The history a run was started with."""
    history, _ = await run_input(client, handle)
    return history


async def run_input(
    client: Client, handle: WorkflowHandle[Any, Any], read_base: bool = True
) -> tuple[list[Message], bool]:
    """The history a run was started with (its first event's input), and whether it was by
    reference (a conversation's turn): then it is read from the conversation and checked
    by digest, unless ``read_base`` is False (then it is empty)."""
    async for event in handle.fetch_history_events():
        attrs = event.workflow_execution_started_event_attributes
        # The client's converter, so an encrypted input is decrypted first.
        payloads = await client.data_converter.decode(list(attrs.input.payloads), [AgentRunInput])
        input: AgentRunInput = payloads[0]
        base = input.base
        if base is None:
            return list(input.run.history), False
        if not read_base:
            return [], True
        # Read from the conversation's history, not by query: no worker needed.
        histories = history_reader(client)
        transcript = await histories.transcript(base.conversation)
        messages = await histories.messages(transcript, 0, base.count) if base.count else []
        if len(messages) != base.count or chain_all(messages)[-1] != base.digest:
            raise ValueError(
                f"conversation {base.conversation} no longer holds the history run "
                f"{handle.id} was given (its first {base.count} messages changed)"
            )
        return messages, True
    return [], False


async def conversation_runs(client: Client, conversation_id: str) -> list[str]:
    """The run id of every turn of conversation workflow ``conversation_id``, in order, across
    continue-as-new, read from its history (no worker needed)."""
    histories = history_reader(client)
    return await histories.runs(await histories.transcript(conversation_id))


def history_reader(client: Client) -> HistoryReader:
    """Reads conversations from their workflow runs' histories (no worker needed)."""
    return HistoryReader(
        lambda workflow_id, run_id: client.get_workflow_handle(
            workflow_id, run_id=run_id or None
        ).fetch_history_events(),
        client.data_converter,
    )


def run_pager(handle: WorkflowHandle[Any, Any]) -> Pager:
    """Pages of a run's conversation through its ``golem.conversation`` query."""

    async def page(query: MessagesQuery) -> MessagesPage:
        page: MessagesPage = await handle.query(
            "golem.conversation", query, result_type=MessagesPage
        )
        return page

    return page


async def run_error(
    exc: WorkflowFailureError, handle: WorkflowHandle[Any, Any], history: list[Message]
) -> Exception:
    """Rebuild the ``RunError`` (or ``UnknownAgentError``) a failed or cancelled run carries."""

    async def evidence(snapshot: RunSnapshot) -> list[Message]:
        return await conversation(snapshot, history, run_pager(handle))

    async def memo() -> Any:
        return await (await handle.describe()).memo_value(FAILURE_MEMO, None)

    error = await golem_error(exc.cause, handle.id, evidence, memo)
    if error is not None:
        return error
    # Terminated or timed out from outside: the loop never got to say why.
    cause = exc.cause
    message = cause.message if isinstance(cause, FailureError) else str(cause)
    kind = cause.type if isinstance(cause, ApplicationError) else type(cause).__name__
    return RunError("canceled", f"run {handle.id} was stopped outside the loop ({kind}): {message}")
