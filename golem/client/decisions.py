"""Decisions as a client sends them: checked here, before anything reaches the run.

    await run.approve({call.id: Approve(args={"amount": 50})}, by="alice")

Each decision is checked for its type (``True``, ``False``, ``Approve``, ``Deny``) and a
denial's reason for its length; edited arguments are checked against the tool's schema when
this client holds the agent (otherwise the run's validator refuses them, nothing recorded).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from golem.approvals import check_edits, check_sizes, to_decisions
from golem.external import ExternalTool, to_results
from golem.messages import Decision, ToolCall
from golem.tools import Tool

#: Asks the run (or conversation) which calls wait now.
Waiting = Callable[[], Awaitable[list[ToolCall]]]


async def checked_decisions(
    decisions: Mapping[str, object],
    by: str,
    tools: Mapping[str, Tool],
    waiting: Waiting,
) -> dict[str, Decision]:
    """``decisions`` as the ``Decision``\\ s sent, stamped with ``by``; ``ValueError`` naming
    the culprit for a decision of the wrong type, an over-long reason, or edited arguments
    the tool would not take (``waiting`` says which calls wait, asked only for edits)."""
    given = to_decisions(decisions, by)
    check_sizes(given)  # without the agent, the run's validator checks the rest
    if tools and any(d.args is not None for d in given.values()):
        validators = {n: t.validate_args for n, t in tools.items()}
        check_edits(validators, await waiting(), given)
    return given


async def checked_results(
    results: Mapping[str, object], by: str, tools: Mapping[str, Tool], waiting: Waiting
) -> dict[str, Decision]:
    """The application's results for client-run tools' calls (a value, or ``ToolFailed``)
    as the ``Decision``\\ s sent; ``ValueError`` for one its tool's result schema refuses."""
    schemas = any(isinstance(t, ExternalTool) and t.result_schema for t in tools.values())
    names = {c.id: c.name for c in await waiting()} if schemas else {}
    given = to_results(results, tools, names, by)
    check_sizes(given)
    return given
