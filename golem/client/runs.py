"""A started durable run: its ids at once, its ``Result`` when it ends or pauses.

    run = await durable.start("Refund order 42")
    result = await run.result()                    # final, or paused for approvals
    final = await run.approve({result.pending_approvals[0].id: True})

The same run goes on after an approval: no new run, no new workflow.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import TypeAdapter
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.converter import DataConverter
from temporalio.service import RPCError

from golem.approvals import DecisionInput
from golem.client.decisions import checked_decisions, checked_results
from golem.client.stuck import said_stuck, unless_stuck
from golem.messages import Message, ToolCall
from golem.results import Result, RunError
from golem.streaming import DurableRunStream
from golem.tools import Tool
from golem.wire import Sources, names
from golem.wire.failures import CannotPause
from golem.wire.run_history import decode_result, lazy_sources, rebuilt_error, run_error
from golem.workflows.agent_run import AgentRunWorkflow

OutputT = TypeVar("OutputT")
T = TypeVar("T")


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
    agent: str = field(default="", repr=False)
    """The agent it runs (its stream's events name it; a handoff's target names itself)."""
    tools: Mapping[str, Tool] = field(default_factory=dict, repr=False)
    """The agent's tools, when this client holds the agent (edits and results are checked)."""
    turn_runs: dict[str, str] = field(default_factory=dict, repr=False)
    """An inline turn's runs, each with its agent: its own, then those it was handed over
    to, as its streams read them (``stream(from_offset)`` starts from them)."""
    followed: dict[str, tuple[str, int]] = field(default_factory=dict, repr=False)
    """The runs below it its streams followed and had not read to their end, each with its
    agent and the offset read up to (``stream(from_offset)`` follows them on from there)."""
    client: Client | None = field(default=None, repr=False)
    """The client it was reached through: a wait on the run looks whether it can go on
    (``WorkflowTaskFailing``, golem.client.stuck)."""
    answer: Callable[[], Awaitable[Result[OutputT]]] | None = field(default=None, repr=False)
    """A conversation turn's run: reads the turn's latest answer from its conversation (its
    runs composed, after a handoff), which its streams end with (``None``: its own)."""

    async def result(self, *, final: bool = False) -> Result[OutputT]:
        """The run's ``Result`` once it ends, or once it waits for approvals (then
        ``pending_approvals`` is set; answer with ``approve``). ``final=True`` waits through
        any approvals (and an approval timeout) for the end."""
        if self.may_pause and not final:
            try:
                paused = await self._paused(names.OUTCOME)
            except CannotPause:
                self.may_pause = False
                if self.on_cannot_pause is not None:
                    self.on_cannot_pause()
                paused = None
            if paused is not None:
                return paused
        return await self._final()

    async def approve(
        self, decisions: Mapping[str, DecisionInput], *, by: str = ""
    ) -> Result[OutputT]:
        """Decide the pending calls, by call id: ``True`` or ``Approve(args=..., always=...)``
        runs a call (with the arguments given in place of the model's), ``False`` or
        ``Deny(reason=...)`` closes it unexecuted; ``by`` names who decided (recorded on each
        call's result). The same run goes on: returns its next ``Result``, final or paused
        again. ``ValueError``, nothing sent, for a decision of the wrong type, an over-long
        reason or arguments the tool would not take; or when the run waits for none of the
        calls, naming what it does."""
        given = await checked_decisions(decisions, by, self.tools, self._waiting)
        paused = await self._paused(names.APPROVE, given)
        return paused if paused is not None else await self._final()

    async def complete(self, results: Mapping[str, object], *, by: str = "") -> Result[OutputT]:
        """Answer the client-run tools' calls the run waits for (``Result.pending_calls``),
        by call id: the result (a ``str`` as it is, anything else as JSON) or
        ``ToolFailed("why")``; the same run goes on. ``ValueError``, nothing sent, for a
        result its tool's ``result_schema`` refuses."""
        given = await checked_results(results, by, self.tools, self._waiting)
        paused = await self._paused(names.APPROVE, given)
        return paused if paused is not None else await self._final()

    async def _waiting(self) -> list[ToolCall]:
        calls: list[ToolCall] = await self.handle.query(AgentRunWorkflow.pending)
        return calls

    async def _paused(self, update: str, *args: Any) -> Result[OutputT] | None:
        """Send ``update``; the paused ``Result`` it returns, or ``None`` once the run ended."""
        try:
            raw = await self._unless_stuck(self.handle.execute_update(update, args=args))
        except WorkflowUpdateRPCTimeoutOrCancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise asyncio.CancelledError from None  # our caller was cancelled (Ctrl-C)
            raise
        except WorkflowUpdateFailedError as exc:
            error = await rebuilt_error(exc.cause, self.run_id)
            if error is not None and not isinstance(error, RunError):
                raise error from None  # refused: not waiting, or the agent never pauses
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
        status = (await self.handle.describe()).status
        if status == WorkflowExecutionStatus.RUNNING:
            raise exc
        if update == names.APPROVE:
            state = status.name.lower() if status is not None else "closed"
            raise ValueError(f"run {self.run_id} has ended ({state}): nothing to approve") from None

    async def _final(self) -> Result[OutputT]:
        try:
            output = await self._unless_stuck(self.handle.result())
        except WorkflowFailureError as exc:
            converter = self.converter or DataConverter.default
            raise await run_error(exc, self.handle, self._sources(), converter) from exc
        return await self._decode(output)

    async def _unless_stuck(self, wait: Awaitable[T]) -> T:
        """``wait``'s outcome, or ``WorkflowTaskFailing`` once the run cannot go on."""
        if self.client is None:
            return await wait
        return await unless_stuck(self.client, self.handle.id, wait)

    async def stuck(self, error: RPCError) -> Exception:
        """What a refusal of a poll of its stream means: ``WorkflowTaskFailing`` when the run,
        or one below it, cannot go on; else ``error``."""
        if self.client is None:
            return error
        return await said_stuck(self.client, self.handle.id, error)

    def _sources(self) -> Sources:
        converter = self.converter or DataConverter.default
        return lazy_sources(converter, self.handle, self.history, self.based)

    async def _decode(self, raw: Any) -> Result[OutputT]:
        adapter = self.output_adapter
        validate = adapter.validate_python if adapter is not None else None
        return await decode_result(raw, self._sources(), validate)

    async def cancel(self) -> None:
        """Ask the run to stop; ``result()`` then raises a ``RunError`` (stage ``canceled``)."""
        await self.handle.cancel()

    async def stream_end(self) -> int:
        """Where the run's stream ends now: ``stream(from_offset=...)`` from here yields only
        what the run publishes next (e.g. once an approval lets it go on)."""
        return await WorkflowStreamClient(self.handle).get_offset()

    async def stream_held(self) -> bool:
        """Whether its stream still holds its items, or will (a run's own stream keeps them
        all; a conversation's drops older turns')."""
        return True

    def stream(self, from_offset: int = 0) -> DurableRunStream[OutputT]:
        """The run's events from ``from_offset`` (live, or replayed once it has ended); a
        turn's stream ends with the turn's ``Result`` (``answer``)."""
        return DurableRunStream(self, from_offset, outcome=self.answer)


