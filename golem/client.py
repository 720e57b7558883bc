"""Run agents durably from a Temporal client.

    client = await Client.connect("localhost:7233", plugins=[GolemPlugin(agent)])
    durable = DurableAgent(client, agent, task_queue="golem")
    result = await durable.run("Plan my trip", history=previous.messages)

``DurableAgent.run`` mirrors ``Agent.run``: same ``Result``, same ``golem.RunError``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

from pydantic import TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError, SchemaSerializer
from pydantic_core.core_schema import any_schema
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.converter import DataConverter
from temporalio.exceptions import ApplicationError, FailureError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from golem.agent import Agent
from golem.ids import new_id
from golem.loop import RunInput, resolve_conversation_id
from golem.messages import HistoryError, Message, Part, validate_history
from golem.records import (
    RunHistory,
    UnknownAgentError,
    decode_failure,
    decode_result,
    run_sources,
)
from golem.results import PartialResult, Result, RunError
from golem.streaming import DurableRunStream
from golem.strict_json import loads_strict
from golem.tools import validation_problems
from golem.wire import (
    AgentRunInput,
    InTranscript,
    MessagesPage,
    MessagesQuery,
    Pager,
    Sources,
    chain_all,
    message_size,
    read_pages,
)
from golem.worker.converter import golem_data_converter
from golem.workflows.agent_run import AgentRunWorkflow
from golem.workflows.approvals import CANNOT_PAUSE
from golem.workflows.conversation import (
    CLOSED,
    CONTINUING,
    RECORDED,
    WAITING,
    ConversationInput,
    ConversationSummary,
    ConversationWorkflow,
    TurnInput,
    TurnOutput,
)
from golem.workflows.lineage import (
    AGENT,
    CONVERSATION_ID,
    PARENT_RUN_ID,
    SEARCH_ATTRIBUTES,
    run_search_attributes,
    summary,
)
from golem.workflows.registry import UNKNOWN_AGENT
from golem.workflows.report import FAILURE_MEMO, run_failure
from golem.workflows.transcript import CARRY_BYTES, HistoryReader, with_segments

__all__ = [
    "AGENT",
    "CONVERSATION_ID",
    "PARENT_RUN_ID",
    "SEARCH_ATTRIBUTES",
    "ConversationClosedError",
    "DurableAgent",
    "DurableConversation",
    "DurableRun",
    "DurableRunStream",
    "RunIdInUseError",
    "RunRecord",
    "UnknownAgentError",
    "conversation_runs",
    "fetch_run",
]

OutputT = TypeVar("OutputT")

#: Largest history a run may start with (the workflow input is one Temporal payload).
MAX_INPUT_BYTES = 2_000_000 - 65_536


class RunIdInUseError(ValueError):
    """A run by that id exists already (running or closed): a run id names one run, ever."""


class _CannotPause(Exception):
    """The worker refused ``golem.outcome``: the run's agent never pauses."""


class ConversationClosedError(RuntimeError):
    """The conversation was closed: nothing more can be sent to it (fork it to go on)."""


