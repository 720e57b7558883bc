"""The commands that read: ``golem show`` and ``golem conversation``.

    golem show <run-id>                         # one run's conversation (--json: a history file)
    golem show <conversation-id>                # a conversation workflow's whole transcript
    golem conversation <conversation-id>        # the runs of a conversation, in order

A closed run is read from its history, no worker needed.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, timedelta
from typing import Any

from temporalio.api.enums.v1 import VersioningBehavior
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from golem.cli.connect import (
    WORKER_HINT,
    CliError,
    client_link,
    connect_args,
    started,
    stored_problem,
)
from golem.cli.output import describe_call, format_message
from golem.cli.queues import describe_queue
from golem.client import conversation_runs, fetch_run
from golem.client.conversations import conversation_status
from golem.client.lookups import (
    Approvals,
    RunInfo,
    awaiting_approval,
    chained_runs,
    conversation_info,
    conversation_messages,
    existing_run,
    find_run,
    inline_turn_conversation,
    run_info,
)
from golem.client.records import inline_turns_of
from golem.messages import dump_messages
from golem.wire import Completed, Paused, ShippingError, TurnOutput, names
from golem.wire.transcript import InlineTurn, ran


async def resolve_run_id(client: Client, given: str) -> str:
    """golem's run id (the Temporal Workflow ID) for ``given``: a run id, or the UI's Run ID."""
    run_id = await find_run(client, given)
    if run_id is None:
        raise CliError(
            f"no run {given!r} in namespace {client.namespace!r} at "
            f"{client.service_client.config.target_host}: it is neither a golem run id (the "
            "Temporal Workflow ID) nor a Temporal Run ID; `golem conversation ID` lists the "
            "runs of a conversation (a turn run inline is no workflow: `golem show` its "
            "conversation)"
        )
    if run_id != given:
        print(
            f"golem: {given} is a Temporal Run ID; golem's run id (the Workflow ID) is {run_id}",
            file=sys.stderr,
        )
    return run_id


async def cmd_show(args: argparse.Namespace) -> int:
    client = await connect_args(args)
    if await find_run(client, args.run_id) is None:
        if chained := await chained_runs(client, args.run_id):
            return await show_chained(client, args.run_id, chained, args.json)
        if inline := await inline_turn_conversation(client, args.run_id):
            return await show_inline_turn(client, args.run_id, inline[0], args.json)
    run_id = await resolve_run_id(client, args.run_id)
    info = await run_info(client, run_id)
    if info.status == "running" and not await started(client, run_id):
        problem = (await describe_queue(client, info.task_queue)).not_current()
        if problem is not None:  # nothing will answer a query: say why at once
            raise CliError(f"{run_id} is running and waits: {problem}")
    try:
        if info.workflow_type == names.CONVERSATION_WORKFLOW:
            return await show_conversation(client, info, args.json)
        record = await fetch_run(client, run_id, patience=PATIENCE)
        running = record.status == "running"
        waiting = await awaiting_approval(client, run_id, PATIENCE) if running else None
    except RPCError as exc:
        if exc.status not in NO_WORKER:
            raise
        raise CliError(no_worker(info)) from exc
    except RuntimeError as exc:
        problem = stored_problem(exc, run_id)
        if problem is None:
            raise
        raise CliError(problem) from None
    if args.json:
        # Exactly a history: `golem run --history FILE` continues from it.
        sys.stdout.write(dump_messages(record.messages).decode() + "\n")
        return 0
    failure = f" ({record.error})" if record.error else ""
    doing = ", waiting for approval" if waiting is not None and waiting.calls else ""
    print(f"run {run_id}: {record.status}{doing}{failure}")
    for index, message in enumerate(record.messages):
        print(format_message(index, message))
    print_approvals(waiting, run_id)
    print(f"UI: {client_link(client, run_id)}")
    return 0


#: How long ``show`` waits for a worker to answer a running run's query: a live worker
#: answers in milliseconds, and Temporal would hold a query nobody takes for about 30 s.
PATIENCE = timedelta(seconds=10)

#: How Temporal answers a query that no worker took: at once (no poller lately), or late.
NO_WORKER = (
    RPCStatusCode.CANCELLED,
    RPCStatusCode.DEADLINE_EXCEEDED,
    RPCStatusCode.FAILED_PRECONDITION,
)


def no_worker(info: RunInfo) -> str:
    """What to start for a running run no worker answered for: a worker of its version, for a
    run pinned to one (a worker of another version never takes it)."""
    run_id, queue = info.run_id, info.task_queue
    versioning = info.description.raw_description.workflow_execution_info.versioning_info
    pinned = versioning.versioning_override.pinned.version
    version = pinned if pinned.build_id else versioning.deployment_version
    if versioning.behavior != VersioningBehavior.VERSIONING_BEHAVIOR_PINNED or not version.build_id:
        return (
            f"{run_id} is running and no worker answered for it: start one "
            f"(`{WORKER_HINT} --task-queue {queue}`), then ask again"
        )
    name, build = version.deployment_name, version.build_id
    return (
        f"{run_id} is running, pinned to build id {build} of deployment {name}, and no "
        f"worker of that version answered for it: start one (`{WORKER_HINT} --task-queue "
        f"{queue} --deployment {name} --build-id {build}`), then ask again; "
        f"`golem deploy status --deployment {name}` shows each version's workers and runs; "
        "only to move it to a version that runs the same code: `temporal workflow "
        f"update-options --workflow-id {run_id} --versioning-override-behavior pinned "
        f"--versioning-override-deployment-name {name} --versioning-override-build-id NEW`"
    )


async def show_conversation(client: Client, info: RunInfo, as_json: bool) -> int:
    """``golem show`` of a conversation id: the whole conversation (from its history), and
    what its turn in flight waits for."""
    messages = await conversation_messages(client, info.run_id)
    if as_json:
        sys.stdout.write(dump_messages(messages).decode() + "\n")
        return 0
    waiting = await awaiting_approval(client, info.run_id) if info.status == "running" else None
    print(f"conversation {info.run_id} ({info.workflow_type}, {await status_of(client, info)})")
    for index, message in enumerate(messages):
        print(format_message(index, message))
    print_approvals(waiting, info.run_id)
    print(f"its runs: golem conversation {info.run_id}")
    print(f"UI: {client_link(client, info.run_id)}")
    return 0


async def show_chained(
    client: Client, conversation_id: str, run_ids: list[str], as_json: bool
) -> int:
    """``golem show`` of a conversation of chained runs (``golem run --conversation-id``):
    its newest run holds the whole conversation."""
    try:
        record = await fetch_run(client, run_ids[-1])
    except RuntimeError as exc:
        problem = stored_problem(exc, run_ids[-1])
        if problem is None:
            raise
        raise CliError(problem) from None
    if as_json:
        sys.stdout.write(dump_messages(record.messages).decode() + "\n")
        return 0
    print(
        f"conversation {conversation_id} ({len(run_ids)} chained run"
        f"{'' if len(run_ids) == 1 else 's'}, newest {record.status})"
    )
    for index, message in enumerate(record.messages):
        print(format_message(index, message))
    print(f"its runs: golem conversation {conversation_id}")
    print(f"UI: {client_link(client, run_ids[-1])}")
    return 0


async def show_inline_turn(client: Client, run_id: str, conversation_id: str, as_json: bool) -> int:
    """``golem show`` of an inline turn's run id (docs/adr/0050), found by its conversation's
    ``GolemTurnRuns``: no workflow of its own, so its conversation up to the turn's end and
    its status are read from the conversation's histories, as ``golem conversation`` does."""
    messages = await conversation_messages(client, conversation_id)
    mine = [index for index, message in enumerate(messages) if message.run_id == run_id]
    messages = messages[: mine[-1] + 1] if mine else []
    if as_json:  # a history, as for a run: `golem run --history FILE` continues from it
        sys.stdout.write(dump_messages(messages).decode() + "\n")
        return 0
    turned = [t for t in await inline_turns_of(client, conversation_id) if t.run_id == run_id]
    # Newest record first: one that ran wins over a send of it refused later.
    turn = next((t for t in turned if ran(t.outcome)), turned[0] if turned else None)
    entry = inline_entry(turn, "") if turn is not None else None
    status = entry["status"] if entry is not None else "handed over to"
    stop = f" ({entry['outcome']})" if entry is not None and entry["outcome"] else ""
    print(f"run {run_id}: {status}{stop} (a turn of conversation {conversation_id}, run inline)")
    for index, message in enumerate(messages):
        print(format_message(index, message))
    if status == "running":
        waiting = await awaiting_approval(client, conversation_id, PATIENCE)
        print_approvals(waiting if waiting.run_id == run_id else None, run_id)
    print(f"its conversation: golem show {conversation_id}")
    print(f"UI: {client_link(client, conversation_id)}")
    return 0


