"""Instructions: resolved once per run, static then dynamic, replacing history system messages."""

from __future__ import annotations

import pytest
from agents import Deps, ask, call, scripted
from pydantic import BaseModel
from runners import Runner

from golem.messages import Message
from golem.results import RunError
from golem.tools import RunContext


async def test_static_instructions_open_every_request_as_one_system_message(
    runner: Runner,
) -> None:
    agent, model = scripted(
        [ask(call("c1", "echo", text="x")), Message.assistant("done")], instructions="Be brief."
    )
    agent.tool(name="echo")(lambda text: text)

    await runner(agent, "go")

    assert [r.messages[0] for r in model.requests] == [Message.system("Be brief.")] * 2
    assert [sum(m.role == "system" for m in r.messages) for r in model.requests] == [1, 1]


async def test_without_instructions_no_request_carries_a_system_message(runner: Runner) -> None:
    history = [Message.system("stale"), Message.user("a"), Message.assistant("b")]
    agent, model = scripted([Message.assistant("c")])

    result = await runner(agent, "d", history=history)

    assert [m.role for m in model.requests[0].messages] == ["user", "assistant", "user"]
    assert [m.role for m in result.messages] == ["user", "assistant", "user", "assistant"]


async def test_dynamic_instructions_follow_static_ones_after_a_blank_line(runner: Runner) -> None:
    def greet(ctx: RunContext[Deps]) -> str:
        return f"The player's name is {ctx.deps.name}."

    agent, model = scripted(
        [Message.assistant("hi")], instructions="Be brief.", instructions_fn=greet, deps_type=Deps
    )

    await runner(agent, "hello", deps=Deps(name="Grace"))

    assert model.requests[0].messages[0] == Message.system(
        "Be brief.\n\nThe player's name is Grace."
    )


async def test_dynamic_instructions_alone_are_the_system_message(runner: Runner) -> None:
    async def greet(ctx: RunContext[dict[str, str]]) -> str:
        return f"Call the user {ctx.deps['name']}."

    agent, model = scripted([Message.assistant("hi")], instructions_fn=greet)

    await runner(agent, "hello", deps={"name": "Ada"})

    assert model.requests[0].messages[0] == Message.system("Call the user Ada.")


async def test_an_empty_dynamic_result_contributes_nothing(runner: Runner) -> None:
    agent, model = scripted(
        [Message.assistant("hi")], instructions="Be brief.", instructions_fn=lambda ctx: ""
    )

    await runner(agent, "hello")

    assert model.requests[0].messages[0] == Message.system("Be brief.")


async def test_an_empty_dynamic_result_alone_means_no_system_message(runner: Runner) -> None:
    agent, model = scripted([Message.assistant("hi")], instructions_fn=lambda ctx: "")

    result = await runner(agent, "hello")

    prompt = Message.user("hello").stamped(result.run_id, result.conversation_id)
    assert model.requests[0].messages == [prompt]


async def test_history_system_messages_are_replaced_by_the_current_instructions(
    runner: Runner,
) -> None:
    history = [
        Message.system("old instructions"),
        Message.user("a"),
        Message.assistant("b"),
        Message.system("injected mid-conversation"),
        Message.user("c"),
        Message.assistant("d"),
    ]
    agent, model = scripted([Message.assistant("e")], instructions="current")

    result = await runner(agent, "f", history=history)

    sent = model.requests[0].messages
    assert sent[0] == Message.system("current")
    assert sent[1:-1] == [history[1], history[2], history[4], history[5]]
    assert all(m.role != "system" for m in result.messages)


async def test_instructions_are_resolved_once_per_run_across_tool_turns(runner: Runner) -> None:
    calls: list[str] = []

    def changing(ctx: RunContext[None]) -> str:
        calls.append(ctx.run_id)
        return f"version {len(calls)}"

    agent, model = scripted(
        [
            ask(call("c1", "echo", text="x")),
            ask(call("c2", "echo", text="y")),
            Message.assistant("z"),
        ],
        instructions_fn=changing,
    )
    agent.tool(name="echo")(lambda text: text)

    result = await runner(agent, "go")

    assert calls == [result.run_id]
    assert [r.messages[0].content for r in model.requests] == ["version 1"] * 3


async def test_correction_rounds_do_not_reevaluate_instructions(runner: Runner) -> None:
    class Answer(BaseModel):
        value: int

    calls: list[int] = []

    def changing(ctx: RunContext[None]) -> str:
        calls.append(1)
        return f"version {len(calls)}"

    agent, model = scripted(
        [Message.assistant("not json"), Message.assistant('{"value": 3}')],
        instructions_fn=changing,
        output_type=Answer,
    )

    result = await runner(agent, "go")

    assert result.output == Answer(value=3)
    assert len(model.requests) == 2
    assert calls == [1]
    assert [r.messages[0] for r in model.requests] == [Message.system("version 1")] * 2


async def test_each_run_resolves_its_own_instructions(runner: Runner) -> None:
    def greet(ctx: RunContext[Deps]) -> str:
        return f"Name: {ctx.deps.name}."

    agent, model = scripted(
        [Message.assistant("one"), Message.assistant("two")], instructions_fn=greet, deps_type=Deps
    )

    first = await runner(agent, "a", deps=Deps(name="Ada"))
    await runner(agent, "b", history=first.messages, deps=Deps(name="Grace"))

    assert [r.messages[0] for r in model.requests] == [
        Message.system("Name: Ada."),
        Message.system("Name: Grace."),
    ]
    assert all(m.role != "system" for m in model.requests[1].messages[1:])


async def test_a_failing_instructions_function_fails_the_run_before_any_model_call(
    runner: Runner,
) -> None:
    def broken(ctx: RunContext[None]) -> str:
        raise LookupError("no profile for this user")

    agent, model = scripted([Message.assistant("never")], instructions_fn=broken)

    with pytest.raises(RunError) as caught:
        await runner(agent, "go")

    assert caught.value.stage == "instructions"
    assert caught.value.partial is None
    assert "no profile for this user" in str(caught.value)
    assert model.requests == []


@pytest.mark.parametrize("value", [42, ["Be brief."], b"Be brief."])
async def test_an_instructions_function_returning_a_non_string_fails_naming_it(
    runner: Runner, value: object
) -> None:
    def answer_of_the_universe(ctx: RunContext[None]) -> object:
        return value

    agent, model = scripted([Message.assistant("never")], instructions_fn=answer_of_the_universe)

    with pytest.raises(RunError) as caught:
        await runner(agent, "go")

    assert caught.value.stage == "instructions"
    assert "answer_of_the_universe" in caught.value.detail
    assert f"returned {type(value).__name__}, not a string" in caught.value.detail
    assert model.requests == []


async def test_an_instructions_function_returning_none_contributes_nothing(
    runner: Runner,
) -> None:
    agent, model = scripted(
        [Message.assistant("hi")], instructions="Be brief.", instructions_fn=lambda ctx: None
    )
    await runner(agent, "hello")
    assert model.requests[0].messages[0] == Message.system("Be brief.")