@dataclass
class DurableRun(Generic[OutputT]):
    """A started run: its ids at once, its ``Result`` (or ``RunError``) when it ends."""

    run_id: str
    conversation_id: str
    handle: WorkflowHandle[Any, Any]
    history: list[Message] = field(repr=False)
    output_adapter: TypeAdapter[Any] | None = field(default=None, repr=False)
    may_pause: bool = field(default=True, repr=False)
    """The agent has tools that need approval (or is unknown here): the run may wait."""
    converter: DataConverter | None = field(default=None, repr=False)
    """The client's data converter: reads what the run's activities recorded."""
    on_cannot_pause: Callable[[], None] | None = field(default=None, repr=False)
    """Called when the worker says the run's agent never pauses."""
    based: bool = field(default=False, repr=False)
    """``history`` came by reference (a conversation's turn): the run holds only its own."""

    def _sources(self) -> Sources:
        converter = self.converter or DataConverter.default
        handle = self.handle

        async def load() -> RunHistory:
            return await RunHistory.read(handle.fetch_history_events(), converter)

        given, lead = ([], self.history) if self.based else (self.history, [])
        return run_sources(self.run_id, given, lead, _pager(handle), load)

    async def result(self, *, final: bool = False) -> Result[OutputT]:
        """The run's ``Result`` once it ends, or once it waits for approvals (then
        ``pending_approvals`` is set; answer with ``approve``). ``final=True`` waits through
        any approvals (and an approval timeout) for the end."""
        if self.may_pause and not final:
            try:
                paused = await self._paused("golem.outcome")
            except _CannotPause:
                self.may_pause = False
                if self.on_cannot_pause is not None:
                    self.on_cannot_pause()
                paused = None
            if paused is not None:
                return paused
        return await self._final()

    async def approve(self, decisions: dict[str, bool]) -> Result[OutputT]:
        """Approve (``True``) or deny (``False``) the pending calls, by call id; the same run
        goes on. Returns its next ``Result``: final, or paused again."""
        paused = await self._paused("golem.approve", decisions)
        return paused if paused is not None else await self._final()

    async def _paused(self, update: str, *args: Any) -> Result[OutputT] | None:
        """Send ``update``; the paused ``Result`` it returns, or ``None`` once the run ended."""
        try:
            raw = await self.handle.execute_update(update, args=args)
        except WorkflowUpdateRPCTimeoutOrCancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise asyncio.CancelledError from None  # our caller was cancelled (Ctrl-C)
            raise
        except WorkflowUpdateFailedError as exc:
            cause = exc.cause
            if isinstance(cause, ApplicationError) and cause.type == "GolemNotPaused":
                raise ValueError(cause.message) from None
            if isinstance(cause, ApplicationError) and cause.type == CANNOT_PAUSE:
                raise _CannotPause from None
            await self._ended(update, exc)
            return None  # the run ended (failed) while the update waited: read its result
        except RPCError as exc:
            await self._ended(update, exc)
            return None  # the run ended before the update arrived: read its result
        if raw is None:
            return None
        return await self._decode(raw)

    async def _ended(self, update: str, exc: Exception) -> None:
        """Re-raise ``exc`` unless the run has ended (then an approval has nothing to do)."""
        if (await self.handle.describe()).status == WorkflowExecutionStatus.RUNNING:
            raise exc
        if update == "golem.approve":
            raise ValueError(f"run {self.run_id} has ended: nothing to approve") from None

    async def _final(self) -> Result[OutputT]:
        try:
            output = await self.handle.result()
        except WorkflowFailureError as exc:
            raise await _run_error(exc, self.handle, self._sources()) from exc
        return await self._decode(output)

    async def _decode(self, raw: Any) -> Result[OutputT]:
        adapter = self.output_adapter
        validate = adapter.validate_python if adapter is not None else None
        return await decode_result(raw, self._sources(), validate)

    async def cancel(self) -> None:
        """Ask the run to stop; ``result()`` then raises a ``RunError`` (stage ``canceled``)."""
        await self.handle.cancel()

    def stream(self, from_offset: int = 0) -> DurableRunStream[OutputT]:
        """The run's events from ``from_offset`` (live, or replayed once it has ended)."""
        return DurableRunStream(self, from_offset)


