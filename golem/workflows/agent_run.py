"""``AgentRunWorkflow``: one agent run as one workflow, driving the same loop as ``agent.run``.

Model requests and tool calls are activities; ids are minted with ``workflow.uuid7()``
(replay-safe); a user's history processor and instructions function run once, as
activities, so their results are recorded and replay never re-evaluates them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    FailureError,
    TimeoutError,
    TimeoutType,
)

with workflow.unsafe.imports_passed_through():
    from pydantic import TypeAdapter, ValidationError

    from golem.agent import Agent
    from golem.events import RunEvent
    from golem.loop import DeltaSink, RunLoop, RunState
    from golem.messages import Message, ToolCall
    from golem.models.base import ModelRequest, ModelResponse
    from golem.models.fallback import move_on
    from golem.phases import finish
    from golem.results import RunError
    from golem.retry import Retry
    from golem.tools import (
        RunContext,
        ToolOutcome,
        ToolOutcomeUnknown,
        validation_problems,
    )
    from golem.toolsets import Toolset, ToolsetTool
    from golem.workflows import lineage, registry
    from golem.workflows.approvals import CANNOT_PAUSE, ApprovalGate
    from golem.workflows.outcome import (
        FAILURE_MEMO,
        RUN_ERROR,
        AgentRunOutput,
        cancel_memo,
        encode_failure,
        encode_result,
        failure_error,
    )
    from golem.workflows.pages import MessagesPage, MessagesQuery
    from golem.workflows.shipping import REF_BYTES, HistoryBase, Outbox, content_digest, derived
    from golem.workflows.streams import RunStreamHost
    from golem.workflows.types import AgentRunInput, PrepareInput, ToolCallInput

if TYPE_CHECKING:
    from golem.workflows.mcp import RunToolsets

T = TypeVar("T")

__all__ = ["FAILURE_MEMO", "OUTCOME_MEMO", "RUN_ERROR", "AgentRunWorkflow", "TemporalExecutor"]

#: Memo key holding a closed run's outcome, so the UI shows it without a worker.
OUTCOME_MEMO = "golemOutcome"
#: Runs recorded before the outcome memo replay without it.
OUTCOME_PATCH = "golem-outcome-memo"
#: Runs recorded before model calls named their run's activity results by digest.
CONTENT_REFS_PATCH = "golem-content-refs"
#: Runs recorded before approvals waited in the workflow replay as paused-and-returned.
APPROVALS_PATCH = "golem-approvals-wait"
#: The once-per-run activities: their user errors are non-retryable, so only a worker that
#: died mid-call (a timeout) runs them again.
ONCE_PER_OUTCOME = RetryPolicy(maximum_attempts=3)


def _retry_policy(retry: Retry) -> RetryPolicy:
    return RetryPolicy(
        initial_interval=timedelta(seconds=retry.initial_interval),
        backoff_coefficient=retry.backoff,
        maximum_interval=timedelta(seconds=retry.max_interval),
        maximum_attempts=retry.max_attempts,
    )


class ActivityFailed(Exception):
    """An activity failed for good; the message is its innermost cause's, not Temporal's wrapper."""


async def _activity(coro: Awaitable[T]) -> T:
    """Await an activity, turning Temporal's wrappers into the failure that matters."""
    try:
        return await coro
    except ActivityError as exc:
        cause = exc.cause
        if isinstance(cause, CancelledError):
            raise asyncio.CancelledError() from exc  # the run was cancelled: stage "canceled"
        if isinstance(cause, TimeoutError):
            kind = cause.type.name.lower().replace("_", "-") if cause.type else "timeout"
            raise ActivityFailed(
                f"timed out ({kind}): the worker running it stopped answering "
                "or the call took too long"
            ) from exc
        message = cause.message if isinstance(cause, FailureError) else str(exc)
        raise ActivityFailed(message) from exc


def _fallback_verdict(failed: ActivityFailed) -> tuple[bool, str | None]:
    """Whether a model's activity failure moves the request on (the activity asked the
    model's ``fallback_on``; a timed-out last attempt does, as a lost connection would), and
    the model's own error text."""
    cause = failed.__cause__.cause if isinstance(failed.__cause__, ActivityError) else None
    if isinstance(cause, TimeoutError):
        return True, None
    if isinstance(cause, ApplicationError) and cause.details:
        verdict = cause.details[0]
        if isinstance(verdict, dict):
            return bool(verdict.get("fallsOver")), str(verdict.get("error", failed))
    return False, None


