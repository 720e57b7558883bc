"""The run loop with a fake executor, for what only a durable run does in practice: an
executor that waits inside the run for approval decisions (``await_approvals`` answers
instead of pausing), so the loop's handling of those decisions is pinned in process."""

from __future__ import annotations

from typing import Any

import pytest
from agents import ask, call, reply
from test_agent_phases import FakeExecutor, agent_with, ok

from golem.events import RunEvent
from golem.loop import RunLoop
from golem.messages import Message, Part, ToolCall, Usage
from golem.models.base import ModelResponse, ModelSettings, StreamDelta
from golem.phases.batch import DENIED_RESULT
from golem.results import RunError
from golem.run_state import RunInput
from golem.tools import RunContext, ToolOutcome


def risky_agent() -> Any:
    agent = agent_with("free")
    agent.tool(name="risky", requires_approval=True)(lambda: "")
    return agent


def results(messages: list[Message]) -> list[tuple[str, str, bool]]:
    return [(m.tool_call_id, m.content, m.failed) for m in messages if m.role == "tool"]


async def test_decisions_given_while_the_run_waits_run_the_approved_and_deny_the_rest() -> None:
    executor = FakeExecutor(risky=ok("moved"), free=ok("free"))
    executor.decisions = {"c1": True, "c2": False}
    turn = ask(call("c1", "risky"), call("c2", "risky"), call("c3", "free"))
    executor.responses = [ModelResponse(message=turn), reply("done")]

    loop = RunLoop(risky_agent(), executor, RunInput(prompt="go"))
    result = await loop.run()

    assert executor.asked == [["c1", "c2"]]  # only the calls that need a decision wait
    assert loop.state.checkpoint.results == 3
    assert [ctx.turn for ctx in executor.approval_contexts] == [1]
    assert executor.dispatched == ["c1", "c3"]
    assert results(result.messages) == [
        ("c1", "moved", False),
        ("c2", DENIED_RESULT, True),
        ("c3", "free", False),
    ]
    assert (result.output, result.tool_calls, result.pending_approvals) == ("done", 2, [])


async def test_a_run_whose_executor_gives_no_decisions_pauses_with_the_waiting_calls() -> None:
    executor = FakeExecutor(risky=ok("moved"), free=ok("free"))
    turn = ask(call("c1", "risky"), call("c2", "free"))
    executor.responses = [ModelResponse(message=turn)]

    result = await RunLoop(risky_agent(), executor, RunInput(prompt="go")).run()

    assert executor.dispatched == []
    assert result.output is None
    assert [c.id for c in result.pending_approvals] == ["c1"]


async def test_a_resumed_run_waits_for_the_calls_its_approvals_left_undecided() -> None:
    executor = FakeExecutor(risky=ok("moved"), free=ok("free"))
    executor.decisions = {"c2": False}
    executor.responses = [reply("done")]
    history = [Message.user("go"), ask(call("c1", "risky"), call("c2", "risky"))]

    inputs = RunInput(history=history, approvals={"c1": True}, run_id="r1")
    result = await RunLoop(risky_agent(), executor, inputs).run()

    assert executor.asked == [["c2"]]
    assert [ctx.run_id for ctx in executor.approval_contexts] == ["r1"]
    assert executor.dispatched == ["c1"]
    assert results(result.messages) == [("c1", "moved", False), ("c2", DENIED_RESULT, True)]
    assert (result.output, result.tool_calls) == ("done", 1)


async def test_the_state_names_the_tools_in_flight_while_they_run_and_none_after() -> None:
    seen: list[list[str]] = []
    loop: RunLoop

    async def watch(call: ToolCall, ctx: RunContext[Any]) -> ToolOutcome:
        seen.append(list(loop.state.tools_in_flight))
        return ToolOutcome(content="ok")

    executor = FakeExecutor(a=watch, b=watch)
    executor.responses = [ModelResponse(message=ask(call("c1", "a"), call("c2", "b")))]
    executor.responses.append(reply("done"))
    loop = RunLoop(agent_with("a", "b"), executor, RunInput(prompt="go"))

    await loop.run()

    assert seen == [["a", "b"], ["a", "b"]]  # the batch runs both at once
    assert loop.state.tools_in_flight == []