@dataclass
class InlineTurnRun(DurableRun[OutputT]):
    """A conversation turn run inline (docs/adr/0050-turns-inline.md): no workflow of its
    own, so ``handle`` is its conversation's, whose stream carries its events among the
    other turns'. Its ``Result`` is its latest answer (``answer``: its send's, or once that
    was a pause, the latest its conversation recorded); its calls are answered, and it is
    stopped (the conversation's cancel), through the conversation."""

    unanswered: Callable[[], bool] = field(default=lambda: False, repr=False)
    """Its send waits for its answer: it is queued or runs (its items are, or will be, held)."""

    async def stream_held(self) -> bool:
        if self.unanswered():
            return True  # no query needed: a turn in flight or queued keeps its items
        try:
            held: bool = await self.handle.query(
                names.TURN_STREAM_HELD, self.run_id, result_type=bool
            )
        except (WorkflowQueryFailedError, RPCError):
            return True  # a worker that does not know the query: read on, as it did
        return held

    async def result(self, *, final: bool = False) -> Result[OutputT]:
        if self.answer is None or final:
            raise TypeError(self._not_a_workflow("wait for its result with final=True"))
        return await self.answer()

    async def approve(
        self, decisions: Mapping[str, DecisionInput], *, by: str = ""
    ) -> Result[OutputT]:
        raise TypeError(self._not_a_workflow("approve its calls (conv.approve does)"))

    async def complete(self, results: Mapping[str, object], *, by: str = "") -> Result[OutputT]:
        raise TypeError(self._not_a_workflow("complete its calls (conv.complete does)"))

    async def cancel(self) -> None:
        # close() would let a turn in flight run to its end: only the conversation's cancel
        # stops it (at stage canceled, its evidence kept), ending the conversation too.
        raise TypeError(
            self._not_a_workflow(
                "be cancelled alone; conv.handle.cancel() stops it and ends the conversation "
                "(close() lets it run to its end)"
            )
        )

    def _not_a_workflow(self, what: str) -> str:
        return (
            f"turn {self.run_id} runs inline in conversation {self.conversation_id}, not as a "
            f"workflow of its own: it cannot {what}"
        )