class TemporalExecutor:
    """The loop's effects as activities; see docs/adr/0004-one-loop-two-executors.md."""

    def __init__(
        self,
        agent: Agent[Any, Any],
        settings: registry.WorkerSettings,
        on_change: Callable[[], None] = lambda: None,
        gate: ApprovalGate | None = None,
        base: HistoryBase | None = None,
    ) -> None:
        self.agent = agent
        self.gate = gate
        self.heartbeat_timeout = settings.heartbeat_timeout
        self.outbox = Outbox(settings.inline_messages_bytes, base)
        self.stream = False  # the model activity publishes deltas (DurableAgent.run_stream)
        self.tools_in_flight: list[str] = []
        """Tool activities started and not yet finished, in start order."""
        self.tools_done = 0
        """Tool activities that returned: the loop counts a batch only when it ends."""
        self.recorded: set[str] = set()
        """Digests of the long contents this run's model and tool activities returned: the
        run's result carries those by reference (the client reads them from its history)."""
        self._on_change = on_change
        self._answer: Message | None = None  # the last model answer, and its calls' outcomes
        self._outcomes: dict[str, ToolOutcome] = {}
        self.toolsets: RunToolsets | None = None  # once the run lists a toolset
        self._toolset_tools: dict[str, ToolsetTool] = {}

    def new_id(self) -> str:
        return str(workflow.uuid7())

    def _prepare_input(self, ctx: RunContext[Any], history: list[Message]) -> PrepareInput:
        return PrepareInput(
            agent=self.agent.name,
            deps=ctx.deps,
            run_id=ctx.run_id,
            conversation_id=ctx.conversation_id,
            history=history,
        )

    async def process_history(self, ctx: RunContext[Any], history: list[Message]) -> list[Message]:
        return await _activity(
            workflow.execute_activity(
                "golem.process_history",
                self._prepare_input(ctx, history),
                result_type=list[Message],
                start_to_close_timeout=timedelta(minutes=5),
                heartbeat_timeout=self.heartbeat_timeout,
                retry_policy=ONCE_PER_OUTCOME,
                summary="history processor",
            )
        )

    async def resolve_instructions(self, ctx: RunContext[Any]) -> str:
        return await _activity(
            workflow.execute_activity(
                "golem.resolve_instructions",
                self._prepare_input(ctx, []),
                result_type=str,
                start_to_close_timeout=timedelta(minutes=5),
                heartbeat_timeout=self.heartbeat_timeout,
                retry_policy=ONCE_PER_OUTCOME,
                summary="instructions",
            )
        )

    async def toolset_tools(self, toolset: Toolset, ctx: RunContext[Any]) -> list[ToolsetTool]:
        if self.toolsets is None:
            from golem.workflows.mcp import RunToolsets  # only runs with toolsets import mcp

            self.toolsets = RunToolsets(self.heartbeat_timeout)
        policy = _retry_policy(toolset.retry_policy)  # listing is safe to repeat
        tools: list[ToolsetTool] = await _activity(self.toolsets.tools(toolset, ctx, policy))
        self._toolset_tools.update((tool.name, tool) for tool in tools)
        return tools

    async def request(
        self, request: ModelRequest, ctx: RunContext[Any], on_delta: DeltaSink | None
    ) -> ModelResponse:
        # What this run's activities returned travels by digest (their worker keeps it).
        recorded = self.recorded if workflow.patched(CONTENT_REFS_PATCH) else ()
        call = self.outbox.ship(
            self.agent.name,
            ctx.turn,
            request.messages,
            self.stream,
            recorded,
            (ctx.run_id, ctx.conversation_id),
            self._derivable(ctx),
        )
        if self.toolsets is not None:  # the model activity learns their tools by digest
            call = call.model_copy(update={"tools": self.toolsets.digest})
        # One activity per model of a fallback, each retried by its own policy (ADR 0017).
        failures: list[tuple[str, str]] = []
        models = self.agent.model_plan
        for index, (name, policy) in enumerate(models):
            try:
                response: ModelResponse = await _activity(
                    workflow.execute_activity(
                        "golem.model_request",
                        call.model_copy(update={"model_index": index}) if index else call,
                        result_type=ModelResponse,
                        start_to_close_timeout=timedelta(minutes=10),
                        heartbeat_timeout=self.heartbeat_timeout,
                        retry_policy=_retry_policy(policy),
                        summary=f"model: {name} (turn {ctx.turn})",
                    )
                )
                break
            except ActivityFailed as exc:
                falls_over, text = _fallback_verdict(exc)
                move_on(failures, name, exc, falls_over and index + 1 < len(models), text)
        self._record(response.message.content)
        self._answer, self._outcomes = response.message, {}
        return response

    def _derivable(self, ctx: RunContext[Any]) -> list[Message] | None:
        """The messages the last answer and its calls' outcomes make, as the loop makes them."""
        if self._answer is None:
            return None
        return derived(self._answer, self._outcomes, (ctx.run_id, ctx.conversation_id))

    def logged(self, messages: list[Message]) -> int:
        """How many leading ``messages`` the run's history holds: its last model request
        (instructions aside), when every request's new messages rode inline or derived."""
        request = self.outbox.messages
        if not self.outbox.logged or not request:
            return 0
        own = request[1:] if request[0].role == "system" else request
        return len(own) if messages[: len(own)] == own else 0

    def _record(self, content: str) -> None:
        if len(content) >= REF_BYTES:
            self.recorded.add(content_digest(content))

    async def await_approvals(
        self, pending: list[ToolCall], ctx: RunContext[Any]
    ) -> dict[str, bool | None] | None:
        # A run with a gate waits in its workflow; one without (inline), or one recorded
        # before runs waited (its history returned at the pause), pauses and returns.
        if self.gate is None or not workflow.patched(APPROVALS_PATCH):
            return None
        return await self.gate.wait(pending)

    async def call_tool(self, call: ToolCall, ctx: RunContext[Any]) -> ToolOutcome:
        try:
            return await self._call_tool(call, ctx)
        except ActivityFailed as exc:
            cause = exc.__cause__.cause if isinstance(exc.__cause__, ActivityError) else None
            if isinstance(cause, TimeoutError) and cause.type != TimeoutType.SCHEDULE_TO_START:
                # A start-to-close or heartbeat timeout: the call had started, so it may
                # have taken effect; it must not be shown as never run.
                raise ToolOutcomeUnknown(str(exc)) from exc
            raise

    async def _call_tool(self, call: ToolCall, ctx: RunContext[Any]) -> ToolOutcome:
        tool = self._toolset_tools.get(call.name) or self.agent.tools[call.name]
        policy = tool.retry_policy
        self.tools_in_flight.append(call.name)
        self._on_change()
        try:
            if isinstance(tool, ToolsetTool):
                assert self.toolsets is not None  # it listed the tool
                outcome = await _activity(
                    self.toolsets.call(tool, call, ctx, tool.timeout, _retry_policy(policy))
                )
            else:
                outcome = await self._tool_activity(
                    call, ctx, tool.timeout or timedelta(minutes=5), policy
                )
                self._outcomes[call.id] = outcome  # its worker can make its message itself
            self._record(outcome.content)
            self.tools_done += 1
            return outcome
        finally:
            self.tools_in_flight.remove(call.name)
            # After the loop has counted the call (same workflow task), not before.
            asyncio.get_running_loop().call_soon(self._on_change)

    async def _tool_activity(
        self, call: ToolCall, ctx: RunContext[Any], timeout: timedelta, policy: Retry
    ) -> ToolOutcome:
        # The activity reads a run id left out from its workflow's id. No patch: replay checks
        # an activity's type and id, not its input (tests/test_replay.py replays older inputs).
        run_id = "" if ctx.run_id == workflow.info().workflow_id else ctx.run_id
        return await _activity(
            workflow.execute_activity(
                "golem.tool",
                ToolCallInput(
                    agent=self.agent.name,
                    call=call,
                    deps=ctx.deps,
                    run_id=run_id,
                    conversation_id=ctx.conversation_id,
                    turn=ctx.turn,
                    usage=ctx.usage,
                    retries=ctx.retries,
                ),
                result_type=ToolOutcome,
                start_to_close_timeout=timeout,
                heartbeat_timeout=self.heartbeat_timeout,
                retry_policy=_retry_policy(policy),
                summary=f"tool: {call.name}",
            )
        )


