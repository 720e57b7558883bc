"""Finishing: decoding the answer (with corrections), the ``Result``, and the evidence a
failed run leaves (``PartialResult``, sliced at the state's checkpoint)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from pydantic import TypeAdapter, ValidationError

from golem.errors import PartialResult
from golem.messages import Message, ToolCall
from golem.phases import Stop
from golem.results import Result
from golem.run_state import RunState
from golem.tools import validation_problems

CORRECTION = (
    "Your answer does not match the required output format: {problems}. "
    "Reply again with only a JSON value that matches the schema."
)


class Decoder:
    """Turns the final answer's text into the output type, or asks for a correction."""

    def __init__(self, adapter: TypeAdapter[Any] | None, retries: int) -> None:
        self.adapter = adapter
        self.retries = retries
        self.failures = 0

    def decode(self, text: str) -> tuple[bool, Any]:
        """``(True, output)``, or ``(False, correction)``: a user message to send the model.
        Past the allowed retries, ``Stop`` at stage ``decode``."""
        if self.adapter is None:
            return True, text
        try:
            return True, self.adapter.validate_json(strip_fences(text))
        except ValidationError as exc:
            self.failures += 1
            problems = validation_problems(exc, "answer")
            if self.failures > self.retries:
                raise Stop(
                    "decode",
                    f"the answer did not match the output type after "
                    f"{self.failures} tries: {problems}",
                ) from exc
            return False, Message.user(CORRECTION.format(problems=problems))


def strip_fences(text: str) -> str:
    """The text inside a Markdown code fence, if the whole answer is one."""
    stripped = text.strip()
    if stripped.startswith("```") and stripped.endswith("```"):
        stripped = stripped[3:-3]
        first, _, rest = stripped.partition("\n")
        return rest if first.strip().isalpha() or not first.strip() else stripped
    return stripped


def result(
    state: RunState,
    output: Any,
    pending: list[ToolCall] | None = None,
    external: Collection[str] = (),
) -> Result[Any]:
    """A finished run (or a paused one, with ``pending`` calls: those ``external`` names
    wait for the application, the others for a person)."""
    waiting = list(pending or [])
    return Result.of(
        state,
        output,
        state.messages,
        pending_approvals=[c for c in waiting if c.id not in external],
        pending_calls=[c for c in waiting if c.id in external],
    )


def partial(state: RunState) -> PartialResult | None:
    """The evidence through the checkpoint; ``None`` when the run completed nothing (no model
    turn, no tool result), so a first-call failure needs no recovery path."""
    checkpoint = state.checkpoint
    if checkpoint.empty:
        return None
    return PartialResult.of(
        state, list(state.messages[: checkpoint.upto]), checkpoint.usage, checkpoint.tool_calls
    )
