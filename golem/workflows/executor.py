"""The loop's effects as activities: the executor ``AgentRunWorkflow`` (and an inline
``run_agent``) drives the one run loop with.

    executor = TemporalExecutor(agent, settings, gate=gate, base=input.base)
    result = await RunLoop(agent, executor, run).run()

Model requests ship their messages through the executor's ``Shipper``; tool calls and the
once-per-run user functions are activities with their own retry policies; ids are minted
with ``workflow.uuid7()`` (replay-safe). See docs/adr/0004-one-loop-two-executors.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from contextlib import nullcontext
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
    from golem.agent import Agent
    from golem.delegation import Delegation, Delegations
    from golem.events import RunEvent
    from golem.messages import Decision, Message, ToolCall
    from golem.models.base import ModelRequest, ModelResponse, ToolDefinition
    from golem.models.fallback import move_on
    from golem.policies import Evaluated, in_turn
    from golem.results import Result
    from golem.retry import Retry
    from golem.run_state import DeltaSink
    from golem.tools import RunContext, ToolOutcome, ToolOutcomeUnknown
    from golem.toolsets import Toolset, ToolsetTool, tools_digest
    from golem.wire import (
        EvaluationInput,
        HistoryBase,
        ModelFailure,
        PrepareInput,
        Stamps,
        ToolCallInput,
        names,
    )
    from golem.workflows import registry
    from golem.workflows.approvals import ApprovalGate
    from golem.workflows.delegation import run_child
    from golem.workflows.patches import EVALUATION_RACE, patched
    from golem.workflows.report import Progress
    from golem.workflows.shipper import Shipper

if TYPE_CHECKING:
    from golem.workflows.mcp import RunToolsets

T = TypeVar("T")

#: The once-per-run activities: their user errors are non-retryable, so only a worker that
#: died mid-call (a timeout) runs them again.
ONCE_PER_OUTCOME = RetryPolicy(maximum_attempts=3)


def retry_policy(retry: Retry) -> RetryPolicy:
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


def _fallback_verdict(failed: ActivityFailed) -> ModelFailure | None:
    """What a model's activity said of its failure (whether the request moves on to the next
    model, and the model's own error text); a timed-out last attempt moves on, as a lost
    connection would."""
    cause = failed.__cause__.cause if isinstance(failed.__cause__, ActivityError) else None
    if isinstance(cause, TimeoutError):
        return ModelFailure(falls_over=True, error="")
    if isinstance(cause, ApplicationError) and cause.details:
        return ModelFailure.model_validate(cause.details[0])
    return None


class TemporalExecutor:
    """The loop's effects as activities; see docs/adr/0004-one-loop-two-executors.md."""

    def __init__(
        self,
        agent: Agent[Any, Any],
        settings: registry.WorkerSettings,
        on_change: Callable[[], None] = lambda: None,
        gate: ApprovalGate | None = None,
        base: HistoryBase | None = None,
        stream: bool = False,
        on_child: Callable[[str, str], None] = lambda run_id, agent: None,
        offered: Sequence[ToolDefinition] = (),
        label: str = "",
        caller: str = "",
    ) -> None:
        self.agent = agent
        self.caller = caller
        """The workflow this run's delegations tell when they wait ("": the run's own; an
        inline turn's: its conversation)."""
        self.label = label
        """Ends each activity's summary: an inline turn's names the turn (ADR 0050), since
        its activities share the conversation's page in the UI."""
        self.on_child = on_child
        """Learns each child run (its id and agent) as it starts: the run's stream names it."""
        self.gate = gate
        self.heartbeat_timeout = settings.heartbeat_timeout
        self.shipper = Shipper(settings.inline_messages_bytes, base, settings.stored_bytes)
        self.stream = stream
        """The model activity publishes deltas (``DurableAgent.run_stream``)."""
        self.progress = Progress()
        self._on_change = on_change
        self.toolsets: RunToolsets | None = None  # once the run lists a toolset
        self._toolset_tools: dict[str, ToolsetTool] = {}
        self.offered = list(offered)
        """The run's own external tools: the model activity learns them by digest, as it
        learns toolsets' (after them)."""
        if self.offered:
            self._serve_tools()

    def _run_tools(self) -> list[ToolDefinition]:
        """The tools the model activity adds to the agent's: toolsets', then the run's."""
        return [*(self.toolsets.definitions if self.toolsets else []), *self.offered]

    def _serve_tools(self) -> None:
        workflow.set_query_handler(names.TOOLS, self._run_tools)

    def new_id(self) -> str:
        return str(workflow.uuid7())

    # -- once per run ---------------------------------------------------------------------

    async def process_history(self, ctx: RunContext[Any], history: list[Message]) -> list[Message]:
        processed: list[Message] = await self._once(
            names.PROCESS_HISTORY, ctx, history, list[Message], "history processor"
        )
        return processed

    async def resolve_instructions(self, ctx: RunContext[Any]) -> str:
        text: str = await self._once(names.RESOLVE_INSTRUCTIONS, ctx, [], str, "instructions")
        return text

    async def _once(
        self, name: str, ctx: RunContext[Any], history: list[Message], kind: Any, summary: str
    ) -> Any:
        given = PrepareInput(
            agent=self.agent.name,
            deps=ctx.deps,
            run_id=ctx.run_id,
            conversation_id=ctx.conversation_id,
            history=history,
        )
        return await _activity(
            workflow.execute_activity(
                name,
                given,
                result_type=kind,
                start_to_close_timeout=timedelta(minutes=5),
                heartbeat_timeout=self.heartbeat_timeout,
                retry_policy=ONCE_PER_OUTCOME,
                summary=summary + self.label,
            )
        )

    async def toolset_tools(self, toolset: Toolset, ctx: RunContext[Any]) -> list[ToolsetTool]:
        if self.toolsets is None:
            from golem.workflows.mcp import RunToolsets  # only runs with toolsets import mcp

            self.toolsets = RunToolsets(self.heartbeat_timeout)
            if self.offered:
                self._serve_tools()  # the toolsets' and the run's, together
        policy = retry_policy(toolset.retry_policy)  # listing is safe to repeat
        tools: list[ToolsetTool] = await _activity(self.toolsets.tools(toolset, ctx, policy))
        self._toolset_tools.update((tool.name, tool) for tool in tools)
        return tools

    # -- model requests -------------------------------------------------------------------

    async def request(
        self, request: ModelRequest, ctx: RunContext[Any], on_delta: DeltaSink | None
    ) -> ModelResponse:
        stamps = Stamps(run_id=ctx.run_id, conversation_id=ctx.conversation_id)
        call = self.shipper.model_call(
            self.agent.name, ctx.turn, request.messages, stamps, self.stream
        )
        if self.toolsets is not None and not self.offered:  # the activity learns them by digest
            call = call.model_copy(update={"tools": self.toolsets.digest})
        elif self.offered:
            call = call.model_copy(update={"tools": tools_digest(self._run_tools())})
        # One activity per model of a fallback, each retried by its own policy (ADR 0017).
        failures: list[tuple[str, str]] = []
        models = self.agent.model_plan
        for index, (name, policy) in enumerate(models):
            try:
                response: ModelResponse = await _activity(
                    workflow.execute_activity(
                        names.MODEL_REQUEST,
                        call.model_copy(update={"model_index": index}) if index else call,
                        result_type=ModelResponse,
                        start_to_close_timeout=timedelta(minutes=10),
                        heartbeat_timeout=self.heartbeat_timeout,
                        retry_policy=retry_policy(policy),
                        summary=f"model: {name} (turn {ctx.turn}){self.label}",
                    )
                )
                break
            except ActivityFailed as exc:
                verdict = _fallback_verdict(exc)
                falls_over = verdict is not None and verdict.falls_over
                text = verdict.error if verdict is not None else None
                move_on(failures, name, exc, falls_over and index + 1 < len(models), text)
        self.shipper.answered(response.message)
        return response

    # -- approvals and tools --------------------------------------------------------------

    async def await_approvals(
        self, pending: list[ToolCall], ctx: RunContext[Any]
    ) -> dict[str, Decision | None] | None:
        # A run with a gate waits in its workflow; one without (inline) pauses and returns.
        return None if self.gate is None else await self.gate.wait(pending)

    async def evaluate_approvals(
        self, waiting: list[ToolCall], evaluated: Evaluated, asked: str = ""
    ) -> dict[str, Decision | None]:
        gate = self.gate  # the loop asks only when the agent's policy has an evaluator
        if gate is None or not patched(EVALUATION_RACE):
            # The evaluator first, then a person (as 0.2.0).
            return await in_turn(evaluated, lambda call, ctx: self._evaluation(call, ctx, asked))

        # Every call waits for a person while the evaluations run: whoever answers a call
        # first decides it, and a person's answer cancels its evaluation. A conversation or
        # a caller is told of the wait at once and again as each evaluation ends.
        async def evaluation(call: ToolCall, ctx: RunContext[Any]) -> None:
            await gate.evaluation_ended(call.id, await self._evaluation(call, ctx, asked))

        # Scheduled in this order (the wait's commands first), none started before the
        # gate knows the evaluations: the wait reports these calls as evaluated.
        answered = asyncio.ensure_future(gate.wait(waiting))
        running = {call.id: asyncio.ensure_future(evaluation(call, ctx)) for call, ctx in evaluated}
        gate.evaluations = dict(running)  # a person's answer cancels its call's at once
        try:
            return await answered
        finally:
            for task in running.values():
                task.cancel()  # all decided (or the run cancelled): not needed now
            await asyncio.gather(*running.values(), return_exceptions=True)
            await gate.evaluations_ended()

    async def _evaluation(
        self, call: ToolCall, ctx: RunContext[Any], asked: str
    ) -> Decision | None:
        # An activity, so the evaluator's answer is recorded and a crash in it loses nothing.
        policy = self.agent.approval_policy
        assert policy is not None
        try:
            decision: Decision | None = await workflow.execute_activity(
                names.EVALUATE_APPROVAL,
                EvaluationInput(
                    agent=self.agent.name,
                    call=call,
                    deps=ctx.deps,
                    run_id=ctx.run_id,
                    conversation_id=ctx.conversation_id,
                    turn=ctx.turn,
                    asked=asked,
                ),
                result_type=Decision | None,  # type: ignore[arg-type]
                start_to_close_timeout=policy.evaluator_timeout + timedelta(seconds=10),
                heartbeat_timeout=self.heartbeat_timeout,
                retry_policy=RetryPolicy(maximum_attempts=3),
                summary=f"approval evaluator: {call.name}{self.label}",
            )
        except ActivityError:
            return None  # never fails open: a person decides
        return decision

    async def delegate(
        self, child: Delegation, ctx: RunContext[Any], emit: Callable[[RunEvent], None] | None
    ) -> Result[Any]:
        # Its gate takes the child's reports of what waits in it (and no one else's).
        with self.gate.child(child.run.run_id) if self.gate is not None else nullcontext():
            return await run_child(
                child, ctx, stream=self.stream, on_start=self.on_child, caller=self.caller
            )

    async def call_tool(self, call: ToolCall, ctx: RunContext[Any]) -> ToolOutcome:
        tool = self._toolset_tools.get(call.name) or self.agent.tools[call.name]
        policy = tool.retry_policy
        self.progress.in_flight.append(call.name)
        self._on_change()
        try:
            if tool.delegate:  # a child run this workflow starts itself: no activity
                return await tool.execute(ctx, ctx.tool_args or call.args)
            if isinstance(tool, ToolsetTool):
                assert self.toolsets is not None  # it listed the tool
                return await _activity(
                    self.toolsets.call(tool, call, ctx, tool.timeout, retry_policy(policy))
                )
            outcome = await self._tool_activity(
                call, ctx, tool.timeout or timedelta(minutes=5), policy
            )
        except ActivityFailed as exc:
            cause = exc.__cause__.cause if isinstance(exc.__cause__, ActivityError) else None
            if isinstance(cause, TimeoutError) and cause.type != TimeoutType.SCHEDULE_TO_START:
                # A start-to-close or heartbeat timeout: the call had started, so it may
                # have taken effect; it must not be shown as never run.
                raise ToolOutcomeUnknown(str(exc)) from exc
            own = not isinstance(tool, ToolsetTool)  # golem.tool: its details are the error
            if own and isinstance(cause, ApplicationError) and cause.details:
                # The tool's error alone: the loop names the tool and the call itself.
                raise ActivityFailed(str(cause.details[0])) from exc.__cause__
            raise
        finally:
            self.progress.in_flight.remove(call.name)
            self.progress.finished += 1
            # After the loop has counted the call (same workflow task), not before.
            asyncio.get_running_loop().call_soon(self._on_change)
        self.shipper.called(call.id, outcome)  # its worker can make its message itself
        if isinstance(ctx.delegator, Delegations) and (outcome.sub_runs or outcome.spent):
            ctx.delegator.adopt(outcome.sub_runs, outcome.spent)  # ctx.delegate in the tool
        return outcome

    async def _tool_activity(
        self, call: ToolCall, ctx: RunContext[Any], timeout: timedelta, policy: Retry
    ) -> ToolOutcome:
        # The activity reads a run id left out from its workflow's id.
        run_id = "" if ctx.run_id == workflow.info().workflow_id else ctx.run_id
        return await _activity(
            workflow.execute_activity(
                names.TOOL,
                ToolCallInput(
                    agent=self.agent.name,
                    call=call,
                    deps=ctx.deps,
                    run_id=run_id,
                    conversation_id=ctx.conversation_id,
                    turn=ctx.turn,
                    usage=ctx.usage,
                    retries=ctx.retries,
                    budget=ctx.delegator.budget()
                    if isinstance(ctx.delegator, Delegations)
                    else None,
                    stream=self.stream,
                ),
                result_type=ToolOutcome,
                start_to_close_timeout=timeout,
                heartbeat_timeout=self.heartbeat_timeout,
                retry_policy=retry_policy(policy),
                summary=f"tool: {call.name}{self.label}",
            )
        )
