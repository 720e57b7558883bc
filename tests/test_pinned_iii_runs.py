"""Run behaviours a planted bug once slipped past (issue 29, "Tests that were missing"):
``Retry.delay``'s exponent, the message count a result leaves to its run's history when
the agent has instructions, a fallback whose durable attempt times out, cancelling only a
child run, a delegate given another conversation's history, and a handoff target's deps."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import timedelta
from typing import Any

import pytest
from agents import Deps
from delegation_agents import answer, caller_agent, calls, results_of
from runners import Runner
from temporalio import activity
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.worker import Worker
from test_conversation import serve
from test_durable import completed_payload
from test_fallback_durable import model_activities
from waiting import eventually

from golem import Agent, Message, Retry, RunContext, ToolCall
from golem.client import DurableAgent
from golem.models import FallbackModel, FunctionModel, ModelHTTPError, ModelResponse
from golem.worker import GolemPlugin

# -- Retry.delay ---------------------------------------------------------------------------


def test_retry_delay_is_the_initial_interval_times_backoff_to_the_attempt_less_one() -> None:
    policy = Retry(max_attempts=9, initial_interval=0.5, backoff=3.0, max_interval=100.0)
    assert [policy.delay(n, None) for n in range(1, 6)] == [0.5, 1.5, 4.5, 13.5, 40.5]
    assert policy.delay(6, None) == 100.0  # 121.5, capped
    assert policy.delay(3, 7.0) == 7.0  # a provider's Retry-After replaces it
    assert [policy.wait_after(n, ModelHTTPError(503, "down")) for n in (1, 2, 9)] == [
        0.5,
        1.5,
        None,  # the last attempt: no wait, the tries end
    ]


async def test_in_process_a_model_is_retried_after_the_policys_waits_in_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def recorded(delay: float, *args: Any) -> Any:
        waits.append(delay)
        return await real_sleep(0)

    def flaky(messages: list[Message], tools: Any) -> Message:
        if len(waits) < 3:
            raise ModelHTTPError(503, "down")
        return Message.assistant("up")

    model = FunctionModel(flaky)
    agent: Agent[Any, str] = Agent(
        model, name="backing-off", model_retry=Retry(max_attempts=4, initial_interval=2, backoff=5)
    )
    monkeypatch.setattr("golem.local.asyncio.sleep", recorded)
    result = await agent.run("go")
    assert result.output == "up"
    assert waits == [2.0, 10.0, 50.0]


# -- the message count a result leaves to its history --------------------------------------


def looked_up(name: str, **options: Any) -> Agent[Any, str]:
    """Calls ``lookup`` twice, one turn each, then answers."""

    def model(messages: list[Message], tools: Any) -> Message:
        done = [m for m in messages if m.role == "tool"]
        if len(done) < 2:
            return Message.assistant("", [ToolCall(id=f"c{len(done)}", name="lookup", args="{}")])
        return Message.assistant("found")

    agent: Agent[Any, str] = Agent(FunctionModel(model), name=name, **options)

    @agent.tool
    def lookup() -> str:
        """Look it up."""
        return "it"

    return agent


@pytest.mark.parametrize(
    "options",
    [{}, {"instructions": "Be brief."}, {"instructions_fn": lambda ctx: "Be kind."}],
    ids=["none", "static", "function"],
)
async def test_a_result_leaves_every_message_but_the_answer_to_its_history_with_instructions(
    temporal_client: Client, options: dict[str, Any]
) -> None:
    agent = looked_up(f"logged-{uuid.uuid4().hex[:6]}", **options)
    async with serve(temporal_client, agent) as tq:
        result = await DurableAgent(temporal_client, agent, task_queue=tq).run("find it")
    messages = json.loads(await completed_payload(temporal_client, result.run_id))["messages"]
    # The last model request held the five messages before the answer (instructions aside).
    assert (messages["kind"], messages.get("count")) == ("history", 5)
    assert [m["content"] for m in messages["added"]["messages"]] == ["found"]
    assert [m.role for m in result.messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert result.output == "found"


# -- a fallback whose durable attempt times out --------------------------------------------


async def test_a_fallbacks_durable_attempt_that_times_out_moves_on_to_the_backup(
    temporal_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    released = asyncio.Event()

    async def silent(messages: list[Message], tools: Any) -> Message:
        await released.wait()  # never answers while the test runs
        return Message.assistant("too late")

    primary = FunctionModel(silent, model_name="silent")
    backup = FunctionModel(lambda m, t: Message.assistant("the backup answered"), model_name="b")
    once = Retry(max_attempts=1)
    agent: Agent[Any, str] = Agent(
        FallbackModel(primary, backup, retry=[once, once]), name="fb-timeout"
    )
    # No heartbeat reaches the server, so the primary's attempt times out as a dead worker's.
    monkeypatch.setattr(activity, "heartbeat", lambda *details: None)
    task_queue = f"fb-timeout-{uuid.uuid4().hex[:10]}"
    plugin = GolemPlugin(agent, heartbeat_timeout=timedelta(seconds=1))
    try:
        async with Worker(temporal_client, task_queue=task_queue, plugins=[plugin]):
            durable = DurableAgent(temporal_client, agent, task_queue=task_queue)
            result = await asyncio.wait_for(durable.run("go"), 60)
    finally:
        released.set()
    assert result.output == "the backup answered" and result.model == "b"
    assert len(primary.requests) == 1
    assert await model_activities(temporal_client, result.run_id) == [
        ("model: silent (turn 1)", 1),
        ("model: b (turn 1)", 1),
    ]


# -- cancelling only a child run -----------------------------------------------------------


async def test_cancelling_only_a_child_run_is_its_callers_failed_result_and_the_caller_goes_on(
    temporal_client: Client,
) -> None:
    children: list[str] = []
    worker = caller_agent("hanging-worker", lambda p: calls(("w1", "hang", {})))

    @worker.tool
    async def hang(ctx: RunContext[Any]) -> str:
        """Work until cancelled."""
        children.append(ctx.run_id)
        await asyncio.Event().wait()
        return ""

    boss = caller_agent(
        "boss", lambda p: calls(("b1", "hanging-worker", {"prompt": "go"})), delegates=[worker]
    )
    async with serve(temporal_client, boss) as tq:
        run = await DurableAgent(temporal_client, boss, task_queue=tq).start("go")
        await eventually(lambda: bool(children), what="the child's tool to start", timeout=20)
        [child] = children
        await temporal_client.get_workflow_handle(child).cancel()
        result = await asyncio.wait_for(run.result(), 30)
    child_status = (await temporal_client.get_workflow_handle(child).describe()).status
    assert child_status == WorkflowExecutionStatus.CANCELED
    assert result.sub_runs == [child]
    [failed] = results_of(result.messages)
    assert failed.failed and failed.tool_name == "hanging-worker"
    assert failed.content.startswith(f"hanging-worker (run {child}) failed at stage canceled: ")
    assert result.output == f"FAILED {failed.content}"  # the caller answered, not cancelled


# -- a delegate given another conversation's history ---------------------------------------

ELSEWHERE = "0190f1d8-0000-7000-8000-00000000c0de"


async def test_a_delegate_given_another_conversations_history_runs_in_that_conversation(
    runner: Runner,
) -> None:
    def billing_model(messages: list[Message], tools: Any) -> ModelResponse:
        return answer(f"billing saw {[m.content for m in messages]}")

    billing: Agent[Any, str] = Agent(FunctionModel(billing_model), name="billing-elsewhere")
    earlier = [
        Message.user("refund order 7").stamped("earlier-run", ELSEWHERE),
        Message.assistant("refunded").stamped("earlier-run", ELSEWHERE),
    ]
    boss = caller_agent("boss-elsewhere", lambda p: calls(("b1", "ask", {})))

    @boss.tool
    async def ask(ctx: RunContext[Any]) -> str:
        """Ask billing, on the other conversation's history."""
        child = await ctx.delegate(billing, "and order 8?", history=earlier)
        return json.dumps(
            {
                "conversation": child.conversation_id,
                "stamps": [(m.run_id, m.conversation_id) for m in child.messages],
                "run": child.run_id,
                "output": child.output,
            }
        )

    result = await runner(boss, "go", serving=[billing])

    seen = json.loads(results_of(result.messages)[0].content)
    [child] = result.sub_runs
    assert seen["conversation"] == ELSEWHERE != result.conversation_id
    assert seen["run"] == child
    assert seen["stamps"] == [
        ["earlier-run", ELSEWHERE],
        ["earlier-run", ELSEWHERE],
        [child, ELSEWHERE],
        [child, ELSEWHERE],
    ]
    assert seen["output"] == "billing saw ['refund order 7', 'refunded', 'and order 8?']"
    assert {m.conversation_id for m in result.messages} == {result.conversation_id}


