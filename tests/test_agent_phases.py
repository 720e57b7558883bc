"""Each phase of the run loop alone, with a fake executor: the tool batch (what every call
is answered with, whatever happens), preparing the history, a model turn, and finishing
(the checkpoint partial evidence slices)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from agents import NO_SUCH_TOOL, ask, call
from pydantic import BaseModel

from golem.agent import Agent
from golem.history.repair import INTERRUPTED_RESULT, OUTCOME_UNKNOWN_RESULT
from golem.messages import Decision, Message, Part, ToolCall, Usage
from golem.models.base import ModelRequest, ModelResponse, StreamDelta
from golem.models.function import ScriptedModel
from golem.phases import Stop, prepare, turn
from golem.phases.batch import DENIED_RESULT, BatchOutcome, ToolBatch
from golem.phases.finish import CORRECTION, Decoder, partial, strip_fences
from golem.run_state import DeltaSink, RunInput, RunState
from golem.tools import RunContext, ToolOutcome, ToolOutcomeUnknown
from golem.usage import UsageLimits

HANDSHAKE_TIMEOUT = 5.0  # a guard against a deadlock, never a wait for the outcome

Behaviour = Callable[[ToolCall, RunContext[Any]], Awaitable[ToolOutcome]]


class FakeExecutor:
    """Answers tool calls with per-tool behaviours and records what it was asked."""

    def __init__(self, **behaviours: Behaviour) -> None:
        self.behaviours = behaviours
        self.dispatched: list[str] = []
        self.contexts: list[RunContext[Any]] = []
        self.responses: list[ModelResponse | BaseException] = []
        self.ids = 0
        self.decisions: dict[str, bool] | None = None
        """What every wait for approvals answers (``None``: the run pauses)."""
        self.asked: list[list[str]] = []
        self.approval_contexts: list[RunContext[Any]] = []
        self.requests: list[tuple[ModelRequest, RunContext[Any], DeltaSink | None]] = []
        self.deltas: list[StreamDelta] = []
        """What every streamed request sends its ``on_delta`` before answering."""

    def new_id(self) -> str:
        self.ids += 1
        return f"id-{self.ids}"

    async def process_history(self, ctx: RunContext[Any], history: list[Message]) -> list[Message]:
        return history

    async def resolve_instructions(self, ctx: RunContext[Any]) -> str:
        return "dynamic"

    async def request(
        self, request: ModelRequest, ctx: RunContext[Any], on_delta: DeltaSink | None
    ) -> ModelResponse:
        self.requests.append((request, ctx, on_delta))
        if on_delta is not None:
            for delta in self.deltas:
                on_delta(delta)
        answer = self.responses.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    async def await_approvals(
        self, pending: list[ToolCall], ctx: RunContext[Any]
    ) -> dict[str, Decision | None] | None:
        self.asked.append([c.id for c in pending])
        self.approval_contexts.append(ctx)
        if self.decisions is None:
            return None
        # a test writes decisions as True / False, as a person does; the loop gets Decisions
        return {
            k: Decision(approved=v) if isinstance(v, bool) else v for k, v in self.decisions.items()
        }

    async def call_tool(self, call: ToolCall, ctx: RunContext[Any]) -> ToolOutcome:
        self.dispatched.append(call.id)
        self.contexts.append(ctx)
        return await self.behaviours[call.name](call, ctx)


def ok(text: str) -> Behaviour:
    async def behave(call: ToolCall, ctx: RunContext[Any]) -> ToolOutcome:
        return ToolOutcome(content=text)

    return behave


def raising(error: Exception) -> Behaviour:
    async def behave(call: ToolCall, ctx: RunContext[Any]) -> ToolOutcome:
        raise error

    return behave


def outcome(result: ToolOutcome) -> Behaviour:
    async def behave(call: ToolCall, ctx: RunContext[Any]) -> ToolOutcome:
        return result

    return behave


def agent_with(
    *names: str, sequential: bool = False, max_retries: int = 1, **options: Any
) -> Agent[Any, Any]:
    agent: Agent[Any, Any] = Agent(ScriptedModel([]), **options)
    for name in names:

        def tool(n: int = 0) -> str:
            return ""

        agent.tool(name=name, sequential=sequential, max_retries=max_retries)(tool)
    return agent


def batch(agent: Agent[Any, Any], executor: FakeExecutor) -> ToolBatch:
    def context(call: ToolCall, retries: Any, args: BaseModel | None) -> RunContext[Any]:
        return RunContext(
            deps=None,
            run_id="r",
            conversation_id="c",
            retries=dict(retries),
            tool_call_id=call.id,
            tool_name=call.name,
            tool_args=args,
        )

    return ToolBatch(agent, executor, context)


def answers(result: BatchOutcome) -> list[tuple[str, str, bool]]:
    return [(m.tool_call_id, m.content, m.failed) for m in result.messages]


async def run(
    agent: Agent[Any, Any], executor: FakeExecutor, *calls: ToolCall, **kw: Any
) -> BatchOutcome:
    kw.setdefault("retries", {})
    kw.setdefault("tool_calls", 0)
    return await batch(agent, executor).run(calls, **kw)


# -- a tool batch ------------------------------------------------------------------------------


async def test_a_batch_answers_every_call_in_call_order() -> None:
    executor = FakeExecutor(a=ok("A"), b=ok("B"))

    result = await run(agent_with("a", "b"), executor, call("c1", "b"), call("c2", "a"))

    assert answers(result) == [("c1", "B", False), ("c2", "A", False)]
    assert (result.executed, result.stop) == (1 + 1, None)


async def test_the_executor_gets_the_validated_args_so_they_are_validated_once() -> None:
    executor = FakeExecutor(a=ok("A"))
    agent = agent_with("a")

    await run(agent, executor, call("c1", "a", n=7))

    args = executor.contexts[0].tool_args
    assert isinstance(args, agent.tools["a"].args_model)
    assert args.model_dump() == {"n": 7}

    executor.contexts.clear()  # and when calls run concurrently
    await run(agent, executor, call("c1", "a", n=1), call("c2", "a", n=2))
    assert [ctx.tool_args.model_dump() for ctx in executor.contexts if ctx.tool_args] == [
        {"n": 1},
        {"n": 2},
    ]


async def test_a_raising_call_gets_a_failed_result_and_its_running_sibling_is_awaited() -> None:
    release = asyncio.Event()

    async def slow(call: ToolCall, ctx: RunContext[Any]) -> ToolOutcome:
        await asyncio.wait_for(release.wait(), HANDSHAKE_TIMEOUT)
        return ToolOutcome(content="slow done")

    async def boom(call: ToolCall, ctx: RunContext[Any]) -> ToolOutcome:
        release.set()  # the sibling finishes only after this call has failed
        raise RuntimeError("disk on fire")

    executor = FakeExecutor(slow=slow, boom=boom)

    result = await run(agent_with("slow", "boom"), executor, call("c1", "slow"), call("c2", "boom"))

    assert answers(result) == [
        ("c1", "slow done", False),
        ("c2", "the tool failed: RuntimeError: disk on fire", True),
    ]
    assert result.stop is not None and result.stop.stage == "tool"
    assert "tool 'boom' (call c2) failed: RuntimeError: disk on fire" in result.stop.message
    assert isinstance(result.cause, RuntimeError)
    assert result.executed == 1  # the raising call is not a completed execution


async def test_an_outcome_unknown_call_is_closed_as_such_never_as_interrupted() -> None:
    error = ToolOutcomeUnknown("the worker died mid-call")
    executor = FakeExecutor(pay=raising(error), log=ok("logged"))

    result = await run(agent_with("pay", "log"), executor, call("c1", "pay"), call("c2", "log"))

    assert answers(result) == [("c1", OUTCOME_UNKNOWN_RESULT, False), ("c2", "logged", False)]
    assert result.results[0].closed
    assert result.stop is not None and result.stop.stage == "tool"
    assert "the worker died mid-call" in result.stop.message
    assert result.cause is error  # the run's error is raised from it


async def test_a_sequential_batch_never_dispatches_the_calls_after_a_failure() -> None:
    executor = FakeExecutor(a=raising(RuntimeError("no")), b=ok("B"))
    agent = agent_with("a", "b", sequential=True)

    result = await run(agent, executor, call("c1", "a"), call("c2", "b"), call("c3", "b"))

    assert executor.dispatched == ["c1"]
    assert answers(result)[1:] == [("c2", INTERRUPTED_RESULT, False)] * 1 + [
        ("c3", INTERRUPTED_RESULT, False)
    ]


async def test_a_deliberate_cancel_cancels_running_siblings_and_closes_them_as_interrupted() -> (
    None
):
    started, never = asyncio.Event(), asyncio.Event()

    async def hang(call: ToolCall, ctx: RunContext[Any]) -> ToolOutcome:
        started.set()
        await never.wait()
        return ToolOutcome(content="unreachable")

    async def stop(call: ToolCall, ctx: RunContext[Any]) -> ToolOutcome:
        await asyncio.wait_for(started.wait(), HANDSHAKE_TIMEOUT)
        return ToolOutcome(status="canceled", content="enough")

    executor = FakeExecutor(hang=hang, stop=stop, done=ok("done"))
    agent = agent_with("hang", "stop", "done")

    result = await run(agent, executor, call("c1", "done"), call("c2", "hang"), call("c3", "stop"))

    assert answers(result) == [
        ("c1", "done", False),
        ("c2", INTERRUPTED_RESULT, False),
        ("c3", INTERRUPTED_RESULT, False),
    ]
    assert result.stop is not None and result.stop.stage == "canceled"
    assert "enough" in result.stop.message


async def test_the_callers_cancel_keeps_finished_results_and_marks_running_ones_unknown() -> None:
    started, never = asyncio.Event(), asyncio.Event()

    async def hang(call: ToolCall, ctx: RunContext[Any]) -> ToolOutcome:
        started.set()
        await never.wait()
        return ToolOutcome(content="unreachable")

    executor = FakeExecutor(hang=hang, done=ok("done"))
    task = asyncio.ensure_future(
        run(agent_with("hang", "done"), executor, call("c1", "done"), call("c2", "hang"))
    )
    await asyncio.wait_for(started.wait(), HANDSHAKE_TIMEOUT)
    task.cancel()

    result = await task

    assert answers(result) == [("c1", "done", False), ("c2", OUTCOME_UNKNOWN_RESULT, False)]
    assert result.stop is not None and result.stop.stage == "canceled"
    assert result.stop.message == "the run was cancelled by its caller"
    assert isinstance(result.cause, asyncio.CancelledError)
    assert [r.call.id for r in result.results] == ["c1", "c2"]  # a closed one names its call


async def test_bad_args_and_unknown_tools_are_answered_not_executed_and_count_retries() -> None:
    executor = FakeExecutor(a=ok("A"))

    result = await run(
        agent_with("a", max_retries=2),
        executor,
        call("c1", "a", n="seven"),
        call("c2", "nope"),
        ToolCall(id="c3", name="a", args='{"n": NaN}'),
        call("c4", "a", n=1),
    )

    assert executor.dispatched == ["c4"]
    assert result.executed == 1
    contents = [m.content for m in result.messages]
    assert "n: Input should be a valid integer" in contents[0]
    assert contents[1] == NO_SUCH_TOOL.format(name="nope", tools="a")
    assert "not valid JSON (NaN is not JSON)" in contents[2]
    assert [m.failed for m in result.messages] == [True, True, True, False]
    assert dict(result.retries) == {"a": 2, "nope": 1}
    assert result.stop is None


async def test_past_the_retry_limit_later_calls_are_closed_as_never_started() -> None:
    executor = FakeExecutor(a=ok("A"))

    result = await run(
        agent_with("a"), executor, call("c1", "a", n="x"), call("c2", "a"), retries={"a": 1}
    )

    assert executor.dispatched == []
    assert answers(result)[1] == ("c2", INTERRUPTED_RESULT, False)
    assert result.stop is not None
    assert "failed 2 times, over the limit of 1" in result.stop.message


async def test_a_model_retry_outcome_is_a_failed_result_counted_against_the_tool() -> None:
    executor = FakeExecutor(a=outcome(ToolOutcome(status="retry", content="use n > 0")))
    agent = agent_with("a")

    first = await run(agent, executor, call("c1", "a"))
    second = await run(agent, executor, call("c2", "a"), retries=first.retries)

    assert answers(first) == [("c1", "use n > 0", True)]
    assert (first.stop, dict(first.retries)) == (None, {"a": 1})
    assert second.stop is not None and second.stop.stage == "tool"
    assert "asked the model to retry 2 times, over the limit of 1: use n > 0" in (
        second.stop.message
    )


async def test_the_tool_calls_limit_closes_the_batch_before_anything_runs() -> None:
    executor = FakeExecutor(a=ok("A"))
    agent = agent_with("a", usage_limits=UsageLimits(tool_calls_limit=2))

    result = await run(agent, executor, call("c1", "a"), call("c2", "a"), tool_calls=1)

    assert executor.dispatched == []
    assert answers(result) == [("c1", INTERRUPTED_RESULT, False), ("c2", INTERRUPTED_RESULT, False)]
    assert result.stop is not None and result.stop.stage == "usage"


async def test_denied_calls_are_answered_without_running() -> None:
    executor = FakeExecutor(a=ok("A"))

    result = await run(
        agent_with("a"),
        executor,
        call("c1", "a"),
        call("c2", "a"),
        decisions={"c1": Decision(approved=False)},
    )

    assert answers(result) == [("c1", DENIED_RESULT, True), ("c2", "A", False)]
    assert (executor.dispatched, result.executed) == (["c2"], 1)


async def test_a_batch_outcome_is_immutable() -> None:
    result = await run(agent_with("a"), FakeExecutor(a=ok("A")), call("c1", "a"))

    with pytest.raises(dataclasses.FrozenInstanceError):
        result.executed = 2  # type: ignore[misc]
    with pytest.raises(TypeError):
        result.retries["a"] = 1  # type: ignore[index]


# -- preparing the history ---------------------------------------------------------------------


def test_identity_mints_only_what_the_inputs_do_not_name() -> None:
    executor = FakeExecutor()
    history = [Message.user("hi").stamped("old-run", "conv-1")]

    assert prepare.identity(RunInput(history=history), executor) == ("id-1", "conv-1")
    assert prepare.identity(RunInput(run_id="r", conversation_id="c"), executor) == ("r", "c")


async def test_an_invalid_history_stops_at_stage_history() -> None:
    history = [
        Message.user("hi"),
        Message.model_construct(role="tool", tool_calls=[call("c", "a")]),
    ]

    with pytest.raises(Stop) as caught:
        await prepare.process_history(agent_with(), FakeExecutor(), _ctx(), history)

    assert caught.value.stage == "history"


def test_approvals_split_decided_denied_and_still_waiting() -> None:
    agent = agent_with("free")
    agent.tool(name="risky", requires_approval=True)(lambda: "")
    history = [
        Message.user("go"),
        ask(call("c1", "risky"), call("c2", "risky"), call("c3", "free")),
    ]

    def waits(c: ToolCall) -> bool:
        return c.name == "risky"

    plan = prepare.plan_approvals(agent, history, {"c1": False}, waits)

    assert [c.id for c in plan.decided] == ["c1", "c3"]
    assert {k: d.approved for k, d in plan.decisions.items()} == {"c1": False}
    assert [c.id for c in plan.still] == ["c2"]
    with pytest.raises(Stop, match="not pending"):
        prepare.plan_approvals(agent, history, {"c9": True}, waits)


def test_repair_closes_unanswered_calls_and_drops_system_messages() -> None:
    history = [Message.system("old rules"), Message.user("go"), ask(call("c1", "a"))]

    assert prepare.repaired(history) == [
        Message.user("go"),
        ask(call("c1", "a")),
        Message.tool("c1", "a", INTERRUPTED_RESULT),
    ]


async def test_instructions_join_static_and_dynamic_text() -> None:
    agent = agent_with(instructions="static", instructions_fn=lambda ctx: "")

    assert await prepare.instructions(agent, FakeExecutor(), _ctx()) == "static\n\ndynamic"


# -- a model turn ------------------------------------------------------------------------------


async def test_a_model_raising_system_exit_stops_at_stage_model() -> None:
    executor = FakeExecutor()
    executor.responses = [SystemExit("gone")]
    request = ModelRequest(messages=[Message.user("go")])

    with pytest.raises(Stop) as caught:
        await turn.request(executor, request, _ctx(), None, 1)

    assert caught.value.stage == "model"
    assert "model request 1 raised SystemExit: gone" in caught.value.message


def test_limits_are_checked_before_a_request() -> None:
    agent = agent_with(max_iterations=2, usage_limits=UsageLimits(request_limit=3))
    state = RunState(turn=1, requests=3)

    with pytest.raises(Stop) as caught:
        turn.check_limits(agent, state, turn.build_request(agent, state))
    assert caught.value.stage == "usage"

    with pytest.raises(Stop) as caught:
        turn.check_limits(agent, RunState(turn=2), turn.build_request(agent, state))
    assert caught.value.stage == "loop"


# -- finishing: the checkpoint is the evidence --------------------------------------------------


def test_partial_is_none_until_a_turn_or_a_tool_result_completed() -> None:
    state = RunState(messages=[Message.user("go")], requests=1)
    state.commit()

    assert partial(state) is None


def test_partial_keeps_an_approved_result_even_before_any_model_turn() -> None:
    state = RunState(messages=[Message.user("go"), ask(call("c1", "a"))])
    state.add(Message.tool("c1", "a", "done"))
    state.tool_calls = state.tool_results = 1
    state.commit()

    evidence = partial(state)

    assert evidence is not None
    assert evidence.messages[-1].content == "done"
    assert evidence.tool_calls == 1


def test_partial_slices_at_the_checkpoint_not_at_the_newest_message() -> None:
    state = RunState(messages=[Message.user("go")])
    state.add(Message.assistant("not json"))
    state.turn, state.usage = 1, Usage(input_tokens=3)
    state.commit()
    state.add(Message.user(CORRECTION.format(problems="answer: invalid")))
    state.usage = Usage(input_tokens=99)  # not committed

    evidence = partial(state)

    assert evidence is not None
    assert [m.role for m in evidence.messages] == ["user", "assistant"]
    assert evidence.usage == Usage(input_tokens=3)


def test_the_decoder_asks_for_corrections_then_stops_at_stage_decode() -> None:
    decoder = Decoder(agent_with(output_type=int).output_adapter, retries=1)

    assert decoder.decode("```json\n42\n```") == (True, 42)
    done, correction = decoder.decode("forty-two")
    assert not done and correction.role == "user"
    with pytest.raises(Stop) as caught:
        decoder.decode("forty-two")
    assert caught.value.stage == "decode"


def _ctx() -> RunContext[Any]:
    return RunContext(deps=None, run_id="r", conversation_id="c")


async def test_an_unknown_tool_of_an_agent_without_tools_is_answered_so() -> None:
    result = await run(agent_with(), FakeExecutor(), call("c1", "nope"))

    assert result.messages[0].content.endswith("the tools you may call are: none")


async def test_a_tool_results_parts_reach_its_message() -> None:
    picture = Part(kind="image", data="aGk=", media_type="image/png")
    executor = FakeExecutor(a=outcome(ToolOutcome(content="see", parts=[picture])))

    result = await run(agent_with("a"), executor, call("c1", "a"))

    assert result.messages[0].parts == [picture]


async def test_a_call_whose_tool_swallows_a_deliberate_cancel_keeps_its_result() -> None:
    """Siblings cancelled by a deliberate stop but finishing anyway are kept, in call order."""
    started = {"c2": asyncio.Event(), "c3": asyncio.Event()}

    async def stubborn(call: ToolCall, ctx: RunContext[Any]) -> ToolOutcome:
        started[call.id].set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            return ToolOutcome(content=f"{call.id} finished anyway")
        return ToolOutcome(content="unreachable")

    async def stop(call: ToolCall, ctx: RunContext[Any]) -> ToolOutcome:
        for event in started.values():
            await asyncio.wait_for(event.wait(), HANDSHAKE_TIMEOUT)
        return ToolOutcome(status="canceled", content="enough")

    executor = FakeExecutor(stop=stop, stubborn=stubborn)
    calls = (call("c1", "stop"), call("c2", "stubborn"), call("c3", "stubborn"))

    result = await run(agent_with("stop", "stubborn"), executor, *calls)

    assert answers(result) == [
        ("c1", INTERRUPTED_RESULT, False),
        ("c2", "c2 finished anyway", False),
        ("c3", "c3 finished anyway", False),
    ]
    assert result.executed == 3


@pytest.mark.parametrize(
    ("text", "inner"),
    [
        ("```json\n42\n```", "42\n"),
        ("```\n42\n```", "42\n"),
        ("```42```", "42"),
        ("```42", "```42"),
        ("42```", "42```"),
        (" 42 ", "42"),
    ],
)
def test_strip_fences_keeps_only_what_a_whole_answer_fence_holds(text: str, inner: str) -> None:
    assert strip_fences(text) == inner


def test_a_conversation_id_nobody_names_is_empty() -> None:
    assert prepare.resolve_conversation_id([Message.user("hi")], None) == ""
