"""What a person answers a call that waits: approve it (maybe with edited arguments) or deny it.

    from golem import Approve, Deny
    await run.approve({call.id: True}, by="alice")                       # as the model asked
    await run.approve({call.id: Approve(args={"order": 42, "amount": 50})}, by="alice")
    await run.approve({call.id: Deny(reason="over the limit; offer store credit")})
    result = await agent.run(history=paused.messages, approvals={call.id: Approve(args=...)})

``True`` is ``Approve()`` and ``False`` is ``Deny()``. Every decision becomes a
``golem.messages.Decision`` recorded on the call's tool message: who decided, when, the
arguments approved in place of the model's (whose own stay on its call) and a denial's
reason, which is what the model reads as the call's result. Anything else is refused with a
``ValueError`` naming the call, before anything is sent (docs/adr/0030-decisions.md).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from golem.messages import Decision, Message, ToolCall
from golem.tools import RunContext, Tool

#: The longest denial reason accepted (the model reads it as the call's result).
MAX_REASON_CHARS = 2000
#: The largest edited arguments, or client-run tool's result, one call takes (in bytes): an
#: activity carries them on (the tool's, the model's), and past Temporal's payload limit its
#: workflow's task fails for ever.
MAX_ARGS_BYTES = 512 * 1024


class Approve(BaseModel):
    """Run the call: as the model asked, or with ``args`` in place of its arguments."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    args: dict[str, Any] | None = None
    """The arguments to run the call with instead of the model's (validated against the
    tool's schema before anything is sent)."""
    always: bool = False
    """Stop asking about this tool in this conversation."""


class Deny(BaseModel):
    """Do not run the call; the model reads ``reason`` (or that it was denied) as its result."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reason: str = ""


#: What ``approve`` takes for each call id.
DecisionInput = bool | Approve | Deny | Decision

_ACCEPTED = "True, False, Approve(args=..., always=...) or Deny(reason=...)"


def to_decision(call_id: str, given: object, by: str = "", at: str = "") -> Decision:
    """``given`` as the ``Decision`` recorded, stamped with ``by`` and ``at`` (default: now);
    ``ValueError`` naming the call for anything but a bool, ``Approve``, ``Deny`` or
    ``Decision``, or a reason over ``MAX_REASON_CHARS``."""
    at = at or datetime.now(UTC).isoformat(timespec="seconds")
    if isinstance(given, bool):
        return Decision(approved=given, by=by, at=at)
    if isinstance(given, Approve):
        args = None if given.args is None else json.dumps(given.args, separators=(",", ":"))
        return Decision(approved=True, args=args, always=given.always, by=by, at=at)
    if isinstance(given, Deny):
        check_reason(call_id, given.reason)
        return Decision(approved=False, reason=given.reason, by=by, at=at)
    if isinstance(given, Decision):
        update = {"by": given.by or by, "at": given.at or at}
        return given.model_copy(update=update)
    raise ValueError(
        f"the decision for call {call_id!r} is {given!r} ({type(given).__name__}): give {_ACCEPTED}"
    )


def check_reason(call_id: str, reason: str) -> None:
    """``ValueError`` naming the call for a denial's reason over ``MAX_REASON_CHARS``."""
    if len(reason) > MAX_REASON_CHARS:
        raise ValueError(
            f"the denial of call {call_id!r} has a reason of {len(reason)} "
            f"characters, over the limit of {MAX_REASON_CHARS}: shorten it"
        )


def to_decisions(given: Mapping[str, object], by: str = "") -> dict[str, Decision]:
    """Every decision of ``given`` checked and recorded as ``Decision`` (one clock reading)."""
    if not isinstance(given, Mapping):
        raise ValueError(
            f"decisions must be a mapping of call id to {_ACCEPTED}, not {type(given).__name__}"
        )
    at = datetime.now(UTC).isoformat(timespec="seconds")
    for call_id in given:
        if not isinstance(call_id, str):
            raise ValueError(f"decisions name call {call_id!r}: a call id is a str")
    return {call_id: to_decision(call_id, value, by, at) for call_id, value in given.items()}