# -- a handoff target's deps ---------------------------------------------------------------


async def test_a_handoff_target_runs_with_the_callers_deps(runner: Runner) -> None:
    seen: list[str] = []

    def billing_model(messages: list[Message], tools: Any) -> ModelResponse:
        if results_of(messages) and messages[-1].tool_name == "customer":
            return answer(f"billing for {messages[-1].content}")
        return calls(("k1", "customer", {}))

    def instructions(ctx: RunContext[Deps]) -> str:
        seen.append(f"instructions for {ctx.deps.name}")
        return "Bill."

    billing: Agent[Deps, str] = Agent(
        FunctionModel(billing_model),
        name="billing-deps",
        deps_type=Deps,
        instructions_fn=instructions,
    )

    @billing.tool
    def customer(ctx: RunContext[Deps]) -> str:
        """Who is served."""
        seen.append(f"tool for {ctx.deps.name}")
        return ctx.deps.name

    triage: Agent[Deps, str] = Agent(
        FunctionModel(lambda m, t: calls(("h1", "transfer_to_billing-deps", {}))),
        name="triage-deps",
        deps_type=Deps,
        handoffs=[billing],
    )

    result = await runner(triage, "bill me", deps=Deps(name="Grace"))

    assert result.agent == "billing-deps"
    assert result.output == "billing for Grace"
    assert seen == ["instructions for Grace", "tool for Grace"]
