"""A run's live stream, on ``temporalio.contrib.workflow_streams``: the workflow side.

    self._stream = RunStreamHost()                       # in AgentRunWorkflow.__init__
    self._stream.publish(event)                          # the loop's own events
    result = await self._stream.hosting(self._loop.run())  # ends the stream with the run

``AgentRunWorkflow`` hosts one ``WorkflowStream``; the loop's events (model and tool
start/end, canceled) are appended by the workflow itself, which records nothing in
history (replay rebuilds them); text and tool-call deltas are published, batched, by the
model activity (``golem.activities.streams``) as signals. Every item is a ``StreamEvent``
on the one topic ``TOPIC``, so an offset addresses exactly one event. See
docs/adr/0007-live-streams.md.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from datetime import timedelta
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict
from temporalio import workflow
from temporalio.contrib.workflow_streams import WorkflowStream

from golem.events import EventKind, RunEvent
from golem.messages import Message, ToolCall
from golem.models.base import ModelResponse, StreamDelta

__all__ = ["LINGER", "TOPIC", "RunStreamHost", "StreamEvent"]

T = TypeVar("T")

#: The one topic of a run's stream.
TOPIC = "golem.events"
#: How long a streamed run that has ended waits for its live subscriber's next poll.
LINGER = timedelta(seconds=1)
_DELTA_KINDS = {"text": "text_delta", "thinking": "thinking_delta", "tool_call": "tool_call_delta"}


class StreamEvent(BaseModel):
    """One stream item: a ``RunEvent`` without the run's ids (the subscriber knows them)
    and without its stamps and duplicates, or ``end``, the run's last item."""

    model_config = ConfigDict(frozen=True)

    kind: EventKind | Literal["end"]
    turn: int = 0
    attempt: int = 0
    """For a delta: the model call attempt that produced it (0 for the first); for
    ``turn_restarted``: the new attempt."""
    model_index: int = 0
    """For a delta or ``turn_restarted``: which model of a fallback (0: the first)."""
    model: str = ""
    """For ``turn_restarted``: the model the turn restarts on."""
    delta: StreamDelta | None = None
    call: ToolCall | None = None
    message: Message | None = None
    """For ``tool_end``: the result, unstamped (the subscriber stamps it with the run's ids)."""
    response: ModelResponse | None = None
    """For ``model_end``: the response; the event's message is its message, stamped."""
    reason: str = ""

    @classmethod
    def of(cls, event: RunEvent) -> StreamEvent:
        """The wire form of a loop event."""
        return cls(
            kind=event.kind,
            turn=event.turn,
            delta=event.delta,
            call=event.call,
            # model_end's message is the response's, stamped: carry it once.
            message=None
            if event.message is None or event.kind == "model_end"
            else event.message.stamped("", ""),
            response=event.response,
            reason=event.reason,
            attempt=event.attempt,
            model=event.model,
        )

    @classmethod
    def of_delta(
        cls, delta: StreamDelta, turn: int, attempt: int, model_index: int = 0
    ) -> StreamEvent:
        """A model call's piece; ``attempt`` is Temporal's (1 for the first)."""
        kind: EventKind = _DELTA_KINDS[delta.kind]  # type: ignore[assignment]
        attempt = attempt if attempt > 1 else 0
        return cls(kind=kind, turn=turn, delta=delta, attempt=attempt, model_index=model_index)

    @property
    def attempt_order(self) -> tuple[int, int]:
        """Where this event's model call comes in its turn: by model, then attempt."""
        return self.model_index, max(self.attempt, 1)

    def to_event(self, run_id: str, conversation_id: str) -> RunEvent:
        """The ``RunEvent`` in-process ``run_stream`` would have yielded."""
        if self.kind == "end":
            raise ValueError("the end of a stream is not a run event")
        message = self.message
        if self.kind == "model_end" and self.response is not None:
            message = self.response.message
        return RunEvent(
            kind=self.kind,
            run_id=run_id,
            conversation_id=conversation_id,
            turn=self.turn,
            delta=self.delta,
            call=self.call,
            message=None if message is None else message.stamped(run_id, conversation_id),
            response=self.response,
            reason=self.reason,
            attempt=self.attempt if self.kind == "turn_restarted" else 0,
            model=self.model,
        )


class RunStreamHost:
    """The run's ``WorkflowStream``: create it in the workflow's ``__init__``."""

    def __init__(self) -> None:
        # WorkflowStream checks that its caller is an __init__ running in the workflow.
        self.stream = WorkflowStream()
        self._topic = self.stream.topic(TOPIC, type=StreamEvent)

    def publish(self, event: RunEvent) -> None:
        """Append a loop event (deltas never reach here: the model activity sends them)."""
        self._topic.publish(StreamEvent.of(event))

    async def hosting(self, work: Awaitable[T], streamed: bool = False) -> T:
        """Await the run, then end the stream: an ``end`` item, waiting polls answered.

        A ``streamed`` run that ends while its live subscriber is between two polls waits
        up to ``LINGER`` for the next one, which would otherwise find the run closed and
        read the end by query (a replay of the whole run on some worker)."""
        try:
            result = await work
        except GeneratorExit:
            raise  # the worker is closing an evicted run's coroutine: no ending to publish
        except BaseException as exc:
            # A cancelled (or evicted) run closes at once; any other failure is an ending.
            ended = isinstance(exc, Exception)
            await self._end(
                streamed, ended and not isinstance(exc.__cause__, asyncio.CancelledError)
            )
            raise
        await self._end(streamed, True)
        return result

    async def _end(self, streamed: bool, completed: bool) -> None:
        self._topic.publish(StreamEvent(kind="end"))
        if streamed and completed and workflow.all_handlers_finished():
            # The run has ended: a cancel (or eviction) now only cuts the wait short.
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await workflow.wait_condition(
                    lambda: not workflow.all_handlers_finished(),
                    timeout=LINGER,
                    timeout_summary="stream: waiting for the reader's last poll",
                )
        # Answer waiting polls now, so a subscriber gets `end` without a query replay.
        self.stream.detach_pollers()
        await workflow.wait_condition(workflow.all_handlers_finished)
