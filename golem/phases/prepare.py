"""Preparing the history: identity, the history processor, validation, approvals to act on,
repair and instructions. Everything here happens before the first model request."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from golem.approvals import check_edits, decider, to_decisions
from golem.executor import Executor
from golem.history.repair import normalize_history
from golem.messages import Decision, HistoryError, Message, Part, ToolCall, validate_history
from golem.phases import Stop
from golem.run_state import AgentSpec, RunInput, resolve_conversation_id
from golem.tools import RunContext
from golem.toolsets import RunTools, Toolset, ToolsetTool, with_tools
from golem.user_functions import describe


def identity(inputs: RunInput, executor: Executor) -> tuple[str, str]:
    """``(run_id, conversation_id)``, minting what the inputs do not name."""
    conversation_id = (
        resolve_conversation_id(inputs.history, inputs.conversation_id) or executor.new_id()
    )
    return inputs.run_id or executor.new_id(), conversation_id


async def process_history(
    agent: AgentSpec, executor: Executor, ctx: RunContext[Any], history: list[Message]
) -> list[Message]:
    """The processor's output (when the agent has one), validated."""
    if agent.history_processor is not None:
        try:
            history = await executor.process_history(ctx, history)
        except Exception as exc:
            name = describe(agent.history_processor)
            raise Stop("history", f"history processor {name} failed: {exc}") from exc
        strays = [i for i, m in enumerate(history) if not isinstance(m, Message)]
        if strays:
            name = describe(agent.history_processor)
            kind = type(history[strays[0]]).__name__
            raise Stop(
                "history",
                f"history processor {name} returned {kind} at index {strays[0]}, not a Message",
            )
    try:
        validate_history(history)
    except HistoryError as exc:
        raise Stop("history", str(exc)) from exc
    return history


async def toolsets(agent: AgentSpec, executor: Executor, ctx: RunContext[Any]) -> RunTools:
    """The agent as this run sees it: its own tools and its toolsets', each server asked
    once, all at once; a server that cannot be asked, or a clash, stops the run."""

    async def listed(toolset: Toolset) -> list[ToolsetTool]:
        try:
            return await executor.toolset_tools(toolset, ctx)
        except ValueError as exc:
            raise Stop("tool", str(exc)) from exc
        except Exception as exc:
            message = f"toolset {toolset.name!r}: its tools could not be listed: {exc}"
            raise Stop("tool", message) from exc

    answers = await asyncio.gather(*map(listed, agent.toolsets), return_exceptions=True)
    for answer in answers:
        if isinstance(answer, BaseException):
            raise answer  # the first toolset's failure, in the agent's order
    try:
        return with_tools(agent, [t for tools in answers for t in tools])  # type: ignore[union-attr]
    except ValueError as exc:
        raise Stop("tool", str(exc)) from None


def prompt(text: str | None, parts: list[Part]) -> Message:
    """The prompt's user message, checked as history is (a malformed part names itself)."""
    message = Message.user(text or "", parts)
    try:
        validate_history([message])
    except HistoryError as exc:
        raise Stop("history", f"the prompt is malformed: {exc}") from exc
    return message


def repaired(messages: list[Message]) -> list[Message]:
    """The history providers accept: pairing repaired, system messages dropped (the
    instructions replace them)."""
    fixed, _ = normalize_history(messages)
    return [m for m in fixed if m.role != "system"]


async def instructions(agent: AgentSpec, executor: Executor, ctx: RunContext[Any]) -> str:
    """Static instructions, then the instructions function's text."""
    static = agent.instructions or ""
    dynamic = ""
    if agent.instructions_fn is not None:
        try:
            dynamic = await executor.resolve_instructions(ctx)
        except Exception as exc:
            raise Stop("instructions", f"instructions function failed: {exc}") from exc
    return "\n\n".join(text for text in (static, dynamic) if text)


@dataclass(frozen=True)
class ApprovalPlan:
    """What to do with the calls a paused run left waiting."""

    decided: tuple[ToolCall, ...]
    """Run now (approved, or not needing approval) or close as denied."""
    decisions: Mapping[str, Decision]
    """The decisions on them, as their results record them."""
    still: tuple[ToolCall, ...]
    """Still waiting for a decision: the run pauses again."""


def plan_approvals(
    agent: AgentSpec,
    messages: Sequence[Message],
    approvals: Mapping[str, bool | Decision],
    needs_approval: Callable[[ToolCall], bool],
) -> ApprovalPlan:
    """Split the last turn's unanswered calls by the decisions given (``needs_approval``
    says which of the others wait)."""
    pending = _unanswered_calls_of_last_turn(messages)
    unknown = sorted(set(approvals) - {c.id for c in pending})
    if unknown:
        raise Stop("history", _not_pending(messages, unknown, pending))
    decisions = {k: as_decision(v) for k, v in approvals.items()}
    try:
        check_edits({n: t.validate_args for n, t in agent.tools.items()}, pending, decisions)
    except ValueError as exc:
        raise Stop("history", str(exc)) from None

    decided = tuple(c for c in pending if c.id in approvals or not needs_approval(c))
    return ApprovalPlan(
        decided=decided,
        decisions=decisions,
        still=tuple(c for c in pending if c not in decided),
    )


def checked_approvals(
    tools: Mapping[str, Any], history: Sequence[Message], approvals: Mapping[str, object]
) -> dict[str, bool | Decision]:
    """The decisions a run is started with, checked before it starts: ``ValueError`` for one
    of the wrong type, an over-long reason, or edited arguments the tool (of ``tools``, by
    name) would not take."""
    decisions = to_decisions(approvals)
    pending = _unanswered_calls_of_last_turn(history)
    check_edits({n: t.validate_args for n, t in tools.items()}, pending, decisions)
    return dict(decisions)


def as_decision(given: bool | Decision) -> Decision:
    """A decision as recorded (a bare ``bool``, as 0.2.0 sent, has no decider or time)."""
    return given if isinstance(given, Decision) else Decision(approved=bool(given))


def _not_pending(
    messages: Sequence[Message], unknown: list[str], pending: Sequence[ToolCall]
) -> str:
    """Why decisions on ``unknown`` cannot be taken: decided already (by whom), or not
    waiting at all; and what does wait."""
    decided = {m.tool_call_id: m.decision for m in messages if m.role == "tool" and m.decision}
    again = [c for c in unknown if c in decided]
    waiting = [c.id for c in pending]
    if again:
        who = ", ".join(f"{c} by {decider(decided[c])}" for c in again)
        return f"calls {again} are decided already ({who}); pending: {waiting}"
    return f"approvals name calls that are not pending: {unknown}; pending: {waiting}"


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
