"""Decisions on waiting calls, as every protocol of ``golem serve`` sends them.

    {"approved": true}                     # or false; AG-UI's resume payload, REST's decision
    {"approved": true, "args": {...}}      # edited arguments    } accepted by the protocol,
    {"approved": false, "reason": "..."}   # a reason to deny    } refused until the client
    {"approved": true, "always": true}     # approve from now on } takes them (422)

:func:`to_approvals` is the one place that turns them into what the client's ``approve``
takes, so richer decisions arrive here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from golem.serve.errors import Problem

__all__ = ["DECISION_SCHEMA", "Decision", "decision", "to_approvals"]

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
#: Accepted in a payload, not yet carried to the run.
NOT_YET = ("args", "reason", "always")


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


def to_approvals(decisions: Mapping[str, Decision]) -> dict[str, bool]:
    """What ``DurableConversation.approve`` takes today: a yes or no per call. Edited
    arguments, a reason and ``always`` are refused with 422 until it takes them."""
    approvals = {}
    for call_id, given in decisions.items():
        checked = decision(call_id, given)
        extra = [name for name in NOT_YET if checked.get(name) is not None]
        if extra:
            raise Problem(
                422,
                f"the decision on call {call_id!r} sets {', '.join(extra)}: not supported yet "
                "(approve or deny only)",
                "not_supported_yet",
            )
        approvals[call_id] = bool(checked["approved"])
    return approvals