async def status_of(client: Client, conversation: RunInfo) -> str:
    """A conversation workflow's status; a resting one says what reopens it."""
    description = conversation.description
    status = await conversation_status(
        client, conversation.run_id, description.status, description.run_id
    )
    return "resting: its next turn reopens it" if status == "resting" else status


def print_approvals(waiting: Approvals | None, shown: str) -> None:
    """The calls a run waits for (a turn's: named, below its conversation), and the command
    that answers them."""
    if waiting is None or not waiting.calls:
        return
    turn = f" (its turn {waiting.run_id})" if waiting.run_id != shown else ""
    for call in waiting.calls:
        print(f"waiting for approval of {describe_call(call)}{turn}")
    calls = " ".join(c.id for c in waiting.calls)
    print(f"approve with: golem approve {waiting.answers} {calls}  (or --deny)")


async def cmd_conversation(args: argparse.Namespace) -> int:
    client = await connect_args(args)
    conversation_id = args.conversation_id
    heading = f"conversation {conversation_id}"
    run_ids = await chained_runs(client, conversation_id)
    workflow = await conversation_info(client, conversation_id)
    turns: list[str] = []
    if workflow is not None:
        heading += f" ({workflow.workflow_type}, {await status_of(client, workflow)})"
        try:  # from its history (no worker needed), across continue-as-new
            turns = await conversation_runs(client, conversation_id)
        except ShippingError as exc:  # an earlier workflow run is gone (retention)
            print(f"golem: {exc}; listing the runs visibility still has instead", file=sys.stderr)
        else:
            run_ids = [r for r in run_ids if r not in set(turns)] + turns
    if not run_ids:
        raise CliError(await no_conversation(client, conversation_id))
    turned = await inline_turns_of(client, conversation_id) if workflow else []
    # Newest run first: a turn's newest record wins, and one that ran over a refused send.
    inline = {t.run_id: t for t in reversed(turned)}
    inline |= {t.run_id: t for t in reversed(turned) if ran(t.outcome)}
    # An inline turn's parent is the turn before it (a delegation visibility lists is none).
    parents = dict(zip(turns[1:], turns, strict=False))
    listed = [
        inline_entry(inline[run_id], parents.get(run_id, ""))
        if run_id in inline
        else await describe_run(client, run_id)
        for run_id in run_ids
    ]
    listed.sort(key=lambda entry: entry["startTime"])  # time order, whichever way they began
    if args.json:
        print(json.dumps({"conversationId": conversation_id, "runs": listed}))
        return 0
    print(f"{heading}: {len(listed)} run(s)")
    for entry in listed:
        print(
            f"  {entry['startTime'][:19].replace('T', ' ')}  {entry['runId']}  "
            f"{entry['status']:<10} parent={entry['parentRunId'] or '-'}"
        )
        if entry["answer"]:
            print(f"      answer: {entry['answer']}")
        elif entry["outcome"] and entry["status"] != "completed":
            print(f"      outcome: {entry['outcome']}")
    return 0


