"""A run's history and outcome read back, the reading side of message shipping: its result
decoded, its conversation rebuilt from what its history holds (no worker needed for a closed
run), or the ``RunError`` its failure stands for. The client reads runs with it, and so does
a tool activity that delegates (a child run's outcome).

    history = await RunHistory.read(handle.fetch_history_events(), converter)
    sources = run_sources(run_id, given, lead, pager, load=lambda: history)
    result = await decode_result(raw, sources, output_validator)

A run's history holds its input (the history it was given), every model call's input and
every activity's result. ``RunHistory`` reads them in one pass: the contents the run's
outcome names by digest, and its last model request rebuilt exactly as a worker that ran
every activity would have assembled it (``RequestLog``, over the activity side's
``MessageCache``). An outcome variant names what it needs (golem.wire.runs).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, TypeAdapter
from temporalio.api.history.v1 import HistoryEvent
from temporalio.converter import DataConverter
from temporalio.exceptions import ApplicationError, FailureError

from golem.history.repair import INTERRUPTED_RESULT, OUTCOME_UNKNOWN_RESULT
from golem.messages import Message, ToolCall, Usage
from golem.models.base import ModelResponse
from golem.results import PartialResult, Result, RunError
from golem.tools import ToolOutcome, tool_message
from golem.wire import (
    AgentRunInput,
    Completed,
    MessagesPage,
    MessagesQuery,
    ModelCall,
    Pager,
    Paused,
    RunReport,
    ShippingError,
    Sources,
    Stamps,
    ToolCallInput,
    content_digest,
    names,
)
from golem.wire.cache import MessageCache
from golem.wire.failures import UNREADABLE, Evidence, golem_error

if TYPE_CHECKING:  # the client's types, named only: wire imports no client at run time
    from temporalio.client import WorkflowFailureError, WorkflowHandle


async def _unreadable(query: MessagesQuery) -> MessagesPage:
    raise ShippingError("the history does not hold this request: it was read by query")


class RequestLog:
    """A run's model requests rebuilt from its history: feed it each model call's input
    and each activity's result in history order."""

    def __init__(self) -> None:
        self._cache = MessageCache()
        self.last: list[Message] = []
        """The last request's own messages (its base and its instructions aside)."""
        self.answer: Message | None = None
        """The last request's answer, once recorded."""
        self.outcomes: dict[str, ToolOutcome] = {}
        """The outcomes recorded of that answer's calls, by call id."""
        self.started: set[str] = set()
        """That answer's calls whose tool activity was scheduled."""
        self.stamps: Stamps | None = None

    async def request(self, call: ModelCall) -> None:
        own = call.model_copy(update={"base": None})
        request = await self._cache.fetch("run", own, _unreadable)
        self.last = request[1:] if request and request[0].role == "system" else request
        self.answer, self.outcomes, self.started = None, {}, set()
        self.stamps = call.stamps

    def answered(self, message: Message) -> None:
        self._cache.answered("run", message)
        self.answer = message

    def called(self, call: ToolCall, outcome: ToolOutcome) -> None:
        self._cache.called("run", call, outcome)
        self.outcomes[call.id] = outcome

    def so_far(self) -> list[Message]:
        """The conversation as far as the history records it, every call of the last answer
        closed: its result, else outcome unknown (its tool was started) or interrupted."""
        if self.answer is None:
            return list(self.last)
        closed = [
            tool_message(c, self.outcomes[c.id])
            if c.id in self.outcomes
            else Message.tool(
                c.id,
                c.name,
                OUTCOME_UNKNOWN_RESULT if c.id in self.started else INTERRUPTED_RESULT,
            )
            for c in self.answer.tool_calls
        ]
        added = [self.answer, *closed]
        if self.stamps is not None:
            added = [m.stamped(self.stamps.run_id, self.stamps.conversation_id) for m in added]
        return [*self.last, *added]


