"""How a run prepares the supplied history: processor once, validation, repair, then the prompt."""

from __future__ import annotations

import pytest
from agents import answered, ask, call, scripted
from runners import Runner

from golem.history.processors import trim_history
from golem.history.repair import INTERRUPTED_RESULT
from golem.messages import Message, Part
from golem.results import RunError


def conversation(turns: int) -> list[Message]:
    history: list[Message] = []
    for n in range(turns):
        history += [Message.user(f"q{n}"), Message.assistant(f"a{n}")]
    return history


async def test_the_history_processor_runs_once_on_exactly_what_the_caller_supplied(
    runner: Runner,
) -> None:
    seen: list[list[Message]] = []

    def record(history: list[Message]) -> list[Message]:
        seen.append(list(history))
        return history

    history = [
        Message.system("stale"),
        Message.user("a"),
        ask(call("c1", "echo", text="x")),  # dangling: repair comes after the processor
    ]
    agent, _ = scripted(
        [ask(call("c2", "echo", text="y")), Message.assistant("done")],
        history_processor=record,
        instructions="now",
    )
    agent.tool(name="echo")(lambda text: text)

    await runner(agent, "go", history=history)

    assert seen == [history]


async def test_the_processors_output_not_its_input_reaches_the_model(runner: Runner) -> None:
    history = conversation(3)
    agent, model = scripted(
        [Message.assistant("ok")], history_processor=lambda h: h[-2:], instructions="Be brief."
    )

    result = await runner(agent, "next", history=history)

    assert model.requests[0].messages == [
        Message.system("Be brief."),
        Message.user("q2"),
        Message.assistant("a2"),
        Message.user("next").stamped(result.run_id, result.conversation_id),
    ]
    assert result.messages[:2] == history[-2:]


async def test_an_async_history_processor_is_awaited(runner: Runner) -> None:
    async def newest_two(history: list[Message]) -> list[Message]:
        return history[-2:]

    agent, model = scripted([Message.assistant("ok")], history_processor=newest_two)

    await runner(agent, "next", history=conversation(3))

    assert [m.content for m in model.requests[0].messages] == ["q2", "a2", "next"]


async def test_trim_history_never_cuts_the_prompt_or_the_instructions(runner: Runner) -> None:
    long_prompt = "p" * 10_000
    agent, model = scripted(
        [Message.assistant("ok")], history_processor=trim_history(2), instructions="i" * 5_000
    )

    await runner(agent, long_prompt, history=conversation(5))

    sent = model.requests[0].messages
    assert [m.content for m in sent] == ["i" * 5_000, "q4", "a4", long_prompt]


async def test_repair_applies_to_the_processors_output(runner: Runner) -> None:
    history = [
        Message.user("a"),
        ask(call("c1", "echo", text="x")),
        Message.tool("c1", "echo", "x"),
    ]
    # Dropping the result leaves the call dangling: repair must close it before the request.
    agent, model = scripted([Message.assistant("ok")], history_processor=lambda h: h[:2])

    result = await runner(agent, "b", history=history)

    assert model.requests[0].messages[:3] == [
        history[0],
        history[1],
        Message.tool("c1", "echo", INTERRUPTED_RESULT),
    ]
    assert result.messages[2] == Message.tool("c1", "echo", INTERRUPTED_RESULT)


async def test_a_failing_history_processor_fails_the_run_naming_it_before_any_model_call(
    runner: Runner,
) -> None:
    def summarize_old_turns(history: list[Message]) -> list[Message]:
        raise ConnectionError("summarizer unavailable")

    agent, model = scripted([Message.assistant("never")], history_processor=summarize_old_turns)

    with pytest.raises(RunError) as caught:
        await runner(agent, "go", history=conversation(2))

    assert caught.value.stage == "history"
    assert caught.value.partial is None
    assert "summarize_old_turns" in str(caught.value)
    assert "summarizer unavailable" in str(caught.value)
    assert model.requests == []


