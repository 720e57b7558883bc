"""The commands that read: ``golem show`` and ``golem conversation``.

    golem show <run-id>                         # one run's conversation (--json: a history file)
    golem conversation <conversation-id>        # the runs of a conversation, in order

A closed run is read from its history, no worker needed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from golem.cli.connect import WORKER_HINT, CliError, client_link, connect_args
from golem.cli.output import format_message
from golem.client import PARENT_RUN_ID, conversation_runs, fetch_run
from golem.messages import dump_messages
from golem.workflows.agent_run import OUTCOME_MEMO, AgentRunWorkflow
from golem.workflows.conversation import ConversationWorkflow
from golem.workflows.shipping import ShippingError

__all__ = [
    "cmd_conversation",
    "cmd_show",
    "conversation_workflow",
    "describe_run",
    "resolve_run_id",
    "runs_query",
]


def quoted(value: str) -> str:
    """A value safe inside a visibility query's double quotes."""
    return value.replace("\\", "").replace('"', "")


async def resolve_run_id(client: Client, given: str) -> str:
    """golem's run id (the Temporal Workflow ID) for ``given``: a run id, or the UI's Run ID."""
    try:
        await client.get_workflow_handle(given).describe()
        return given
    except RPCError as exc:
        if exc.status != RPCStatusCode.NOT_FOUND or "namespace" in exc.message.lower():
            raise
    with contextlib.suppress(RPCError):  # not a UUID: no such Run ID either
        async for run in client.list_workflows(f'RunId = "{quoted(given)}"', limit=1):
            print(
                f"golem: {given} is a Temporal Run ID; "
                f"golem's run id (the Workflow ID) is {run.id}",
                file=sys.stderr,
            )
            return run.id
    raise CliError(
        f"no run {given!r} in namespace {client.namespace!r} at "
        f"{client.service_client.config.target_host}: it is neither a golem run id (the "
        "Temporal Workflow ID) nor a Temporal Run ID; `golem conversation ID` lists the runs "
        "of a conversation"
    )


async def cmd_show(args: argparse.Namespace) -> int:
    client = await connect_args(args)
    run_id = await resolve_run_id(client, args.run_id)
    try:
        record = await fetch_run(client, run_id)
    except RPCError as exc:
        if exc.status not in (RPCStatusCode.CANCELLED, RPCStatusCode.DEADLINE_EXCEEDED):
            raise
        queue = (await client.get_workflow_handle(run_id).describe()).task_queue
        raise CliError(
            f"run {run_id} is running and no worker answered for it: start one "
            f"(`{WORKER_HINT} --task-queue {queue}`), then ask again"
        ) from exc
    if args.json:
        # Exactly a history: `golem run --history FILE` continues from it.
        sys.stdout.write(dump_messages(record.messages).decode() + "\n")
        return 0
    failure = f" ({record.error})" if record.error else ""
    print(f"run {run_id}: {record.status}{failure}")
    for index, message in enumerate(record.messages):
        print(format_message(index, message))
    print(f"UI: {client_link(client, run_id)}")
    return 0


async def cmd_conversation(args: argparse.Namespace) -> int:
    client = await connect_args(args)
    conversation_id = args.conversation_id
    chained = [run async for run in client.list_workflows(runs_query(conversation_id))]
    chained.sort(key=lambda run: run.start_time)
    heading = f"conversation {conversation_id}"
    run_ids = [run.id for run in chained]
    if await conversation_workflow(client, conversation_id):
        handle = client.get_workflow_handle(conversation_id)
        status = (await handle.describe()).status
        heading += f" ({ConversationWorkflow.__name__}, {_status(status)})"
        try:  # from its history (no worker needed), across continue-as-new
            turns = await conversation_runs(client, conversation_id)
        except ShippingError as exc:  # an earlier workflow run is gone (retention)
            print(f"golem: {exc}; listing the runs visibility still has instead", file=sys.stderr)
        else:
            # Runs chained under this id before the workflow came first; then its turns.
            run_ids = [r for r in run_ids if r not in set(turns)] + turns
    if not run_ids:
        raise CliError(
            f"no runs found for conversation {conversation_id} in namespace "
            f"{client.namespace!r}: check the id (`golem run` and `golem chat` print it)"
        )
    listed = [await describe_run(client, run_id) for run_id in run_ids]
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


def _status(status: WorkflowExecutionStatus | None) -> str:
    return status.name.lower() if status else "unknown"


async def describe_run(client: Client, run_id: str) -> dict[str, Any]:
    """One run's line of ``golem conversation``: its status, parent and answer."""
    description = await client.get_workflow_handle(run_id).describe()
    answer = ""
    outcome = await description.memo_value(OUTCOME_MEMO, None)
    if not isinstance(outcome, dict):
        outcome = {}
    if description.status == WorkflowExecutionStatus.COMPLETED:
        # The run's outcome memo holds its answer; runs older than the memo are read whole.
        output = outcome.get("output")
        if output is None:
            output = (await fetch_run(client, run_id, base=False)).output
        answer = " ".join(str(output or "").split())[:80]
    return {
        "runId": run_id,
        "status": _status(description.status),
        "parentRunId": description.typed_search_attributes.get(PARENT_RUN_ID) or "",
        "startTime": description.start_time.isoformat() if description.start_time else "",
        "answer": answer,
        "outcome": str(outcome.get("stopReason") or ""),
    }


def runs_query(conversation_id: str) -> str:
    """The visibility query for a conversation's runs (not its ConversationWorkflow)."""
    return (
        f'GolemConversationId = "{quoted(conversation_id)}" '
        f'AND WorkflowType = "{AgentRunWorkflow.__name__}"'
    )


async def conversation_workflow(client: Client, conversation_id: str) -> bool:
    """Whether ``conversation_id`` names a ``ConversationWorkflow`` (running or closed)."""
    try:
        description = await client.get_workflow_handle(conversation_id).describe()
    except RPCError as exc:
        if exc.status != RPCStatusCode.NOT_FOUND or "namespace" in exc.message.lower():
            raise
        return False
    return description.workflow_type == ConversationWorkflow.__name__
