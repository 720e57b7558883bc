"""Agents for the durable MCP tests: served by a worker subprocess that gets killed
(tests/mcp_worker.py) and by the test's own worker that takes over, both with the same
stdio server logging to ``log``."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from mcp_support import files_server

from golem import Message, ToolCall
from golem.agent import Agent
from golem.models import FunctionModel, ScriptedModel


def _slow_then_answer(messages: list[Message], tools: Any) -> Message:
    results = [m for m in messages if m.role == "tool"]
    if not results:
        return Message.assistant("", [ToolCall(id="c1", name="slow", args='{"label": "x"}')])
    return Message.assistant(f"finished: {results[-1].content}")


def agents(log: Path | str) -> list[Agent[Any, Any]]:
    """``mcp_idempotent`` and ``mcp_at_most_once``: each calls ``slow``, then answers."""
    files = files_server(log)
    model = FunctionModel(_slow_then_answer, model_name="mcp-crash-model")
    once = dataclasses.replace(files, at_most_once={"slow"})
    return [
        Agent(model, name="mcp_idempotent", toolsets=[files]),
        Agent(model, name="mcp_at_most_once", toolsets=[once]),
    ]


def replayed(log: Path | str) -> list[Agent[Any, Any]]:
    """The agents of the recorded MCP histories (tests/record_mcp_histories.py): their names
    and toolsets are what a replay needs; their models answer only when recording."""
    files = files_server(log, "--tools", "12", "--page-size", "5")
    tools = Agent(
        ScriptedModel(
            [
                Message.assistant(
                    "",
                    [
                        ToolCall(id="c1", name="read", args='{"path": "a"}'),
                        ToolCall(id="c2", name="picture", args="{}"),
                        ToolCall(id="c3", name="broken", args='{"why": "no"}'),
                        ToolCall(id="c4", name="strict", args='{"count": -1}'),
                    ],
                ),
                Message.assistant("done"),
            ]
        ),
        name="mcp_tools",
        toolsets=[files],
    )
    approval = Agent(
        ScriptedModel(
            [
                Message.assistant("", [ToolCall(id="d1", name="delete", args='{"path": "a"}')]),
                Message.assistant("deleted"),
            ]
        ),
        name="mcp_approval",
        toolsets=[dataclasses.replace(files, requires_approval={"delete"})],
    )
    return [tools, approval]
