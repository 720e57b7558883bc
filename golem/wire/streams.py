"""A run's live-stream item (``temporalio.contrib.workflow_streams``, one topic): a loop
event without the run's ids, which every subscriber knows, the run's ``end``, or ``child``:
a run it delegated or handed off to started, whose own stream the subscriber reads too.
See docs/adr/0007-live-streams.md.
"""

from __future__ import annotations

from typing import Literal

from golem.events import EventKind, RunEvent
from golem.messages import Message, ToolCall
from golem.models.base import ModelResponse, StreamDelta
from golem.wire.base import Wire

_DELTA_KINDS = {"text": "text_delta", "thinking": "thinking_delta", "tool_call": "tool_call_delta"}


class StreamEvent(Wire):
    """One stream item: a ``RunEvent`` without the run's ids (the subscriber knows them)
    and without its stamps and duplicates, or ``end``, the run's last item. On a
    conversation's stream, ``handed``: an inline turn's run handed over to run ``run_id``,
    whose items are the turn's from then on."""

    kind: EventKind | Literal["end", "child", "handed"]
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
    agent: str = ""
    """The run's agent (on the items its workflow publishes; a delta's is its run's)."""
    run_id: str = ""
    """For ``child`` and ``handed``: the run that started (its agent is ``agent``)."""
    of_run: str = ""
    """On a conversation's stream: the inline turn the item belongs to (docs/adr/0050);
    empty on a run's own stream, whose items are all its own."""

    @classmethod
    def of(cls, event: RunEvent, of_run: str = "") -> StreamEvent:
        """The wire form of a loop event (``of_run``: an inline turn's, on its conversation's)."""
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
            agent=event.agent,
            of_run=of_run,
        )

    @classmethod
    def of_delta(
        cls, delta: StreamDelta, turn: int, attempt: int, model_index: int = 0, of_run: str = ""
    ) -> StreamEvent:
        """A model call's piece; ``attempt`` is Temporal's (1 for the first)."""
        kind: EventKind = _DELTA_KINDS[delta.kind]  # type: ignore[assignment]
        attempt = attempt if attempt > 1 else 0
        return cls(
            kind=kind,
            turn=turn,
            delta=delta,
            attempt=attempt,
            model_index=model_index,
            of_run=of_run,
        )

    @property
    def attempt_order(self) -> tuple[int, int]:
        """Where this event's model call comes in its turn: by model, then attempt."""
        return self.model_index, max(self.attempt, 1)

    def to_event(self, run_id: str, conversation_id: str, agent: str = "") -> RunEvent:
        """The ``RunEvent`` in-process ``run_stream`` would have yielded."""
        kind = self.kind
        if kind == "end" or kind == "child" or kind == "handed":
            raise ValueError(f"a stream's {kind!r} item is not a run event")
        message = self.message
        if self.kind == "model_end" and self.response is not None:
            message = self.response.message
        return RunEvent(
            kind=kind,
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
            agent=self.agent or agent,
        )
