"""A provider that drops its stream mid-answer falls over to the next model, as a 503 does, in
process and durably; a streaming caller sees the turn restart (docs/adr/0017-fallback-and-retry.md).

The primary is a real HTTP adapter talking to a 127.0.0.1 server that sends the first events
of a recorded answer and then closes the connection (tests/providers/provider_fakes.py).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from providers.provider_fakes import API_KEY, StreamCutter, recording
from temporalio.client import Client
from temporalio.worker import Worker
from waiting import within

from golem import Agent, Message, Retry, RunEvent
from golem.client import DurableAgent
from golem.models import FallbackModel, OpenAIChatModel, ScriptedModel
from golem.worker import GolemPlugin

#: The first three events of a recorded answer: its text so far is "The capital".
SENT = "".join(
    event + "\n\n"
    for event in recording("openai-chat-06-stream-text-after-tool-result")["response"]["sse"].split(
        "\n\n"
    )[:3]
).encode()


@pytest.fixture
async def cutter() -> AsyncIterator[StreamCutter]:
    async with StreamCutter(SENT) as server:
        yield server


def fallback_agent(cutter: StreamCutter) -> tuple[Agent[Any, Any], ScriptedModel]:
    primary = OpenAIChatModel("gpt-4o", base_url=cutter.url + "/v1", api_key=API_KEY)
    backup = ScriptedModel([Message.assistant("Hello")], model_name="backup")
    model = FallbackModel(primary, backup, retry=[Retry(max_attempts=1), None])
    return Agent(model, name=f"dropped_{uuid.uuid4().hex[:8]}"), backup


def seen(events: list[RunEvent]) -> list[tuple[str, Any]]:
    """The text each model got out before the next took over, and the restarts between."""
    told: list[tuple[str, Any]] = []
    for event in events:
        if event.kind == "text_delta" and event.delta is not None:
            if told and told[-1][0] == "text":
                told[-1] = ("text", told[-1][1] + event.delta.text)
            else:
                told.append(("text", event.delta.text))
        elif event.kind == "turn_restarted":
            told.append(("turn_restarted", (event.attempt, event.model)))
    return told


async def streamed(
    agent: Agent[Any, Any], executor: str, client: Client
) -> tuple[list[RunEvent], Any]:
    if executor == "local":
        stream = agent.run_stream("go")
        return [event async for event in stream], stream.result
    task_queue = f"dropped-{uuid.uuid4().hex[:12]}"
    async with Worker(client, task_queue=task_queue, plugins=[GolemPlugin(agent)]):
        durable = DurableAgent(client, agent, task_queue=task_queue).run_stream("go")

        async def drain() -> list[RunEvent]:
            return [event async for event in durable]

        events = await within(drain(), what="the durable stream to end", timeout=60)
        return events, durable.result


@pytest.mark.parametrize("executor", ["local", "durable"])
async def test_a_stream_the_provider_drops_falls_over_and_the_caller_sees_the_restart(
    cutter: StreamCutter, executor: str, temporal_client: Client
) -> None:
    agent, backup = fallback_agent(cutter)

    events, result = await streamed(agent, executor, temporal_client)

    assert seen(events) == [
        ("text", "The capital"),
        ("turn_restarted", (1, "backup")),
        ("text", "Hello"),
    ]
    assert (result.output, result.model) == ("Hello", "backup")
    assert (cutter.requests, len(backup.requests)) == (1, 1)


@pytest.mark.parametrize("executor", ["local", "durable"])
async def test_an_answer_the_provider_drops_falls_over_unstreamed_too(
    cutter: StreamCutter, executor: str, temporal_client: Client
) -> None:
    agent, backup = fallback_agent(cutter)

    if executor == "local":
        result = await agent.run("go")
    else:
        task_queue = f"dropped-{uuid.uuid4().hex[:12]}"
        async with Worker(temporal_client, task_queue=task_queue, plugins=[GolemPlugin(agent)]):
            result = await DurableAgent(temporal_client, agent, task_queue=task_queue).run("go")

    assert (result.output, result.model) == ("Hello", "backup")
    assert (cutter.requests, len(backup.requests)) == (1, 1)
