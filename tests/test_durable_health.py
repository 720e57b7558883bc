"""A worker fleet that stays healthy whatever a tool, a model, a user function or a client
does: user code that exits fails only its call, bad input fails the run (never a workflow
task retried forever), and client mistakes are golem's own clear errors."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker
from temporalio.workflow import NondeterminismError

from golem import Message, Part, ToolCall
from golem.agent import Agent
from golem.client import DurableAgent, DurableRun, RunIdInUseError
from golem.models import FunctionModel
from golem.results import RunError
from golem.run_state import RunInput
from golem.tools import RunContext
from golem.wire import AgentRunInput
from golem.worker import GolemPlugin
from golem.workflows.agent_run import FAILURE_TYPES


def calls_then_answers(tool: str, args: str = "{}") -> FunctionModel:
    def answer(messages: list[Message], tools: Any) -> Message:
        results = [m for m in messages if m.role == "tool"]
        if not results:
            return Message.assistant("", [ToolCall(id="call-1", name=tool, args=args)])
        return Message.assistant(f"done: {results[-1].content}")

    return FunctionModel(answer, model_name="health-model")


exits = Agent(calls_then_answers("leave"), name="exits")


@exits.tool
def leave() -> str:
    """Leave the process (a sync tool)."""
    raise SystemExit("bye")


interrupts = Agent(calls_then_answers("interrupt"), name="interrupts")


@interrupts.tool
async def interrupt() -> str:
    """Raise KeyboardInterrupt (an async tool)."""
    raise KeyboardInterrupt


cancels_itself = Agent(calls_then_answers("give_up"), name="cancels_itself")


@cancels_itself.tool
async def give_up() -> str:
    """Raise CancelledError without anyone cancelling it."""
    raise asyncio.CancelledError


def _exiting_model(messages: list[Message], tools: Any) -> Message:
    raise SystemExit("the model left")


model_exits = Agent(FunctionModel(_exiting_model, model_name="exiting-model"), name="model_exits")
plain = Agent(calls_then_answers("echo", '{"text": "hi"}'), name="plain")


@plain.tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


def _bogus_processor(history: list[Message]) -> list[Message]:
    return [*history, Message.model_construct(role="bogus", content="x")]


bad_processor = Agent(
    calls_then_answers("echo"), name="bad_processor", history_processor=_bogus_processor
)


def _none_processor(history: list[Message]) -> Any:
    return None


none_processor = Agent(
    calls_then_answers("echo"), name="none_processor", history_processor=_none_processor
)


def _exiting_instructions(ctx: RunContext[Any]) -> str:
    raise SystemExit("no instructions today")


exiting_instructions = Agent(
    calls_then_answers("echo"), name="exiting_instructions", instructions_fn=_exiting_instructions
)


@dataclass
class Account:
    owner: str
    limit: int


typed = Agent(calls_then_answers("echo"), name="typed", deps_type=Account)

slow_sync = Agent(calls_then_answers("crunch"), name="slow_sync")
CRUNCHES: list[str] = []


@slow_sync.tool
def crunch() -> str:
    """A blocking computation longer than the heartbeat timeout."""
    CRUNCHES.append("crunch")
    time.sleep(2.5)
    return "crunched"


AGENTS = [
    slow_sync,
    exits,
    interrupts,
    cancels_itself,
    model_exits,
    plain,
    bad_processor,
    none_processor,
    exiting_instructions,
    typed,
]


@asynccontextmanager
async def serve(client: Client, heartbeat_timeout: float = 5) -> AsyncIterator[str]:
    task_queue = f"health-{uuid.uuid4().hex[:12]}"
    plugin = GolemPlugin(*AGENTS, heartbeat_timeout=timedelta(seconds=heartbeat_timeout))
    async with Worker(client, task_queue=task_queue, plugins=[plugin]):
        yield task_queue


async def failure(durable: DurableAgent[Any], prompt: str = "go") -> RunError:
    with pytest.raises(RunError) as caught:
        async with asyncio.timeout(30):
            await durable.run(prompt)
    return caught.value


# -- the worker stays healthy ------------------------------------------------------------


@pytest.mark.parametrize(
    ("agent", "stage", "culprit"),
    [
        (exits, "tool", "SystemExit"),
        (interrupts, "tool", "KeyboardInterrupt"),
        (cancels_itself, "tool", "CancelledError"),
        (model_exits, "model", "SystemExit"),
        (exiting_instructions, "instructions", "SystemExit"),
    ],
    ids=lambda v: v.name if isinstance(v, Agent) else None,
)
async def test_base_exception_fails_its_call_and_the_worker_keeps_serving(
    temporal_client: Client, agent: Agent[Any, Any], stage: str, culprit: str
) -> None:
    async with serve(temporal_client) as tq:
        error = await failure(DurableAgent(temporal_client, agent, task_queue=tq))
        assert error.stage == stage
        assert culprit in str(error)
        after = await DurableAgent(temporal_client, plain, task_queue=tq).run("again")
    assert after.output == "done: hi"


async def test_sync_tool_longer_than_the_heartbeat_timeout_succeeds_once(
    temporal_client: Client,
) -> None:
    CRUNCHES.clear()
    async with serve(temporal_client, heartbeat_timeout=1) as tq:
        result = await DurableAgent(temporal_client, slow_sync, task_queue=tq).run("go")
    assert result.output == "done: crunched"
    assert CRUNCHES == ["crunch"]  # heartbeats kept flowing from the loop: no retry


# -- no workflow-task retry loops ------------------------------------------------------------


async def test_history_processor_returning_malformed_messages_fails_the_run_clearly(
    temporal_client: Client,
) -> None:
    async with serve(temporal_client) as tq:
        error = await failure(DurableAgent(temporal_client, bad_processor, task_queue=tq))
        none = await failure(DurableAgent(temporal_client, none_processor, task_queue=tq))
    assert error.stage == "history"
    assert "_bogus_processor" in str(error) and "role" in str(error)
    assert none.stage == "history"
    assert "_none_processor" in str(error) or "_none_processor" in str(none)
    assert "NoneType" in str(none)


GOOD_RUN: dict[str, Any] = {"prompt": "hi", "run_id": "", "conversation_id": ""}
USER = {"role": "user", "content": "hi"}


def run_with(**fields: Any) -> list[Any]:
    return [{"agent": "plain", "run": {**GOOD_RUN, **fields}}]


# (workflow arguments as a client not built on golem sends them, a text naming the culprit)
CATALOGUE: dict[str, tuple[list[Any], str]] = {
    "bogus role": (run_with(history=[{"role": "bogus"}]), "history.0.role"),
    "missing role": (run_with(history=[{"content": "x"}]), "history.0.role"),
    "history not a list": (run_with(history="oops"), "run.history"),
    "message not an object": (run_with(history=[42]), "history.0"),
    "content not text": (run_with(history=[{"role": "user", "content": 5}]), "content"),
    "tool calls not a list": (
        run_with(history=[USER, {"role": "assistant", "toolCalls": "x"}]),
        "toolCalls",
    ),
    "tool call without name": (
        run_with(history=[USER, {"role": "assistant", "toolCalls": [{"id": "c"}]}]),
        "name",
    ),
    "tool call args not text": (
        run_with(
            history=[USER, {"role": "assistant", "toolCalls": [{"name": "t", "args": {"a": 1}}]}]
        ),
        "args",
    ),
    "part without kind": (run_with(parts=[{"url": "https://x"}]), "parts.0.kind"),
    "part of unknown kind": (
        run_with(history=[{"role": "user", "parts": [{"kind": "hologram", "url": "https://x"}]}]),
        "hologram",
    ),
    "tool calls on a user message": (
        run_with(history=[{"role": "user", "toolCalls": [{"name": "t"}]}]),
        "tool calls are only allowed on assistant",
    ),
    "prompt not text": (run_with(prompt=5), "run.prompt"),
    "approvals not a mapping": (run_with(approvals=[1]), "run.approvals"),
    "approval not a decision": (run_with(approvals={"c": "maybe"}), "approvals.c"),
    "approval of no pending call": (run_with(approvals={"c": True}), "not pending"),
    "run id not text": (run_with(run_id=["x"]), "run.run_id"),
    "conversation id not text": (run_with(conversation_id=3), "run.conversation_id"),
    "thinking not a list": (
        run_with(history=[USER, {"role": "assistant", "thinking": "x"}]),
        "thinking",
    ),
    "no agent": ([{"run": GOOD_RUN}], "agent"),
    "agent not text": ([{"agent": 7, "run": GOOD_RUN}], "agent"),
    "unknown agent": ([{"agent": "nobody", "run": GOOD_RUN}], "nobody"),
    "no run": ([{"agent": "plain"}], "run"),
    "input is text": (["hello"], "AgentRunInput"),
    "input is null": ([None], "AgentRunInput"),
    "no input": ([], "input"),
    "two inputs": ([{"agent": "plain", "run": GOOD_RUN}, {"extra": 1}], "positional argument"),
    "deps of the wrong shape": (
        [{"agent": "typed", "run": {**GOOD_RUN, "deps": {"owner": 1}}}],
        "deps",
    ),
    "lone surrogate": (run_with(prompt="\ud800"), '"prompt":'),
}


@pytest.mark.parametrize("case", sorted(CATALOGUE))
async def test_bad_workflow_input_from_any_client_ends_the_run_naming_the_culprit(
    temporal_client: Client, case: str
) -> None:
    args, culprit = CATALOGUE[case]
    # The plain Temporal client (default converter): no golem checks on the way in.
    plain_client = await Client.connect(temporal_client.service_client.config.target_host)
    async with serve(temporal_client) as tq:
        handle = await plain_client.start_workflow(
            "AgentRunWorkflow", args=args, id=f"bad-{uuid.uuid4().hex}", task_queue=tq
        )
        with pytest.raises(WorkflowFailureError) as caught:
            async with asyncio.timeout(20):
                await handle.result()
        description = await handle.describe()
    assert description.status == WorkflowExecutionStatus.FAILED
    assert culprit in str(caught.value.cause), str(caught.value.cause)


async def test_model_construct_messages_sent_with_golems_converter_fail_the_run(
    temporal_client: Client,
) -> None:
    payload = AgentRunInput.model_construct(
        agent="plain",
        run=RunInput.model_construct(
            prompt="hi", history=[Message.model_construct(role="bogus", content="x")]
        ),
    )
    async with serve(temporal_client) as tq:
        handle = await temporal_client.start_workflow(
            "AgentRunWorkflow", payload, id=f"bad-{uuid.uuid4().hex}", task_queue=tq
        )
        with pytest.raises(WorkflowFailureError) as caught:
            async with asyncio.timeout(20):
                await handle.result()
        # golem's client reads it as a run that failed on its input.
        with pytest.raises(RunError) as read:
            await DurableRun(handle.id, "", handle, []).result()
    assert "history.0.role" in str(caught.value.cause)
    assert read.value.stage == "history"
    assert "history.0.role" in str(read.value)


# -- client errors ----------------------------------------------------------------------------


async def test_reusing_a_run_id_raises_golems_own_error(temporal_client: Client) -> None:
    async with serve(temporal_client) as tq:
        durable = DurableAgent(temporal_client, plain, task_queue=tq)
        first = await durable.run("once")
        with pytest.raises(RunIdInUseError, match=first.run_id):
            await durable.run("twice", run_id=first.run_id)


@pytest.mark.parametrize(
    ("arguments", "culprit"),
    [
        ({"prompt": "hi \ud800"}, "prompt"),
        ({"deps": {"note": "\udfff"}}, "deps"),
        ({"history": [Message.user("\ud800")]}, "history"),
        ({"deps": {"rate": float("nan")}}, "deps"),
        ({"deps": [float("inf")]}, "deps"),
        ({"history": [Message.model_construct(role="bogus")]}, "history message 0 .*role"),
        ({"parts": [Part.model_construct(url="https://x")]}, "parts .*kind"),
    ],
    ids=[
        "surrogate prompt",
        "surrogate deps",
        "surrogate history",
        "nan deps",
        "inf deps",
        "constructed message",
        "constructed part",
    ],
)
async def test_input_that_cannot_be_sent_fails_before_start_naming_the_field(
    temporal_client: Client, arguments: dict[str, Any], culprit: str
) -> None:
    durable = DurableAgent(temporal_client, plain, task_queue=f"never-{uuid.uuid4().hex}")
    run_id = f"unsent-{uuid.uuid4().hex}"
    with pytest.raises(ValueError, match=culprit):
        await durable.start(run_id=run_id, **arguments)
    # Nothing started: Temporal knows no run by that id.
    with pytest.raises(RPCError) as missing:
        await temporal_client.get_workflow_handle(run_id).describe()
    assert missing.value.status == RPCStatusCode.NOT_FOUND


def test_temporal_errors_stay_task_failures_so_a_fixed_worker_can_continue() -> None:
    # Nondeterminism (and the sandbox's restrictions) must not fail runs for good.
    assert not any(issubclass(NondeterminismError, kind) for kind in FAILURE_TYPES)
    assert not any(issubclass(RuntimeError, kind) for kind in FAILURE_TYPES)
