"""Reading runs back from Temporal: what a run was given, what it recorded, how it ended.

    record = await fetch_run(client, run_id)           # status, messages, output or error
    runs = await conversation_runs(client, conv_id)    # a conversation's turns, in order

A closed run is read from its history, in one pass, no worker needed; a running one
through a query.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
)
from temporalio.converter import DataConverter
from temporalio.exceptions import ApplicationError, FailureError

from golem.client.history import RunHistory, decode_result, run_sources
from golem.messages import Message
from golem.results import RunError
from golem.wire import (
    AgentRunInput,
    MessagesPage,
    MessagesQuery,
    Pager,
    RunReport,
    Sources,
    chain_all,
    names,
    read_pages,
)
from golem.wire.failures import Evidence, golem_error
from golem.wire.transcript import HistoryReader


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


async def fetch_run(
    client: Client, run_id: str, *, base: bool = True, patience: timedelta | None = None
) -> RunRecord:
    """Read a run from Temporal (a running one through a query, so a worker must be up; a
    closed one from its history, no worker needed).

    A conversation's turn got its history by reference: it is read from the conversation's
    history; ``base=False`` skips that, and ``messages`` are then only the turn's own
    (enough for its status and output). ``patience`` bounds the wait for a worker to answer
    a running run's query (Temporal holds one no worker takes for about 30 s)."""
    handle = client.get_workflow_handle(run_id)
    description = await handle.describe()
    status = description.status.name.lower() if description.status else "unknown"
    # One pass over the run's history: its input, its activities' results, its requests.
    history = await RunHistory.read(handle.fetch_history_events(), client.data_converter)
    input = history.input
    given = list(input.run.history) if input is not None else []
    lead: list[Message] = []
    if input is not None and input.base is not None and base:
        lead = await base_messages(client, input, run_id)

    async def load() -> RunHistory:
        return history

    sources = run_sources(run_id, given, lead, run_pager(handle, patience), load)
    if description.status == WorkflowExecutionStatus.RUNNING:
        return RunRecord(run_id, status, [*lead, *await read_pages(run_pager(handle, patience))])
    try:
        raw = await handle.result()
    except WorkflowFailureError as exc:
        error = await run_error(exc, handle, sources, client.data_converter)
        partial = error.partial if isinstance(error, RunError) else None
        messages = partial.messages if partial else [*lead, *given]
        return RunRecord(run_id, status, messages, error=error)
    result = await decode_result(raw, sources)
    return RunRecord(run_id, status, result.messages, output=result.output)


def lazy_sources(
    converter: DataConverter,
    handle: WorkflowHandle[Any, Any],
    history: list[Message],
    based: bool,
) -> Sources:
    """What decoding a run's outcome needs, its history read only if the outcome names what
    the history holds; ``history`` is what the run was given (its base, when ``based``)."""

    async def load() -> RunHistory:
        return await RunHistory.read(handle.fetch_history_events(), converter)

    given, lead = ([], history) if based else (history, [])
    return run_sources(handle.id, given, lead, run_pager(handle), load)


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
        if input.base is None:
            return list(input.run.history), False
        if not read_base:
            return [], True
        return await base_messages(client, input, handle.id), True
    return [], False


async def base_messages(client: Client, input: AgentRunInput, run_id: str) -> list[Message]:
    """The history a conversation's turn got by reference, read from the conversation's
    history (no worker needed) and checked against its digest."""
    base = input.base
    if base is None or not base.count:
        return []
    histories = history_reader(client)
    transcript = await histories.transcript(base.conversation)
    messages = await histories.messages(transcript, 0, base.count)
    if len(messages) != base.count or chain_all(messages)[-1] != base.digest:
        raise ValueError(
            f"conversation {base.conversation} no longer holds the history run "
            f"{run_id} was given (its first {base.count} messages changed)"
        )
    return messages


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


def run_pager(handle: WorkflowHandle[Any, Any], patience: timedelta | None = None) -> Pager:
    """Pages of a run's conversation through its ``golem.conversation`` query, each query
    waiting at most ``patience`` for a worker to answer."""

    async def page(query: MessagesQuery) -> MessagesPage:
        page: MessagesPage = await handle.query(
            names.CONVERSATION, query, result_type=MessagesPage, rpc_timeout=patience
        )
        return page

    return page


async def run_error(
    exc: WorkflowFailureError,
    handle: WorkflowHandle[Any, Any],
    sources: Sources,
    converter: DataConverter | None = None,
) -> Exception:
    """Rebuild the ``RunError`` (or ``UnknownAgentError``) a failed or cancelled run carries;
    ``converter`` (the client's) reads the evidence of a run its worker could not read."""

    async def memo() -> Any:
        return await (await handle.describe()).memo_value(names.FAILURE_MEMO, None)

    reread = (handle, converter) if converter is not None else None
    return await failure_of(exc.cause, handle.id, sources, memo, reread)


#: Stages of a run its worker could not read (a key it lacks, a damaged blob).
UNREAD_STAGES = ("codec", "storage")


async def rebuilt_error(
    cause: BaseException | None,
    run_id: str = "",
    evidence: Evidence | None = None,
    memo: Callable[[], Awaitable[Any]] | None = None,
    reread: tuple[WorkflowHandle[Any, Any], DataConverter] | None = None,
) -> Exception | None:
    """The one place the client turns a Temporal failure into golem's exception (by the
    failure table, golem.wire.failures), the evidence rebuilt by ``evidence``; ``reread``:
    this client reads the evidence of a run its worker could not read. ``None``: golem did
    not set that failure, so the caller words it."""
    error = await golem_error(cause, run_id, evidence, memo)
    unread = isinstance(error, RunError) and error.stage in UNREAD_STAGES
    if unread and reread is not None and isinstance(error, RunError) and error.partial is None:
        # Its worker could not read the run, so it sent no evidence: this reader may.
        handle, converter = reread
        events = handle.fetch_history_events()
        history = await RunHistory.read(events, converter, upto_unreadable=True)
        return RunError(error.stage, error.detail, history.evidence(handle.id), handle.id)
    return error


async def failure_of(
    cause: BaseException | None,
    run_id: str,
    sources: Sources,
    memo: Callable[[], Awaitable[Any]],
    reread: tuple[WorkflowHandle[Any, Any], DataConverter] | None = None,
) -> Exception:
    """golem's exception for a failed or cancelled run's ``cause``, its evidence rebuilt from
    ``sources``; ``memo`` reads a cancelled run's failure memo."""

    async def evidence(report: RunReport) -> list[Message]:
        return await report.conversation(sources)

    error = await rebuilt_error(cause, run_id, evidence, memo, reread)
    if error is not None:
        return error
    # Terminated or timed out from outside: the loop never got to say why.
    message = cause.message if isinstance(cause, FailureError) else str(cause)
    kind = cause.type if isinstance(cause, ApplicationError) else type(cause).__name__
    return RunError("canceled", f"run {run_id} was stopped outside the loop ({kind}): {message}")