@dataclass
class RunHistory:
    """What one pass over a run's history events gives a reader."""

    input: AgentRunInput | None = None
    contents: dict[str, str] = field(default_factory=dict)
    """Every content the run's model and tool activities returned, by digest."""
    last_request: list[Message] | None = None
    """The last model request's own messages; ``None`` when one was read by query."""
    so_far: list[Message] = field(default_factory=list)
    """The conversation as far as it could be read (every call closed), base aside."""
    usage: Usage = field(default_factory=Usage)
    requests: int = 0
    tool_calls: int = 0
    unreadable: str = ""
    """Why reading stopped early (``upto_unreadable``): a payload this reader cannot read."""
    _log: RequestLog | None = field(default=None, init=False, repr=False)
    """The model requests being rebuilt (``None`` once one was read by query)."""

    @classmethod
    async def read(
        cls,
        events: AsyncIterator[HistoryEvent],
        converter: DataConverter,
        upto_unreadable: bool = False,
    ) -> RunHistory:
        """Read ``events`` with ``converter`` (the client's: an encrypted payload is
        decrypted first); ``upto_unreadable``: stop at the first payload that cannot be read
        (sealed with a key not held, a damaged blob) and keep what came before."""
        read = cls()
        try:
            await read._read(events, converter)
        except ApplicationError as exc:
            if not upto_unreadable or exc.type not in UNREADABLE:
                raise
            read.unreadable = exc.message
        return read

    def evidence(self, run_id: str) -> PartialResult | None:
        """The partial evidence this history holds, as far as it was read (``None``: it
        records no model request)."""
        if self.input is None or not self.so_far:
            return None
        return PartialResult(
            messages=self.so_far,
            usage=self.usage,
            requests=self.requests,
            tool_calls=self.tool_calls,
            run_id=self.input.run.run_id or run_id,
            conversation_id=self.input.run.conversation_id,
        )

    async def _read(self, events: AsyncIterator[HistoryEvent], converter: DataConverter) -> None:
        self._log = RequestLog()
        try:
            await self._events(events, converter)
        finally:  # once, after the last event read (an unreadable one stops it early)
            self.last_request = self._log.last if self._log is not None else None
            self.so_far = self._log.so_far() if self._log is not None else []

    async def _events(self, events: AsyncIterator[HistoryEvent], converter: DataConverter) -> None:
        read = self
        scheduled: dict[int, ModelCall | ToolCallInput] = {}
        async for event in events:
            log = self._log
            if event.HasField("workflow_execution_started_event_attributes"):
                payloads = event.workflow_execution_started_event_attributes.input.payloads
                [read.input] = await converter.decode(list(payloads), [AgentRunInput])
            elif event.HasField("activity_task_scheduled_event_attributes"):
                attrs = event.activity_task_scheduled_event_attributes
                kind = _KINDS.get(attrs.activity_type.name)
                if kind is None:
                    continue
                [value] = await converter.decode(list(attrs.input.payloads), [kind[0]])
                scheduled[event.event_id] = value
                if log is not None and isinstance(value, ModelCall):
                    try:
                        await log.request(value)
                    except (ShippingError, LookupError):
                        self._log = None  # a request read by query: only the contents count
                elif log is not None and isinstance(value, ToolCallInput):
                    log.started.add(value.call.id)
            elif event.HasField("activity_task_completed_event_attributes"):
                completed = event.activity_task_completed_event_attributes
                given = scheduled.get(completed.scheduled_event_id)
                if given is None:
                    continue
                done = ModelResponse if isinstance(given, ModelCall) else ToolOutcome
                [value] = await converter.decode(list(completed.result.payloads), [done])
                if isinstance(value, ModelResponse):
                    read.contents[content_digest(value.message.content)] = value.message.content
                    read.requests += 1
                    read.usage = read.usage + value.usage
                    if log is not None:
                        log.answered(value.message)
                elif isinstance(given, ToolCallInput):
                    read.contents[content_digest(value.content)] = value.content
                    read.tool_calls += 1
                    if log is not None:
                        log.called(given.call, value)


