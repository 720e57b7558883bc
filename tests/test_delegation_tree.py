"""What a run reports of its tree, without a server: the tree fields round-trip through
golem's converters as the client decodes them, a budget never lets a delegate spend past
any caller's limits, and in process a nested run cannot wait for a person, nor outlive
its caller."""

from __future__ import annotations

import asyncio
from typing import Any

from delegation_agents import caller_agent, calls, refund_agent, results_of, usage
from hypothesis import given
from hypothesis import strategies as st
from test_outcome import HISTORY, RUN, added, raw, roundtrip_failure, sources

from golem import Agent, Message, RunContext, RunError
from golem.messages import ToolCall
from golem.models import FunctionModel
from golem.results import PartialResult, Result
from golem.usage import Budget, Spent, UsageLimits
from golem.wire.run_history import decode_result
from golem.workflows.report import Reporter

TREE = Spent(usage=usage(30, 12), requests=3, tool_calls=1)


async def test_a_results_tree_round_trips_through_the_wire() -> None:
    messages = [*HISTORY, *added(1)]
    sent = Result(
        output="ok",
        messages=messages,
        usage=usage(10, 5),
        run_id=RUN,
        conversation_id="conv",
        requests=2,
        agent="billing",
        sub_runs=["child-1", "child-2"],
        descendants=TREE,
    )
    back = await decode_result(raw(Reporter(HISTORY, True).completed(sent, "ok")), sources(HISTORY))
    assert back == sent
    assert back.total_usage == usage(40, 17)


async def test_a_paused_trees_pending_calls_name_the_runs_that_wait() -> None:
    own, below = ToolCall(id="a", name="pay", args="{}"), ToolCall(id="b", name="refund")
    messages = [*HISTORY, Message.assistant("", [own]).stamped(RUN, "conv")]
    sent = Result(
        output=None,
        messages=messages,
        usage=usage(1, 1),
        run_id=RUN,
        conversation_id="conv",
        pending_approvals=[own, below],
        pending_runs={"b": "child-1"},
        sub_runs=["child-1"],
    )
    assert sent.pending_runs == {"a": RUN, "b": "child-1"}
    paused = Reporter(HISTORY, True).paused(sent)
    assert paused.pending_runs == {"b": "child-1"}  # the wire names only the others
    assert await decode_result(raw(paused), sources(HISTORY)) == sent


async def test_a_failed_runs_evidence_keeps_what_its_children_spent() -> None:
    partial = PartialResult(
        messages=[*HISTORY, *added(1)],
        usage=usage(3, 3),
        requests=1,
        tool_calls=1,
        run_id=RUN,
        conversation_id="conv",
        sub_runs=["child-1"],
        descendants=TREE,
    )
    back, _ = await roundtrip_failure(RunError("tool", "it broke", partial), HISTORY)
    assert isinstance(back, RunError) and back.partial == partial
    assert back.partial.spent == Spent(usage=usage(33, 15), requests=4, tool_calls=2)


limits = st.builds(
    UsageLimits,
    request_limit=st.none() | st.integers(0, 50),
    total_tokens_limit=st.none() | st.integers(0, 10_000),
    tool_calls_limit=st.none() | st.integers(0, 50),
)
spends = st.builds(
    Spent,
    usage=st.builds(usage, st.integers(0, 5_000), st.integers(0, 5_000)),
    requests=st.integers(0, 60),
    tool_calls=st.integers(0, 60),
)


@given(st.lists(st.tuples(limits, spends), min_size=1, max_size=4))
def test_a_budget_never_lets_a_delegate_past_any_callers_limits(
    chain: list[tuple[UsageLimits, Spent]],
) -> None:
    """Each caller down a chain gives its child what its limits and its own budget leave."""
    budget: Budget | None = None
    for caller_limits, spent in chain:
        budget = Budget.of(caller_limits, spent, budget)
        for limit, used, left in (
            (caller_limits.request_limit, spent.requests, budget.requests),
            (caller_limits.total_tokens_limit, spent.usage.total_tokens, budget.total_tokens),
            (caller_limits.tool_calls_limit, spent.tool_calls, budget.tool_calls),
        ):
            if limit is not None:
                assert left is not None and 0 <= left <= max(limit - used, 0)
    assert budget is not None
    asked = Spent(requests=budget.requests) if budget.requests is not None else Spent()
    assert (budget.before_request(asked) != "") == (budget.requests is not None)


async def test_in_process_a_delegate_that_waits_for_approval_is_a_failed_result() -> None:
    refunds: list[int] = []
    triage = caller_agent(
        "triage",
        lambda p: calls(("c1", "billing", {"prompt": "refund"})),
        delegates=[refund_agent(refunds)],
    )
    result = await triage.run("help")
    [tool] = results_of(result.messages)
    [child] = result.sub_runs
    assert tool.failed and refunds == []
    assert tool.content == (
        f"billing (run {child}) stopped to wait for approval of refund (billing-r1); "
        "in process a delegated run cannot wait for a person"
    )


async def test_in_process_cancelling_the_caller_cancels_the_nested_run() -> None:
    started, stopped = asyncio.Event(), asyncio.Event()

    async def hang(messages: list[Message], tools: Any) -> Message:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()
        raise AssertionError("unreachable")

    worker = Agent(FunctionModel(hang), name="worker")
    boss = caller_agent(
        "boss", lambda p: calls(("b1", "worker", {"prompt": "go"})), delegates=[worker]
    )
    task = asyncio.ensure_future(boss.run("go"))
    await asyncio.wait_for(started.wait(), 10)
    task.cancel()
    try:
        await task
        raise AssertionError("the caller was cancelled")
    except RunError as exc:
        assert exc.stage == "canceled"
    assert stopped.is_set()


def test_ctx_delegate_outside_a_tool_says_where_it_works() -> None:
    ctx: RunContext[None] = RunContext(deps=None, run_id="r", conversation_id="c")
    try:
        ctx.delegate("billing", "hi")
        raise AssertionError("no delegator: it must refuse")
    except RuntimeError as exc:
        assert str(exc) == "ctx.delegate works only inside a tool of a running agent"
