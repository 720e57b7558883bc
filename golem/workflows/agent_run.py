"""``AgentRunWorkflow``: one agent run as one workflow, driving the same loop as ``agent.run``.

Model requests and tool calls are activities; ids are minted with ``workflow.uuid7()``
(replay-safe); a user's history processor and instructions function run once, as
activities, so their results are recorded and replay never re-evaluates them.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    FailureError,
    TimeoutError,
)

with workflow.unsafe.imports_passed_through():
    from pydantic import TypeAdapter, ValidationError

    from golem.agent import Agent
    from golem.events import RunEvent
    from golem.loop import DeltaSink, RunLoop, RunState
    from golem.messages import Message, ToolCall
    from golem.models.base import ModelRequest, ModelResponse
    from golem.results import RunError
    from golem.retry import Retry
    from golem.tools import RunContext, ToolOutcome, validation_problems
    from golem.workflows import registry
    from golem.workflows.streams import RunStreamHost
    from golem.workflows.types import (
        AgentRunInput,
        AgentRunOutput,
        FailureDetails,
        MessagesPage,
        MessagesQuery,
        ModelCallInput,
        PrepareInput,
        RunSnapshot,
        ToolCallInput,
        message_size,
    )

T = TypeVar("T")

__all__ = ["FAILURE_MEMO", "RUN_ERROR", "AgentRunWorkflow", "TemporalExecutor"]

#: ``ApplicationError.type`` of a failed run; its details are a ``FailureDetails``.
RUN_ERROR = "GolemRunError"
#: Memo key holding a cancelled run's ``FailureDetails``.
FAILURE_MEMO = "golemFailure"
#: A tool's activity retry policy unless it names its own.
TOOL_RETRY = Retry(max_attempts=3)


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


class TemporalExecutor:
    """The loop's effects as activities; see docs/adr/0004-one-loop-two-executors.md."""

    def __init__(self, agent: Agent[Any, Any], settings: registry.WorkerSettings) -> None:
        self.agent = agent
        self.heartbeat_timeout = settings.heartbeat_timeout
        self.inline_bytes = settings.inline_messages_bytes
        self.request_messages: list[Message] = []
        self.stream = False  # the model activity publishes deltas (DurableAgent.run_stream)
        self._sent = 0  # messages the previous model call already had

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
                retry_policy=RetryPolicy(maximum_attempts=1),  # once per run, as the spec says
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
                retry_policy=RetryPolicy(maximum_attempts=1),  # once per run, as the spec says
                summary="instructions",
            )
        )

    async def request(
        self, request: ModelRequest, ctx: RunContext[Any], on_delta: DeltaSink | None
    ) -> ModelResponse:
        # The activity reads these through the golem.messages query instead of its input.
        self.request_messages = request.messages
        upto = len(request.messages)
        new = request.messages[self._sent : upto]
        inline = new if sum(message_size(m) for m in new) <= self.inline_bytes else []
        call = ModelCallInput(
            agent=self.agent.name,
            turn=ctx.turn,
            upto=upto,
            since=self._sent,
            messages=inline,
            stream=self.stream,
        )
        self._sent = upto
        policy = self.agent.model_retry
        return await _activity(
            workflow.execute_activity(
                "golem.model_request",
                call,
                result_type=ModelResponse,
                start_to_close_timeout=timedelta(minutes=10),
                heartbeat_timeout=self.heartbeat_timeout,
                retry_policy=_retry_policy(policy),
                summary=f"model: {self.agent.model_name} (turn {ctx.turn})",
            )
        )

    async def call_tool(self, call: ToolCall, ctx: RunContext[Any]) -> ToolOutcome:
        tool = self.agent.tools[call.name]
        policy = tool.retry or TOOL_RETRY
        if tool.retry_attempts is not None:
            policy = dataclasses.replace(policy, max_attempts=tool.retry_attempts)
        if tool.at_most_once:
            policy = dataclasses.replace(policy, max_attempts=1)
        return await _activity(
            workflow.execute_activity(
                "golem.tool",
                ToolCallInput(
                    agent=self.agent.name,
                    call=call,
                    deps=ctx.deps,
                    run_id=ctx.run_id,
                    conversation_id=ctx.conversation_id,
                    turn=ctx.turn,
                    usage=ctx.usage,
                    retries=ctx.retries,
                ),
                result_type=ToolOutcome,
                start_to_close_timeout=tool.timeout or timedelta(minutes=5),
                heartbeat_timeout=self.heartbeat_timeout,
                retry_policy=_retry_policy(policy),
                summary=f"tool: {call.name}",
            )
        )


