"""``Agent.run_sync``: ``agent.run`` for code without an event loop (a script, a notebook cell
run without ``await``), as pydantic-ai users write it."""

from __future__ import annotations

import asyncio

import pytest

from golem import Agent, Message, RunError
from golem.models import FunctionModel


def _answer(messages: list[Message], tools: object) -> Message:
    return Message.assistant(f"sync: {messages[-1].content}")


agent = Agent(FunctionModel(_answer, model_name="sync-model"), name="sync")


def test_run_sync_returns_what_run_returns_and_continues_a_history() -> None:
    first = agent.run_sync("hello")
    again = agent.run_sync("again", history=first.messages)
    assert (first.output, again.output) == ("sync: hello", "sync: again")
    assert again.conversation_id == first.conversation_id
    assert [m.role for m in again.messages] == ["user", "assistant", "user", "assistant"]


def test_run_sync_raises_the_runs_own_error() -> None:
    def fail(messages: list[Message], tools: object) -> Message:
        raise ValueError("the model broke")

    broken = Agent(FunctionModel(fail, model_name="broken"), name="broken")
    with pytest.raises(RunError) as failed:
        broken.run_sync("hi")
    assert failed.value.stage == "model" and "the model broke" in str(failed.value)


async def test_run_sync_inside_a_running_event_loop_says_to_await_run() -> None:
    with pytest.raises(RuntimeError) as refused:
        agent.run_sync("hi")
    assert str(refused.value) == (
        "Agent.run_sync('sync') was called inside a running event loop, which it would "
        "block: use `await agent.run(...)` there"
    )
    assert asyncio.get_running_loop().is_running()  # the loop was left alone
