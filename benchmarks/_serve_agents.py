"""The agent benchmarks/serve.py streams: N text deltas a fixed pause apart, no tools."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from golem import Agent, Message
from golem.models import FunctionModel, ModelResponse, StreamDelta, ToolDefinition

DELTAS = 20
PAUSE = 0.025
PIECE = "word "


async def _whole(messages: list[Message], tools: list[ToolDefinition]) -> Message:
    return Message.assistant(PIECE * DELTAS)


async def _stream(
    messages: list[Message], tools: list[ToolDefinition]
) -> AsyncIterator[StreamDelta | ModelResponse]:
    for index in range(DELTAS):
        if index:
            await asyncio.sleep(PAUSE)
        yield StreamDelta(kind="text", text=PIECE)
    yield ModelResponse(message=Message.assistant(PIECE * DELTAS))


agent: Agent[Any, str] = Agent(FunctionModel(_whole, _stream), name="bench_stream")
