"""The run loop, written once and driven by an :class:`Executor`.

identity → history processor → validate → (approved calls) → repair → drop system
messages → instructions → prompt → [request → tools]* → output.

The loop never touches the clock, randomness, the network or Temporal: whatever
has an effect goes through the executor. ``LocalExecutor`` (golem.local) runs it
in process; ``TemporalExecutor`` (golem.workflows) runs it inside a workflow,
where every effect is an activity and every id is replay-safe.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from golem.events import RunEvent
from golem.history.repair import INTERRUPTED_RESULT, normalize_history
from golem.messages import HistoryError, Message, Part, ToolCall, Usage, validate_history
from golem.models.base import ModelRequest, ModelResponse, StreamDelta
from golem.results import PartialResult, Result, RunError, Stage
from golem.tools import RunContext, Tool, ToolOutcome, validation_problems

if TYPE_CHECKING:
    from golem.agent import Agent

__all__ = [
    "DENIED_RESULT",
    "Executor",
    "RunInput",
    "RunLoop",
    "RunState",
    "resolve_conversation_id",
]

#: The failed result a denied approval leaves.
DENIED_RESULT = "the user denied this tool call; it was not executed"

DeltaSink = Callable[[StreamDelta], None]


class Executor(Protocol):
    """Everything with an effect that a run needs. See docs/adr/0004-one-loop-two-executors.md."""

    def new_id(self) -> str:
        """Mint a run or conversation id."""
        ...

    async def process_history(self, ctx: RunContext[Any], history: list[Message]) -> list[Message]:
        """Apply the agent's history processor, once."""
        ...

    async def resolve_instructions(self, ctx: RunContext[Any]) -> str:
        """Evaluate the agent's dynamic instructions, once."""
        ...

    async def request(
        self, request: ModelRequest, ctx: RunContext[Any], on_delta: DeltaSink | None
    ) -> ModelResponse:
        """Send one request to the model (``ctx.turn`` is the turn it will complete)."""
        ...

    async def call_tool(self, call: ToolCall, ctx: RunContext[Any]) -> ToolOutcome:
        """Execute one validated tool call."""
        ...


class RunInput(BaseModel):
    """What a run is started with; also the durable workflow's input."""

    # camelCase on the wire, like every payload in a durable run's history.
    model_config = ConfigDict(frozen=True, alias_generator=to_camel, populate_by_name=True)

    prompt: str | None = None
    parts: list[Part] = Field(default_factory=list)
    history: list[Message] = Field(default_factory=list)
    deps: Any = None
    run_id: str = ""
    conversation_id: str = ""
    approvals: dict[str, bool] = Field(default_factory=dict)


@dataclass
class RunState:
    """The live state of one run; the durable workflow serves it to queries and the UI."""

    run_id: str = ""
    conversation_id: str = ""
    instructions: str = ""
    messages: list[Message] = field(default_factory=list)
    """The conversation: repaired history (no system messages) and what this run added."""
    completed: int = 0
    """``messages[:completed]`` is the evidence through the last completed model turn."""
    usage: Usage = field(default_factory=Usage)
    requests: int = 0
    tool_calls: int = 0
    turn: int = 0
    tools_in_flight: list[str] = field(default_factory=list)

    def request_messages(self) -> list[Message]:
        """What the model sees: instructions first, then the conversation (append-only)."""
        if self.instructions:
            return [Message.system(self.instructions), *self.messages]
        return list(self.messages)


class _Stop(Exception):
    """Internal: end the run with a RunError built from the current state."""

    def __init__(self, stage: Stage, message: str, evidence: int | None = None) -> None:
        super().__init__(message)
        self.stage: Stage = stage
        self.message = message
        self.evidence = evidence