class DurableAgent(Generic[OutputT]):
    """Start runs of an agent that a golem worker serves on ``task_queue``."""

    def __init__(
        self,
        client: Client,
        agent: Agent[Any, OutputT] | str,
        *,
        task_queue: str = "golem",
        output_type: type[OutputT] | None = None,
    ) -> None:
        self.client = client
        self.agent_name = agent if isinstance(agent, str) else agent.name
        self.task_queue = task_queue
        kind = output_type or (None if isinstance(agent, str) else agent.output_type)
        self.output_adapter = None if kind in (None, str) else TypeAdapter(kind)
        # Only a run that may wait for approvals needs the outcome update's round trip.
        self.may_pause = isinstance(agent, str) or any(
            tool.requires_approval for tool in agent.tools.values()
        )

    def _never_pauses(self) -> None:
        """The worker says this agent has no tool that needs approval: later runs skip the
        outcome update."""
        self.may_pause = False

    async def start(
        self,
        prompt: str | None = None,
        *,
        history: Sequence[Message] | None = None,
        parts: Sequence[Part] = (),
        deps: Any = None,
        run_id: str | None = None,
        conversation_id: str | None = None,
        approvals: dict[str, bool] | None = None,
        parent_run_id: str | None = None,
        stream: bool = False,
    ) -> DurableRun[OutputT]:
        """Start a run and return at once. The run id is minted here, so it is the
        workflow id before the run starts."""
        history = list(history or ())
        try:
            validate_history(history)
        except HistoryError as exc:
            raise RunError("history", str(exc)) from exc
        run_id = run_id or new_id()
        conversation_id = resolve_conversation_id(history, conversation_id) or new_id()
        parent = parent_run_id or next((m.run_id for m in reversed(history) if m.run_id), "")
        _check_sendable("prompt", prompt)
        _check_sendable("parts", list(parts), _PARTS)
        _check_sendable("deps", deps)
        for index, message in enumerate(history):
            _check_sendable(f"history message {index}", message, _MESSAGE)
        run = RunInput(
            prompt=prompt,
            parts=list(parts),
            history=history,
            deps=deps,
            run_id=run_id,
            conversation_id=conversation_id,
            approvals=dict(approvals or {}),
        )
        payload = AgentRunInput(agent=self.agent_name, run=run, parent_run_id=parent, stream=stream)
        size = len(golem_data_converter.payload_converter.to_payloads([payload])[0].data)
        if size > MAX_INPUT_BYTES:
            raise RunError(
                "history",
                f"the run's input is {size} bytes, over the {MAX_INPUT_BYTES}-byte limit of "
                "one Temporal payload; trim the history (trim_history / budget_history)",
            )
        try:
            handle = await self._start(payload, run_id, parent, prompt)
        except WorkflowAlreadyStartedError:
            raise RunIdInUseError(
                f"run id {run_id!r} is taken: a run by that id exists already (running or "
                "closed); pass a new run id, or none to get one"
            ) from None
        return DurableRun(
            run_id,
            conversation_id,
            handle,
            history,
            self.output_adapter,
            self.may_pause,
            self.client.data_converter,
            self._never_pauses,
        )

    async def _start(
        self, payload: AgentRunInput, run_id: str, parent: str, prompt: str | None
    ) -> WorkflowHandle[Any, Any]:
        return await self.client.start_workflow(
            AgentRunWorkflow.run,
            payload,
            id=run_id,
            task_queue=self.task_queue,
            search_attributes=run_search_attributes(
                payload.run.conversation_id, self.agent_name, parent
            ),
            static_summary=summary(self.agent_name, prompt),
            # The UI shows Temporal's Run ID beside the Workflow ID: say which one is golem's.
            static_details=(
                f"**golem run id** {run_id} (the Workflow ID; the Run ID is Temporal's)\n\n"
                f"**conversation** {payload.run.conversation_id} · **agent** {self.agent_name}"
            ),
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
        )

    async def run(
        self,
        prompt: str | None = None,
        *,
        history: Sequence[Message] | None = None,
        parts: Sequence[Part] = (),
        deps: Any = None,
        run_id: str | None = None,
        conversation_id: str | None = None,
        approvals: dict[str, bool] | None = None,
    ) -> Result[OutputT]:
        """Run durably and wait: the same ``Result`` and ``RunError`` as ``Agent.run``."""
        started = await self.start(
            prompt,
            history=history,
            parts=parts,
            deps=deps,
            run_id=run_id,
            conversation_id=conversation_id,
            approvals=approvals,
        )
        return await started.result()

    def run_stream(
        self,
        prompt: str | None = None,
        *,
        history: Sequence[Message] | None = None,
        parts: Sequence[Part] = (),
        deps: Any = None,
        run_id: str | None = None,
        conversation_id: str | None = None,
        approvals: dict[str, bool] | None = None,
    ) -> DurableRunStream[OutputT]:
        """Run durably, yielding ``agent.run_stream``'s events as they happen (the run
        starts when iterated); once exhausted, ``.result`` is what ``run`` returns."""
        return DurableRunStream(
            lambda: self.start(
                prompt,
                history=history,
                parts=parts,
                deps=deps,
                run_id=run_id,
                conversation_id=conversation_id,
                approvals=approvals,
                stream=True,
            )
        )

    async def attach(self, run_id: str) -> DurableRun[OutputT]:
        """A handle on a run started earlier, e.g. by a client that has since restarted."""
        handle = self.client.get_workflow_handle(run_id)
        description = await handle.describe()
        conversation_id = description.typed_search_attributes.get(CONVERSATION_ID) or ""
        history, based = await _input(self.client, handle)
        return DurableRun(
            run_id,
            conversation_id,
            handle,
            history,
            self.output_adapter,
            self.may_pause,
            self.client.data_converter,
            self._never_pauses,
            based,
        )

    async def conversation(
        self,
        conversation_id: str | None = None,
        *,
        history: Sequence[Message] | None = None,
        parent_run_id: str = "",
    ) -> DurableConversation[OutputT]:
        """A durable conversation (a ``ConversationWorkflow``): started when absent, attached
        when it runs already. ``history`` seeds a new conversation only."""
        seed = list(history or ())
        try:
            validate_history(seed)
        except HistoryError as exc:
            raise RunError("history", str(exc)) from exc
        conversation_id = conversation_id or resolve_conversation_id(seed, None) or new_id()
        parent = parent_run_id or next((m.run_id for m in reversed(seed) if m.run_id), "")
        input = ConversationInput(agent=self.agent_name, messages=seed, parent_run_id=parent)
        return await self._conversation(conversation_id, input)

    async def _conversation(
        self, conversation_id: str, input: ConversationInput
    ) -> DurableConversation[OutputT]:
        parent = input.parent_run_id
        try:
            handle = await self.client.start_workflow(
                ConversationWorkflow.run,
                input,
                id=conversation_id,
                task_queue=self.task_queue,
                search_attributes=run_search_attributes(conversation_id, self.agent_name, parent),
                static_summary=f"{self.agent_name}: conversation",
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            )
        except WorkflowAlreadyStartedError:
            handle = self.client.get_workflow_handle(conversation_id)  # closed: readable only
        return DurableConversation(self, handle)

    async def resume(
        self,
        failed: RunError | PartialResult | str,
        prompt: str | None = "continue",
        *,
        deps: Any = None,
    ) -> Result[OutputT]:
        """Continue a failed run in its conversation: from its ``RunError``, its
        ``PartialResult``, or its run id (the partial evidence is read from Temporal)."""
        if isinstance(failed, str):
            failed = await self._failure_of(failed)
        partial = failed.partial if isinstance(failed, RunError) else failed
        if partial is None:
            raise ValueError("the run completed nothing, so there is nothing to resume: start anew")
        return await (
            await self.start(
                prompt,
                history=partial.messages,
                deps=deps,
                conversation_id=partial.conversation_id,
                parent_run_id=partial.run_id,
            )
        ).result()

    async def _failure_of(self, run_id: str) -> RunError:
        record = await fetch_run(self.client, run_id)
        if isinstance(record.error, RunError):
            return record.error
        if record.error is not None:
            raise record.error
        raise ValueError(f"run {run_id} did not fail ({record.status}); continue it with run()")


