"""golem's bounds on what others hand it: JSON nesting (MAX_DEPTH) and tool calls in flight
(``max_concurrent_tools``). Past a bound a run still ends, naming it; it never loops."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from agents import ask, call, scripted
from hypothesis import given, settings
from hypothesis import strategies as st
from runners import Runner
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

from golem.agent import Agent
from golem.client import DurableAgent
from golem.messages import HistoryError, Message, ToolCall, load_messages, validate_history
from golem.models.function import ScriptedModel
from golem.results import RunError
from golem.strict_json import MAX_DEPTH, TooDeep, is_json_object, loads_strict
from golem.testing import dev_server
from golem.worker import GolemPlugin

DEEP = '{"a": ' + "[" * 5000 + "]" * 5000 + "}"
"""Tool-call arguments nested 5,001 levels: a recursive reader runs out of stack on them."""


def nested(depth: int) -> str:
    """A JSON object nested ``depth`` levels (the object itself is the first)."""
    return '{"a": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


@pytest.mark.parametrize("text", [DEEP, DEEP.encode(), "[" * 5000, '["\\ud800", ' + DEEP + "]"])
def test_json_past_the_nesting_limit_is_a_value_error_naming_the_limit(text: str | bytes) -> None:
    with pytest.raises(TooDeep, match=f"past golem's limit of {MAX_DEPTH}"):
        loads_strict(text)


def test_json_at_the_nesting_limit_is_read_and_one_level_more_is_not() -> None:
    assert isinstance(loads_strict(nested(MAX_DEPTH)), dict)
    assert is_json_object(nested(MAX_DEPTH))
    assert not is_json_object(nested(MAX_DEPTH + 1))
    brackets_in_a_string = json.dumps({"text": "[" * 5000})  # not nesting: read as usual
    assert loads_strict(brackets_in_a_string) == {"text": "[" * 5000}


@settings(max_examples=60, deadline=None)
@given(
    shape=st.lists(st.booleans(), min_size=1, max_size=600),
    filler=st.text(alphabet='[]{}"\\ab', max_size=12),
)
def test_any_nesting_is_read_up_to_the_limit_and_refused_past_it_never_overflowing(
    shape: list[bool], filler: str
) -> None:
    """Arrays and objects in any order, a string of brackets and quotes at the bottom:
    read when at most MAX_DEPTH deep, a TooDeep naming the depth otherwise."""
    text = json.dumps(filler)
    for is_object in reversed(shape):
        text = f'{{"k": {text}}}' if is_object else f"[{text}]"
    if len(shape) <= MAX_DEPTH:
        assert loads_strict(text) is not None
    else:
        with pytest.raises(TooDeep) as refused:
            loads_strict(text)
        assert refused.value.depth == len(shape)


async def test_arguments_past_the_nesting_limit_answer_the_call_as_failed_and_the_run_goes_on(
    runner: Runner,
) -> None:
    agent, model = scripted(
        [
            ask(ToolCall(id="deep", name="echo", args=DEEP), call("ok", "echo", text="hi")),
            Message.assistant("done"),
        ]
    )
    ran: list[str] = []

    @agent.tool
    def echo(text: str = "") -> str:
        """Echo."""
        ran.append(text)
        return text

    result = await asyncio.wait_for(runner(agent, "go"), 60)

    assert result.output == "done" and ran == ["hi"]
    deep_result = next(m for m in result.messages if m.tool_call_id == "deep")
    assert deep_result.failed
    assert f"past golem's limit of {MAX_DEPTH}" in deep_result.content
    sent = model.requests[1].messages
    assert next(m for m in sent if m.tool_calls).tool_calls[0].args == DEEP  # kept verbatim


def deep_history() -> list[Message]:
    return [
        Message.user("go"),
        Message.assistant("", [ToolCall(id="deep", name="echo", args=DEEP)]),
        Message.tool("deep", "echo", "x"),
    ]


def test_a_history_with_arguments_past_the_nesting_limit_is_refused_naming_the_call() -> None:
    with pytest.raises(HistoryError) as refused:
        validate_history(deep_history())
    assert refused.value.index == 1
    assert "tool call 0 (deep)" in str(refused.value) and f"limit of {MAX_DEPTH}" in str(
        refused.value
    )
    data = json.dumps(
        [{"role": "assistant", "toolCalls": [{"id": "d", "name": "x", "args": DEEP}]}]
    )
    with pytest.raises(HistoryError, match=f"limit of {MAX_DEPTH}"):
        load_messages(data)


async def test_a_run_given_a_history_past_the_nesting_limit_fails_at_stage_history(
    runner: Runner,
) -> None:
    agent, model = scripted([Message.assistant("never")])
    with pytest.raises(RunError) as failure:
        await asyncio.wait_for(runner(agent, "again", history=deep_history()), 60)
    assert failure.value.stage == "history"
    assert "message 1: tool call 0 (deep)" in failure.value.detail
    assert model.requests == []


async def test_a_durable_run_with_such_a_history_is_refused_before_any_workflow_starts(
    temporal_client: Client,
) -> None:
    agent, _ = scripted([Message.assistant("never")])
    run_id = f"deep-{uuid.uuid4().hex[:8]}"
    with pytest.raises(RunError, match="message 1: tool call 0"):
        await DurableAgent(temporal_client, agent, task_queue="nobody").start(
            "again", history=deep_history(), run_id=run_id
        )
    with pytest.raises(RPCError) as absent:
        await temporal_client.get_workflow_handle(run_id).describe()
    assert absent.value.status == RPCStatusCode.NOT_FOUND


async def test_a_durable_conversation_seeded_with_such_a_history_is_refused(
    temporal_client: Client,
) -> None:
    agent, _ = scripted([Message.assistant("never")])
    with pytest.raises(RunError, match="message 1: tool call 0"):
        await DurableAgent(temporal_client, agent, task_queue="nobody").conversation(
            history=deep_history()
        )


# -- tool calls in flight ---------------------------------------------------------------------


def fan_out(count: int) -> Message:
    return ask(*(call(f"c{i}", "bump", i=i) for i in range(count)))


def counting_agent(count: int, bound: int) -> tuple[Agent[None, str], dict[str, int]]:
    """Asks for ``count`` calls of ``bump`` at once, at most ``bound`` in flight; tracks how
    many run at the same time. The first calls hold until ``bound`` of them are in flight,
    so a batch that let one more start would show it."""
    agent, _ = scripted([fan_out(count), Message.assistant("done")], max_concurrent_tools=bound)
    seen = {"now": 0, "most": 0, "ran": 0}
    full = asyncio.Event()

    @agent.tool
    async def bump(i: int) -> str:
        """Count."""
        seen["now"] += 1
        seen["most"] = max(seen["most"], seen["now"])
        if seen["now"] >= min(bound, count):
            full.set()
        await full.wait()
        seen["now"] -= 1
        seen["ran"] += 1
        return str(i)

    return agent, seen


async def test_a_batch_never_has_more_than_max_concurrent_tools_calls_in_flight(
    runner: Runner,
) -> None:
    agent, seen = counting_agent(30, 4)
    result = await asyncio.wait_for(runner(agent, "go"), 60)
    assert result.output == "done" and result.tool_calls == 30 and seen["ran"] == 30
    assert seen["most"] == 4
    results = [m for m in result.messages if m.role == "tool"]
    assert [m.tool_call_id for m in results] == [f"c{i}" for i in range(30)]  # call order
    assert [m.content for m in results] == [str(i) for i in range(30)]


async def test_calls_beyond_the_bound_start_in_call_order(local_runner: Runner) -> None:
    agent, _ = scripted([fan_out(12), Message.assistant("done")], max_concurrent_tools=3)
    started: list[int] = []

    @agent.tool
    async def bump(i: int) -> str:
        """Count."""
        started.append(i)
        await asyncio.sleep(0.001 * (12 - i))  # later calls finish first
        return str(i)

    await local_runner(agent, "go")
    assert started == list(range(12))


def test_max_concurrent_tools_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_concurrent_tools must be at least 1, got 0"):
        Agent(ScriptedModel([]), max_concurrent_tools=0)


async def test_a_durable_batch_wider_than_temporals_pending_activity_limit_completes() -> None:
    """Temporal refuses a workflow task that leaves more activities pending than its
    per-workflow limit (PendingActivitiesLimitExceeded; 2,000 by default) and retries it
    forever. The limit is lowered to 20 on a server of this test's own, so a batch of 30
    shows the same refusal in seconds (2,100 calls against the default limit take 40 s to
    minutes here); the bound keeps the batch under it, and ``tool_calls`` counts them all."""
    limit = ("--dynamic-config-value", "limit.numPendingActivities.error=20")
    agent, _ = scripted([fan_out(30), Message.assistant("done")], max_concurrent_tools=10)
    ran: list[int] = []

    @agent.tool
    async def bump(i: int) -> str:
        """Count."""
        ran.append(i)
        return str(i)

    task_queue = f"wide-{uuid.uuid4().hex[:8]}"
    plugin = GolemPlugin(agent)
    async with (
        dev_server(extra_args=limit) as env,
        Worker(env.client, task_queue=task_queue, plugins=[plugin]),
    ):
        result = await asyncio.wait_for(
            DurableAgent(env.client, agent, task_queue=task_queue).run("go"), 60
        )
    assert result.output == "done" and result.tool_calls == 30
    assert sorted(ran) == list(range(30))