class RunLoop:
    """One run of one agent through one executor."""

    def __init__(
        self,
        agent: Agent[Any, Any],
        executor: Executor,
        inputs: RunInput,
        emit: Callable[[RunEvent], None] | None = None,
    ) -> None:
        self.agent = agent
        self.executor = executor
        self.inputs = inputs
        self.emit = emit
        self.state = RunState()
        self._retries: dict[str, int] = {}
        self._decode_retries = 0
        self._paused: Result[Any] | None = None

    # -- public -------------------------------------------------------------------

    async def run(self) -> Result[Any]:
        try:
            return await self._run()
        except _Stop as stop:
            raise RunError(stop.stage, stop.message, self._partial(stop.evidence)) from (
                stop.__cause__
            )
        except asyncio.CancelledError as exc:
            raise RunError(
                "canceled", "the run was cancelled by its caller", self._partial()
            ) from exc

    # -- the loop ----------------------------------------------------------------

    async def _run(self) -> Result[Any]:
        agent, state, inputs = self.agent, self.state, self.inputs
        history = list(inputs.history)
        state.conversation_id = (
            resolve_conversation_id(history, inputs.conversation_id) or self.executor.new_id()
        )
        state.run_id = inputs.run_id or self.executor.new_id()
        if agent.history_processor is not None:
            try:
                history = await self.executor.process_history(self._ctx(), history)
            except Exception as exc:
                name = getattr(agent.history_processor, "__name__", repr(agent.history_processor))
                raise _Stop("history", f"history processor {name} failed: {exc}") from exc
        try:
            validate_history(history)
        except HistoryError as exc:
            raise _Stop("history", str(exc)) from exc
        state.messages = history
        if inputs.approvals:
            await self._run_approved_calls(inputs.approvals)
            if self._paused is not None:
                return self._paused  # still waiting on decisions: nothing to repair or ask yet
        repaired, _ = normalize_history(state.messages)
        state.messages = [m for m in repaired if m.role != "system"]
        state.completed = len(state.messages)
        state.instructions = await self._instructions()
        if inputs.prompt is not None or inputs.parts:
            self._add(Message.user(inputs.prompt or "", inputs.parts))

        while True:
            if state.turn >= agent.max_iterations:
                raise _Stop(
                    "loop", f"no final answer after max_iterations={agent.max_iterations} turns"
                )
            request = self._build_request()
            limit = agent.usage_limits.before_request(state.requests, state.usage, request.messages)
            if limit:
                raise _Stop("usage", limit)
            response = await self._request(request)
            answer = response.message
            if answer.tool_calls:
                paused = await self._run_batch(answer.tool_calls)
                if paused:
                    return paused
                continue
            output = self._decode(answer.content)
            if output is not _RETRY:
                return self._result(output)

    async def _instructions(self) -> str:
        static = self.agent.instructions or ""
        dynamic = ""
        if self.agent.instructions_fn is not None:
            try:
                dynamic = await self.executor.resolve_instructions(self._ctx())
            except Exception as exc:
                raise _Stop("instructions", f"instructions function failed: {exc}") from exc
        return "\n\n".join(text for text in (static, dynamic) if text)

    def _build_request(self) -> ModelRequest:
        agent = self.agent
        return ModelRequest.model_construct(
            messages=self.state.request_messages(),
            tools=agent.tool_definitions,
            output_schema=agent.output_schema,
            settings=agent.model_settings,
        )

    async def _request(self, request: ModelRequest) -> ModelResponse:
        state = self.state
        state.requests += 1
        turn = state.turn + 1
        self._event("model_start", turn=turn)
        on_delta = self._on_delta if self.emit is not None else None
        try:
            response = await self.executor.request(request, self._ctx(turn=turn), on_delta)
        except (asyncio.CancelledError, _Stop):
            raise
        except Exception as exc:
            raise _Stop("model", f"model request {state.requests} failed: {exc}") from exc
        state.turn = turn
        state.usage = state.usage + response.usage
        self._add(response.message)
        state.completed = len(state.messages)
        self._event("model_end", turn=turn, message=state.messages[-1], response=response)
        return response

    # -- tools ---------------------------------------------------------------------

    async def _run_batch(self, calls: Sequence[ToolCall]) -> Result[Any] | None:
        """Run the calls of the newest assistant turn; a ``Result`` when the run pauses."""
        agent = self.agent
        waiting = [c for c in calls if (t := agent.tools.get(c.name)) and t.requires_approval]
        if waiting:
            return self._result(None, pending=waiting)
        await self._execute(calls, {})
        return None

    async def _run_approved_calls(self, approvals: dict[str, bool]) -> None:
        """Continue a paused run: execute approved calls, close denied ones."""
        pending = _unanswered_calls_of_last_turn(self.state.messages)
        unknown = sorted(set(approvals) - {c.id for c in pending})
        if unknown:
            raise _Stop("history", f"approvals name calls that are not pending: {unknown}")
        decided = [c for c in pending if c.id in approvals or not self._needs_approval(c)]
        await self._execute(decided, {c.id: not ok for c, ok in _decisions(pending, approvals)})
        still = [c for c in pending if c not in decided]
        if still:
            self._paused = self._result(None, pending=still)

    def _needs_approval(self, call: ToolCall) -> bool:
        tool = self.agent.tools.get(call.name)
        return bool(tool and tool.requires_approval)

    async def _execute(self, calls: Sequence[ToolCall], denied: dict[str, bool]) -> None:
        """Validate, run and record one batch, results in call order."""
        state, agent = self.state, self.agent
        outcomes: dict[int, ToolOutcome] = {}
        runnable: list[tuple[int, ToolCall, Tool]] = []
        for index, call in enumerate(calls):
            if denied.get(call.id):
                outcomes[index] = ToolOutcome(status="failed", content=DENIED_RESULT)
                continue
            problem, tool = self._check_call(call)
            if problem:
                outcomes[index] = ToolOutcome(status="failed", content=problem)
            elif tool is not None:
                runnable.append((index, call, tool))
        limit = agent.usage_limits.before_tools(state.tool_calls, len(runnable))
        if limit:
            raise _Stop("usage", limit)
        stopped = await self._run_tools(runnable, outcomes)
        for index, call in enumerate(calls):
            outcome = outcomes.get(index)
            if outcome is None or outcome.status == "canceled":
                # A deliberate stop closes every unanswered call at once: resume needs no repair.
                outcome = ToolOutcome(status="ok", content=INTERRUPTED_RESULT)
            message = Message.tool(
                call.id, call.name, outcome.content, outcome.status == "failed", outcome.parts
            )
            self._add(message)
            if index in outcomes and outcomes[index].status != "canceled":
                self._event("tool_end", call=call, message=self.state.messages[-1])
        state.completed = len(state.messages)
        if stopped is not None:
            self._event("canceled", reason=stopped)
            raise _Stop("canceled", f"a tool stopped the run: {stopped}")

    def _check_call(self, call: ToolCall) -> tuple[str, Tool | None]:
        """A problem to send back to the model instead of running the call, or the tool."""
        agent, retries = self.agent, self._retries
        tool = agent.tools.get(call.name)
        if tool is None:
            names = ", ".join(sorted(agent.tools)) or "none"
            problem = f"unknown tool {call.name!r}; the tools you may call are: {names}"
            limit = agent.retries
        else:
            try:
                tool.validate_args(call.args)
                return "", tool
            except ValueError as exc:
                problem = f"tool {call.name!r}: {exc}"
                limit = tool.max_retries
        retries[call.name] = retries.get(call.name, 0) + 1
        if retries[call.name] > limit:
            raise _Stop(
                "tool",
                f"{problem} (failed {retries[call.name]} times, over the limit of {limit})",
                evidence=self.state.completed,
            )
        return problem, None

    async def _run_tools(
        self, runnable: list[tuple[int, ToolCall, Tool]], outcomes: dict[int, ToolOutcome]
    ) -> str | None:
        """Run calls (concurrently unless a tool is sequential); the stop reason, if any."""
        if not runnable:
            return None
        evidence = self.state.completed
        sequential = len(runnable) == 1 or any(tool.sequential for _, _, tool in runnable)
        self.state.tools_in_flight = [call.name for _, call, _ in runnable]
        try:
            if sequential:
                for index, call, _ in runnable:
                    outcome = await self._call(call, evidence)
                    outcomes[index] = outcome
                    if outcome.status == "canceled":
                        return outcome.content
                return None
            tasks = {
                asyncio.ensure_future(self._call(call, evidence)): index
                for index, call, _ in runnable
            }
            pending = set(tasks)
            try:
                while pending:
                    done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                    # Record in call order so concurrent completions are deterministic.
                    for task in sorted(done, key=tasks.__getitem__):
                        outcome = task.result()
                        outcomes[tasks[task]] = outcome
                        if outcome.status == "canceled":
                            return outcome.content
                return None
            finally:
                for task in pending:
                    task.cancel()
                if pending:
                    await asyncio.wait(pending)
        finally:
            self.state.tools_in_flight = []

    async def _call(self, call: ToolCall, evidence: int) -> ToolOutcome:
        self._event("tool_start", call=call)
        try:
            outcome = await self.executor.call_tool(call, self._ctx(call=call))
        except (asyncio.CancelledError, _Stop):
            raise
        except Exception as exc:
            raise _Stop(
                "tool", f"tool {call.name!r} (call {call.id}) failed: {exc}", evidence
            ) from exc
        self.state.tool_calls += 1
        return outcome

    # -- output --------------------------------------------------------------------

    def _decode(self, text: str) -> Any:
        adapter = self.agent.output_adapter
        if adapter is None:
            return text
        try:
            return adapter.validate_json(_strip_fences(text))
        except ValidationError as exc:
            self._decode_retries += 1
            problems = validation_problems(exc, "answer")
            if self._decode_retries > self.agent.output_retries:
                raise _Stop(
                    "decode",
                    f"the answer did not match the output type after "
                    f"{self._decode_retries} tries: {problems}",
                ) from exc
            self._add(Message.user(_CORRECTION.format(problems=problems)))
            return _RETRY

    # -- bookkeeping ---------------------------------------------------------------

    def _add(self, message: Message) -> None:
        self.state.messages.append(message.stamped(self.state.run_id, self.state.conversation_id))

    def _ctx(self, *, turn: int | None = None, call: ToolCall | None = None) -> RunContext[Any]:
        state = self.state
        return RunContext(
            deps=self.inputs.deps,
            run_id=state.run_id,
            conversation_id=state.conversation_id,
            agent_name=self.agent.name,
            usage=state.usage,
            retries=dict(self._retries),
            turn=state.turn if turn is None else turn,
            tool_call_id=call.id if call else "",
            tool_name=call.name if call else "",
        )

    def _result(self, output: Any, pending: list[ToolCall] | None = None) -> Result[Any]:
        state = self.state
        return Result(
            output=output,
            messages=list(state.messages),
            usage=state.usage,
            run_id=state.run_id,
            conversation_id=state.conversation_id,
            requests=state.requests,
            tool_calls=state.tool_calls,
            pending_approvals=list(pending or []),
        )

    def _partial(self, evidence: int | None = None) -> PartialResult | None:
        state = self.state
        if state.turn == 0 and state.tool_calls == 0:
            return None  # nothing was completed: a first-call failure needs no recovery path
        upto = state.completed if evidence is None else evidence
        return PartialResult(
            messages=list(state.messages[:upto]),
            usage=state.usage,
            requests=state.requests,
            tool_calls=state.tool_calls,
            run_id=state.run_id,
            conversation_id=state.conversation_id,
        )

    def _on_delta(self, delta: StreamDelta) -> None:
        kind = {"text": "text_delta", "thinking": "thinking_delta"}.get(
            delta.kind, "tool_call_delta"
        )
        self._event(kind, turn=self.state.turn + 1, delta=delta)

    def _event(self, kind: str, **fields: Any) -> None:
        if self.emit is None:
            return
        fields.setdefault("turn", self.state.turn)
        self.emit(
            RunEvent(
                kind=kind,  # type: ignore[arg-type]
                run_id=self.state.run_id,
                conversation_id=self.state.conversation_id,
                **fields,
            )
        )


