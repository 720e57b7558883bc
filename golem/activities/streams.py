"""The model activity's side of a live stream: deltas, batched, onto the run's stream.

    response = await request_or_stream(agent.model, request, call)   # in golem.model_request

The first delta of a call is sent at once (time to first token is what a user feels);
after it, at most one batch per ``BATCH_INTERVAL``, its adjacent pieces merged, so history
grows by one signal per interval, never one per token. A retried attempt, or the next
model of a fallback, first publishes ``turn_restarted`` so a subscriber drops the turn's
partial text. See
docs/adr/0007-live-streams.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from datetime import timedelta
from types import TracebackType

from temporalio import activity
from temporalio.contrib.workflow_streams import TopicHandle, WorkflowStreamClient
from temporalio.service import RPCError

from golem.models.base import Model, ModelError, ModelRequest, ModelResponse, StreamDelta
from golem.wire import ModelCall, StreamEvent, names

#: Deltas that arrive within this interval of the previous batch go out together.
BATCH_INTERVAL = timedelta(milliseconds=200)

log = logging.getLogger(__name__)


def coalesce(deltas: Sequence[StreamDelta]) -> list[StreamDelta]:
    """Merge adjacent pieces of the same text, thinking or tool call (a piece that names a
    call starts a new one); the concatenated text of every stream is unchanged."""
    groups: list[tuple[StreamDelta, list[str]]] = []
    for delta in deltas:
        if groups:
            first, texts = groups[-1]
            names_nothing = not delta.call_id and not delta.name
            same_index = delta.kind != "tool_call" or delta.index == first.index
            if names_nothing and delta.kind == first.kind and same_index:
                texts.append(delta.text)
                continue
        groups.append((delta, [delta.text]))
    return [
        first if len(texts) == 1 else first.model_copy(update={"text": "".join(texts)})
        for first, texts in groups
    ]


@dataclass
class DeltaPublisher:
    """Publishes one model call's deltas to the stream of the activity's workflow."""

    turn: int
    attempt: int
    _: KW_ONLY
    interval: timedelta = BATCH_INTERVAL
    client: WorkflowStreamClient | None = None
    """Where the deltas go (default: the stream of the activity's own workflow)."""
    model: str = ""
    model_index: int = 0
    """Which model of a fallback answers: past the first, the turn restarts on it."""
    of_run: str = ""
    """The inline turn whose deltas these are, on its conversation's stream ("" on a run's)."""
    _pending: list[StreamDelta] = field(default_factory=list, init=False)
    _wake: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    _task: asyncio.Task[None] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        within = WorkflowStreamClient.from_within_activity
        self._client = self.client or within(batch_interval=self.interval)
        self._topic: TopicHandle[StreamEvent] = self._client.topic(names.TOPIC, type=StreamEvent)

    async def __aenter__(self) -> DeltaPublisher:
        if self.attempt > 1 or self.model_index > 0:
            event = StreamEvent(
                kind="turn_restarted",
                turn=self.turn,
                attempt=self.attempt,
                model=self.model,
                model_index=self.model_index,
                of_run=self.of_run,
            )
            self._topic.publish(event)
            self._wake.set()
        self._task = asyncio.create_task(self._batches())
        return self

    def add(self, delta: StreamDelta) -> None:
        self._pending.append(delta)
        self._wake.set()

    async def _batches(self) -> None:
        # A leading-edge throttle: send what is pending, then rest one interval. The
        # contrib's own flusher is not used: on Python 3.11 its wait_for can swallow the
        # cancellation that stops it, which would hang the activity.
        while True:
            await self._wake.wait()
            self._wake.clear()
            self._buffer_pending()
            try:
                await self._client.flush()
            except RPCError:
                # The batch stays pending; the next flush resends it (deduplicated).
                log.warning("publishing deltas failed; retrying", exc_info=True)
            await asyncio.sleep(self.interval.total_seconds())

    def _buffer_pending(self) -> None:
        pieces, self._pending = coalesce(self._pending), []
        for piece in pieces:
            self._topic.publish(
                StreamEvent.of_delta(piece, self.turn, self.attempt, self.model_index, self.of_run)
            )

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if kind is asyncio.CancelledError:
            return  # the run is being cancelled: nobody waits for the rest of this turn
        self._buffer_pending()
        try:
            await self._client.flush()
        except Exception:
            if kind is None:
                raise  # the answer is complete but its deltas are not: retry the call
            log.warning("could not publish the last deltas of a failing model call", exc_info=True)


async def stream_request(
    model: Model, request: ModelRequest, turn: int, model_index: int = 0, of_run: str = ""
) -> ModelResponse:
    """``model.request_stream``, its deltas published live; the complete response."""
    response: ModelResponse | None = None
    publisher = DeltaPublisher(
        turn,
        activity.info().attempt,
        model=model.model_name,
        model_index=model_index,
        of_run=of_run,
    )
    async with publisher:
        async for item in model.request_stream(request):
            if isinstance(item, StreamDelta):
                publisher.add(item)
            else:
                response = item
    if response is None:
        raise ModelError("the stream ended without a complete response", provider=model.model_name)
    return response


def request_or_stream(
    model: Model, request: ModelRequest, call: ModelCall
) -> Awaitable[ModelResponse]:
    """The model call ``call`` asks for: streamed live when its run is (``run_stream``)."""
    if call.stream:
        run_id = call.stamps.run_id if call.stamps is not None else ""
        # A turn run inline streams onto its conversation's stream: its items name it.
        of_run = run_id if run_id and run_id != activity.info().workflow_id else ""
        return stream_request(model, request, call.turn, call.model_index, of_run)
    return model.request(request)
