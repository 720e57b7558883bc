"""Reading runs back from Temporal: what a run was given, what it recorded, how it ended.

    record = await fetch_run(client, run_id)           # status, messages, output or error
    runs = await conversation_runs(client, conv_id)    # a conversation's turns, in order

A closed run is read from its history, in one pass, no worker needed; a running one
through a query.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
)
from temporalio.service import RPCError, RPCStatusCode

from golem.messages import Message
from golem.results import RunError
from golem.wire import (
    AgentRunInput,
    ConversationInput,
    chain_all,
    read_pages,
)
from golem.wire.run_history import (
    RunHistory,
    decode_result,
    run_error,
    run_pager,
    run_sources,
)
from golem.wire.transcript import HistoryReader, InlineTurn, inline_turns


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


async def inline_turns_of(client: Client, conversation_id: str) -> list[InlineTurn]:
    """Every inline turn of conversation ``conversation_id`` (docs/adr/0050), newest
    workflow run first, read from its histories (no worker needed): back along
    continue-as-new, then any run visibility lists besides (a run a rest closed). None for
    a conversation whose turns are child runs (only its latest run is read)."""
    found: list[InlineTurn] = []
    seen: set[str] = set()

    async def read(run_id: str) -> str | None:
        """That run's turns into ``found``; the run it continued (``None``: not inline)."""
        seen.add(run_id)
        handle = client.get_workflow_handle(conversation_id, run_id=run_id)
        try:
            events = [e async for e in handle.fetch_history_events()]
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
            return ""  # gone past the namespace's retention: what is left is listed
        started = events[0].workflow_execution_started_event_attributes if events else None
        if started is None:
            return ""
        [given] = await client.data_converter.decode(
            list(started.input.payloads), [ConversationInput]
        )
        if not given.inline_turns:
            return None
        found.extend(reversed(await inline_turns(events, client.data_converter)))
        return started.continued_execution_run_id

    at: str | None = (await client.get_workflow_handle(conversation_id).describe()).run_id
    while at:
        at = await read(at)
    if at is None:
        return []
    async for execution in client.list_workflows(f"WorkflowId = '{conversation_id}'"):
        if execution.run_id not in seen:
            await read(execution.run_id)
    return found


def history_reader(client: Client) -> HistoryReader:
    """Reads conversations from their workflow runs' histories (no worker needed)."""
    return HistoryReader(
        lambda workflow_id, run_id: client.get_workflow_handle(
            workflow_id, run_id=run_id or None
        ).fetch_history_events(),
        client.data_converter,
    )
