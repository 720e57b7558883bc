"""``AgentRunWorkflow``: one agent run as one workflow, driving the same loop as ``agent.run``.

    handle = await client.start_workflow(AgentRunWorkflow.run, AgentRunInput(...), id=run_id)

``run`` is three steps: a validated setup (bad input fails the run at once, never its
task), the loop through ``TemporalExecutor`` (golem.workflows.executor: every model
request and tool call an activity, ids minted replay-safely), and the outcome
(golem.workflows.report: the result, or a failure that carries the partial evidence).
The handlers answer approvals (golem.workflows.approvals), the live stream
(golem.workflows.streams) and the queries the activities and clients read pages with.
Delegations and handoffs are child runs (golem.workflows.delegation); a conversation's turn
that hands over ends naming its target (``hand_back``), and the conversation goes on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError, CancelledError

with workflow.unsafe.imports_passed_through():
    from pydantic import TypeAdapter, ValidationError

    from golem.agent import Agent
    from golem.events import RunEvent
    from golem.loop import RunLoop
    from golem.messages import Message, ToolCall
    from golem.phases import finish
    from golem.results import Result, RunError
    from golem.run_state import RunInput, RunState
    from golem.tools import validation_problems
    from golem.wire import (
        AgentRunInput,
        Completed,
        MessagesPage,
        MessagesQuery,
        Paused,
        lineage,
        names,
    )
    from golem.wire.failures import failure_error
    from golem.workflows import registry
    from golem.workflows.approvals import ApprovalGate
    from golem.workflows.arity import drops_misfits, refuses_misfits
    from golem.workflows.executor import TemporalExecutor
    from golem.workflows.patches import SIGNAL_ARITY
    from golem.workflows.report import Progress, Reporter, details, memo
    from golem.workflows.streams import RunStreamHost
    from golem.workflows.turns import Verdict


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


def setup(input: AgentRunInput) -> tuple[Agent[Any, Any], RunInput]:
    """The run's agent and its checked input; bad input fails the run here, for good."""
    info = workflow.info()
    if not isinstance(input, AgentRunInput):  # a null payload skips validation
        raise ApplicationError(
            f"AgentRunWorkflow takes an AgentRunInput, not {type(input).__name__}",
            non_retryable=True,
        )
    try:
        agent = registry.lookup(info.task_queue, input.agent)
    except LookupError as exc:
        raise ApplicationError(str(exc), type=names.UNKNOWN_AGENT, non_retryable=True) from None
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
            raise failure_error(error, Reporter(run.history, False).failed(error)) from None
        run = run.model_copy(update={"deps": deps})
    if not run.run_id:
        run = run.model_copy(update={"run_id": info.workflow_id})
    return agent, run


def run_gate(
    agent: Agent[Any, Any],
    report: Reporter,
    loop: Callable[[], RunLoop | None],
    *,
    notify_parent: bool = False,
    on_change: Callable[[], None] = lambda: None,
    caller: str = "",
    tell: Callable[[Paused], Awaitable[None]] | None = None,
) -> ApprovalGate:
    """A run's approval gate: its own workflow's, or an inline conversation turn's (``tell``:
    how the conversation hears its pauses). ``loop`` gives the run's loop once it is made."""

    def paused(pending: list[ToolCall]) -> Paused:
        current = loop()
        assert current is not None
        external = current.external_ids(pending)
        return report.paused(finish.result(current.state, None, pending=pending, external=external))

    def validators() -> dict[str, Callable[[str], object]]:
        """How each of the run's tools (its toolsets' too, once listed) checks arguments."""
        current = loop()
        return {n: t.validate_args for n, t in current.agent.tools.items()} if current else {}

    def tools_running() -> bool:
        """One of the agent's own tools runs in an activity now (it may ``ctx.delegate``)."""
        current = loop()
        progress = getattr(current.executor, "progress", None) if current is not None else None
        running = progress.in_flight if progress is not None else []
        tools = agent.tools
        return any(name in tools and not tools[name].delegate for name in running)

    def external(calls: list[ToolCall]) -> set[str]:
        current = loop()
        return current.external_ids(calls) if current is not None else set()

    return ApprovalGate(
        paused,
        agent.approval_timeout,
        notify_parent=notify_parent,
        on_change=on_change,
        caller=caller,
        validators=validators,
        external=external,
        external_timeout=agent.external_timeout,
        tell=tell,
        tools_running=tools_running,
    )