#: Exceptions that fail an ``AgentRunWorkflow`` instead of its workflow task, which Temporal
#: would retry forever: a run's own failure, bad input (ValueError covers pydantic's
#: validation and serialization errors, TypeError a wrong argument count) and bugs.
#: Temporal's own (NondeterminismError, the SDK's RuntimeErrors) stay task failures, so a
#: fixed worker can still pick the run up.
FAILURE_TYPES: list[type[BaseException]] = [
    RunError,
    ValueError,
    TypeError,
    LookupError,
    AttributeError,
    ArithmeticError,
]


@workflow.defn(name="AgentRunWorkflow", failure_exception_types=FAILURE_TYPES)
class AgentRunWorkflow:
    """One agent run. Workflow id = run id; fails with ``GolemRunError`` details on failure."""

    def __init__(self) -> None:
        self._loop: RunLoop | None = None
        self._executor: TemporalExecutor | None = None
        self._gate: ApprovalGate | None = None
        self._outcome: list[Message] | None = None  # the conversation the outcome reports
        self._turn = 0
        self._stream = RunStreamHost()

    @workflow.run
    async def run(self, input: AgentRunInput) -> AgentRunOutput:
        info = workflow.info()
        if not isinstance(input, AgentRunInput):  # a null payload skips validation
            raise ApplicationError(
                f"AgentRunWorkflow takes an AgentRunInput, not {type(input).__name__}",
                non_retryable=True,
            )
        try:
            agent = registry.lookup(info.task_queue, input.agent)
        except LookupError as exc:
            raise ApplicationError(
                str(exc), type=registry.UNKNOWN_AGENT, non_retryable=True
            ) from None
        run = input.run
        if input.base is not None and (agent.history_processor is not None or run.history):
            # A history processor must see the whole history: such runs get it by value.
            raise ApplicationError(
                f"agent {agent.name!r}: a history by reference cannot go with a history "
                "processor or a history by value",
                non_retryable=True,
            )
        if agent.deps_type is not None and run.deps is not None:
            try:
                deps = TypeAdapter(agent.deps_type).validate_python(run.deps)
            except ValidationError as exc:
                # Raised in workflow code this would fail the task, and retry it, forever.
                name = getattr(agent.deps_type, "__name__", str(agent.deps_type))
                message = f"deps do not validate as {name}: {validation_problems(exc, 'deps')}"
                error = RunError("history", message)
                raise failure_error(error, encode_failure(error, run.history)) from None
            run = run.model_copy(update={"deps": deps})
        if not run.run_id:
            run = run.model_copy(update={"run_id": info.workflow_id})
        history = run.history
        based = input.base is not None
        self._gate = ApprovalGate(
            lambda pending: encode_result(
                finish.result(self._state(), None, pending=pending), history, None, based
            ),
            agent.approval_timeout,
            notify_parent=input.notify_parent,
        )
        self._executor = TemporalExecutor(
            agent,
            registry.settings(info.task_queue),
            on_change=self._show_details,
            gate=self._gate,
            base=input.base,
        )
        self._executor.stream = input.stream
        self._loop = RunLoop(agent, self._executor, run, emit=self._on_event)
        try:
            result = await self._stream.hosting(self._running(self._loop.run()), input.stream)
        except RunError as exc:
            if exc.partial is not None:
                self._outcome = exc.partial.messages
            details = encode_failure(exc, run.history, based)
            if isinstance(exc.__cause__, asyncio.CancelledError):
                # A cancel command carries no details: the evidence rides the memo instead,
                # so the run still shows as Canceled in the UI.
                memo = cancel_memo(details)
                if workflow.patched(OUTCOME_PATCH):
                    memo[OUTCOME_MEMO] = self._summary("canceled")
                workflow.upsert_memo(memo)
                raise CancelledError(str(exc)) from None
            if workflow.patched(OUTCOME_PATCH):
                workflow.upsert_memo({OUTCOME_MEMO: self._summary(f"failed at {exc.stage}")})
            raise failure_error(exc, details) from None
        self._outcome = result.messages
        output = result.output
        if agent.output_adapter is not None and output is not None:
            output = agent.output_adapter.dump_python(output, mode="json")
        reason = "awaiting approval" if result.pending_approvals else "answered"
        if workflow.patched(OUTCOME_PATCH):
            workflow.upsert_memo({OUTCOME_MEMO: self._summary(reason, output)})
        # A parent workflow cannot read this run's history: only a client-started run's
        # result names recorded contents instead of carrying them again.
        recorded = self._executor.recorded if info.parent is None else set()
        logged = self._executor.logged(result.messages) if info.parent is None else 0
        return encode_result(result, run.history, output, based, recorded, logged)

    def _state(self) -> RunState:
        assert self._loop is not None
        return self._loop.state

    async def _running(self, work: Awaitable[T]) -> T:
        """Await the run; then whoever waits on its outcome (an update) is answered, before
        the stream's host waits for every handler to finish."""
        try:
            return await work
        finally:
            if self._gate is not None:
                self._gate.finish()

    # -- approvals (docs: golem/workflows/approvals.py) ----------------------------------

    # A run that fails before it starts (bad input) leaves it waiting: the client then reads
    # the failure from the result, so abandoning it is right.
    @workflow.update(
        name="golem.outcome", unfinished_policy=workflow.HandlerUnfinishedPolicy.ABANDON
    )
    async def outcome(self) -> AgentRunOutput | None:
        """Returns once the run waits for approvals (its paused output) or ends (None)."""
        await workflow.wait_condition(lambda: self._gate is not None)
        assert self._gate is not None
        return await self._gate.outcome()

    @outcome.validator
    def _check_outcome(self) -> None:
        # The client may know the agent by name only: tell it, before anything is recorded,
        # that this run can never pause (an unknown agent is the run's to report).
        info = workflow.info()
        name = info.typed_search_attributes.get(lineage.AGENT)
        try:
            agent = registry.lookup(info.task_queue, name) if name else None
        except LookupError:
            return
        if agent is not None and not agent.may_pause:
            raise ApplicationError(
                f"agent {name!r} has no tool that needs approval: its runs never pause",
                type=CANNOT_PAUSE,
                non_retryable=True,
            )

    @workflow.update(name="golem.approve")
    async def approve(self, decisions: dict[str, bool]) -> AgentRunOutput | None:
        """Decide pending calls; returns like ``golem.outcome`` once the run pauses or ends."""
        assert self._gate is not None
        return await self._gate.approve(decisions)

    @approve.validator
    def _check_approve(self, decisions: dict[str, bool]) -> None:
        if self._gate is None:
            raise ApplicationError("the run has not started yet", non_retryable=True)
        self._gate.check(decisions)

    @workflow.signal(name="golem.decide")
    def decide(self, decisions: dict[str, bool | None]) -> None:
        """Decisions from a parent workflow (which cannot send updates); ``None``: the
        parent's approval timeout ran out first."""
        if self._gate is not None:
            self._gate.decide(decisions)

    @workflow.query(name="golem.pending")
    def pending(self) -> list[ToolCall]:
        """The calls waiting for a person now."""
        return list(self._gate.pending) if self._gate else []

    def _summary(self, stop_reason: str, output: Any = None) -> dict[str, Any]:
        """A closed run at a glance, for the UI's memo (camelCase, like every payload)."""
        assert self._loop is not None
        state = self._loop.state
        text = output if isinstance(output, str) else "" if output is None else json.dumps(output)
        return {
            "stopReason": stop_reason,
            "output": text if len(text) <= 200 else text[:197] + "...",
            "turns": state.turn,
            "requests": state.requests,
            "toolCalls": state.tool_calls,
            "inputTokens": state.usage.input_tokens,
            "outputTokens": state.usage.output_tokens,
        }

    def _on_event(self, event: RunEvent) -> None:
        self._stream.publish(event)
        if event.kind in ("model_start", "model_end", "tool_start", "tool_end"):
            self._show_details(event.turn)

    def _show_details(self, turn: int | None = None) -> None:
        """What the UI shows for a running run; redrawn on every model and tool change."""
        if self._loop is None or self._executor is None:
            return
        state = self._loop.state
        self._turn = turn if turn is not None else self._turn
        usage = state.usage
        tools = ", ".join(self._executor.tools_in_flight) or "none"
        workflow.set_current_details(
            f"**turn** {self._turn} · **requests** {state.requests} · **tool calls** "
            f"{max(state.tool_calls, self._executor.tools_done)}\n\n"
            f"**tokens** {usage.input_tokens} in / "
            f"{usage.output_tokens} out\n\n**tools in flight** {tools}"
        )

    @workflow.query(name="golem.messages")
    def messages(self, query: MessagesQuery) -> MessagesPage:
        """The current model request's messages ``[since, upto)``, one page (≤ ~1 MB)."""
        return self._executor.outbox.page(query) if self._executor else MessagesPage.of([], query)

    @workflow.query(name="golem.conversation")
    def conversation(self, query: MessagesQuery) -> MessagesPage:
        """The conversation ``[since, upto)``, one page: a running run's, or a closed run's
        whose result or failure was too big to carry it (``RunSnapshot.paged``)."""
        if self._outcome is not None:
            return MessagesPage.of(self._outcome, query)
        return MessagesPage.of(self._loop.state.messages if self._loop else [], query)
