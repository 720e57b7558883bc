"""One ``golem.Retry`` means the same attempts, backoff and non-retryable errors in process
and durably, for tools and for models (docs/adr/0017-fallback-and-retry.md)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from agents import ask, call, scripted
from hypothesis import given
from hypothesis import strategies as st
from runners import Runner

from golem import Agent, Retry, RunError, Tool
from golem.messages import Message
from golem.models import ModelConnectionError, ModelHTTPError
from golem.retry import TOOL_RETRY
from golem.user_functions import UserCodeError

#: Milliseconds, so no test sleeps for real; the durable cases run them as Temporal's backoff.
QUICK = Retry(max_attempts=3, initial_interval=0.001, backoff=1.0)


def flaky_tool_agent(
    failures: int, retry: Retry, error: Exception | None = None
) -> tuple[list[int], Agent[Any, Any]]:
    """An agent whose one tool fails ``failures`` times (``error``, else ConnectionError)."""
    agent, _ = scripted([ask(call("c1", "flaky")), Message.assistant("done")])
    attempts: list[int] = []

    @agent.tool(retry=retry)
    def flaky() -> str:
        """Fails, then works."""
        attempts.append(len(attempts) + 1)
        if len(attempts) <= failures:
            raise error or ConnectionError(f"blip {len(attempts)}")
        return "worked"

    return attempts, agent


async def test_the_same_flaky_tool_gets_the_same_attempts_in_both_executors(
    runner: Runner,
) -> None:
    attempts, agent = flaky_tool_agent(failures=2, retry=QUICK)

    result = await runner(agent, "go")

    assert attempts == [1, 2, 3]
    assert result.output == "done"
    assert result.messages[2].content == "worked"
    assert result.tool_calls == 1  # one call, executed once it worked


async def test_a_tool_past_its_last_attempt_ends_the_run_at_stage_tool_in_both_executors(
    runner: Runner,
) -> None:
    attempts, agent = flaky_tool_agent(failures=10, retry=QUICK)

    with pytest.raises(RunError) as caught:
        await runner(agent, "go")

    assert attempts == [1, 2, 3]
    assert caught.value.stage == "tool"
    assert "blip 3" in caught.value.detail  # the last attempt's error


async def test_a_non_retryable_tool_error_is_tried_once_in_both_executors(
    runner: Runner,
) -> None:
    policy = dataclasses.replace(QUICK, non_retryable=(PermissionError,))
    attempts, agent = flaky_tool_agent(failures=10, retry=policy, error=PermissionError("no"))

    with pytest.raises(RunError) as caught:
        await runner(agent, "go")

    assert attempts == [1]
    assert caught.value.stage == "tool"


async def test_an_at_most_once_tool_is_tried_once_in_both_executors(runner: Runner) -> None:
    agent, _ = scripted([ask(call("c1", "charge")), Message.assistant("never")])
    attempts: list[int] = []

    @agent.tool(at_most_once=True, retry=QUICK)
    def charge() -> str:
        """Charges a card."""
        attempts.append(1)
        raise ConnectionError("gateway reset")

    with pytest.raises(RunError):
        await runner(agent, "go")

    assert attempts == [1]


async def test_the_same_flaky_model_gets_the_same_attempts_in_both_executors(
    runner: Runner,
) -> None:
    agent, model = scripted(
        [ModelHTTPError(503, "overloaded"), ModelConnectionError("reset"), Message.assistant("hi")],
        model_retry=QUICK,
    )

    result = await runner(agent, "go")

    assert result.output == "hi"
    assert len(model.requests) == 3
    assert result.requests == 1  # one turn: its attempts are the policy's business


async def test_a_model_past_its_last_attempt_ends_the_run_at_stage_model_in_both_executors(
    runner: Runner,
) -> None:
    agent, model = scripted([ModelHTTPError(503, "overloaded")] * 4, model_retry=QUICK)

    with pytest.raises(RunError) as caught:
        await runner(agent, "go")

    assert len(model.requests) == 3
    assert caught.value.stage == "model"
    assert "HTTP 503: overloaded" in caught.value.detail


async def test_a_model_error_the_policy_names_non_retryable_is_tried_once_in_both_executors(
    runner: Runner,
) -> None:
    policy = dataclasses.replace(QUICK, non_retryable=(ModelConnectionError,))
    agent, model = scripted([ModelConnectionError("reset"), Message.assistant("never")])
    agent.model_retry = policy

    with pytest.raises(RunError) as caught:
        await runner(agent, "go")

    assert len(model.requests) == 1
    assert "reset" in caught.value.detail


# -- the policy itself -------------------------------------------------------------------------


def test_a_tools_policy_is_its_own_then_the_default_with_its_shorthands_applied() -> None:
    def plain() -> str:
        return ""

    assert Tool.from_function(plain).retry_policy == TOOL_RETRY
    assert Tool.from_function(plain, retry=QUICK).retry_policy == QUICK
    assert Tool.from_function(plain, retry_attempts=7).retry_policy.max_attempts == 7
    assert Tool.from_function(plain, retry=QUICK, at_most_once=True).retry_policy == (
        dataclasses.replace(QUICK, max_attempts=1)
    )


def test_what_a_policy_retries() -> None:
    policy = Retry(max_interval=10, non_retryable=(KeyError,))

    assert policy.retryable(ConnectionError("reset"))
    assert policy.retryable(ModelHTTPError(429, "slow down", retry_after=5))
    assert not policy.retryable(ModelHTTPError(429, "quota", retry_after=3600))  # too long
    assert not policy.retryable(ModelHTTPError(400, "bad request"))
    assert not policy.retryable(KeyError("named non-retryable"))
    assert not policy.retryable(UserCodeError("tool raised SystemExit"))


def test_a_bad_policy_is_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match="max_attempts must be at least 1, got 0"):
        Retry(max_attempts=0)
    with pytest.raises(ValueError, match=r"backoff must be at least 1, got 0\.5"):
        Retry(backoff=0.5)
    with pytest.raises(ValueError, match="initial_interval must not be negative, got -1"):
        Retry(initial_interval=-1)
    with pytest.raises(TypeError, match="non_retryable takes exception types"):
        Retry(non_retryable=("KeyError",))


@given(
    max_attempts=st.integers(1, 10),
    initial=st.floats(0, 100),
    backoff=st.floats(1, 10),
    cap=st.floats(0, 1000),
    attempt=st.integers(1, 20),
    retry_after=st.none() | st.floats(0, 2000),
)
def test_a_policy_waits_at_most_its_max_interval_and_stops_at_its_last_attempt(
    max_attempts: int,
    initial: float,
    backoff: float,
    cap: float,
    attempt: int,
    retry_after: float | None,
) -> None:
    policy = Retry(max_attempts, initial, backoff, cap)
    wait = policy.wait_after(attempt, ModelHTTPError(503, "down", retry_after=retry_after))

    if attempt >= max_attempts or (retry_after is not None and retry_after > cap):
        assert wait is None
    else:
        assert wait is not None
        assert 0 <= wait <= cap
        assert wait == (retry_after if retry_after is not None else policy.delay(attempt, None))
