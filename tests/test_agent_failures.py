"""Failures: stages, partial evidence, resuming, model retries, limits and cancellation."""

from __future__ import annotations

import asyncio

import pytest
from agents import FAST_RETRY, answered, ask, call, reply, scripted
from runners import Runner

from golem.history.repair import (
    INTERRUPTED_RESULT,
    OUTCOME_UNKNOWN_RESULT,
    HistoryRepair,
    normalize_history,
)
from golem.messages import Message, Usage
from golem.models.base import ModelConnectionError, ModelHTTPError, ModelResponse
from golem.results import RunError
from golem.retry import Retry
from golem.tools import Canceled
from golem.usage import UsageLimits

HANDSHAKE_TIMEOUT = 5.0  # a guard against a deadlock, never a wait for the outcome


def tool_turn(*calls: tuple[str, str], input_tokens: int = 10) -> ModelResponse:
    return ModelResponse(
        message=ask(*(call(call_id, name) for call_id, name in calls)),
        usage=Usage(input_tokens=input_tokens, output_tokens=2),
        finish_reason="tool_calls",
    )


# -- model failures ------------------------------------------------------------------------


async def test_a_first_call_failure_has_no_partial(runner: Runner) -> None:
    agent, model = scripted([ModelHTTPError(400, "bad request: unknown field")])

    with pytest.raises(RunError) as caught:
        await runner(agent, "go")

    assert caught.value.stage == "model"
    assert caught.value.partial is None
    assert "HTTP 400: bad request: unknown field" in str(caught.value)
    assert len(model.requests) == 1


async def test_a_model_error_after_a_completed_turn_carries_the_evidence(runner: Runner) -> None:
    agent, _ = scripted(
        [tool_turn(("c1", "ping"), input_tokens=7), ModelHTTPError(400, "context too long")]
    )
    agent.tool(name="ping")(lambda: "pong")

    with pytest.raises(RunError) as caught:
        await runner(agent, "go")

    error = caught.value
    assert error.stage == "model"
    assert "context too long" in str(error)
    partial = error.partial
    assert partial is not None
    ids = (partial.run_id, partial.conversation_id)
    assert partial.messages == [
        Message.user("go").stamped(*ids),
        answered(ask(call("c1", "ping"))).stamped(*ids),
        Message.tool("c1", "ping", "pong").stamped(*ids),
    ]
    assert partial.usage == Usage(input_tokens=7, output_tokens=2)
    assert (partial.requests, partial.tool_calls) == (2, 1)  # the failed attempt counts


async def test_a_retryable_rate_limit_is_retried_and_the_run_completes(runner: Runner) -> None:
    agent, model = scripted(
        [ModelHTTPError(429, "slow down", retry_after=0.01), Message.assistant("hi")],
        model_retry=Retry(max_attempts=3, initial_interval=0.001),
    )

    result = await runner(agent, "go")

    assert result.output == "hi"
    assert len(model.requests) == 2
    assert model.requests[0] == model.requests[1]


async def test_a_connection_error_is_retried(runner: Runner) -> None:
    agent, model = scripted([ModelConnectionError("reset by peer"), Message.assistant("hi")])

    result = await runner(agent, "go")

    assert result.output == "hi"
    assert len(model.requests) == 2


async def test_a_non_retryable_model_error_is_not_retried(runner: Runner) -> None:
    agent, model = scripted([ModelHTTPError(401, "invalid api key"), Message.assistant("never")])

    with pytest.raises(RunError) as caught:
        await runner(agent, "go")

    assert caught.value.stage == "model"
    assert len(model.requests) == 1


async def test_exhausted_model_retries_end_the_run_at_stage_model(runner: Runner) -> None:
    agent, model = scripted(
        [ModelHTTPError(503, "overloaded")] * 3 + [Message.assistant("too late")],
        model_retry=Retry(max_attempts=3, initial_interval=0.001),
    )

    with pytest.raises(RunError) as caught:
        await runner(agent, "go")

    assert caught.value.stage == "model"
    assert "HTTP 503: overloaded" in str(caught.value)
    assert len(model.requests) == 3


