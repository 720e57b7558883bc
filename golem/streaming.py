"""Live events of durable runs, read from the run's Temporal workflow stream.

    stream = durable.run_stream("Plan my trip")          # starts the run when iterated
    async for event in stream:                           # the RunEvents of agent.run_stream
        print(event.delta.text if event.kind == "text_delta" and event.delta else "", end="")
    stream.result                                        # the Result run() gives (or RunError)

    async for event in run.stream(from_offset=saved):    # attach late, or resume after a crash
        saved = run_stream.offset                        # what to pass next time

The client half of ``golem.client``: it takes a ``DurableRun`` (its workflow handle) and
reads the stream through ``temporalio.contrib.workflow_streams``; ``golem.client``
re-exports it. See docs/adr/0007-live-streams.md.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from datetime import timedelta
from typing import TYPE_CHECKING, Generic, TypeVar, cast

from temporalio.client import WorkflowExecutionStatus, WorkflowQueryFailedError
from temporalio.common import RawValue
from temporalio.contrib.workflow_streams import WorkflowStreamClient, WorkflowStreamItem

from golem.events import RunEvent
from golem.results import Result
from golem.wire import StreamEvent
from golem.worker.converter import golem_data_converter
from golem.workflows.streams import TOPIC

if TYPE_CHECKING:
    from golem.client import DurableRun

__all__ = ["POLL_COOLDOWN", "DurableRunStream", "write_text"]

OutputT = TypeVar("OutputT")

#: Pause after each answered poll. Polls are long polls (each answered only when new
#: items exist), so this bounds the poll rate, not the latency of a waiting subscriber.
POLL_COOLDOWN = timedelta(milliseconds=10)


class DurableRunStream(Generic[OutputT]):
    """The ``RunEvent``s of a durable run, from ``offset`` on, each once and in order;
    ``result`` once exhausted. Leaving the loop early leaves the run running."""

    def __init__(
        self,
        run: DurableRun[OutputT] | Callable[[], Awaitable[DurableRun[OutputT]]],
        from_offset: int = 0,
        *,
        outcome: Callable[[], Awaitable[Result[OutputT]]] | None = None,
        on_close: Callable[[], object] | None = None,
        paused: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        if from_offset < 0:
            raise ValueError(f"from_offset must be 0 or more, not {from_offset}")
        self._run = run if not callable(run) else None
        self._start = run if callable(run) else None
        self._offset = from_offset
        self._result: Result[OutputT] | None = None
        # A conversation turn's Result is its update's, not its run's (run.result()).
        self._outcome = outcome
        self._on_close = on_close
        # Returns once the run waits for approvals (a turn's update says so); never otherwise.
        self._paused = paused

    @property
    def run(self) -> DurableRun[OutputT]:
        """The run (its ids, ``cancel()``), once iteration has started it."""
        if self._run is None:
            raise RuntimeError("the run has not started: iterate the stream first")
        return self._run

    @property
    def offset(self) -> int:
        """Where the events not yet yielded begin: pass it to ``DurableRun.stream`` to resume."""
        return self._offset

    @property
    def result(self) -> Result[OutputT]:
        if self._result is None:
            raise RuntimeError("the run has not finished: iterate the stream to the end first")
        return self._result

    async def __aiter__(self) -> AsyncIterator[RunEvent]:
        try:
            try:
                async with aclosing(self._events()) as events:
                    async for event in events:
                        yield event
            except WorkflowQueryFailedError:
                # A run its worker cannot read (an input it cannot decrypt) answers no
                # query; once it has ended, its outcome says why.
                if self._run is None or await _running(self._run):
                    raise
            outcome = self._outcome or self.run.result
            self._result = await outcome()
        finally:
            if self._on_close is not None:
                self._on_close()

    async def _events(self) -> AsyncGenerator[RunEvent, None]:
        if self._run is None:
            assert self._start is not None
            self._run = await self._start()
        run = self._run
        converter = golem_data_converter.payload_converter
        attempts: dict[int, tuple[int, int]] = {}  # turn -> its newest (model, attempt)
        items = cast(  # an async generator: closed at once when we stop at `end`
            AsyncGenerator[WorkflowStreamItem[RawValue], None],
            WorkflowStreamClient(run.handle).subscribe(
                [TOPIC], self._offset, result_type=RawValue, poll_cooldown=POLL_COOLDOWN
            ),
        )
        async with aclosing(items):
            async for item in self._until_paused(run, items):
                self._offset = item.offset + 1
                wire = converter.from_payload(item.data.payload, StreamEvent)
                if wire.kind == "end":
                    break
                turn = wire.turn
                if wire.kind == "turn_restarted":
                    attempts[turn] = wire.attempt_order
                elif wire.delta is not None and wire.attempt_order < attempts.get(
                    wire.turn, (0, 1)
                ):
                    continue  # a late piece of an attempt that was already given up on
                yield wire.to_event(run.run_id, run.conversation_id)

    async def _until_paused(
        self, run: DurableRun[OutputT], items: AsyncGenerator[WorkflowStreamItem[RawValue], None]
    ) -> AsyncGenerator[WorkflowStreamItem[RawValue], None]:
        """``items``; once ``paused`` says the run waits for a person (its stream does not
        end then), only those already published."""
        if self._paused is None:
            async for item in items:
                yield item
            return
        pausing = asyncio.ensure_future(self._paused())
        step: asyncio.Future[WorkflowStreamItem[RawValue]] | None = None
        end_at: int | None = None
        try:
            while end_at is None or self._offset < end_at:
                step = asyncio.ensure_future(anext(items))
                if end_at is None:
                    await asyncio.wait([step, pausing], return_when=asyncio.FIRST_COMPLETED)
                    if pausing.done():
                        # Everything before the pause is published: read up to there.
                        end_at = await WorkflowStreamClient(run.handle).get_offset()
                        if self._offset >= end_at and not step.done():
                            return
                try:
                    yield await step
                except StopAsyncIteration:
                    return
        finally:
            pausing.cancel()
            if step is not None and not step.done():
                step.cancel()  # a poll in flight: end it before the subscription closes
                with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                    await step


async def _running(run: DurableRun[OutputT]) -> bool:
    return (await run.handle.describe()).status == WorkflowExecutionStatus.RUNNING


async def write_text(stream: AsyncIterable[RunEvent], write: Callable[[str], object]) -> bool:
    """Write a run's text as it streams, a line per model turn; a retried turn is marked.
    ``False`` when there was no text at all."""
    wrote = anything = False
    async for event in stream:
        if event.kind == "model_start" and wrote:
            write("\n")
            wrote = False
        elif event.kind == "turn_restarted" and event.attempt == 1:
            write(f"\n[{event.model} takes over from a model that failed: its answer restarts]\n")
        elif event.kind == "turn_restarted":
            write(
                f"\n[the model call was retried (attempt {event.attempt}): its answer restarts]\n"
            )
            wrote = False
        elif event.kind == "text_delta" and event.delta is not None and event.delta.text:
            write(event.delta.text)
            wrote = anything = True
    if wrote:
        write("\n")
    return anything