class DurableConversation(Generic[OutputT]):
    """A conversation held by its own workflow; ``id`` is the conversation id. Use it from
    any process with a client: turns are serialized in arrival order."""

    def __init__(self, agent: DurableAgent[OutputT], handle: WorkflowHandle[Any, Any]) -> None:
        self.agent = agent
        self.handle = handle
        self.id = handle.id
        self._messages: list[Message] | None = None  # what this handle has seen of the transcript
        self._histories = _histories(agent.client)

    async def send(
        self,
        prompt: str | None = None,
        *,
        parts: Sequence[Part] = (),
        deps: Any = None,
        run_id: str | None = None,
    ) -> Result[OutputT]:
        """Run one turn (a child run of the conversation) and return its ``Result``, whose
        ``messages`` are the whole conversation. ``run_id`` makes a retried send one turn."""
        run_id = run_id or new_id()
        turn = TurnInput(run_id=run_id, prompt=prompt, parts=list(parts), deps=deps)
        return await self._finish(self._update(turn), run_id)

    def send_stream(
        self,
        prompt: str | None = None,
        *,
        parts: Sequence[Part] = (),
        deps: Any = None,
        run_id: str | None = None,
    ) -> DurableRunStream[OutputT]:
        """One turn, yielding its run's events as they happen (the turn starts when
        iterated); once exhausted, ``.result`` is what ``send`` returns, or it raises
        ``send``'s ``RunError``."""
        run_id = run_id or new_id()  # minted here: the stream is the child's, by this id
        turn = TurnInput(run_id=run_id, prompt=prompt, parts=list(parts), deps=deps, stream=True)
        sent: list[asyncio.Task[TurnOutput]] = []

        async def start() -> DurableRun[OutputT]:
            sent.append(asyncio.ensure_future(self._update(turn)))
            child = self.agent.client.get_workflow_handle(run_id)
            if not await _started(child, sent[0], self.id):
                await self._finish(sent[0], run_id)  # raises the refusal, as send would
            agent = self.agent
            return DurableRun(
                run_id, self.id, child, [], agent.output_adapter, agent.may_pause, based=True
            )

        async def outcome() -> Result[OutputT]:
            return await self._finish(sent[0], run_id)

        async def paused() -> None:
            try:  # shielded: a stream that stops waiting must not cancel the turn's update
                out: TurnOutput | None = await asyncio.shield(sent[0])
            except Exception:
                out = None  # the turn failed: its run has ended, and so does its stream
            if out is None or out.run.kind != "paused":
                await asyncio.Event().wait()  # the run ended: its stream ends by itself

        return DurableRunStream(
            start, outcome=outcome, on_close=lambda: sent and sent[0].cancel(), paused=paused
        )

    async def _update(self, turn: TurnInput) -> TurnOutput:
        delay = 0.02
        while True:
            try:
                out: TurnOutput = await self.handle.execute_update(
                    "golem.send", turn, id=turn.update_id(), result_type=TurnOutput
                )
                return out
            except WorkflowUpdateFailedError as exc:
                cause = exc.cause
                if not (isinstance(cause, ApplicationError) and cause.type == CONTINUING):
                    raise
            # The conversation finishes its turns in flight, then continues as new:
            # the same update, sent again, lands on the next run.
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)

    async def _finish(self, sent: Awaitable[TurnOutput], run_id: str) -> Result[OutputT]:
        """The turn's ``Result`` once its update returns, or its ``RunError``."""
        try:
            out = await sent
        except WorkflowUpdateFailedError as exc:
            cause = exc.cause
            if isinstance(cause, ApplicationError) and cause.type == RECORDED:
                # A send retried after continue-as-new: the turn ran, so its run answers,
                # with the conversation through that turn (a turn's run holds only its own).
                result = await (await self.agent.attach(run_id)).result()
                transcript = await read_pages(self._pager())
                ends = [i + 1 for i, m in enumerate(transcript) if m.run_id == run_id]
                return replace(result, messages=transcript[: ends[-1]]) if ends else result
            raise await self._turn_error(exc, run_id) from exc
        except RPCError as exc:
            raise await self._closed_or(exc) from exc
        return await self._turn_result(out, run_id)

    async def approve(self, decisions: dict[str, bool]) -> Result[OutputT]:
        """Answer the turn that waits for approvals (``{call_id: approved}``); returns that
        turn's next ``Result``: final, or waiting again."""
        try:
            out: TurnOutput = await self.handle.execute_update(
                "golem.approve", decisions, result_type=TurnOutput
            )
        except WorkflowUpdateFailedError as exc:
            raise await self._turn_error(exc, "") from exc
        except RPCError as exc:
            raise await self._closed_or(exc) from exc
        return await self._turn_result(out, out.run.run_id)

    async def _turn_result(self, out: TurnOutput, run_id: str) -> Result[OutputT]:
        history = await self._transcript(out.start)
        handle = self.agent.client.get_workflow_handle(run_id)
        adapter = self.agent.output_adapter
        validate = adapter.validate_python if adapter is not None else None
        based = out.based or isinstance(out.run.messages, InTranscript)
        given, lead = ([], history) if based else (history, [])
        sources = Sources(given=given, lead=lead, pages=_pager(handle), transcript=self._pager())
        result: Result[OutputT] = await decode_result(out.run, sources, validate)
        if not result.paused:  # a paused turn is not in the transcript yet
            self._messages = result.messages
        return result

    async def messages(self) -> list[Message]:
        """The whole conversation so far (a query: a worker must be up)."""
        self._messages = await read_pages(self._pager())
        return list(self._messages)

    async def runs(self) -> list[str]:
        """The run id of every turn, in order, across continue-as-new (read from the
        conversation's history: no worker needed; earlier workflow runs are read once per
        handle)."""
        histories = self._histories
        return await histories.runs(await histories.transcript(self.id))

    async def fork(self, at_run_id: str | None = None) -> DurableConversation[OutputT]:
        """A new conversation that continues this one from the end of run ``at_run_id``
        (default: the newest); its first run names that run as its parent. Read from the
        conversation's history (no worker needed); a long transcript is shared by reference
        to the workflow runs that hold it, not copied."""
        description = await self.handle.describe()
        histories = self._histories
        source = await histories.transcript(self.id, description.run_id or "")
        messages = await histories.messages(source)
        runs = await histories.runs(source)
        ends = {m.run_id: i + 1 for i, m in enumerate(messages) if m.run_id}
        if at_run_id is None:  # the newest turn in the transcript (not one in flight or waiting)
            at = next((run for run in reversed(runs) if run in ends), "")
        elif at_run_id not in runs:
            raise ValueError(f"run {at_run_id} is not a turn of conversation {self.id}")
        elif at_run_id not in ends:
            raise ValueError(
                f"run {at_run_id} added nothing to conversation {self.id} (it is in flight, "
                "waits for approvals, or ended before it recorded anything): fork at another run"
            )
        else:
            at = at_run_id
        end = ends[at] if at else len(messages)
        input = ConversationInput(
            agent=self.agent.agent_name, messages=messages[:end], parent_run_id=at
        )
        if sum(map(message_size, messages[:end])) > CARRY_BYTES:
            # By reference up to the forked turn (what its run added goes by value: the new
            # conversation repairs it if it failed), so no open call is shared unrepaired.
            begins = next(i for i, m in enumerate(messages) if m.run_id == at) if at else end
            earlier, cut = source.fork_point(self.id, description.run_id or "", begins, messages)
            input = input.model_copy(update={"messages": messages[cut:end], "earlier": earlier})
        return await self.agent._conversation(new_id(), input)

    def _pager(self) -> Pager:
        """Pages of the transcript; what earlier workflow runs hold is read from their histories."""
        return with_segments(_pager(self.handle), self._histories.segment)

    async def close(self) -> None:
        """End the conversation once the turn in flight (if any) finishes."""
        try:
            await self.handle.execute_update("golem.close", result_type=ConversationSummary)
        except (WorkflowUpdateFailedError, RPCError) as exc:
            error = await self._closed_or(exc)
            if not isinstance(error, ConversationClosedError):
                raise error from exc

    async def _transcript(self, upto: int) -> list[Message]:
        """The first ``upto`` messages: what this handle saw, else read by query."""
        if self._messages is not None and len(self._messages) == upto:
            return self._messages
        return await read_pages(self._pager(), 0, upto) if upto else []

    async def _turn_error(self, exc: WorkflowUpdateFailedError, run_id: str) -> Exception:
        cause = exc.cause
        details = run_failure(cause)
        if details is not None:
            partial = None
            if details.evidence is not None:
                # The conversation appended the evidence before it refused the turn.
                rid = run_id or details.evidence.run_id
                transcript = await read_pages(self._pager())
                self._messages = transcript
                ends = [i + 1 for i, m in enumerate(transcript) if m.run_id == rid]
                partial = details.evidence.partial(transcript[: ends[-1] if ends else None])
            else:
                self._messages = None
            return RunError(details.stage, details.message, partial)
        if isinstance(cause, ApplicationError) and cause.type == CLOSED:
            return ConversationClosedError(cause.message)
        if isinstance(cause, ApplicationError) and cause.type == WAITING:
            return ValueError(cause.message)
        if isinstance(cause, ApplicationError) and cause.type == UNKNOWN_AGENT:
            return UnknownAgentError(cause.message)
        message = cause.message if isinstance(cause, FailureError) else str(exc)
        return ValueError(f"conversation {self.id} refused the turn: {message}")

    async def _closed_or(self, exc: Exception) -> Exception:
        description = await self.handle.describe()
        if description.status != WorkflowExecutionStatus.RUNNING:
            status = description.status.name.lower() if description.status else "closed"
            return ConversationClosedError(f"conversation {self.id} is {status}; fork it to go on")
        return exc


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
    # One pass over the run's history: its input, its activities' results, its requests.
    history = await RunHistory.read(handle.fetch_history_events(), client.data_converter)
    input = history.input
    given = list(input.run.history) if input is not None else []
    lead: list[Message] = []
    if input is not None and input.base is not None and base:
        lead = await _base_messages(client, input, run_id)

    async def load() -> RunHistory:
        return history

    sources = run_sources(run_id, given, lead, _pager(handle), load)
    if description.status == WorkflowExecutionStatus.RUNNING:
        return RunRecord(run_id, status, [*lead, *await read_pages(_pager(handle))])
    try:
        raw = await handle.result()
    except WorkflowFailureError as exc:
        error = await _run_error(exc, handle, sources)
        partial = error.partial if isinstance(error, RunError) else None
        return RunRecord(
            run_id, status, partial.messages if partial else [*lead, *given], error=error
        )
    result = await decode_result(raw, sources)
    return RunRecord(run_id, status, result.messages, output=result.output)


