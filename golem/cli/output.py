"""What the user reads: one line per message, a result with its ids, a failure with its
next steps.

    print(format_message(0, message))      # "  0  user    Where is my order?"
"""

from __future__ import annotations

import json
import sys
from typing import Any

from pydantic_core import to_json, to_jsonable_python
from temporalio.client import Client

from golem.approvals import describe_decision
from golem.cli.connect import client_link, ui_link
from golem.messages import Message, ToolCall
from golem.results import Result, RunError


def describe_call(call: ToolCall) -> str:
    """``transfer({"amount": 5}) #t-1``: a call as the user reads it everywhere."""
    args = call.args if len(call.args) <= 200 else call.args[:197] + "..."
    return f"{call.name}({args}) #{call.id}"


def format_message(index: int, message: Message) -> str:
    """One readable line per message."""
    text = " ".join(message.content.split())
    if len(text) > 100:
        text = text[:97] + "..."
    calls = ", ".join(f"{c.name}({c.args[:60]}) #{c.id}" for c in message.tool_calls)
    who: str = message.role
    if message.role == "tool":
        who = f"tool {message.tool_name} #{message.tool_call_id}" + (
            " FAILED" if message.failed else ""
        )
    line = f"{index:>3}  {who:<28} {text}"
    if calls:
        line += f"  -> {calls}"
    if message.decision is not None:
        line += f"  [{describe_decision(message.decision)}]"
    return line


def readable_output(output: Any) -> str:
    """A run's answer as printed: text as it is, a structured output as JSON."""
    return output if isinstance(output, str) else to_json(output, fallback=str).decode()


def print_result(
    client: Client, result: Result[Any], as_json: bool, *, streamed: bool = False
) -> None:
    if as_json:
        print(
            json.dumps(
                {
                    "output": to_jsonable_python(result.output, fallback=str),
                    "runId": result.run_id,
                    "conversationId": result.conversation_id,
                    "ui": ui_link(
                        result.run_id, client.namespace, client.service_client.config.target_host
                    ),
                }
            )
        )
        return
    if not streamed:  # streamed: the answer is out already, its line ended
        print(readable_output(result.output))
    print()
    print(f"run id:          {result.run_id}")
    print(f"conversation id: {result.conversation_id}")
    print(f"UI:              {client_link(client, result.run_id)}")


def print_failure(
    client: Client, exc: RunError, run_id: str, conversation: str = "", as_json: bool = False
) -> int:
    """The failure and what to do on stderr, the run id on stdout (``as_json``: one JSON
    object); ``conversation``: the run was a turn of that conversation workflow."""
    print(f"run failed at stage {exc.stage}: {exc.detail}", file=sys.stderr)
    print_run_id(run_id, as_json, conversation, error=f"{exc.stage}: {exc.detail}")
    if conversation:  # the conversation kept the evidence: its next turn resumes it
        print(
            f"resume with:     golem run --conversation-id {conversation} PROMPT", file=sys.stderr
        )
    elif exc.partial:
        print(f"resume with:     golem resume {run_id} [PROMPT]", file=sys.stderr)
    print(f"inspect with:    golem show {run_id}", file=sys.stderr)
    print(f"UI:              {client_link(client, run_id)}", file=sys.stderr)
    return 1


def print_run_id(
    run_id: str, as_json: bool = False, conversation: str = "", *, error: str = ""
) -> None:
    """The id of a run that gave no result (failed, or not taken), on stdout."""
    if as_json:
        print(json.dumps({"runId": run_id, "conversationId": conversation, "error": error}))
    else:
        print(f"run id:          {run_id}")


def echo(text: str) -> None:
    print(text, end="", flush=True)