async def test_a_model_end_event_carries_the_whole_response() -> None:
    events: list[RunEvent] = []
    executor = FakeExecutor()
    executor.responses = [reply("done", input_tokens=7, output_tokens=3)]

    await RunLoop(agent_with(), executor, RunInput(prompt="go"), events.append).run()

    ends = [e for e in events if e.kind == "model_end"]
    assert [(e.turn, e.response and e.response.usage) for e in ends] == [
        (1, Usage(input_tokens=7, output_tokens=3))
    ]


async def test_the_history_processor_is_asked_with_the_runs_context() -> None:
    contexts: list[RunContext[Any]] = []

    class Recording(FakeExecutor):
        async def process_history(
            self, ctx: RunContext[Any], history: list[Message]
        ) -> list[Message]:
            contexts.append(ctx)
            return history

    executor = Recording()
    executor.responses = [reply("done")]
    agent = agent_with(history_processor=lambda history: history)
    inputs = RunInput(prompt="go", deps={"user": 7}, run_id="r1", conversation_id="c1")

    await RunLoop(agent, executor, inputs).run()

    assert [(c.run_id, c.conversation_id, c.deps) for c in contexts] == [("r1", "c1", {"user": 7})]


async def test_a_prompt_of_parts_only_is_a_user_message_with_empty_text() -> None:
    picture = Part(kind="image", url="https://example.com/cat.png")
    executor = FakeExecutor()
    executor.responses = [reply("a cat")]

    result = await RunLoop(agent_with(), executor, RunInput(parts=[picture])).run()

    assert (result.messages[0].content, result.messages[0].parts) == ("", [picture])


async def test_a_request_gets_the_settings_its_turn_and_a_delta_sink_only_if_heard() -> None:
    settings = ModelSettings(temperature=0.5)
    executor = FakeExecutor(a=ok("A"))
    executor.responses = [ModelResponse(message=ask(call("c1", "a"))), reply("done")]
    agent = agent_with("a", model_settings=settings)

    await RunLoop(agent, executor, RunInput(prompt="go", run_id="r1")).run()

    assert [(r.settings, c.run_id, c.turn, s) for r, c, s in executor.requests] == [
        (settings, "r1", 1, None),
        (settings, "r1", 2, None),
    ]


async def test_a_failed_request_is_named_by_its_attempt_number() -> None:
    executor = FakeExecutor()
    executor.responses = [RuntimeError("boom")]

    with pytest.raises(RunError) as caught:
        await RunLoop(agent_with(), executor, RunInput(prompt="go")).run()

    assert caught.value.detail == "model request 1 failed: boom"


async def test_a_tool_sees_the_agent_the_usage_and_the_turn_of_its_run() -> None:
    executor = FakeExecutor(a=ok("A"))
    first = ask(call("c0", "a", n="bad"), call("c1", "a"))
    executor.responses = [ModelResponse(message=first, usage=Usage(input_tokens=4)), reply("done")]
    agent = agent_with("a", name="helper", max_retries=3)

    loop = RunLoop(agent, executor, RunInput(prompt="go"))
    await loop.run()

    (tool_ctx,) = executor.contexts
    assert (tool_ctx.agent_name, tool_ctx.usage, tool_ctx.turn) == (
        "helper",
        Usage(input_tokens=4),
        1,
    )
    assert tool_ctx.retries == {"a": 1}  # the bad call before it counted
    request_ctx = executor.requests[1][1]
    assert (request_ctx.agent_name, request_ctx.usage, request_ctx.retries) == (
        "helper",
        Usage(input_tokens=4),
        {"a": 1},
    )


async def test_streamed_text_and_thinking_become_their_own_event_kinds() -> None:
    events: list[RunEvent] = []
    executor = FakeExecutor()
    executor.deltas = [StreamDelta(kind="thinking", text="hm"), StreamDelta(kind="text", text="hi")]
    executor.responses = [reply("hi")]

    await RunLoop(agent_with(), executor, RunInput(prompt="go"), events.append).run()

    deltas = [(e.kind, e.turn) for e in events if e.kind.endswith("_delta")]
    assert deltas == [("thinking_delta", 1), ("text_delta", 1)]
