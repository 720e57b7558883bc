"""Decisions as a client sends them: checked here, before anything reaches the run.

    await run.approve({call.id: Approve(args={"amount": 50})}, by="alice")

Each decision is checked for its type (``True``, ``False``, ``Approve``, ``Deny``) and a
denial's reason for its length; edited arguments are checked against the tool's schema when
this client holds the agent (otherwise the run's validator refuses them, nothing recorded).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from golem.approvals import check_edits, to_decisions
from golem.messages import Decision, ToolCall

__all__ = ["Validators", "checked_decisions"]

#: A tool name -> how that tool checks its arguments (``Tool.validate_args``).
Validators = Mapping[str, Callable[[str], object]]


async def checked_decisions(
    decisions: Mapping[str, object],
    by: str,
    tools: Validators,
    waiting: Callable[[], Awaitable[list[ToolCall]]],
) -> dict[str, Decision]:
    """``decisions`` as the ``Decision``\\ s sent, stamped with ``by``; ``ValueError`` naming
    the culprit for a decision of the wrong type, an over-long reason, or edited arguments
    the tool would not take (``waiting`` says which calls wait, asked only for edits)."""
    given = to_decisions(decisions, by)
    if tools and any(d.args is not None for d in given.values()):
        check_edits(tools, await waiting(), given)
    return given