async def test_a_retry_after_longer_than_the_max_interval_is_not_waited_for(
    runner: Runner, request: pytest.FixtureRequest
) -> None:
    agent, model = scripted(
        [ModelHTTPError(429, "quota", retry_after=3600.0), Message.assistant("never")],
        model_retry=Retry(max_attempts=3, initial_interval=0.001, max_interval=1.0),
    )

    with pytest.raises(RunError) as caught:
        await runner(agent, "go")

    # Not waited for: the run ends with the provider's own error after one request.
    assert caught.value.stage == "model"
    assert "HTTP 429: quota" in caught.value.detail
    assert caught.value.partial is None
    assert len(model.requests) == 1


def test_model_retry_backs_off_exponentially_capped_and_honours_retry_after() -> None:
    policy = Retry(max_attempts=5, initial_interval=1.0, backoff=2.0, max_interval=5.0)

    assert [policy.delay(n, None) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 5.0]
    assert policy.delay(1, 0.25) == 0.25


# -- tool failures and resuming ---------------------------------------------------------------


async def test_an_unexpected_tool_exception_keeps_finished_results_and_names_the_error(
    runner: Runner,
) -> None:
    agent, model = scripted([tool_turn(("c1", "ok"), ("c2", "boom")), Message.assistant("never")])
    agent.tool(name="ok")(lambda: "fine")

    @agent.tool(retry=FAST_RETRY)  # retried in both executors: quickly
    def boom() -> str:
        """Explodes."""
        raise RuntimeError("disk on fire")

    with pytest.raises(RunError) as caught:
        await runner(agent, "go")

    error = caught.value
    assert error.stage == "tool"
    assert "disk on fire" in str(error)
    assert "'boom'" in str(error)
    partial = error.partial
    assert partial is not None
    ids = (partial.run_id, partial.conversation_id)
    assert partial.messages[:3] == [
        Message.user("go").stamped(*ids),
        answered(ask(call("c1", "ok"), call("c2", "boom"))).stamped(*ids),
        Message.tool("c1", "ok", "fine").stamped(*ids),
    ]
    failure = partial.messages[3]
    assert (failure.tool_call_id, failure.failed) == ("c2", True)
    assert failure.content.startswith("the tool failed: ")
    assert "disk on fire" in failure.content
    assert len(partial.messages) == 4
    assert (partial.requests, partial.tool_calls) == (1, 1)
    assert len(model.requests) == 1


async def test_resuming_a_failed_batch_needs_no_repair_and_completes_in_the_same_conversation(
    runner: Runner,
) -> None:
    agent, model = scripted(
        [tool_turn(("c1", "ok"), ("c2", "boom")), Message.assistant("recovered")]
    )
    agent.tool(name="ok")(lambda: "fine")

    @agent.tool(retry=FAST_RETRY)  # retried in both executors: quickly
    def boom() -> str:
        """Explodes."""
        raise RuntimeError("disk on fire")

    with pytest.raises(RunError) as caught:
        await runner(agent, "go")
    partial = caught.value.partial
    assert partial is not None
    assert normalize_history(partial.messages)[1] == HistoryRepair()

    resumed = await runner(agent, "continue", history=partial.messages)

    assert resumed.output == "recovered"
    assert resumed.conversation_id == partial.conversation_id
    assert resumed.run_id != partial.run_id
    assert model.requests[1].messages == [
        *partial.messages,
        Message.user("continue").stamped(resumed.run_id, resumed.conversation_id),
    ]


async def test_a_deliberate_cancel_keeps_earlier_results_and_closes_every_unanswered_call(
    runner: Runner,
) -> None:
    agent, model = scripted(
        [tool_turn(("c1", "ok"), ("c2", "stop"), ("c3", "ok")), Message.assistant("never")]
    )
    agent.tool(name="ok")(lambda: "fine")

    @agent.tool(sequential=True)
    def stop() -> str:
        """Stops the run."""
        raise Canceled("the user hung up")

    with pytest.raises(RunError) as caught:
        await runner(agent, "go")

    error = caught.value
    assert error.stage == "canceled"
    assert "the user hung up" in str(error)
    partial = error.partial
    assert partial is not None
    ids = (partial.run_id, partial.conversation_id)
    assert partial.messages == [
        Message.user("go").stamped(*ids),
        answered(ask(call("c1", "ok"), call("c2", "stop"), call("c3", "ok"))).stamped(*ids),
        Message.tool("c1", "ok", "fine").stamped(*ids),
        Message.tool("c2", "stop", INTERRUPTED_RESULT).stamped(*ids),
        Message.tool("c3", "ok", INTERRUPTED_RESULT).stamped(*ids),
    ]
    assert len(model.requests) == 1


