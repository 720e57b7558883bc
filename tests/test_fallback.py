"""``FallbackModel``: the next model answers once the current one's own retries are spent,
in process and durably alike (docs/adr/0017-fallback-and-retry.md)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from agents import FAST_RETRY, ask, call, scripted
from runners import Runner

from golem import Agent, Message, RunError, dump_messages, load_messages
from golem.models import (
    FallbackError,
    FallbackModel,
    FunctionModel,
    ModelConnectionError,
    ModelHTTPError,
    ModelRequest,
    ModelResponseError,
    ScriptedModel,
    StreamDelta,
    ToolDefinition,
)
from golem.retry import Retry

#: One attempt per model: the switch at once (retries are tested where they matter).
ONCE = Retry(max_attempts=1)


def pair(
    primary: list[Any], backup: list[Any], **options: Any
) -> tuple[Agent[Any, Any], ScriptedModel, ScriptedModel]:
    """An agent on ``FallbackModel(primary, backup)``, each scripted, retried fast."""
    first = ScriptedModel(primary, model_name="primary")
    second = ScriptedModel(backup, model_name="backup")
    agent = Agent(FallbackModel(first, second, **options), model_retry=FAST_RETRY)
    return agent, first, second


async def test_the_backup_answers_once_the_primarys_retries_are_spent_and_is_recorded(
    runner: Runner,
) -> None:
    agent, primary, backup = pair(
        [ModelHTTPError(503, "overloaded")] * 3, [Message.assistant("hi")]
    )

    result = await runner(agent, "go")

    assert result.output == "hi"
    assert len(primary.requests) == FAST_RETRY.max_attempts
    assert len(backup.requests) == 1
    assert backup.requests[0] == primary.requests[0]  # the very request the primary got
    assert result.model == "backup"
    assert result.messages[-1].model == "backup"
    assert result.requests == 1  # still one model turn


@pytest.mark.parametrize(
    "error",
    [
        ModelConnectionError("connection refused"),
        ModelHTTPError(429, "rate limited"),
        ModelHTTPError(500, "internal error"),
        ModelHTTPError(529, "overloaded"),
        ModelHTTPError(408, "request timeout"),
    ],
    ids=lambda e: type(e).__name__ + getattr(e, "message", ""),
)
async def test_an_unavailable_provider_falls_over_by_default(
    runner: Runner, error: Exception
) -> None:
    agent, _, _ = pair([error], [Message.assistant("hi")], retry=ONCE)

    result = await runner(agent, "go")

    assert (result.output, result.model) == ("hi", "backup")


@pytest.mark.parametrize(
    "error",
    [
        ModelHTTPError(400, "context too long"),
        ModelHTTPError(401, "invalid api key"),
        ModelHTTPError(422, "unprocessable"),
        ModelResponseError("response has no choices"),
    ],
    ids=lambda e: str(e),
)
async def test_an_error_that_says_the_request_is_bad_does_not_fall_over(
    runner: Runner, error: Exception
) -> None:
    agent, primary, backup = pair([error], [Message.assistant("never")])

    with pytest.raises(RunError) as caught:
        await runner(agent, "go")

    assert caught.value.stage == "model"
    assert str(error) in caught.value.detail
    assert "all 2 models failed" not in caught.value.detail
    assert (len(primary.requests), backup.requests) == (1, [])


async def test_when_every_model_fails_the_run_error_names_each_models_failure(
    runner: Runner,
) -> None:
    agent, primary, backup = pair(
        [ModelHTTPError(503, "overloaded")], [ModelConnectionError("refused")], retry=ONCE
    )

    with pytest.raises(RunError) as caught:
        await runner(agent, "go")

    assert caught.value.stage == "model"
    assert "all 2 models failed: primary: HTTP 503: overloaded; backup: refused" in (
        caught.value.detail
    )
    assert (len(primary.requests), len(backup.requests)) == (1, 1)


async def test_a_quota_past_the_policys_max_interval_falls_over_without_retrying(
    runner: Runner,
) -> None:
    agent, primary, backup = pair(
        [ModelHTTPError(429, "quota exhausted", retry_after=3600.0)], [Message.assistant("hi")]
    )

    result = await runner(agent, "go")

    assert result.model == "backup"
    assert (len(primary.requests), len(backup.requests)) == (1, 1)


async def test_each_model_is_retried_by_its_own_policy(runner: Runner) -> None:
    agent, primary, backup = pair(
        [ModelHTTPError(503, "down")] * 3,
        [ModelHTTPError(503, "down"), Message.assistant("hi")],
        retry=[ONCE, None],  # None: the agent's model_retry
    )

    result = await runner(agent, "go")

    assert result.output == "hi"
    assert (len(primary.requests), len(backup.requests)) == (1, 2)


async def test_a_predicate_decides_what_falls_over(runner: Runner) -> None:
    def bad_request(exc: Exception) -> bool:
        return isinstance(exc, ModelHTTPError) and exc.status == 400

    agent, _, _ = pair(
        [ModelHTTPError(400, "this provider rejects it")],
        [Message.assistant("another provider takes it")],
        fallback_on=bad_request,
    )

    result = await runner(agent, "go")

    assert result.model == "backup"


async def test_exception_types_decide_what_falls_over(runner: Runner) -> None:
    agent, _, backup = pair(
        [ModelHTTPError(503, "down")],
        [Message.assistant("never")],
        fallback_on=(ModelConnectionError,),
        retry=ONCE,
    )

    with pytest.raises(RunError) as caught:
        await runner(agent, "go")

    assert "HTTP 503: down" in caught.value.detail
    assert backup.requests == []


async def test_every_turn_starts_with_the_primary_again(runner: Runner) -> None:
    agent, primary, backup = pair(
        [ModelConnectionError("blip"), Message.assistant("primary again")],
        [ask(call("c1", "ping"))],
        retry=ONCE,
    )
    agent.tool(name="ping")(lambda: "pong")

    result = await runner(agent, "go")

    assert [(m.role, m.model) for m in result.messages] == [
        ("user", ""),
        ("assistant", "backup"),
        ("tool", ""),
        ("assistant", "primary"),
    ]
    assert result.model == "primary"
    assert (len(primary.requests), len(backup.requests)) == (2, 1)


async def test_a_plain_model_records_its_name_on_each_answer(runner: Runner) -> None:
    agent, _ = scripted([Message.assistant("hi")])

    result = await runner(agent, "go")

    assert result.model == "scripted"
    assert result.messages[-1].model == "scripted"


# -- streaming ----------------------------------------------------------------------------------


async def test_a_switch_mid_stream_restarts_the_turn_on_the_backup(local_runner: Runner) -> None:
    async def breaks_off(
        messages: list[Message], tools: list[ToolDefinition]
    ) -> AsyncIterator[StreamDelta]:
        yield StreamDelta(kind="text", text="Hal")
        raise ModelConnectionError("connection reset mid-stream")

    primary = FunctionModel(lambda m, t: Message.assistant("unused"), breaks_off)
    backup = ScriptedModel([Message.assistant("Hello")], model_name="backup")
    agent = Agent(FallbackModel(primary, backup, retry=Retry(max_attempts=1)))

    stream = agent.run_stream("go")
    seen = [(e.kind, e.attempt, e.model, e.delta.text if e.delta else "") async for e in stream]

    assert seen == [
        ("model_start", 0, "", ""),
        ("text_delta", 0, "", "Hal"),
        ("turn_restarted", 1, "backup", ""),
        ("text_delta", 0, "", "Hello"),
        ("model_end", 0, "", ""),
    ]
    assert stream.result.output == "Hello"


async def test_a_retried_streamed_turn_is_marked_restarted_in_process_as_durably() -> None:
    agent, _ = scripted([ModelConnectionError("reset"), Message.assistant("hi")])

    kinds = [(e.kind, e.attempt, e.model) async for e in agent.run_stream("go")]

    assert ("turn_restarted", 2, "scripted") in kinds


# -- the model itself ---------------------------------------------------------------------------


async def test_used_alone_a_fallback_model_tries_each_model_once() -> None:
    primary = ScriptedModel([ModelHTTPError(503, "down")], model_name="primary")
    backup = ScriptedModel([Message.assistant("hi")], model_name="backup")
    model = FallbackModel(primary, backup)
    request = ModelRequest(messages=[Message.user("go")])

    response = await model.request(request)

    assert response.message.model == "backup"
    assert model.model_name == "fallback(primary, backup)"


async def test_used_alone_every_failure_is_named() -> None:
    model = FallbackModel(
        ScriptedModel([ModelHTTPError(503, "down")], model_name="a"),
        ScriptedModel([ModelHTTPError(502, "bad gateway")], model_name="b"),
    )

    with pytest.raises(FallbackError) as caught:
        await model.request(ModelRequest(messages=[Message.user("go")]))

    assert caught.value.failures == [("a", "HTTP 503: down"), ("b", "HTTP 502: bad gateway")]
    assert not caught.value.retryable  # each model's own retries are spent


def test_a_fallback_model_needs_a_model_and_one_policy_per_model() -> None:
    with pytest.raises(ValueError, match="at least one model"):
        FallbackModel()
    with pytest.raises(ValueError, match="2 models but 1 retry policies"):
        FallbackModel(ScriptedModel([]), ScriptedModel([]), retry=[Retry()])


def test_a_messages_model_is_camel_case_json_omitted_when_empty_and_round_trips() -> None:
    answered = Message.assistant("hi").model_copy(update={"model": "gpt-4o"})
    history = [Message.user("go"), answered]

    data = dump_messages(history)

    assert b'"model":"gpt-4o"' in data
    assert data.count(b'"model"') == 1  # the user message has none
    assert load_messages(data) == history
    # An older reader's message without it loads as empty; a newer field beside it is kept.
    newer = load_messages(b'[{"role":"assistant","content":"x","model":"m","futureField":1}]')
    assert newer[0].model == "m"
    assert b'"futureField":1' in dump_messages(newer)
