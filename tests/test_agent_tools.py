"""Tools: the schema the model sees, argument validation, retries, batches and failures."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Literal

import pytest
from agents import FAST_RETRY, NO_SUCH_TOOL, Deps, answered, ask, call, scripted
from runners import Runner

from golem.history.repair import OUTCOME_UNKNOWN_RESULT
from golem.messages import Message, ToolCall
from golem.models.base import ToolDefinition
from golem.results import RunError
from golem.tools import ModelRetry, RunContext, ToolFailed

HANDSHAKE_TIMEOUT = 5.0  # a guard against a deadlock, never a wait for the outcome


async def test_the_model_receives_a_schema_built_from_signature_and_docstring(
    runner: Runner,
) -> None:
    agent, model = scripted([Message.assistant("ok")], deps_type=Deps)

    @agent.tool
    def forecast(
        ctx: RunContext[Deps], city: str, days: int = 3, units: Literal["c", "f"] = "c"
    ) -> str:
        """Weather forecast for a city.

        Args:
            city: The city name, e.g. "Paris".
            days: How many days ahead.
        """
        return ""

    await runner(agent, "go", deps=Deps())

    assert model.requests[0].tools == [
        ToolDefinition(
            name="forecast",
            description="Weather forecast for a city.",
            parameters={
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "city": {"type": "string", "description": 'The city name, e.g. "Paris".'},
                    "days": {
                        "type": "integer",
                        "default": 3,
                        "description": "How many days ahead.",
                    },
                    "units": {"type": "string", "enum": ["c", "f"], "default": "c"},
                },
                "required": ["city"],
            },
        )
    ]


async def test_a_tool_without_parameters_has_an_empty_object_schema(runner: Runner) -> None:
    agent, model = scripted([Message.assistant("ok")])

    @agent.tool(name="now")
    def current_time() -> str:
        """The current time."""
        return "noon"

    await runner(agent, "go")

    assert model.requests[0].tools == [
        ToolDefinition(
            name="now",
            description="The current time.",
            parameters={"type": "object", "additionalProperties": False, "properties": {}},
        )
    ]


def test_registering_two_tools_with_one_name_is_refused() -> None:
    agent, _ = scripted([])
    agent.tool(name="now")(lambda: "")

    with pytest.raises(ValueError, match="already has a tool named 'now'"):
        agent.tool(name="now")(lambda: "")


async def test_tool_results_are_sent_back_as_tool_messages(runner: Runner) -> None:
    agent, model = scripted(
        [ask(call("c1", "add", a=2, b=3)), Message.assistant("5")], instructions="Add."
    )

    @agent.tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    result = await runner(agent, "2+3?")

    assert result.output == "5"
    assert (result.requests, result.tool_calls) == (2, 1)
    ids = (result.run_id, result.conversation_id)
    assert model.requests[1].messages == [
        Message.system("Add."),
        Message.user("2+3?").stamped(*ids),
        answered(ask(call("c1", "add", a=2, b=3))).stamped(*ids),
        Message.tool("c1", "add", "5").stamped(*ids),
    ]


async def test_structured_tool_returns_are_sent_as_json_and_none_as_empty_text(
    runner: Runner,
) -> None:
    agent, _ = scripted([ask(call("c1", "info"), call("c2", "nothing")), Message.assistant("ok")])
    agent.tool(name="info")(lambda: {"city": "Paris", "temps": [1, 2]})
    agent.tool(name="nothing")(lambda: None)

    result = await runner(agent, "go")

    assert [(m.content, m.failed) for m in result.messages[2:4]] == [
        ('{"city":"Paris","temps":[1,2]}', False),
        ("", False),
    ]


async def test_invalid_arguments_never_reach_the_function_and_the_model_is_told_why(
    runner: Runner,
) -> None:
    received: list[tuple[int, int]] = []
    agent, model = scripted(
        [
            ask(ToolCall(id="c1", name="add", args='{"a": 2, "b": "three"}')),
            ask(ToolCall(id="c2", name="add", args='{"a": 2}')),
            ask(call("c3", "add", a=2, b=3)),
            Message.assistant("5"),
        ]
    )

    @agent.tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        received.append((a, b))
        return a + b

    result = await runner(agent, "2+3?")

    assert received == [(2, 3)]
    results = [m for m in result.messages if m.role == "tool"]
    assert [(m.tool_call_id, m.failed, m.content) for m in results] == [
        (
            "c1",
            True,
            "tool 'add': invalid arguments: b: Input should be a valid integer, "
            "unable to parse string as an integer",
        ),
        ("c2", True, "tool 'add': invalid arguments: b: Field required"),
        ("c3", False, "5"),
    ]
    assert model.requests[1].messages[-1] == results[0]


async def test_truncated_arguments_never_reach_the_function(runner: Runner) -> None:
    received: list[str] = []
    agent, _ = scripted(
        [ask(ToolCall(id="c1", name="echo", args='{"text": "hel')), Message.assistant("ok")]
    )

    @agent.tool
    def echo(text: str) -> str:
        """Echo."""
        received.append(text)
        return text

    result = await runner(agent, "go")

    assert received == []
    failed = result.messages[2]
    assert (failed.tool_call_id, failed.failed) == ("c1", True)
    assert failed.content == (
        "tool 'echo': arguments are not valid JSON (Unterminated string starting at at "
        "position 9); they may have been cut off. Send the complete arguments as a JSON object."
    )
    assert result.messages[1].tool_calls[0].args == '{"text": "hel'  # evidence kept verbatim


async def test_a_call_to_an_unknown_tool_gets_a_failed_result_listing_the_tools(
    runner: Runner,
) -> None:
    agent, model = scripted([ask(call("c1", "multiply", a=2, b=3)), Message.assistant("sorry")])
    agent.tool(name="add")(lambda a, b: a + b)
    agent.tool(name="echo")(lambda text: text)

    result = await runner(agent, "2*3?")

    assert model.requests[1].messages[-1] == Message.tool(
        "c1",
        "multiply",
        NO_SUCH_TOOL.format(name="multiply", tools="add, echo"),
        failed=True,
    ).stamped(result.run_id, result.conversation_id)
    assert result.output == "sorry"


async def test_bad_calls_past_the_retry_limit_end_the_run_at_stage_tool(runner: Runner) -> None:
    received: list[int] = []
    bad = [ask(ToolCall(id=f"c{n}", name="square", args="{}")) for n in range(3)]
    agent, model = scripted([*bad, Message.assistant("never")])

    @agent.tool(max_retries=1)
    def square(x: int) -> int:
        """Square a number."""
        received.append(x)
        return x * x

    with pytest.raises(RunError) as caught:
        await runner(agent, "go")

    error = caught.value
    assert error.stage == "tool"
    assert "x: Field required" in str(error)
    assert "over the limit of 1" in str(error)
    assert received == []
    assert len(model.requests) == 2
    partial = error.partial
    assert partial is not None
    # The call that went over the limit is answered with its problem: nothing to repair.
    assert [(m.role, m.tool_call_id, m.failed) for m in partial.messages] == [
        ("user", "", False),
        ("assistant", "", False),
        ("tool", "c0", True),
        ("assistant", "", False),
        ("tool", "c1", True),
    ]
    assert "x: Field required" in partial.messages[-1].content
    assert (partial.requests, partial.tool_calls) == (2, 0)


async def test_unknown_tool_calls_past_the_agent_retry_limit_end_the_run(runner: Runner) -> None:
    agent, model = scripted(
        [ask(call("c1", "nope")), ask(call("c2", "nope")), Message.assistant("never")], retries=1
    )
    agent.tool(name="yes")(lambda: "")

    with pytest.raises(RunError) as caught:
        await runner(agent, "go")

    assert caught.value.stage == "tool"
    assert "unknown tool 'nope'" in str(caught.value)
    assert len(model.requests) == 2


async def test_a_batch_runs_concurrently(runner: Runner) -> None:
    a_started, b_started = asyncio.Event(), asyncio.Event()
    agent, _ = scripted([ask(call("c1", "a"), call("c2", "b")), Message.assistant("ok")])

    @agent.tool
    async def a() -> str:
        """Waits for b."""
        a_started.set()
        await asyncio.wait_for(b_started.wait(), HANDSHAKE_TIMEOUT)
        return "a saw b"

    @agent.tool
    async def b() -> str:
        """Waits for a."""
        b_started.set()
        await asyncio.wait_for(a_started.wait(), HANDSHAKE_TIMEOUT)
        return "b saw a"

    result = await runner(agent, "go")

    assert [m.content for m in result.messages[2:4]] == ["a saw b", "b saw a"]


async def test_results_are_recorded_in_call_order_not_completion_order(runner: Runner) -> None:
    second_done = asyncio.Event()
    agent, _ = scripted([ask(call("c1", "slow"), call("c2", "fast")), Message.assistant("ok")])

    @agent.tool
    async def slow() -> str:
        """Finishes after fast."""
        await asyncio.wait_for(second_done.wait(), HANDSHAKE_TIMEOUT)
        return "slow"

    @agent.tool
    def fast() -> str:
        """Finishes first."""
        second_done.set()
        return "fast"

    result = await runner(agent, "go")

    assert [(m.tool_call_id, m.content) for m in result.messages[2:4]] == [
        ("c1", "slow"),
        ("c2", "fast"),
    ]


async def test_a_sequential_tool_makes_its_batch_run_one_call_at_a_time(runner: Runner) -> None:
    log: list[str] = []
    agent, _ = scripted(
        [
            ask(call("c1", "step", n=1), call("c2", "step", n=2), call("c3", "other")),
            Message.assistant("ok"),
        ]
    )

    @agent.tool(sequential=True)
    async def step(n: int) -> str:
        """One step."""
        log.append(f"start {n}")
        for _ in range(5):
            await asyncio.sleep(0)  # yield: a concurrent sibling would start here
        log.append(f"end {n}")
        return str(n)

    @agent.tool
    async def other() -> str:
        """Another tool in the same batch."""
        log.append("other")
        return "other"

    result = await runner(agent, "go")

    assert log == ["start 1", "end 1", "start 2", "end 2", "other"]
    assert [m.content for m in result.messages[2:5]] == ["1", "2", "other"]


async def test_tool_failed_records_a_failed_result_and_the_run_goes_on(runner: Runner) -> None:
    agent, model = scripted(
        [ask(call("c1", "lookup", key="k")), Message.assistant("not found, sorry")]
    )

    @agent.tool
    def lookup(key: str) -> str:
        """Look a key up."""
        raise ToolFailed(f"no entry for {key!r}")

    result = await runner(agent, "go")

    assert result.output == "not found, sorry"
    assert model.requests[1].messages[-1] == Message.tool(
        "c1", "lookup", "no entry for 'k'", failed=True
    ).stamped(result.run_id, result.conversation_id)
    assert result.tool_calls == 1


async def test_tool_failed_does_not_count_against_the_retry_limit(runner: Runner) -> None:
    answers = [ask(call(f"c{n}", "flaky")) for n in range(4)]
    agent, _ = scripted([*answers, Message.assistant("gave up")])

    @agent.tool(max_retries=1)
    def flaky() -> str:
        """Always fails definitively."""
        raise ToolFailed("down")

    result = await runner(agent, "go")

    assert result.output == "gave up"
    assert [m.failed for m in result.messages if m.role == "tool"] == [True] * 4


# -- ModelRetry, NaN, timeouts -------------------------------------------------------------------


async def test_model_retry_sends_its_message_back_as_the_calls_failed_result(
    runner: Runner,
) -> None:
    agent, model = scripted(
        [
            ask(call("c1", "search", query="")),
            ask(call("c2", "search", query="paris")),
            Message.assistant("done"),
        ]
    )
    seen_retries: list[dict[str, int]] = []

    @agent.tool
    def search(ctx: RunContext[None], query: str) -> str:
        """Search."""
        seen_retries.append(dict(ctx.retries))
        if not query:
            raise ModelRetry("use a better query")
        return f"results for {query}"

    result = await runner(agent, "go")

    assert result.output == "done"
    first = model.requests[1].messages[-1]
    assert (first.tool_call_id, first.content, first.failed) == ("c1", "use a better query", True)
    assert result.messages[-2].content == "results for paris"
    assert seen_retries == [{}, {"search": 1}]
    assert result.tool_calls == 2


async def test_model_retry_past_the_tools_limit_ends_the_run_at_stage_tool(
    runner: Runner,
) -> None:
    agent, _ = scripted([ask(call(f"c{n}", "search")) for n in range(3)])

    @agent.tool(max_retries=1)
    def search() -> str:
        """Search."""
        raise ModelRetry("still wrong")

    with pytest.raises(RunError) as caught:
        await runner(agent, "go")

    assert caught.value.stage == "tool"
    assert "over the limit of 1: still wrong" in caught.value.detail
    partial = caught.value.partial
    assert partial is not None
    assert partial.messages[-1].content == "still wrong"


def test_golem_model_retry_is_an_exception_and_retry_the_policy() -> None:
    import golem

    assert issubclass(golem.ModelRetry, Exception)
    assert golem.Retry(initial_interval=timedelta(milliseconds=250)).initial_interval == 0.25
    assert golem.Retry(max_interval=timedelta(minutes=2)).max_interval == 120.0
    with pytest.raises(ValueError, match="max_attempts"):
        golem.Retry(max_attempts=0)


async def test_nan_and_infinity_in_a_tool_result_are_kept_never_turned_into_null(
    runner: Runner,
) -> None:
    agent, _ = scripted([ask(call("c1", "measure")), Message.assistant("done")])

    @agent.tool
    def measure() -> dict[str, float]:
        """Measure."""
        return {"mean": float("nan"), "max": float("inf"), "min": float("-inf")}

    result = await runner(agent, "go")

    assert result.messages[-2].content == '{"mean":NaN,"max":Infinity,"min":-Infinity}'


async def test_nan_arguments_are_not_valid_json_and_say_so(runner: Runner) -> None:
    agent, model = scripted(
        [ask(ToolCall(id="c1", name="square", args='{"x": NaN}')), Message.assistant("done")]
    )
    ran: list[float] = []

    @agent.tool
    def square(x: float) -> float:
        """Square."""
        ran.append(x)
        return x * x

    await runner(agent, "go")

    answer = model.requests[1].messages[-1]
    assert answer.failed
    assert "not valid JSON (NaN is not JSON)" in answer.content
    assert ran == []


async def test_a_tool_past_its_timeout_ends_the_run_with_its_outcome_unknown(
    local_runner: Runner,
) -> None:
    # In process only: under Temporal the timeout is the activity's (retried by the same policy).
    never = asyncio.Event()
    agent, _ = scripted([ask(call("c1", "slow"), call("c2", "quick")), Message.assistant("never")])
    agent.tool(name="quick")(lambda: "quick done")

    @agent.tool(timeout=timedelta(milliseconds=20), retry=FAST_RETRY)
    async def slow() -> str:
        """Slow."""
        await never.wait()
        return "unreachable"

    with pytest.raises(RunError) as caught:
        await local_runner(agent, "go")

    assert caught.value.stage == "tool"
    assert "timed out after 0.02 s" in caught.value.detail
    partial = caught.value.partial
    assert partial is not None
    assert [(m.tool_call_id, m.content) for m in partial.messages[2:]] == [
        ("c1", OUTCOME_UNKNOWN_RESULT),
        ("c2", "quick done"),
    ]