async def test_a_cancel_closes_its_concurrent_siblings_at_once(runner: Runner) -> None:
    sibling_started = asyncio.Event()
    never = asyncio.Event()
    agent, _ = scripted([tool_turn(("c1", "wait"), ("c2", "stop")), Message.assistant("never")])

    @agent.tool
    async def wait() -> str:
        """Waits forever."""
        sibling_started.set()
        await never.wait()
        return "unreachable"

    @agent.tool
    async def stop() -> str:
        """Stops the run once its sibling runs."""
        await asyncio.wait_for(sibling_started.wait(), HANDSHAKE_TIMEOUT)
        raise Canceled("enough")

    with pytest.raises(RunError) as caught:
        await runner(agent, "go")

    partial = caught.value.partial
    assert caught.value.stage == "canceled"
    assert partial is not None
    assert [(m.tool_call_id, m.content) for m in partial.messages[2:]] == [
        ("c1", INTERRUPTED_RESULT),
        ("c2", INTERRUPTED_RESULT),
    ]


async def test_a_canceled_run_resumes_with_zero_repair(runner: Runner) -> None:
    agent, model = scripted(
        [tool_turn(("c1", "ok"), ("c2", "stop")), Message.assistant("picked up again")]
    )
    agent.tool(name="ok")(lambda: "fine")

    @agent.tool(sequential=True)
    def stop() -> str:
        """Stops the run."""
        raise Canceled("pause here")

    with pytest.raises(RunError) as caught:
        await runner(agent, "go")
    partial = caught.value.partial
    assert partial is not None

    assert normalize_history(partial.messages)[1] == HistoryRepair()
    resumed = await runner(agent, "continue", history=partial.messages)

    assert resumed.output == "picked up again"
    assert resumed.conversation_id == partial.conversation_id
    assert model.requests[1].messages == [
        *partial.messages,
        Message.user("continue").stamped(resumed.run_id, resumed.conversation_id),
    ]


# -- limits ------------------------------------------------------------------------------------


async def test_the_request_limit_ends_the_run_at_stage_usage(runner: Runner) -> None:
    agent, model = scripted(
        [tool_turn(("c1", "ping")), Message.assistant("never")],
        usage_limits=UsageLimits(request_limit=1),
    )
    agent.tool(name="ping")(lambda: "pong")

    with pytest.raises(RunError) as caught:
        await runner(agent, "go")

    error = caught.value
    assert error.stage == "usage"
    assert "request_limit=1" in str(error)
    assert len(model.requests) == 1
    assert error.partial is not None
    assert [m.role for m in error.partial.messages] == ["user", "assistant", "tool"]
    assert (error.partial.requests, error.partial.tool_calls) == (1, 1)


@pytest.mark.parametrize(
    ("limits", "named"),
    [
        (UsageLimits(input_tokens_limit=50), "input_tokens_limit=50"),
        (UsageLimits(output_tokens_limit=10), "output_tokens_limit=10"),
        (UsageLimits(total_tokens_limit=100), "total_tokens_limit=100"),
    ],
)
async def test_token_limits_end_the_run_at_stage_usage(
    runner: Runner, limits: UsageLimits, named: str
) -> None:
    heavy = ModelResponse(
        message=ask(call("c1", "ping")),
        usage=Usage(input_tokens=80, output_tokens=40),
        finish_reason="tool_calls",
    )
    agent, model = scripted([heavy, Message.assistant("never")], usage_limits=limits)
    agent.tool(name="ping")(lambda: "pong")

    with pytest.raises(RunError) as caught:
        await runner(agent, "go")

    assert caught.value.stage == "usage"
    assert named in str(caught.value)
    assert len(model.requests) == 1
    assert caught.value.partial is not None
    assert caught.value.partial.usage == Usage(input_tokens=80, output_tokens=40)


async def test_the_tool_calls_limit_stops_a_batch_before_it_runs(runner: Runner) -> None:
    ran: list[str] = []
    agent, _ = scripted(
        [tool_turn(("c1", "ping")), tool_turn(("c2", "ping"), ("c3", "ping")), reply("never")],
        usage_limits=UsageLimits(tool_calls_limit=2),
    )

    @agent.tool
    def ping() -> str:
        """Ping."""
        ran.append("ping")
        return "pong"

    with pytest.raises(RunError) as caught:
        await runner(agent, "go")

    assert caught.value.stage == "usage"
    assert "tool_calls_limit=2" in str(caught.value)
    assert ran == ["ping"]
    assert caught.value.partial is not None
    assert caught.value.partial.tool_calls == 1


