"""User code (tools, model functions, history processors, instructions functions) never
stalls or kills the event loop: sync code runs in a thread, and whatever it raises fails
only its own call."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from agents import ask, call, scripted
from runners import Runner

from golem.agent import Agent
from golem.messages import Message
from golem.models.base import ToolDefinition
from golem.models.function import FunctionModel
from golem.results import RunError
from golem.tools import RunContext

HANDSHAKE_TIMEOUT = 5.0  # a guard against a deadlock, never a wait for the outcome


class Oops(BaseException):
    """A BaseException that is neither SystemExit nor KeyboardInterrupt."""


async def test_two_sync_tools_of_one_batch_run_at_the_same_time(runner: Runner) -> None:
    # Each waits for the other: only possible when neither blocks the event loop.
    barrier = threading.Barrier(2, timeout=HANDSHAKE_TIMEOUT)
    agent, _ = scripted(
        [ask(call("c1", "meet", who="a"), call("c2", "meet", who="b")), Message.assistant("ok")]
    )

    @agent.tool
    def meet(who: str) -> str:
        barrier.wait()
        return f"met {who}"

    result = await runner(agent, "go")

    assert [m.content for m in result.messages if m.role == "tool"] == ["met a", "met b"]


async def test_a_sync_tool_leaves_the_event_loop_free(local_runner: Runner) -> None:
    released = threading.Event()
    agent, _ = scripted([ask(call("c1", "wait")), Message.assistant("ok")])

    @agent.tool
    def wait() -> str:
        return "released" if released.wait(HANDSHAKE_TIMEOUT) else "stalled"

    async def release() -> None:
        await asyncio.sleep(0)  # runs only if the loop is free while the tool waits
        released.set()

    run = asyncio.ensure_future(local_runner(agent, "go"))
    while not released.is_set():
        await release()
    result = await run

    assert result.messages[-2].content == "released"


@pytest.mark.parametrize("on_loop", [False, True])
@pytest.mark.parametrize("error", [SystemExit(3), KeyboardInterrupt(), Oops("odd")])
async def test_a_tool_raising_a_base_exception_fails_the_call_at_stage_tool(
    runner: Runner, error: BaseException, on_loop: bool
) -> None:
    agent, _ = scripted([ask(call("c1", "bye")), Message.assistant("unreachable")])

    @agent.tool(on_loop=on_loop)  # in a thread, or on the loop (ADR 0037)
    def bye() -> str:
        raise error

    with pytest.raises(RunError) as info:
        await runner(agent, "go")

    assert info.value.stage == "tool"
    assert "tool 'bye'" in info.value.detail
    assert type(error).__name__ in info.value.detail


async def test_an_async_tool_raising_system_exit_fails_the_call(runner: Runner) -> None:
    agent, _ = scripted(
        [ask(call("c1", "bye"), call("c2", "bye")), Message.assistant("unreachable")]
    )

    @agent.tool
    async def bye() -> str:
        raise SystemExit("leaving")

    with pytest.raises(RunError) as info:
        await runner(agent, "go")

    assert info.value.stage == "tool"
    assert "SystemExit: leaving" in info.value.detail


async def test_a_tool_raising_cancelled_error_on_its_own_says_so(runner: Runner) -> None:
    agent, _ = scripted([ask(call("c1", "odd")), Message.assistant("unreachable")])

    @agent.tool
    async def odd() -> str:
        raise asyncio.CancelledError()

    with pytest.raises(RunError) as info:
        await runner(agent, "go")

    assert info.value.stage == "tool"
    assert "tool 'odd' raised asyncio.CancelledError" in info.value.detail


async def test_a_sync_model_function_runs_in_a_thread(runner: Runner) -> None:
    seen: list[str] = []

    def answer(messages: list[Message], tools: list[ToolDefinition]) -> Message:
        seen.append(threading.current_thread().name)
        return Message.assistant("hi")

    result = await runner(Agent(FunctionModel(answer)), "go")

    assert result.output == "hi"
    assert seen and seen[0] != threading.main_thread().name


async def test_a_model_function_raising_system_exit_fails_at_stage_model(runner: Runner) -> None:
    def answer(messages: list[Message], tools: list[ToolDefinition]) -> Message:
        raise SystemExit("model gone")

    with pytest.raises(RunError) as info:
        await runner(Agent(FunctionModel(answer)), "go")

    assert info.value.stage == "model"
    assert "SystemExit: model gone" in info.value.detail


async def test_sync_history_processor_and_instructions_run_in_threads(runner: Runner) -> None:
    threads: dict[str, str] = {}

    def processor(history: list[Message]) -> list[Message]:
        threads["processor"] = threading.current_thread().name
        return history

    def instructions(ctx: RunContext[Any]) -> str:
        threads["instructions"] = threading.current_thread().name
        return "Be brief."

    agent, model = scripted(
        [Message.assistant("ok")], history_processor=processor, instructions_fn=instructions
    )

    await runner(agent, "go")

    # Durably they run in the worker, which shares this process in the tests.
    assert set(threads) == {"processor", "instructions"}
    assert threading.main_thread().name not in threads.values()
    assert model.requests[0].messages[0] == Message.system("Be brief.")


@pytest.mark.parametrize("where", ["history", "instructions"])
async def test_a_user_function_raising_system_exit_fails_its_stage(
    runner: Runner, where: str
) -> None:
    def processor(history: list[Message]) -> list[Message]:
        raise SystemExit("no history")

    def instructions(ctx: RunContext[Any]) -> str:
        raise SystemExit("no instructions")

    options: dict[str, Any] = (
        {"history_processor": processor}
        if where == "history"
        else {"instructions_fn": instructions}
    )
    agent, _ = scripted([Message.assistant("unreachable")], **options)

    with pytest.raises(RunError) as info:
        await runner(agent, "go")

    assert info.value.stage == where
    assert "SystemExit" in info.value.detail
    assert ("processor" if where == "history" else "instructions") in info.value.detail


# -- on_loop: a sync function the application says never blocks (ADR 0037) -----------------


async def test_a_sync_tool_marked_on_loop_runs_on_the_event_loop_thread(runner: Runner) -> None:
    seen: list[bool] = []
    agent, _ = scripted([ask(call("c1", "quick")), Message.assistant("ok")])

    @agent.tool(on_loop=True)
    def quick() -> str:
        seen.append(_on_the_loop_thread())
        return "quick"

    @agent.tool
    def threaded() -> str:  # the default, beside it: a thread
        return "unused"

    result = await runner(agent, "go")

    assert result.messages[-2].content == "quick"
    assert seen == [True]
    assert agent.tools["quick"].on_loop and not agent.tools["threaded"].on_loop


async def test_a_sync_model_function_marked_on_loop_runs_on_the_event_loop_thread(
    runner: Runner,
) -> None:
    seen: list[bool] = []

    def answer(messages: list[Message], tools: list[ToolDefinition]) -> Message:
        seen.append(_on_the_loop_thread())
        return Message.assistant("hi")

    result = await runner(Agent(FunctionModel(answer, on_loop=True)), "go")

    assert result.output == "hi"
    assert seen == [True]


async def test_an_on_loop_function_is_named_while_it_holds_the_loop() -> None:
    # What the worker's loop watchdog reads to name the function that stalls the loop.
    from golem.user_functions import call_user_function, running_on_loop

    named: list[str | None] = []

    def holds() -> str:
        named.append(running_on_loop(asyncio.current_task()))
        return "done"

    assert await call_user_function(holds, what="tool 'holds'", on_loop=True) == "done"
    assert named == ["tool 'holds' (marked on_loop)"]
    assert running_on_loop(asyncio.current_task()) is None


def _on_the_loop_thread() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False  # a worker thread has no running loop
    return True