@workflow.defn(name="AgentRunWorkflow")
class AgentRunWorkflow:
    """One agent run. Workflow id = run id; fails with ``GolemRunError`` details on failure."""

    def __init__(self) -> None:
        self._loop: RunLoop | None = None
        self._executor: TemporalExecutor | None = None
        self._stream = RunStreamHost()

    @workflow.run
    async def run(self, input: AgentRunInput) -> AgentRunOutput:
        info = workflow.info()
        try:
            agent = registry.lookup(info.task_queue, input.agent)
        except LookupError as exc:
            raise ApplicationError(
                str(exc), type=registry.UNKNOWN_AGENT, non_retryable=True
            ) from None
        run = input.run
        if agent.deps_type is not None and run.deps is not None:
            try:
                deps = TypeAdapter(agent.deps_type).validate_python(run.deps)
            except ValidationError as exc:
                # Raised in workflow code this would fail the task, and retry it, forever.
                name = getattr(agent.deps_type, "__name__", str(agent.deps_type))
                message = f"deps do not validate as {name}: {validation_problems(exc, 'deps')}"
                error = RunError("history", message)
                details = FailureDetails(stage="history", message=message)
                raise ApplicationError(
                    str(error), details, type=RUN_ERROR, non_retryable=True
                ) from None
            run = run.model_copy(update={"deps": deps})
        if not run.run_id:
            run = run.model_copy(update={"run_id": info.workflow_id})
        self._executor = TemporalExecutor(agent, registry.settings(info.task_queue))
        self._executor.stream = input.stream
        self._loop = RunLoop(agent, self._executor, run, emit=self._on_event)
        try:
            result = await self._stream.hosting(self._loop.run(), input.stream)
        except RunError as exc:
            details = FailureDetails(
                stage=exc.stage,
                message=exc.detail,
                partial=self._snapshot(run.history) if exc.partial is not None else None,
            )
            if isinstance(exc.__cause__, asyncio.CancelledError):
                # A cancel command carries no details: the evidence rides the memo instead,
                # so the run still shows as Canceled in the UI.
                workflow.upsert_memo({FAILURE_MEMO: details})
                raise CancelledError(str(exc)) from None
            raise ApplicationError(str(exc), details, type=RUN_ERROR, non_retryable=True) from None
        output = result.output
        if agent.output_adapter is not None and output is not None:
            output = agent.output_adapter.dump_python(output, mode="json")
        return AgentRunOutput(
            output=output,
            snapshot=self._snapshot(run.history, completed=False),
            pending_approvals=result.pending_approvals,
        )

    def _snapshot(self, history: list[Message], completed: bool = True) -> RunSnapshot:
        assert self._loop is not None
        state: RunState = self._loop.state
        messages = state.messages[: state.completed] if completed else state.messages
        return RunSnapshot.of(messages, history, state)

    def _on_event(self, event: RunEvent) -> None:
        self._stream.publish(event)
        if event.kind not in ("model_start", "model_end", "tool_start", "tool_end"):
            return
        assert self._loop is not None
        state = self._loop.state
        usage = state.usage
        tools = ", ".join(state.tools_in_flight) or "none"
        workflow.set_current_details(
            f"**turn** {event.turn} · **requests** {state.requests} · **tool calls** "
            f"{state.tool_calls}\n\n**tokens** {usage.input_tokens} in / "
            f"{usage.output_tokens} out\n\n**tools in flight** {tools}"
        )

    @workflow.query(name="golem.messages")
    def messages(self, query: MessagesQuery) -> MessagesPage:
        """The current model request's messages ``[since, upto)``, one page (≤ ~1 MB)."""
        return MessagesPage.of(self._executor.request_messages if self._executor else [], query)

    @workflow.query(name="golem.conversation")
    def conversation(self, query: MessagesQuery) -> MessagesPage:
        """The conversation ``[since, upto)``, one page: a running run's, or a closed run's
        whose result or failure was too big to carry it (``RunSnapshot.paged``)."""
        return MessagesPage.of(self._loop.state.messages if self._loop else [], query)