_RETRY = object()
_CORRECTION = (
    "Your answer does not match the required output format: {problems}. "
    "Reply again with only a JSON value that matches the schema."
)


def _strip_fences(text: str) -> str:
    stripped = text.strip()
    if stripped.startswith("```") and stripped.endswith("```"):
        stripped = stripped[3:-3]
        first, _, rest = stripped.partition("\n")
        return rest if first.strip().isalpha() or not first.strip() else stripped
    return stripped


def resolve_conversation_id(history: Sequence[Message], explicit: str | None) -> str:
    """The explicit id, else the one the newest identified message carries, else ``""``."""
    if explicit:
        return explicit
    return next((m.conversation_id for m in reversed(history) if m.conversation_id), "")


def _unanswered_calls_of_last_turn(messages: Sequence[Message]) -> list[ToolCall]:
    """Calls of the final assistant turn that no result answers yet."""
    answered: set[str] = set()
    for message in reversed(messages):
        if message.role == "tool":
            answered.add(message.tool_call_id)
            continue
        if message.role == "assistant":
            return [c for c in message.tool_calls if c.id and c.id not in answered]
        return []
    return []


def _decisions(
    pending: Sequence[ToolCall], approvals: dict[str, bool]
) -> list[tuple[ToolCall, bool]]:
    return [(c, approvals[c.id]) for c in pending if c.id in approvals]
