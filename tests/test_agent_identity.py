"""Run and conversation identity: who is stamped, with what, and where ids come from."""

from __future__ import annotations

from typing import Any

import pytest
from agents import Deps, answered, ask, call, is_uuid7, scripted, stamped
from runners import Runner

from golem.history.repair import INTERRUPTED_RESULT
from golem.ids import new_id
from golem.messages import Message
from golem.results import RunError
from golem.tools import RunContext


async def test_a_fresh_run_mints_distinct_uuid7_run_and_conversation_ids(runner: Runner) -> None:
    agent, _ = scripted([Message.assistant("hi")])

    result = await runner(agent, "hello")

    assert is_uuid7(result.run_id)
    assert is_uuid7(result.conversation_id)
    assert result.run_id != result.conversation_id


async def test_every_message_the_run_adds_is_stamped_with_its_ids(runner: Runner) -> None:
    agent, _ = scripted([ask(call("c1", "echo", text="x")), Message.assistant("done")])
    agent.tool(name="echo")(lambda text: text)

    run_id = new_id()  # a durable run's workflow id: unique per run

    result = await runner(agent, "go", run_id=run_id, conversation_id="conv-1")

    assert result.messages == stamped(
        [
            Message.user("go"),
            answered(ask(call("c1", "echo", text="x"))),
            Message.tool("c1", "echo", "x"),
            answered(Message.assistant("done")),
        ],
        run_id,
        "conv-1",
    )
    assert (result.run_id, result.conversation_id) == (run_id, "conv-1")


async def test_a_chained_run_keeps_the_conversation_id_and_gets_a_fresh_run_id(
    runner: Runner,
) -> None:
    agent, _ = scripted([Message.assistant("one"), Message.assistant("two")])

    first = await runner(agent, "first")
    second = await runner(agent, "second", history=first.messages)

    assert second.conversation_id == first.conversation_id
    assert second.run_id != first.run_id
    assert is_uuid7(second.run_id)


async def test_the_newest_identified_message_donates_the_conversation_id(runner: Runner) -> None:
    history = [
        Message.user("a").stamped("run-a", "conv-old"),
        Message.assistant("b").stamped("run-b", "conv-newer"),
        Message.user("c"),  # unidentified: hand-built history
        Message.assistant("d"),
    ]
    agent, _ = scripted([Message.assistant("e")])

    result = await runner(agent, "f", history=history)

    assert result.conversation_id == "conv-newer"
    assert result.run_id not in ("run-a", "run-b")


async def test_the_run_id_is_never_inherited_from_history(runner: Runner) -> None:
    history = [Message.user("a").stamped("run-a", "conv-a"), Message.assistant("b")]
    agent, _ = scripted([Message.assistant("c")])

    result = await runner(agent, "d", history=history)

    assert result.run_id != "run-a"
    assert result.messages[-1].run_id == result.run_id


async def test_an_explicit_conversation_id_wins_over_the_history_and_forks(
    runner: Runner,
) -> None:
    agent, _ = scripted([Message.assistant("one"), Message.assistant("two")])
    first = await runner(agent, "first")
    fork_id = new_id()

    fork = await runner(agent, "fork", history=first.messages, conversation_id=fork_id)

    assert fork.conversation_id == fork_id
    assert fork.messages[:2] == first.messages  # the forked history keeps its old stamps
    assert fork.messages[2:] == stamped(
        [Message.user("fork"), answered(Message.assistant("two"))], fork.run_id, fork_id
    )


async def test_history_without_identity_starts_a_new_conversation(runner: Runner) -> None:
    history = [Message.user("a"), Message.assistant("b")]
    agent, _ = scripted([Message.assistant("c")])

    result = await runner(agent, "d", history=history)

    assert is_uuid7(result.conversation_id)
    assert result.messages[:2] == history


async def test_supplied_history_keeps_its_stamps_and_only_added_messages_are_stamped(
    runner: Runner,
) -> None:
    history = [
        Message.user("a"),
        Message.assistant("b").stamped("run-x", "conv-x"),
        Message.user("c").stamped("run-y", "conv-x"),
        Message.assistant("d"),
    ]
    agent, _ = scripted([Message.assistant("e")])

    run_id = new_id()

    result = await runner(agent, "f", history=history, run_id=run_id)

    assert result.messages == [
        *history,
        *stamped([Message.user("f"), answered(Message.assistant("e"))], run_id, "conv-x"),
    ]


async def test_repair_synthesized_results_carry_no_stamps(runner: Runner) -> None:
    history = [
        Message.user("a").stamped("run-a", "conv-a"),
        ask(call("c1", "echo", text="x")).stamped("run-a", "conv-a"),
    ]
    agent, model = scripted([Message.assistant("ok")])

    result = await runner(agent, "again", history=history)

    synthesized = Message.tool("c1", "echo", INTERRUPTED_RESULT)
    assert result.messages[:3] == [*history, synthesized]
    assert model.requests[0].messages == [
        *history,
        synthesized,
        Message.user("again").stamped(result.run_id, "conv-a"),
    ]


async def test_the_callers_history_list_is_never_mutated(runner: Runner) -> None:
    history = [
        Message.system("old instructions"),
        Message.user("a"),
        ask(call("c1", "echo", text="x")),  # dangling: repair synthesizes its result
        Message.tool("c9", "echo", "orphan"),  # orphan: repair drops it
    ]
    before = list(history)
    agent, _ = scripted([Message.assistant("ok")], instructions="new")

    result = await runner(agent, "go", history=history)

    assert history == before
    assert all(a is b for a, b in zip(history, before, strict=True))
    assert result.messages is not history


async def test_a_failed_runs_partial_reports_the_same_ids(runner: Runner) -> None:
    agent, _ = scripted([ask(call("c1", "echo", text="x")), RuntimeError("provider exploded")])
    agent.tool(name="echo")(lambda text: text)

    run_id = new_id()

    with pytest.raises(RunError) as caught:
        await runner(agent, "go", run_id=run_id, conversation_id="conv-1")

    partial = caught.value.partial
    assert partial is not None
    assert (partial.run_id, partial.conversation_id) == (run_id, "conv-1")
    assert caught.value.run_id == run_id


async def test_tools_see_the_run_identity_and_deps_in_their_context(runner: Runner) -> None:
    seen: list[tuple[str, str, Any, str, str]] = []
    agent, _ = scripted([ask(call("c1", "whoami")), Message.assistant("done")], deps_type=Deps)

    @agent.tool
    def whoami(ctx: RunContext[Deps]) -> str:
        """Say who is asking."""
        seen.append((ctx.run_id, ctx.conversation_id, ctx.deps, ctx.tool_call_id, ctx.tool_name))
        return ctx.deps.name

    run_id = new_id()

    result = await runner(agent, "go", deps=Deps(name="Grace"), run_id=run_id, conversation_id="c")

    assert seen == [(run_id, "c", Deps(name="Grace"), "c1", "whoami")]
    assert result.messages[2] == Message.tool("c1", "whoami", "Grace").stamped(run_id, "c")
