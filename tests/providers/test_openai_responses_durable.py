"""A run through the OpenAI Responses adapter, in process and durably, against the checking
fake: its tool call answered, its encrypted reasoning carried through the run's history (the
Temporal payloads, when durable) and replayed as it came, its stream the same both ways."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterable, Sequence
from datetime import timedelta
from typing import Any

import pytest
from provider_fakes import Answer, FakeProvider, completed_response, recording
from runners import Runner
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from golem import Agent, RunEvent
from golem.client import DurableAgent
from golem.messages import ThinkingBlock
from golem.models import OpenAIResponsesModel
from golem.worker import GolemPlugin

CALL = "openai-responses-04-stream-function-call"
ANSWER = "openai-responses-05-stream-text-after-function-call-output"
DEADLINE = 60.0


def weather_agent(model: OpenAIResponsesModel) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(model, name=f"responses-{uuid.uuid4().hex[:8]}")

    @agent.tool
    def get_weather(city: str) -> str:
        """Get the current weather for a city."""
        return "sunny, 22°C" if city == "Paris" else "unknown"

    return agent


def replayed_reasoning(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [item for item in body["input"] if item["type"] == "reasoning"]


async def test_a_run_answers_its_call_and_replays_the_encrypted_reasoning_in_both_executors(
    runner: Runner, responses_fake: FakeProvider, responses_model: OpenAIResponsesModel
) -> None:
    responses_fake.answer(
        Answer.json(200, completed_response(CALL)), Answer.json(200, completed_response(ANSWER))
    )
    result = await runner(weather_agent(responses_model), "What's the weather in Paris?")

    assert result.output == "The weather in Paris is sunny, 22°C."
    assert result.requests == 2 and result.tool_calls == 1
    # the second request holds the first answer's items exactly as the API documents them
    recorded = recording(ANSWER)["request"]["body"]
    assert responses_fake.bodies[1]["input"] == recorded["input"]
    assert responses_fake.bodies[1]["store"] is False
    thinking = result.messages[1].thinking
    item = completed_response(CALL)["output"][0]
    assert thinking == [
        ThinkingBlock(text=item["summary"][0]["text"], provider="openai-responses", id=item["id"]),
        ThinkingBlock(
            redacted=item["encrypted_content"], provider="openai-responses", id=item["id"]
        ),
    ]
    assert result.usage.reasoning_tokens == 128 + 16


async def collect(stream: AsyncIterable[RunEvent]) -> list[RunEvent]:
    async with asyncio.timeout(DEADLINE):
        return [event async for event in stream]


def pieces(events: Sequence[RunEvent], kind: str) -> str:
    return "".join(e.delta.text for e in events if e.kind == kind and e.delta)


@pytest.mark.parametrize("executor", ["local", "durable"])
async def test_a_streamed_run_yields_the_same_events_and_result_in_both_executors(
    request: pytest.FixtureRequest,
    executor: str,
    responses_fake: FakeProvider,
    responses_model: OpenAIResponsesModel,
) -> None:
    responses_fake.answer(CALL, ANSWER)
    agent = weather_agent(responses_model)
    if executor == "local":
        stream = agent.run_stream("What's the weather in Paris?")
        events = await collect(stream)
        result = stream.result
    else:
        env: WorkflowEnvironment = request.getfixturevalue("temporal_env")
        task_queue = f"responses-{uuid.uuid4().hex[:12]}"
        plugin = GolemPlugin(agent, heartbeat_timeout=timedelta(seconds=5))
        async with Worker(env.client, task_queue=task_queue, plugins=[plugin]):
            durable = DurableAgent(env.client, agent, task_queue=task_queue)
            durable_stream = durable.run_stream("What's the weather in Paris?")
            events = await collect(durable_stream)
            result = durable_stream.result

    assert pieces(events, "thinking_delta") == (
        "**Looking up the weather**\n\nI should call the tool for Paris."
    )
    assert pieces(events, "tool_call_delta") == '{"city":"Paris"}'
    assert pieces(events, "text_delta") == "The weather in Paris is sunny, 22°C."
    assert [e.kind for e in events if e.kind in ("tool_start", "tool_end")] == [
        "tool_start",
        "tool_end",
    ]
    assert result.output == "The weather in Paris is sunny, 22°C."
    assert [i["encrypted_content"] for i in replayed_reasoning(responses_fake.bodies[1])] == [
        completed_response(CALL)["output"][0]["encrypted_content"]
    ]
    assert all(body["stream"] is True for body in responses_fake.bodies)