def decider(decision: Decision | bool | None) -> str:
    """Who gave ``decision``, for a refusal that names them (``None``: no decision arrived
    in time)."""
    if decision is None:
        return "the approval timeout"
    if isinstance(decision, Decision) and decision.by:
        return decision.by
    return "an unnamed decider"


def describe_decision(decision: Decision) -> str:
    """``approved by alice at 2026-12-02T06:00:00+00:00, ran with {"amount":3}``: a decision
    as a person reads it in ``golem show`` and the Temporal UI."""
    verb = "approved" if decision.approved else "denied"
    text = f"{verb} by {decision.by or 'an unnamed decider'}"
    if decision.at:
        text += f" at {decision.at}"
    if decision.args is not None:
        text += f", ran with {decision.args}"
    if decision.always:
        text += ", always for this tool"
    if decision.reason:
        text += f": {decision.reason}"
    return text


def standing_approvals(history: Sequence[Message]) -> dict[str, Decision]:
    """The tools ``history`` approved ``always``, by name: the decision that did it."""
    return {
        m.tool_name: m.decision
        for m in history
        if m.role == "tool" and m.decision is not None and m.decision.always
    }


def needs_approval(tool: Tool | None, call: ToolCall, ctx: RunContext[Any]) -> bool:
    """Whether ``call`` waits for a person: its tool's ``requires_approval``, a bool or a
    predicate ``(ctx, args) -> bool`` on the validated arguments (a dict). A call whose
    arguments are invalid does not wait (its result tells the model); a predicate that
    raises sends the call to a person: never fails open."""
    rule = tool.requires_approval if tool is not None else False
    if not callable(rule):
        return bool(rule)
    assert tool is not None
    try:
        args = tool.validate_args(call.args)
    except ValueError:
        return False
    try:
        return bool(rule(ctx, args.model_dump()))
    except Exception:
        return True


def edited_call(call: ToolCall, decision: Decision | bool | None) -> ToolCall:
    """The call as it runs: with the approved arguments in place of the model's."""
    if isinstance(decision, Decision) and decision.args is not None:
        return call.model_copy(update={"args": decision.args})
    return call


def edited_note(decision: Decision) -> str:
    """What the model reads before an edited call's result: a person changed its arguments."""
    who = f" ({decision.by})" if decision.by else ""
    return (
        f"[a person{who} changed this call's arguments before it ran; it ran with {decision.args}]"
    )


def oversized(decisions: Mapping[str, Decision]) -> list[str]:
    """The decisions whose edited arguments or result are over ``MAX_ARGS_BYTES``, each
    named with its size."""
    found = []
    for call_id, decision in decisions.items():
        for what, text in (("edited arguments", decision.args), ("result", decision.result)):
            if text is not None and (size := len(text.encode())) > MAX_ARGS_BYTES:
                found.append(
                    f"call {call_id!r}: {size} bytes, over the limit of {MAX_ARGS_BYTES} "
                    f"for its {what}"
                )
    return found


def check_sizes(decisions: Mapping[str, Decision]) -> None:
    """``ValueError`` naming each decision too large to carry on (``oversized``)."""
    if problems := oversized(decisions):
        raise ValueError("too large to carry on: " + "; ".join(problems))


def check_edits(
    validate: Mapping[str, Any], calls: Sequence[ToolCall], decisions: Mapping[str, Decision]
) -> None:
    """Refuse edited arguments a tool would not accept, or too large for any tool to be
    called with (``MAX_ARGS_BYTES``): ``ValueError`` listing every problem.

    ``validate`` maps a tool name to its ``validate_args``; calls of tools it lacks (run by
    a run below, say) are left to the run that waits for them."""
    by_id = {c.id: c for c in calls}
    problems = oversized(decisions)  # whatever the tool, run here or below
    for call_id, decision in decisions.items():
        call = by_id.get(call_id)
        if decision.args is None or call is None or call.name not in validate:
            continue
        try:
            validate[call.name](decision.args)
        except ValueError as exc:
            problems.append(f"call {call_id!r} ({call.name}): {exc}")
    if problems:
        raise ValueError("the edited arguments are invalid: " + "; ".join(problems))
