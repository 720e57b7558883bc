"""Approvals from the command line: ``golem approve``, and the question ``run`` and ``chat`` ask.

    golem approve <run-id>                      # approve every call the run waits for
    golem approve <run-id> t-1 --deny           # deny that call; the model reads it was denied
    golem approve <run-id> t-1 --deny --reason "over the limit"   # the model reads the reason
    golem approve <run-id> t-1 --args '{"amount": 50}'            # run it with these arguments
    golem approve <run-id> --by alice           # who decided (default: the OS user)
    golem approve <run-id> --always             # and stop asking for that tool in the conversation
    golem approve <conversation-id>             # the conversation's turn in flight

A run waits for approvals in its own workflow: ``golem run`` asks at a terminal and
otherwise says what waits and exits 3; ``golem approve`` answers from anywhere, later.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from temporalio.client import Client

from golem.approvals import Approve, Deny
from golem.cli.connect import CliError, client_link, connect_args, watching
from golem.cli.output import describe_call, print_failure, print_result
from golem.cli.show import resolve_run_id
from golem.client import DurableAgent, DurableConversation
from golem.client.lookups import Approvals, awaiting_approval
from golem.messages import ToolCall
from golem.results import Result, RunError
from golem.tools import ToolFailed

#: ``golem run``'s exit code when its run waits for approvals nobody at a terminal gave.
WAITS_FOR_APPROVAL = 3


def read_line(prompt: str, out: TextIO | None = None) -> str:
    """One line from the person at the terminal (``EOFError`` at end of input); the prompt
    goes to ``out`` (stdout by default: ``run`` asks on stderr, beside its answer)."""
    stream = out or sys.stdout
    stream.write(prompt)
    stream.flush()
    line = sys.stdin.readline()
    if not line:
        raise EOFError
    return line.rstrip("\n")


async def ask_approvals(
    calls: Sequence[ToolCall], interactive: bool, out: TextIO | None = None
) -> dict[str, bool]:
    """The person's decision on each call, asked in turn. End of input is nobody's decision:
    ``EOFError``, and the calls keep waiting."""
    stream = out or sys.stdout
    decisions = {}
    for call in calls:
        question = f"approve {call.name}({call.args})? [y/N] "
        answer = await asyncio.to_thread(read_line, question if interactive else "", stream)
        if not interactive:
            print(f"{question}{answer}", file=stream)  # piped input: show the decision
        decisions[call.id] = answer.strip().lower() in ("y", "yes")
    return decisions


def print_waiting(
    client: Client, result: Result[Any], run_id: str, conversation_id: str, as_json: bool
) -> int:
    """Say which calls ``run_id`` waits for and how to answer them; ``WAITS_FOR_APPROVAL``."""
    calls = [*result.pending_approvals, *result.pending_calls]
    if as_json:
        print(
            json.dumps(
                {
                    "waitingFor": [{"id": c.id, "name": c.name, "args": c.args} for c in calls],
                    "runId": run_id,
                    "conversationId": conversation_id,
                }
            )
        )
        return WAITS_FOR_APPROVAL
    if result.pending_approvals:
        ids = " ".join(c.id for c in result.pending_approvals)
        for call in result.pending_approvals:
            print(f"waiting for approval of {describe_call(call)}", file=sys.stderr)
        print(f"approve with:    golem approve {run_id} {ids}  (or --deny)", file=sys.stderr)
    for call in result.pending_calls:
        print(f"waiting for the application's result of {describe_call(call)}", file=sys.stderr)
        print(
            f"complete with:   golem complete {run_id} {call.id} --result JSON  (or --error TEXT)",
            file=sys.stderr,
        )
    print(f"run id:          {run_id}")  # ids on stdout, as in every state
    print(f"conversation id: {conversation_id}")
    print(f"UI:              {client_link(client, run_id)}")
    return WAITS_FOR_APPROVAL


async def cmd_approve(args: argparse.Namespace) -> int:
    client = await connect_args(args)
    waiting = await awaiting_approval(client, await resolve_run_id(client, args.run_id))
    decisions = chosen(waiting, args.call_id, decision_of(args))
    by = args.by or getpass.getuser()
    info = waiting.info
    durable: DurableAgent[Any] = DurableAgent(client, info.agent, task_queue=info.task_queue)
    try:
        async with watching(client, info.task_queue, waiting.run_id):
            if waiting.conversation_id:
                handle = client.get_workflow_handle(waiting.conversation_id)
                result = await DurableConversation(durable, handle).approve(decisions, by=by)
            else:
                result = await (await durable.attach(waiting.run_id)).approve(decisions, by=by)
    except ValueError as exc:  # refused, nothing recorded
        raise CliError(str(exc)) from None
    except RunError as exc:
        return print_failure(client, exc, waiting.run_id, waiting.conversation_id)
    verb = "denied" if args.deny else "approved"
    more = f" to run with {args.args}" if args.args else f": {args.reason}" if args.reason else ""
    for call in waiting.calls:
        if call.id in decisions:
            standing = f" and every later {call.name} call in this conversation" * args.always
            print(f"golem: {verb} {describe_call(call)}{more}{standing} (by {by})", file=sys.stderr)
    if result.paused:  # another batch, or calls this approval left undecided
        return print_waiting(
            client, result, waiting.run_id, result.conversation_id or "", args.json
        )
    print_result(client, result, args.json)
    return 0


async def cmd_complete(args: argparse.Namespace) -> int:
    """``golem complete RUN CALL --result JSON | --error TEXT``: the application's answer
    to a client-run tool's call the run (or conversation's turn) waits for."""
    if (args.result is None) == (args.error is None):
        raise CliError("give the call's --result JSON, or --error TEXT when it failed")
    if args.result is not None:
        try:
            value: object = json.loads(args.result)
        except json.JSONDecodeError as exc:
            raise CliError(f"--result is not JSON ({exc.msg} at position {exc.pos})") from None
    else:
        value = ToolFailed(args.error)
    client = await connect_args(args)
    waiting = await awaiting_approval(client, await resolve_run_id(client, args.run_id))
    chosen(waiting, [args.call_id], Approve())  # the call must be waiting
    info = waiting.info
    durable: DurableAgent[Any] = DurableAgent(client, info.agent, task_queue=info.task_queue)
    by = args.by or getpass.getuser()
    try:
        async with watching(client, info.task_queue, waiting.run_id):
            if waiting.conversation_id:
                handle = client.get_workflow_handle(waiting.conversation_id)
                conversation = DurableConversation(durable, handle)
                result = await conversation.complete({args.call_id: value}, by=by)
            else:
                run = await durable.attach(waiting.run_id)
                result = await run.complete({args.call_id: value}, by=by)
    except ValueError as exc:  # refused, nothing recorded
        raise CliError(str(exc)) from None
    except RunError as exc:
        return print_failure(client, exc, waiting.run_id, waiting.conversation_id)
    print(f"golem: completed #{args.call_id} (by {by})", file=sys.stderr)
    if result.paused:
        return print_waiting(
            client, result, waiting.run_id, result.conversation_id or "", args.json
        )
    print_result(client, result, args.json)
    return 0


def decision_of(args: argparse.Namespace) -> Approve | Deny:
    """The decision ``golem approve``'s flags give: ``--deny [--reason]`` or
    ``[--args] [--always]``."""
    if args.deny:
        if args.args is not None:
            raise CliError("--args edits a call that runs; it cannot go with --deny")
        if args.always:
            raise CliError("--always approves: it cannot go with --deny")
        return Deny(reason=args.reason or "")
    if args.reason is not None:
        raise CliError("--reason is a denial's: give it with --deny")
    if args.args is None:
        return Approve(always=args.always)
    try:
        edited = json.loads(args.args)
    except json.JSONDecodeError as exc:
        raise CliError(f"--args is not JSON ({exc.msg} at position {exc.pos})") from None
    if not isinstance(edited, dict):
        raise CliError(f"--args must be a JSON object of arguments, not {args.args}")
    if len(args.call_id) != 1:
        raise CliError("--args edits one call: name it (golem approve RUN CALL_ID --args ...)")
    return Approve(args=edited, always=args.always)


def chosen(
    waiting: Approvals, call_ids: Sequence[str], decision: Approve | Deny
) -> dict[str, Approve | Deny]:
    """The decisions ``golem approve`` sends: for the calls named, else every pending one."""
    run = waiting.run_id
    if not waiting.calls:
        if run == waiting.conversation_id:
            raise CliError(f"conversation {run} is not waiting for approval: no turn is in flight")
        raise CliError(
            f"run {run} is not waiting for approval: it is {waiting.info.status} "
            f"(`golem show {run}`)"
        )
    pending = {c.id: c for c in waiting.calls}
    unknown = [c for c in call_ids if c not in pending]
    if unknown:
        listed = ", ".join(describe_call(c) for c in waiting.calls)
        raise CliError(f"run {run} is not waiting for {', '.join(unknown)}: it waits for {listed}")
    return dict.fromkeys(call_ids or pending, decision)
