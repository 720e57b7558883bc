"""The agent benchmarks/serve.py streams: N text deltas a fixed pause apart, no tools.

A prompt ``hold PATH`` holds its stream open after the first delta until the file PATH
exists (the memory bursts: every stream open at once, then let go together).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from golem import Agent, Message
from golem.models import FunctionModel, ModelResponse, StreamDelta, ToolDefinition

DELTAS = 20
PAUSE = 0.025
PIECE = "word "
HOLD = "hold "
#: How often a held stream looks for its gate (the model call heartbeats on a timer).
GATE_POLL = 0.2


async def _whole(messages: list[Message], tools: list[ToolDefinition]) -> Message:
    return Message.assistant(PIECE * DELTAS)


async def _stream(
    messages: list[Message], tools: list[ToolDefinition]
) -> AsyncIterator[StreamDelta | ModelResponse]:
    prompt = messages[-1].content or ""
    gate = Path(prompt.removeprefix(HOLD)) if prompt.startswith(HOLD) else None
    for index in range(DELTAS):
        if index:
            await asyncio.sleep(PAUSE)
        yield StreamDelta(kind="text", text=PIECE)
        while gate is not None and not gate.exists():
            await asyncio.sleep(GATE_POLL)
    yield ModelResponse(message=Message.assistant(PIECE * DELTAS))


agent: Agent[Any, str] = Agent(FunctionModel(_whole, _stream), name="bench_stream")
