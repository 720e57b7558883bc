"""Delegation through both executors: a delegate is a tool whose call is a child run (in
process a nested run, durably a child workflow), reported in the caller's Result."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from delegation_agents import answer, caller_agent, calls, echo_agent, results_of, usage
from pydantic import BaseModel
from runners import Runner

from golem import Agent, Message, RunContext, RunError
from golem.models import FunctionModel, ModelResponse
from golem.usage import UsageLimits


async def test_a_delegate_answers_the_callers_tool_call_from_a_child_run_of_its_own(
    runner: Runner,
) -> None:
    billing = echo_agent("billing", lambda p: f"refunded ({p})", description="Refunds.")
    triage = caller_agent(
        "triage",
        lambda p: calls(("c1", "billing", {"prompt": "refund order 42"})),
        delegates=[billing],
    )

    result = await runner(triage, "I was charged twice")

    tool = results_of(result.messages)[0]
    assert (tool.tool_name, tool.content, tool.failed) == (
        "billing",
        "refunded (refund order 42)",
        False,
    )
    assert result.output == "refunded (refund order 42)"
    assert result.agent == "triage"
    [child] = result.sub_runs
    assert child not in (result.run_id, "")
    # The child saw only what it was asked, never the caller's conversation.
    assert all(m.run_id != child for m in result.messages)
    assert result.usage == usage(20, 10)  # the caller's own two turns
    assert result.total_usage == usage(30, 15)  # and the child's one
    assert result.spent.requests == 3


async def test_the_delegate_tool_is_named_after_the_agent_and_takes_a_prompt_or_its_deps(
    runner: Runner,
) -> None:
    class Order(BaseModel):
        order_id: str

    def ledger_model(messages: list[Message], tools: Any) -> ModelResponse:
        return answer("booked")

    ledger = Agent(FunctionModel(ledger_model), name="ledger", deps_type=Order)
    seen: list[list[Any]] = []

    def triage_model(messages: list[Message], tools: Any) -> ModelResponse:
        seen.append(tools)
        if results_of(messages):
            return answer("ok")
        return calls(("c1", "ledger", {"prompt": "book it", "deps": {"order_id": "42"}}))

    triage = Agent(FunctionModel(triage_model), name="triage", delegates=[ledger])

    result = await runner(triage, "go")

    assert result.output == "ok"
    [tool] = seen[0]
    assert tool.name == "ledger"
    assert tool.description == "Ask the ledger agent."
    assert sorted(tool.parameters["properties"]) == ["deps", "prompt"]
    assert tool.parameters["required"] == ["prompt", "deps"]


async def test_parallel_delegations_run_at_once_and_are_listed_in_call_order(
    runner: Runner,
) -> None:
    started: list[str] = []
    both = asyncio.Event()

    async def reader_model(messages: list[Message], tools: Any) -> ModelResponse:
        prompt = next(m.content for m in messages if m.role == "user")
        started.append(prompt)
        if len(started) == 2:
            both.set()
        await asyncio.wait_for(both.wait(), 10)  # each waits for the other: they overlap
        return answer(f"read {prompt}")

    reader = Agent(FunctionModel(reader_model), name="reader")
    writer = echo_agent("writer")
    research = caller_agent(
        "research",
        lambda p: calls(
            ("a", "reader", {"prompt": "part 1"}), ("b", "reader", {"prompt": "part 2"})
        ),
        delegates=[reader, writer],
    )

    result = await runner(research, "summarise")

    assert result.output == "read part 1 | read part 2"
    assert sorted(started) == ["part 1", "part 2"]
    assert len(result.sub_runs) == 2 and len(set(result.sub_runs)) == 2
    assert result.total_usage == usage(40, 20)


async def test_delegations_nest_two_deep_and_the_top_counts_the_whole_tree(
    runner: Runner,
) -> None:
    ledger = echo_agent("ledger", lambda p: f"ledger says {p}")
    billing = caller_agent(
        "billing", lambda p: calls(("l1", "ledger", {"prompt": f"check {p}"})), delegates=[ledger]
    )
    triage = caller_agent(
        "triage", lambda p: calls(("b1", "billing", {"prompt": "order 42"})), delegates=[billing]
    )

    result = await runner(triage, "help")

    assert result.output == "ledger says check order 42"
    assert len(result.sub_runs) == 1  # billing; ledger is billing's child
    assert result.total_usage == usage(50, 25)  # 2 + 2 + 1 turns
    assert result.spent.requests == 5


async def test_a_failed_child_is_the_delegating_tools_failed_result_and_the_caller_goes_on(
    runner: Runner,
) -> None:
    def broken(messages: list[Message], tools: Any) -> ModelResponse:
        raise ValueError("the ledger is down")

    billing = Agent(FunctionModel(broken), name="billing")
    triage = caller_agent(
        "triage", lambda p: calls(("c1", "billing", {"prompt": "refund"})), delegates=[billing]
    )

    result = await runner(triage, "help")

    [tool] = results_of(result.messages)
    assert tool.failed
    [child] = result.sub_runs
    assert tool.content.startswith(f"billing (run {child}) failed at stage model: ")
    assert "the ledger is down" in tool.content
    assert result.output.startswith("FAILED billing")


async def test_the_callers_usage_limits_bound_the_whole_tree(runner: Runner) -> None:
    def busy(messages: list[Message], tools: Any) -> ModelResponse:
        if results_of(messages):
            return answer("done")
        return calls(("n1", "note", {}))

    worker = Agent(FunctionModel(busy), name="worker")

    @worker.tool
    def note() -> str:
        """Take a note."""
        return "noted"

    boss = caller_agent(
        "boss",
        lambda p: calls(("w1", "worker", {"prompt": "work"})),
        delegates=[worker],
        usage_limits=UsageLimits(request_limit=2),
    )

    with pytest.raises(RunError) as caught:
        await runner(boss, "go")

    error = caught.value
    assert error.stage == "usage"
    assert "request_limit=2" in str(error)
    partial = error.partial
    assert partial is not None
    [tool] = results_of(partial.messages)
    # The child got what the boss's limit left (1 request): its second one was refused.
    assert tool.failed and "failed at stage usage" in tool.content
    assert "its delegating run's usage limits left it" in tool.content
    assert partial.spent.requests == 2


async def test_ctx_delegate_runs_agents_from_a_tool_body_in_parallel(runner: Runner) -> None:
    reader = echo_agent("reader", lambda p: f"read {p}")
    research = caller_agent("research", lambda p: calls(("r1", "research", {"topic": p})))

    @research.tool(name="research")
    async def research_tool(ctx: RunContext[Any], topic: str) -> str:
        """Research a topic."""
        parts = await asyncio.gather(*(ctx.delegate(reader, f"{topic}: {s}") for s in "abc"))
        return "; ".join(p.output for p in parts)

    result = await runner(research, "golems", serving=[reader])

    assert result.output == "read golems: a; read golems: b; read golems: c"
    assert len(result.sub_runs) == 3 and len(set(result.sub_runs)) == 3
    assert result.total_usage == usage(50, 25)


async def test_an_unknown_delegate_fails_the_run_at_once_naming_it(runner: Runner) -> None:
    attempts: list[int] = []
    caller = caller_agent("caller", lambda p: calls(("c1", "ask", {})))

    @caller.tool
    async def ask(ctx: RunContext[Any]) -> str:
        """Ask somebody."""
        attempts.append(1)
        return (await ctx.delegate("nobody", "hello")).output

    with pytest.raises(RunError) as caught:
        await runner(caller, "go")

    assert caught.value.stage == "tool"
    assert "'nobody'" in str(caught.value)
    assert attempts == [1]  # never retried: no retry makes the agent appear


def test_an_agent_whose_name_is_no_tool_name_cannot_be_a_delegate() -> None:
    odd = echo_agent("billing team")
    with pytest.raises(ValueError, match="'billing team' is not a tool name"):
        Agent(FunctionModel(lambda m, t: Message.assistant("x")), delegates=[odd])


def test_a_delegate_clashing_with_a_tool_is_refused_naming_it() -> None:
    billing = echo_agent("billing")

    def billing_tool() -> str:
        return ""

    billing_tool.__name__ = "billing"
    with pytest.raises(ValueError, match="already has a tool named 'billing'"):
        Agent(
            FunctionModel(lambda m, t: Message.assistant("x")),
            tools=[billing_tool],
            delegates=[billing],
        )