async def test_trim_history_that_leaves_nothing_to_open_a_request_fails_at_history(
    runner: Runner,
) -> None:
    history = [
        Message.user("a"),
        ask(call("c1", "echo", text="x"), call("c2", "echo", text="y")),
        Message.tool("c1", "echo", "x"),
        Message.tool("c2", "echo", "y"),
    ]
    agent, model = scripted([Message.assistant("never")], history_processor=trim_history(2))

    with pytest.raises(RunError) as caught:
        await runner(agent, "go", history=history)

    assert caught.value.stage == "history"
    assert "trim_history(2)" in str(caught.value)
    assert model.requests == []


async def test_a_failing_history_processor_is_called_once_not_retried(
    runner: Runner, request: pytest.FixtureRequest
) -> None:
    calls: list[int] = []

    def refuse(history: list[Message]) -> list[Message]:
        calls.append(len(history))
        raise ValueError("cannot shorten this history")

    agent, _ = scripted([Message.assistant("never")], history_processor=refuse)

    with pytest.raises(RunError):
        await runner(agent, "go", history=conversation(2))

    assert calls == [4]


async def test_an_invalid_history_fails_at_history_with_no_partial(runner: Runner) -> None:
    history = [
        Message.user("a"),
        Message(role="assistant", content="b", parts=[Part(kind="image", url="https://x/y.png")]),
    ]
    agent, model = scripted([Message.assistant("never")])

    with pytest.raises(RunError) as caught:
        await runner(agent, "go", history=history)

    assert caught.value.stage == "history"
    assert caught.value.partial is None
    assert "message 1: parts are only allowed on user and tool messages" in str(caught.value)
    assert model.requests == []


async def test_a_processor_producing_invalid_history_fails_at_history(runner: Runner) -> None:
    bad = Message(role="user", content="x", parts=[Part(kind="hologram", url="https://x/y")])
    agent, model = scripted([Message.assistant("never")], history_processor=lambda h: [bad])

    with pytest.raises(RunError) as caught:
        await runner(agent, "go", history=conversation(1))

    assert caught.value.stage == "history"
    assert "message 0: part 0: unknown kind 'hologram'" in str(caught.value)
    assert model.requests == []


async def test_the_prompt_joins_after_the_repaired_history(runner: Runner) -> None:
    history = [
        Message.tool("c0", "echo", "orphan, dropped"),
        Message.user("a"),
        ask(call("c1", "echo", text="x"), call("c2", "echo", text="y")),
        Message.tool("c2", "echo", "y"),
    ]
    agent, model = scripted([Message.assistant("ok")])

    result = await runner(agent, "b", history=history)

    assert result.messages == [
        history[1],
        history[2],
        history[3],
        Message.tool("c1", "echo", INTERRUPTED_RESULT),
        *[
            m.stamped(result.run_id, result.conversation_id)
            for m in (Message.user("b"), answered(Message.assistant("ok")))
        ],
    ]
    assert model.requests[0].messages == result.messages[:-1]


async def test_a_run_without_a_prompt_continues_the_history_as_is(runner: Runner) -> None:
    history = [Message.user("a")]
    agent, model = scripted([Message.assistant("b")])

    result = await runner(agent, None, history=history)

    assert model.requests[0].messages == history
    assert result.output == "b"


@pytest.mark.parametrize(
    ("part", "problem"),
    [
        (Part(kind="hologram", url="https://example.com/h"), "unknown kind 'hologram'"),
        (Part(kind="image"), "needs exactly one of url or data"),
    ],
)
async def test_a_malformed_prompt_part_fails_the_run_before_any_model_call(
    runner: Runner, part: Part, problem: str
) -> None:
    agent, model = scripted([Message.assistant("never")])

    with pytest.raises(RunError) as failed:
        await runner(agent, "look", parts=[part])

    assert failed.value.stage == "history"
    assert "prompt" in failed.value.detail and problem in failed.value.detail
    assert model.requests == []
