"""A tool batch: the calls of one assistant turn, checked, run and closed.

``ToolBatch.run`` returns an immutable ``BatchOutcome`` holding one result per call, in call
order, whatever happened: a batch that stops still answers every call, so its evidence can
be kept whole and a resumed run needs no repair (docs/adr/0006-tool-batch-evidence.md):

- a call that finished keeps its result;
- a call never dispatched to the executor is closed with ``INTERRUPTED_RESULT``;
- a call dispatched that did not finish (``ToolOutcomeUnknown``, or cancelled while it ran)
  is closed with ``OUTCOME_UNKNOWN_RESULT``;
- a call whose tool raised gets a failed result naming the error;
- a handoff call (``Agent(handoffs=...)``) is answered by the batch itself, and the
  outcome names the agent the turn goes on with (a second one in the batch is refused).

At most ``Agent.max_concurrent_tools`` calls of a batch are in flight at once; the rest
start in call order as earlier ones finish (docs/adr/0006-tool-batch-evidence.md). When one
call of a concurrent batch fails, siblings already running are awaited and their results
kept, and no waiting call starts. A deliberate ``Canceled`` keeps the spec's rule instead:
running siblings are cancelled and every unanswered call is closed with
``INTERRUPTED_RESULT`` at once.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel

from golem.approvals import edited_call, edited_note
from golem.executor import Executor
from golem.external import ExternalTool
from golem.history.repair import INTERRUPTED_RESULT, OUTCOME_UNKNOWN_RESULT
from golem.messages import Decision, Message, ToolCall
from golem.phases import Stop
from golem.run_state import AgentSpec
from golem.tools import RunContext, Tool, ToolOutcome, ToolOutcomeUnknown, raised, tool_message
from golem.usage import Budget

#: The failed result a denied approval leaves.
DENIED_RESULT = "the user denied this tool call; it was not executed"
#: The failed result of a client-run tool's call approved without the application's result.
NO_RESULT = "the application gave no result for this call; it was not executed"
#: The failed result of a call that needed approval and got no decision before the agent's
#: ``approval_timeout`` ran out.
NO_DECISION_RESULT = (
    "no decision on this tool call arrived before the approval timeout; it was not executed"
)

#: The failed result of a client-run tool's call the application gave no result for before
#: the agent's ``external_timeout`` ran out.
NO_EXTERNAL_RESULT = (
    "no result for this call arrived from the application before the external timeout; "
    "it was not executed"
)

ContextFn = Callable[[ToolCall, Mapping[str, int], BaseModel | None], RunContext[Any]]
EmitFn = Callable[..., None]


@dataclass(frozen=True)
class CallResult:
    """One call's answer. ``closed``: synthesized because the call did not finish."""

    call: ToolCall
    message: Message
    closed: bool = False


@dataclass(frozen=True)
class BatchOutcome:
    """What one batch produced: a result for every call, in call order."""

    results: tuple[CallResult, ...]
    executed: int
    """Executions that completed (what ``tool_calls`` counts)."""
    retries: Mapping[str, int]
    """Retries per tool name after this batch."""
    stop: Stop | None = None
    """Why the run ends after this batch, if it does."""
    cause: BaseException | None = None
    """What caused ``stop`` (the caller's ``CancelledError`` for a cancelled run)."""
    handoff: tuple[str, str] | None = None
    """``(agent, reason)``: a call handed the conversation to that agent."""

    @property
    def messages(self) -> list[Message]:
        return [r.message for r in self.results]


@dataclass(frozen=True)
class _Done:
    """How one dispatched call ended."""

    outcome: ToolOutcome | None = None
    error: Exception | None = None


class ToolBatch:
    """Runs batches for one run: checks calls, dispatches them, closes what is left."""

    def __init__(
        self,
        agent: AgentSpec,
        executor: Executor,
        context: ContextFn,
        emit: EmitFn | None = None,
        in_flight: Callable[[list[str]], None] | None = None,
    ) -> None:
        self.agent = agent
        self.executor = executor
        self.context = context
        self.emit = emit or (lambda kind, **fields: None)
        self.in_flight = in_flight or (lambda names: None)

    async def run(
        self,
        calls: Sequence[ToolCall],
        *,
        retries: Mapping[str, int],
        tool_calls: int,
        decisions: Mapping[str, Decision | None] | None = None,
        budget: Budget | None = None,
    ) -> BatchOutcome:
        """Check, run and close ``calls``; ``decisions`` holds what was decided on calls that
        waited (``None``: no decision arrived in time), each recorded on its result;
        ``tool_calls`` counts those of the run's tree, which its limits (and ``budget``, a
        delegated run's) bound."""
        run = _BatchRun(self, dict(retries), dict(decisions or {}))
        runnable = run.check(calls)
        if run.stop is None and runnable:
            limit = self.agent.usage_limits.before_tools(tool_calls, len(runnable))
            if not limit and budget is not None:
                limit = budget.before_tools(tool_calls, len(runnable))
            if limit:
                run.stop = Stop("usage", limit)
            else:
                await run.dispatch(runnable)
        return run.outcome(calls)


