"""Decisions on waiting calls, as every protocol of ``golem serve`` sends them.

    {"approved": true}                     # or false; AG-UI's resume payload, REST's decision
    {"approved": true, "args": {...}}      # edited arguments (checked against the tool's schema)
    {"approved": false, "reason": "..."}   # a reason to deny: what the model reads
    {"approved": true, "always": true}     # approve this tool from now on, in this conversation

:func:`to_approvals` is the one place that turns them into what the client's ``approve``
takes (``golem.Approve`` / ``golem.Deny``); the caller's subject is recorded as who decided.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from golem.approvals import MAX_ARGS_BYTES, Approve, DecisionInput, Deny
from golem.serve.errors import Problem

#: One decision, as its JSON arrives.
Decision = Mapping[str, Any]

#: The JSON schema of a decision (AG-UI interrupts name it as their ``responseSchema``).
DECISION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean", "description": "run the call (true) or deny it"},
        "args": {"type": "object", "description": "the arguments to run it with instead"},
        "reason": {"type": "string", "description": "why it is denied (the model reads it)"},
        "always": {"type": "boolean", "description": "approve this tool from now on"},
    },
    "required": ["approved"],
    "additionalProperties": False,
}
FIELDS = frozenset(DECISION_SCHEMA["properties"])


def decision(call_id: str, given: object) -> Decision:
    """``given`` checked as a decision on call ``call_id`` (400 naming what is wrong)."""
    if isinstance(given, bool):
        return {"approved": given}
    if not isinstance(given, Mapping):
        raise Problem(
            400,
            f'the decision on call {call_id!r} must be {{"approved": true|false}}, not {given!r}',
        )
    unknown = sorted(set(given) - FIELDS)
    if unknown:
        raise Problem(400, f"the decision on call {call_id!r} has unknown fields: {unknown}")
    if not isinstance(given.get("approved"), bool):
        raise Problem(400, f'the decision on call {call_id!r} needs "approved": true or false')
    return given


def to_approvals(decisions: Mapping[str, Decision]) -> dict[str, DecisionInput]:
    """What ``DurableConversation.approve`` takes: an ``Approve`` (maybe with edited
    arguments, or ``always``) or a ``Deny`` (maybe with a reason) per call; a field that
    does not fit its verdict (a reason on an approval, arguments on a denial) is a 400."""
    approvals: dict[str, DecisionInput] = {}
    for call_id, given in decisions.items():
        checked = decision(call_id, given)
        args, reason, always = checked.get("args"), checked.get("reason"), checked.get("always")
        if args is not None and not isinstance(args, Mapping):
            raise Problem(400, f'"args" of the decision on call {call_id!r} must be an object')
        if args is not None and (size := len(json.dumps(args).encode())) > MAX_ARGS_BYTES:
            raise Problem(
                413,
                f"the edited arguments of call {call_id!r} are {size} bytes: "
                f"at most {MAX_ARGS_BYTES}",
                "too_large",
            )
        if reason is not None and not isinstance(reason, str):
            raise Problem(400, f'"reason" of the decision on call {call_id!r} must be a string')
        if checked["approved"]:
            if reason:
                raise Problem(400, f"call {call_id!r} is approved: a reason is for a denial")
            approvals[call_id] = Approve(
                args=dict(args) if args is not None else None, always=bool(always)
            )
        else:
            if args is not None or always:
                raise Problem(
                    400, f"call {call_id!r} is denied: args and always are for an approval"
                )
            approvals[call_id] = Deny(reason=reason or "")
    return approvals