@workflow.defn(name=names.AGENT_RUN_WORKFLOW, failure_exception_types=FAILURE_TYPES)
class AgentRunWorkflow:
    """One agent run. Workflow id = run id; fails with ``GolemRunError`` details on failure."""

    @workflow.init
    def __init__(self, input: AgentRunInput) -> None:
        # A run's own external tools let it pause whatever its agent: golem.outcome allowed.
        run = getattr(input, "run", None)
        self._offers_external = bool(getattr(run, "external_tools", None))
        self._loop: RunLoop | None = None
        self._executor: TemporalExecutor | None = None
        self._gate: ApprovalGate | None = None
        self._outcome: list[Message] | None = None  # the conversation the outcome reports
        self._turn = 0
        self._stream = RunStreamHost()

    @workflow.run
    async def run(self, input: AgentRunInput) -> Completed:
        agent, run = setup(input)
        settings = registry.settings(workflow.info().task_queue)
        # With external storage an outcome of any size is one payload: none is paged.
        stored = settings.stored_bytes is not None
        report = Reporter(run.history, readable=workflow.info().parent is None, stored=stored)
        self._gate = run_gate(
            agent,
            report,
            lambda: self._loop,
            notify_parent=input.notify_parent,
            on_change=self._show_details,
            caller=input.caller,
        )
        self._executor = TemporalExecutor(
            agent,
            settings,
            on_change=self._show_details,
            gate=self._gate,
            base=input.base,
            stream=input.stream,
            on_child=self._stream.child,
            offered=run.external_tools,
        )
        self._loop = RunLoop(
            agent, self._executor, run, emit=self._on_event, follow_handoffs=not input.hand_back
        )
        try:
            result = await self._stream.hosting(
                self._running(self._loop.run(), report), input.stream
            )
        except RunError as exc:
            self._outcome = exc.partial.messages if exc.partial is not None else []
            failure, memo_ = report.failure(exc)
            canceled = isinstance(failure, CancelledError)
            self._closed("canceled" if canceled else f"failed at {exc.stage}: {exc.detail}", memo_)
            raise failure from None
        self._outcome = result.messages
        completed = self._gate.completed if self._gate is not None else None
        assert completed is not None  # _running made it before the stream ended
        self._closed("completed", output=completed.output)
        return completed

    def _completed(self, result: Result[Any], report: Reporter) -> Completed:
        """The workflow's result, known before the stream ends: an approval answers with it."""
        assert self._executor is not None and self._loop is not None
        agent, output = self._loop.agent, result.output
        if agent.output_adapter is not None and output is not None:
            output = agent.output_adapter.dump_python(output, mode="json")
        shipper = self._executor.shipper
        completed = report.completed(
            result, output, shipper.recorded, shipper.logged_count(result.messages)
        )
        handoff = self._loop.handoff
        if handoff is None or self._loop.follow_handoffs:  # only a turn's run hands back
            return completed
        return completed.model_copy(update={"handoff": handoff})

    def _state(self) -> RunState:
        assert self._loop is not None
        return self._loop.state

    def _closed(self, outcome: str, more: dict[str, Any] | None = None, output: Any = None) -> None:
        """The run ended: the UI leads with how (its memo for when no worker answers)."""
        state = self._state()
        progress = self._executor.progress if self._executor else Progress()
        summary = memo(state, progress, outcome.split(":")[0], output)
        workflow.upsert_memo({names.OUTCOME_MEMO: summary, **(more or {})})
        workflow.set_current_details(details(state, state.turn, progress, outcome))

    async def _running(self, work: Awaitable[Result[Any]], report: Reporter) -> Result[Any]:
        """Await the run; then whoever waits on its outcome (an update) is answered with it,
        before the stream's host waits for every handler to finish. A turn that hands over
        names its target's run in its stream before the stream ends (its conversation
        starts it)."""
        completed: Completed | None = None
        try:
            result = await work
            loop = self._loop
            if loop is not None and loop.handoff is not None and not loop.follow_handoffs:
                self._stream.child(loop.handoff.run_id, loop.handoff.agent)
            completed = self._completed(result, report)
            return result
        finally:
            if self._gate is not None:
                self._gate.finish(completed)

    # -- approvals (docs: golem/workflows/approvals.py) ----------------------------------

    # A run that fails before it starts (bad input) leaves it waiting: the client then reads
    # the failure from the result, so abandoning it is right.
    @workflow.update(name=names.OUTCOME, unfinished_policy=workflow.HandlerUnfinishedPolicy.ABANDON)
    async def outcome(self) -> Paused | None:
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
        if agent is not None and not agent.may_pause and not self._offers_external:
            raise ApplicationError(
                f"agent {name!r} has no tool that needs approval: its runs never pause",
                type=names.CANNOT_PAUSE,
                non_retryable=True,
            )

    @workflow.update(name=names.APPROVE)
    async def approve(self, decisions: dict[str, Verdict]) -> Paused | Completed | None:
        """Decide pending calls; answers what they did once the run pauses again (``Paused``)
        or ends (``Completed``; ``None``: it failed), with the decisions recorded."""
        assert self._gate is not None
        return await self._gate.approve(decisions)

    @approve.validator
    @refuses_misfits(names.APPROVE)
    def _check_approve(self, decisions: dict[str, Verdict]) -> None:
        if self._gate is None:
            raise ApplicationError("the run has not started yet", non_retryable=True)
        self._gate.check(decisions)

    @workflow.signal(name=names.DECIDE)
    @drops_misfits(names.DECIDE, SIGNAL_ARITY)
    async def decide(self, decisions: dict[str, Verdict | None]) -> None:
        """Decisions from a parent workflow (which cannot send updates) or a caller; ``None``:
        the parent's approval timeout ran out first."""
        if self._gate is not None:
            await self._gate.decide(decisions)

    @workflow.signal(name=names.PAUSED)
    @drops_misfits(names.PAUSED, SIGNAL_ARITY)
    async def below_paused(self, report: Paused) -> None:
        """A run this one delegated to waits for approvals now (or no more)."""
        await workflow.wait_condition(lambda: self._gate is not None)
        assert self._gate is not None
        await self._gate.reported(report)

    @workflow.query(name=names.PENDING)
    def pending(self) -> list[ToolCall]:
        """The calls waiting for a person now (those of the runs below it included)."""
        return list(self._gate.waiting) if self._gate else []

    def _on_event(self, event: RunEvent) -> None:
        self._stream.publish(event)
        if event.kind in ("model_start", "model_end", "tool_start", "tool_end"):
            self._show_details(event.turn)

    def _show_details(self, turn: int | None = None) -> None:
        """What the UI shows for a running run; redrawn on every model and tool change."""
        if self._loop is None or self._executor is None:
            return
        self._turn = turn if turn is not None else self._turn
        pending = self._gate.waiting if self._gate is not None else []
        workflow.set_current_details(
            details(self._loop.state, self._turn, self._executor.progress, pending=pending)
        )

    @workflow.query(name=names.MESSAGES)
    def messages(self, query: MessagesQuery) -> MessagesPage:
        """The current model request's messages ``[since, upto)``, one page (≤ ~1 MB)."""
        if self._executor is None:
            return MessagesPage.of([], query)
        return self._executor.shipper.page(query)

    @workflow.query(name=names.CONVERSATION)
    def conversation(self, query: MessagesQuery) -> MessagesPage:
        """The conversation ``[since, upto)``, one page: a running run's, or a closed run's
        (its evidence, when it failed) whose outcome was too big to carry it (``Paged``)."""
        if self._outcome is not None:
            return MessagesPage.of(self._outcome, query)
        return MessagesPage.of(self._loop.state.messages if self._loop else [], query)