def run_sources(
    run_id: str,
    given: list[Message],
    lead: list[Message],
    pages: Pager | None,
    load: Callable[[], Awaitable[RunHistory]],
) -> Sources:
    """What decoding a run's outcome needs: the history it was ``given`` by value, the
    ``lead`` it got by reference, its ``pages`` query, and ``load`` to read its history
    (called at most once, and only by an outcome that names what the history holds)."""
    read: list[RunHistory] = []

    async def history() -> RunHistory:
        if not read:
            read.append(await load())
        return read[0]

    async def contents() -> dict[str, str]:
        return (await history()).contents

    async def last_request() -> list[Message]:
        request = (await history()).last_request
        if request is None:
            raise LookupError(f"run {run_id}: its history does not hold its model requests")
        return request

    return Sources(given=given, lead=lead, contents=contents, log=last_request, pages=pages)


_KINDS: dict[str, tuple[type[Any], type[Any]]] = {
    names.MODEL_REQUEST: (ModelCall, ModelResponse),
    names.TOOL: (ToolCallInput, ToolOutcome),
}

_OUTCOME: TypeAdapter[Completed | Paused] = TypeAdapter(
    Annotated[Completed | Paused, Field(discriminator="kind")]
)


def decode_outcome(raw: Any) -> Completed | Paused:
    """A run's outcome as a workflow result or an update's answer gives it."""
    if isinstance(raw, Completed | Paused):
        return raw
    return _OUTCOME.validate_python(raw)


async def decode_result(
    raw: Any, sources: Sources, output: Callable[[Any], Any] | None = None, messages: bool = True
) -> Result[Any]:
    """The ``Result`` a run's outcome stands for (``output`` validates the output); with
    ``messages=False`` its ``messages`` are left empty, nothing read for them."""
    outcome = decode_outcome(raw)
    conversation = await outcome.conversation(sources) if messages else []
    if isinstance(outcome, Paused):
        return outcome.result(conversation)
    value = outcome.output
    if output is not None and value is not None:
        value = output(value)
    return outcome.result(conversation, value)


#: Reads a run's history as far as its payloads can be read (a run its worker could not).
Reread = Callable[[], Awaitable[RunHistory]]


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

    reread = None
    if converter is not None:

        async def reread() -> RunHistory:
            events = handle.fetch_history_events()
            return await RunHistory.read(events, converter, upto_unreadable=True)

    return await failure_of(exc.cause, handle.id, sources, memo, reread)


#: Stages of a run its worker could not read (a key it lacks, a damaged blob).
UNREAD_STAGES = ("codec", "storage")


async def rebuilt_error(
    cause: BaseException | None,
    run_id: str = "",
    evidence: Evidence | None = None,
    memo: Callable[[], Awaitable[Any]] | None = None,
    reread: Reread | None = None,
) -> Exception | None:
    """The one place the client turns a Temporal failure into golem's exception (by the
    failure table, golem.wire.failures), the evidence rebuilt by ``evidence``; ``reread``:
    this client reads the evidence of a run its worker could not read. ``None``: golem did
    not set that failure, so the caller words it."""
    error = await golem_error(cause, run_id, evidence, memo)
    unread = isinstance(error, RunError) and error.stage in UNREAD_STAGES
    if unread and reread is not None and isinstance(error, RunError) and error.partial is None:
        # Its worker could not read the run, so it sent no evidence: this reader may.
        history = await reread()
        return RunError(error.stage, error.detail, history.evidence(run_id), run_id)
    return error


async def failure_of(
    cause: BaseException | None,
    run_id: str,
    sources: Sources,
    memo: Callable[[], Awaitable[Any]],
    reread: Reread | None = None,
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
