"""Agents for the crash tests, served both by a worker subprocess that gets killed and by
the test's own worker that takes over. ``GOLEM_CRASH_HANG=1`` makes the first execution
of a tool or model call announce itself (a file in ``GOLEM_CRASH_DIR``) and hang."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from golem import Message, ToolCall
from golem.agent import Agent, ModelRetry
from golem.models import FunctionModel, ModelResponse, StreamDelta


def _dir() -> Path:
    return Path(os.environ["GOLEM_CRASH_DIR"])


async def _record_and_maybe_hang(what: str) -> None:
    with (_dir() / "executions").open("a") as log:
        log.write(f"{what}\n")
    if os.environ.get("GOLEM_CRASH_HANG") == "1":
        (_dir() / "started").write_text(what)
        await asyncio.Event().wait()


def _tool_then_answer(tool: str) -> FunctionModel:
    def answer(messages: list[Message], tools: Any) -> Message:
        results = [m for m in messages if m.role == "tool"]
        if not results:
            return Message.assistant("", [ToolCall(id="call-1", name=tool, args="{}")])
        return Message.assistant(f"finished: {results[-1].content}")

    return FunctionModel(answer, model_name="crash-model")


idempotent = Agent(_tool_then_answer("lookup"), name="idempotent")


@idempotent.tool
async def lookup() -> str:
    """Look something up (safe to repeat)."""
    await _record_and_maybe_hang("lookup")
    return "looked up"


at_most_once = Agent(_tool_then_answer("charge_card"), name="at_most_once")


@at_most_once.tool(at_most_once=True)
async def charge_card() -> str:
    """Charge the card (never twice)."""
    await _record_and_maybe_hang("charge_card")
    return "charged"


async def _slow_model(messages: list[Message], tools: Any) -> Message:
    await _record_and_maybe_hang("model")
    return Message.assistant("the model answered")


model_crash = Agent(
    FunctionModel(_slow_model, model_name="crash-model"),
    name="model_crash",
    model_retry=ModelRetry(initial_interval=0.1),
)


async def _stream_then_hang(messages: list[Message], tools: Any) -> Any:
    if os.environ.get("GOLEM_CRASH_HANG") == "1":
        yield StreamDelta(kind="text", text="a partial ")  # then the worker dies
    await _record_and_maybe_hang("stream")
    for piece in ("the retried ", "answer"):
        yield StreamDelta(kind="text", text=piece)
    yield ModelResponse(message=Message.assistant("the retried answer"))


stream_crash = Agent(
    FunctionModel(lambda m, t: Message.assistant("unused"), _stream_then_hang),
    name="stream_crash",
    model_retry=ModelRetry(initial_interval=0.1),
)

AGENTS = [idempotent, at_most_once, model_crash, stream_crash]