async def _input(
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
        return await _base_messages(client, input, handle.id), True
    return [], False


async def _base_messages(client: Client, input: AgentRunInput, run_id: str) -> list[Message]:
    """The history a conversation's turn got by reference, read from the conversation's
    history (no worker needed) and checked against its digest."""
    base = input.base
    if base is None or not base.count:
        return []
    histories = _histories(client)
    transcript = await histories.transcript(base.conversation)
    messages = await histories.messages(transcript, 0, base.count)
    if len(messages) != base.count or chain_all(messages)[-1] != base.digest:
        raise ValueError(
            f"conversation {base.conversation} no longer holds the history run "
            f"{run_id} was given (its first {base.count} messages changed)"
        )
    return messages


async def _started(
    child: WorkflowHandle[Any, Any], sent: asyncio.Future[TurnOutput], conversation_id: str
) -> bool:
    """Wait until the turn's child run exists (a turn may queue behind the one in flight):
    ``True`` then, ``False`` when the update ended first without a child (refused)."""
    pause = 0.02
    while True:
        try:
            # A workflow by that id that is not this conversation's child is not the turn.
            if (await child.describe()).parent_id == conversation_id:
                return True
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
        if sent.done():
            return sent.cancelled() or sent.exception() is None  # a turn that ran has a child
        await asyncio.wait([sent], timeout=pause)
        pause = min(pause * 2, 0.5)


async def conversation_runs(client: Client, conversation_id: str) -> list[str]:
    """The run id of every turn of conversation workflow ``conversation_id``, in order, across
    continue-as-new, read from its history (no worker needed)."""
    histories = _histories(client)
    return await histories.runs(await histories.transcript(conversation_id))


def _histories(client: Client) -> HistoryReader:
    """Reads conversations from their workflow runs' histories (no worker needed)."""
    return HistoryReader(
        lambda workflow_id, run_id: client.get_workflow_handle(
            workflow_id, run_id=run_id or None
        ).fetch_history_events(),
        client.data_converter,
    )


def _pager(handle: WorkflowHandle[Any, Any]) -> Pager:
    """Pages of a run's conversation through its ``golem.conversation`` query."""

    async def page(query: MessagesQuery) -> MessagesPage:
        page: MessagesPage = await handle.query(
            "golem.conversation", query, result_type=MessagesPage
        )
        return page

    return page


_STRICT_JSON = SchemaSerializer(any_schema(), {"ser_json_inf_nan": "constants"})


_MESSAGE: TypeAdapter[Message] = TypeAdapter(Message)
_PARTS: TypeAdapter[list[Part]] = TypeAdapter(list[Part])


def _check_sendable(field: str, value: Any, kind: TypeAdapter[Any] | None = None) -> None:
    """``ValueError`` naming ``field`` unless it survives a JSON round trip unchanged: lone
    surrogates cannot be encoded, NaN or Infinity would silently become null, and a
    ``model_construct``-ed message would fail the run's input decoding."""
    try:
        data = _STRICT_JSON.to_json(value, by_alias=True, exclude_defaults=True)
    except PydanticSerializationError as exc:
        raise ValueError(f"{field} cannot be sent to Temporal: {exc}") from None
    try:
        loads_strict(data)
    except ValueError as exc:
        raise ValueError(
            f"{field} cannot be sent to Temporal: {exc} (JSON has no NaN or Infinity; "
            "encode such numbers yourself, e.g. as null or a string)"
        ) from None
    if kind is not None:
        try:
            kind.validate_json(data)
        except ValidationError as exc:
            raise ValueError(f"{field} is invalid: {validation_problems(exc)}") from None


async def _run_error(
    exc: WorkflowFailureError, handle: WorkflowHandle[Any, Any], sources: Sources
) -> Exception:
    """Rebuild the ``RunError`` a failed (or cancelled) workflow carries."""

    async def memo() -> Any:
        return await (await handle.describe()).memo_value(FAILURE_MEMO, None)

    return await decode_failure(exc.cause, sources, handle.id, memo)