class _BatchRun:
    """The mutable bookkeeping of one batch; only ``BatchOutcome`` leaves it."""

    def __init__(
        self, batch: ToolBatch, retries: dict[str, int], decisions: dict[str, Decision | None]
    ) -> None:
        self.batch = batch
        self.retries = retries
        self.decisions = decisions
        self.answers: dict[int, CallResult] = {}
        self.dispatched: set[int] = set()
        self.executed = 0
        self.stop: Stop | None = None
        self.cause: BaseException | None = None
        self.canceled = False  # a tool raised Canceled: the spec's rule closes the rest
        self.handoff: tuple[str, str] | None = None

    # -- before dispatch ----------------------------------------------------------------

    def check(self, calls: Sequence[ToolCall]) -> list[tuple[int, ToolCall, Tool, BaseModel]]:
        """Answer denied, undecided and invalid calls; the rest, validated, to run (an
        edited call with the arguments approved in place of the model's)."""
        runnable: list[tuple[int, ToolCall, Tool, BaseModel]] = []
        for index, call in enumerate(calls):
            if self.stop is not None:
                break  # the rest is never dispatched
            decision = self.decisions.get(call.id)
            if call.id in self.decisions and decision is None:
                self._answer(index, call, ToolOutcome(status="failed", content=NO_DECISION_RESULT))
                continue
            if decision is not None and not decision.approved:
                denial = decision.reason or DENIED_RESULT
                self._answer(index, call, ToolOutcome(status="failed", content=denial))
                continue
            if decision is not None and decision.result is not None:  # the application's
                self._answer(index, call, ToolOutcome(content=decision.result))
                continue
            if isinstance(self.batch.agent.tools.get(call.name), ExternalTool):
                self._answer(index, call, ToolOutcome(status="failed", content=NO_RESULT))
                continue
            call = edited_call(call, decision)
            tool, problem, args, limit = self._validate(call)
            if tool is not None and args is not None and tool.handoff:
                self._hand_off(index, call, tool, args)
                continue
            if tool is not None and args is not None:
                runnable.append((index, call, tool, args))
                continue
            self._answer(index, call, ToolOutcome(status="failed", content=problem))
            count = self._count_retry(call.name)
            if count > limit:
                self.stop = Stop(
                    "tool", f"{problem} (failed {count} times, over the limit of {limit})"
                )
        return runnable if self.stop is None else []

    def _hand_off(self, index: int, call: ToolCall, tool: Tool, args: BaseModel) -> None:
        """Answer a handoff call: the first one of the batch wins, later ones are refused."""
        if self.handoff is not None:
            refused = f"the conversation is handed over to {self.handoff[0]} already"
            self._answer(index, call, ToolOutcome(status="failed", content=refused))
            return
        self.handoff = (tool.handoff, str(getattr(args, "reason", "") or ""))
        self._answer(index, call, ToolOutcome(content=f"Transferred to {tool.handoff}."))

    def _validate(self, call: ToolCall) -> tuple[Tool | None, str, BaseModel | None, int]:
        agent = self.batch.agent
        tool = agent.tools.get(call.name)
        if tool is None:
            names = ", ".join(sorted(agent.tools)) or "none"
            return (
                None,
                f"unknown tool {call.name!r}: this agent has no tool by that name (it is not, "
                f"or no longer, available); the tools you may call are: {names}",
                None,
                agent.retries,
            )
        try:
            return tool, "", tool.validate_args(call.args), tool.max_retries
        except ValueError as exc:
            return None, f"tool {call.name!r}: {exc}", None, tool.max_retries

    def _count_retry(self, name: str) -> int:
        self.retries[name] = self.retries.get(name, 0) + 1
        return self.retries[name]

    # -- dispatch -------------------------------------------------------------------------

    async def dispatch(self, runnable: list[tuple[int, ToolCall, Tool, BaseModel]]) -> None:
        sequential = len(runnable) == 1 or any(tool.sequential for _, _, tool, _ in runnable)
        try:
            if sequential:
                for index, call, _, args in runnable:
                    if self.stop is not None:
                        break
                    self._flight([call])
                    self._record(index, call, await self._call(index, call, args))
            else:
                await self._concurrently(runnable)
        except asyncio.CancelledError as exc:
            # The caller cancelled the run: what finished is kept, the rest closed below.
            self.stop = Stop("canceled", "the run was cancelled by its caller")
            self.cause = exc
        finally:
            self._flight([])

    async def _concurrently(self, runnable: list[tuple[int, ToolCall, Tool, BaseModel]]) -> None:
        waiting = deque(runnable)  # started in call order, at most the agent's bound at once
        bound = self.batch.agent.max_concurrent_tools
        tasks: dict[asyncio.Task[_Done], tuple[int, ToolCall]] = {}
        pending: set[asyncio.Task[_Done]] = set()
        try:
            while True:
                while waiting and len(pending) < bound and self.stop is None:
                    index, call, _, args = waiting.popleft()
                    task = asyncio.ensure_future(self._call(index, call, args))
                    tasks[task] = (index, call)
                    pending.add(task)
                if not pending:
                    break
                self._flight([tasks[t][1] for t in sorted(pending, key=lambda t: tasks[t][0])])
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                # Record in call order so concurrent completions are deterministic.
                for task in sorted(done, key=lambda t: tasks[t][0]):
                    self._record(*tasks[task], task.result())
                if self.canceled:
                    break  # the spec's rule: a deliberate stop cancels running siblings
        finally:
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)
                for task in sorted(pending, key=lambda t: tasks[t][0]):
                    if not task.cancelled():  # it finished before the cancel reached it
                        self._record(*tasks[task], task.result())

    async def _call(self, index: int, call: ToolCall, args: BaseModel) -> _Done:
        self.dispatched.add(index)
        self.batch.emit("tool_start", call=call)
        ctx = self.batch.context(call, dict(self.retries), args)
        try:
            return _Done(outcome=await self.batch.executor.call_tool(call, ctx))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return _Done(error=exc)

    def _record(self, index: int, call: ToolCall, done: _Done) -> None:
        outcome, error = done.outcome, done.error
        if outcome is not None:
            self.executed += 1
            self._record_outcome(index, call, outcome)
        elif isinstance(error, ToolOutcomeUnknown):
            self._close(index, call, OUTCOME_UNKNOWN_RESULT)
            self._fail(Stop("tool", f"tool {call.name!r} (call {call.id}): {error}"), error)
        elif error is not None:
            told = raised(error)
            failure = ToolOutcome(status="failed", content=f"the tool failed: {told}")
            self._answer(index, call, failure)
            self._fail(Stop("tool", f"tool {call.name!r} (call {call.id}) failed: {told}"), error)

    def _record_outcome(self, index: int, call: ToolCall, outcome: ToolOutcome) -> None:
        if outcome.status == "canceled":
            self.batch.emit("canceled", reason=outcome.content)
            self.canceled = True
            self._fail(Stop("canceled", f"a tool stopped the run: {outcome.content}"), None)
            return  # the stopping call is closed with the others
        if outcome.status == "retry":
            self._answer(index, call, outcome.model_copy(update={"status": "failed"}))
            tool = self.batch.agent.tools[call.name]
            count = self._count_retry(call.name)
            if count > tool.max_retries:
                stop = Stop(
                    "tool",
                    f"tool {call.name!r} asked the model to retry {count} times, over the "
                    f"limit of {tool.max_retries}: {outcome.content}",
                )
                self._fail(stop, None)
            return
        self._answer(index, call, outcome)

    def _fail(self, stop: Stop, cause: BaseException | None) -> None:
        if self.stop is None:  # the first failure is the run's
            self.stop, self.cause = stop, cause

    def _flight(self, calls: Sequence[ToolCall]) -> None:
        self.batch.in_flight([c.name for c in calls])

    # -- results ----------------------------------------------------------------------------

    def _answer(self, index: int, call: ToolCall, outcome: ToolOutcome) -> None:
        self.answers[index] = CallResult(call, self._decided(tool_message(call, outcome)))

    def _close(self, index: int, call: ToolCall, text: str) -> None:
        message = self._decided(Message.tool(call.id, call.name, text))
        self.answers[index] = CallResult(call, message, True)

    def _decided(self, message: Message) -> Message:
        """``message`` carrying the decision on its call, if one was made; an edited call's
        result tells the model a person changed the arguments."""
        decision = self.decisions.get(message.tool_call_id)
        if decision is None:
            return message
        update: dict[str, object] = {"decision": decision}
        if decision.approved and decision.args is not None:
            update["content"] = f"{edited_note(decision)}\n{message.content}"
        return message.model_copy(update=update)

    def outcome(self, calls: Sequence[ToolCall]) -> BatchOutcome:
        for index, call in enumerate(calls):
            if index in self.answers:
                continue
            started = index in self.dispatched and not self.canceled
            self._close(index, call, OUTCOME_UNKNOWN_RESULT if started else INTERRUPTED_RESULT)
        return BatchOutcome(
            results=tuple(self.answers[i] for i in range(len(calls))),
            executed=self.executed,
            retries=MappingProxyType(dict(self.retries)),
            stop=self.stop,
            cause=self.cause,
            handoff=self.handoff,
        )