async def no_conversation(client: Client, given: str) -> str:
    """Why ``golem conversation`` found no runs for ``given``: a turn's run id (a child
    run's, or an inline turn's) names its conversation."""
    info = await existing_run(client, given)
    if info is not None:  # a child turn's run is a child of its conversation
        parent = info.parent_workflow_id
        found, how = (parent if parent and parent == info.conversation_id else ""), ""
    else:
        inline = await inline_turn_conversation(client, given)
        found, how = (inline[0] if inline else ""), ", run inline"
    if found:
        return (
            f"{given} is a run id (a turn of conversation {found}{how}), not a conversation "
            f"id: `golem conversation {found}` lists its runs"
        )
    return (
        f"no runs found for conversation {given} in namespace {client.namespace!r}: check "
        "the id (`golem run` and `golem chat` print it)"
    )


def inline_entry(turn: InlineTurn, parent: str) -> dict[str, Any]:
    """An inline turn's line of ``golem conversation`` (docs/adr/0050): no workflow of its
    own, so read from its update in the conversation's history."""
    outcome = turn.outcome
    answer, stop = "", ""
    if isinstance(outcome, TurnOutput) and isinstance(outcome.run, Completed):
        status = "completed"
        output = outcome.run.output
        answer = " ".join(str(output if output is not None else "").split())[:80]
    elif outcome is None:
        status = "running"
    elif isinstance(outcome, TurnOutput) and isinstance(outcome.run, Paused):  # it waits
        calls = ", ".join(c.id for c in outcome.run.pending_approvals)
        status, stop = "running", f"waiting for approval: {calls}"
    else:
        status, stop = "failed", " ".join(str(outcome).split())[:80]
    return {
        "runId": turn.run_id,
        "status": status,
        "parentRunId": parent,
        "startTime": turn.started.replace(tzinfo=UTC).isoformat(),
        "answer": answer,
        "outcome": stop,
    }


async def describe_run(client: Client, run_id: str) -> dict[str, Any]:
    """One run's line of ``golem conversation``: its status, parent and answer."""
    info = await run_info(client, run_id)
    outcome = await info.outcome()
    answer = ""
    if info.status == "completed":
        # The run's outcome memo holds its answer; runs older than the memo are read whole.
        output = outcome.get("output")
        if output is None:
            output = (await fetch_run(client, run_id, base=False)).output
        answer = " ".join(str(output or "").split())[:80]
    return {
        "runId": run_id,
        "status": info.status,
        "parentRunId": info.parent_run_id,
        "startTime": info.start_time.isoformat() if info.start_time else "",
        "answer": answer,
        "outcome": str(outcome.get("stopReason") or ""),
    }