async def test_the_per_request_input_limit_counts_the_request_with_the_token_counter(
    runner: Runner,
) -> None:
    counted: list[list[str]] = []

    def count(messages: object) -> int:
        contents = [m.content for m in messages]  # type: ignore[attr-defined]
        counted.append(contents)
        return 100 * len(contents)

    agent, model = scripted(
        [Message.assistant("never")],
        instructions="rules",
        usage_limits=UsageLimits(request_input_tokens_limit=150, token_counter=count),
    )

    with pytest.raises(RunError) as caught:
        await runner(agent, "go")

    assert caught.value.stage == "usage"
    assert "about 200 input tokens, over request_input_tokens_limit=150" in str(caught.value)
    assert caught.value.partial is None
    assert counted == [["rules", "go"]]
    assert model.requests == []


async def test_max_iterations_ends_a_run_that_never_answers_at_stage_loop(
    runner: Runner,
) -> None:
    agent, model = scripted([tool_turn((f"c{n}", "ping")) for n in range(5)], max_iterations=3)
    agent.tool(name="ping")(lambda: "pong")

    with pytest.raises(RunError) as caught:
        await runner(agent, "go")

    assert caught.value.stage == "loop"
    assert "max_iterations=3" in str(caught.value)
    assert len(model.requests) == 3
    assert caught.value.partial is not None
    assert (caught.value.partial.requests, caught.value.partial.tool_calls) == (3, 3)


# -- the caller's task (in process only) --------------------------------------------------------


async def test_cancelling_the_callers_task_ends_in_a_run_error_with_the_evidence() -> None:
    started, never, ok_done = asyncio.Event(), asyncio.Event(), asyncio.Event()
    agent, _ = scripted([tool_turn(("c1", "ok"), ("c2", "hang")), Message.assistant("never")])

    @agent.tool
    async def ok() -> str:
        """Finishes at once."""
        ok_done.set()
        return "fine"

    @agent.tool
    async def hang() -> str:
        """Never finishes (and starts only once its sibling has finished)."""
        await asyncio.wait_for(ok_done.wait(), HANDSHAKE_TIMEOUT)
        started.set()
        await never.wait()
        return "unreachable"

    task = asyncio.ensure_future(agent.run("go"))
    await asyncio.wait_for(started.wait(), HANDSHAKE_TIMEOUT)
    task.cancel()

    with pytest.raises(RunError) as caught:
        await task

    error = caught.value
    assert (error.stage, error.detail) == ("canceled", "the run was cancelled by its caller")
    assert isinstance(error.__cause__, asyncio.CancelledError)
    partial = error.partial
    assert partial is not None
    ids = (partial.run_id, partial.conversation_id)
    # The finished call keeps its result; the running one may have taken effect.
    assert partial.messages == [
        Message.user("go").stamped(*ids),
        answered(ask(call("c1", "ok"), call("c2", "hang"))).stamped(*ids),
        Message.tool("c1", "ok", "fine").stamped(*ids),
        Message.tool("c2", "hang", OUTCOME_UNKNOWN_RESULT).stamped(*ids),
    ]
    assert (partial.requests, partial.tool_calls) == (1, 1)


async def test_a_run_cancelled_by_its_caller_resumes_with_zero_repair() -> None:
    started, never = asyncio.Event(), asyncio.Event()
    agent, model = scripted([tool_turn(("c1", "hang")), Message.assistant("back")])

    @agent.tool
    async def hang() -> str:
        """Never finishes."""
        started.set()
        await never.wait()
        return "unreachable"

    task = asyncio.ensure_future(agent.run("go"))
    await asyncio.wait_for(started.wait(), HANDSHAKE_TIMEOUT)
    task.cancel()
    with pytest.raises(RunError) as caught:
        await task
    partial = caught.value.partial
    assert partial is not None

    resumed = await agent.run("continue", history=partial.messages)

    assert resumed.output == "back"
    assert resumed.conversation_id == partial.conversation_id
    assert normalize_history(partial.messages)[1] == HistoryRepair()
    assert model.requests[1].messages[2] == Message.tool(
        "c1", "hang", OUTCOME_UNKNOWN_RESULT
    ).stamped(partial.run_id, partial.conversation_id)
