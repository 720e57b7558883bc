"""``golem pending``: every call waiting for a person or an application, across runs and
conversations, and the command that answers each.

    golem pending                              # everything that waits in the namespace
    golem pending --agent refunds --json       # one agent's, as JSON
    golem pending --conversation <id>          # one conversation's

Served by Temporal visibility (golem.client.inbox): no worker needs to run.
"""

from __future__ import annotations

import argparse
import json
import sys

from golem.cli.connect import CliError, connect_args
from golem.client import PendingCall, pending


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--agent", help="only this agent's runs (its name)")
    parser.add_argument("--conversation", help="only this conversation's runs")
    parser.add_argument("--json", action="store_true", help="print the calls as JSON")


def listed(call: PendingCall) -> dict[str, object]:
    """A waiting call as ``golem pending --json`` prints it."""
    return {
        "runId": call.run_id,
        "conversationId": call.conversation_id,
        "agent": call.agent,
        "callId": call.call_id,
        "tool": call.tool,
        "args": call.args,
        "argsCut": call.args_cut,
        "kind": call.kind,
        "since": call.since.isoformat(),
        "who": call.who,
        "answers": call.answers,
        "command": call.command,
    }


async def cmd_pending(args: argparse.Namespace) -> int:
    client = await connect_args(args)
    try:
        calls = await pending(client, agent=args.agent, conversation=args.conversation)
    except LookupError as exc:
        raise CliError(str(exc)) from None
    if args.json:
        print(json.dumps([listed(c) for c in calls], indent=2))
        return 0
    if not calls:
        print("golem: nothing waits", file=sys.stderr)
        return 0
    for call in calls:
        cut = " (cut: golem show has them whole)" if call.args_cut else ""
        what = "approval" if call.kind == "approval" else "result"
        print(f"{call.agent}: {call.tool}({call.args}){cut} [#{call.call_id}]")
        print(f"  waits for {what} by {call.who} since {call.since.isoformat(timespec='seconds')}")
        print(f"  run {call.run_id} · conversation {call.conversation_id}")
        print(f"  answer: {call.command}")
    return 0
