"""Client-run (external) tools: the model may call them, the application runs them.

    agent.external_tool("pick_date", "Ask the user for a date", {"type": "object", ...})
    paused = await run.result()                  # paused.pending_calls: what the app answers
    await run.complete({call.id: "2026-12-24"})  # or ToolFailed("user closed the dialog")
    result = await agent.run(history=paused.messages, tool_results={call.id: "2026-12-24"})

A call of an external tool always waits, durably in its run's workflow, in process by
pausing; its result is what the application gives (a ``str`` as it is, anything else as
JSON), checked against the tool's ``result_schema`` when it has one, before anything is sent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from golem.errors import ToolFailed
from golem.messages import Decision, HistoryItem, as_messages
from golem.models.base import ToolDefinition
from golem.tools import Tool
from golem.toolsets import Arguments


@dataclass(kw_only=True)
class ExternalTool(Tool):
    """A tool the application runs: the model sees ``parameters``; the run waits for it."""

    parameters: dict[str, Any] = field(default_factory=dict)
    result_schema: dict[str, Any] | None = None
    """A JSON schema the application's results must match (``None``: any)."""

    @property
    def definition(self) -> ToolDefinition:
        return ToolDefinition(
            name=self.name, description=self.description, parameters=self.parameters
        )


def external_tool(
    name: str,
    description: str,
    parameters: Mapping[str, Any],
    result_schema: Mapping[str, Any] | None = None,
) -> ExternalTool:
    """An external tool named ``name``: its calls wait for the application's result."""

    def never(**_: Any) -> str:
        raise RuntimeError(f"tool {name!r} is run by the application: answer with complete()")

    return ExternalTool(
        function=never,
        name=name,
        description=description,
        takes_context=False,
        args_model=Arguments,
        parameters=dict(parameters),
        result_schema=dict(result_schema) if result_schema is not None else None,
    )


def to_results(
    given: Mapping[str, object], tools: Mapping[str, Tool], names: Mapping[str, str], by: str = ""
) -> dict[str, Decision]:
    """The application's results as the ``Decision``\\ s that carry them (a ``ToolFailed``: a
    failed result); ``ValueError`` naming the call for a result its tool's ``result_schema``
    refuses or one that is not JSON. ``names``: call id -> tool name, where known."""
    at = datetime.now(UTC).isoformat(timespec="seconds")
    results: dict[str, Decision] = {}
    for call_id, value in given.items():
        if isinstance(value, ToolFailed):
            results[call_id] = Decision(approved=False, reason=str(value), by=by, at=at)
            continue
        tool = tools.get(names.get(call_id, ""))
        if isinstance(tool, ExternalTool) and tool.result_schema is not None:
            _check(call_id, value, tool.result_schema)
        try:
            text = value if isinstance(value, str) else json.dumps(value)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"the result for call {call_id!r} is not JSON: {exc}") from None
        results[call_id] = Decision(approved=True, result=text, by=by, at=at)
    return results


def with_results(
    tools: Mapping[str, Tool],
    history: Sequence[HistoryItem] | None,
    approvals: Mapping[str, object] | None,
    tool_results: Mapping[str, object] | None,
) -> Mapping[str, object]:
    """A person's decisions and the application's results (``run(tool_results=...)``) on
    the calls ``history`` leaves waiting, together."""
    if not tool_results:
        return approvals or {}
    names = {c.id: c.name for m in as_messages(history or ()) for c in m.tool_calls}
    return {**(approvals or {}), **to_results(tool_results, tools, names)}


def _check(call_id: str, value: object, schema: Mapping[str, Any]) -> None:
    import jsonschema  # type: ignore[import-untyped]  # only for a declared result schema

    validator = jsonschema.Draft202012Validator(schema)
    problems = sorted(e.message for e in validator.iter_errors(value))
    if problems:
        raise ValueError(
            f"the result for call {call_id!r} does not match its schema: " + "; ".join(problems)
        )
