"""``golem``: the command line.

    golem dev                                   # Temporal dev server, UI on :8233, data in .golem/
    golem worker --agent myapp.agents:support   # serve agents
    golem run --agent support "Where is my order?"
    golem resume <run-id> ["try again"]         # continue a failed run in its conversation
    golem chat --agent support                  # a conversation workflow: each turn a child run
    golem conversation <conversation-id>        # the runs of a conversation, in order
    golem show <run-id>                         # one run's conversation (--json: a history file)
    golem setup                                 # register golem's search attributes on a cluster
    golem codec-server                          # decrypt payloads for the Temporal UI

``--agent`` is ``module:attribute`` everywhere; ``run`` and ``chat`` also take the bare
name a worker serves. Against a real cluster or Temporal Cloud, ``--address``,
``--namespace`` and the usual TEMPORAL_* settings apply. Errors are one line; ``--debug``
prints the traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import logging
import os
import signal
import socket
import sys
import traceback
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, NoReturn

from temporalio.api.enums.v1 import IndexedValueType, TaskQueueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.envconfig import ClientConfig
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

from golem import codec_server
from golem.agent import Agent
from golem.client import (
    AGENT,
    CONVERSATION_ID,
    PARENT_RUN_ID,
    SEARCH_ATTRIBUTES,
    DurableAgent,
    DurableConversation,
    UnknownAgentError,
    conversation_runs,
    fetch_run,
)
from golem.ids import new_id
from golem.messages import HistoryError, Message, ToolCall, dump_messages, load_messages
from golem.results import Result, RunError
from golem.streaming import write_text
from golem.testing import DEV_SERVER_ARGS, temporal_cli
from golem.worker import GolemPlugin, golem_converter
from golem.worker.converter import codec_problem
from golem.worker.logs import configure_logging
from golem.workflows.agent_run import OUTCOME_MEMO, AgentRunWorkflow
from golem.workflows.conversation import ConversationWorkflow
from golem.workflows.shipping import ShippingError

__all__ = [
    "CliError",
    "connect",
    "format_message",
    "load_agent",
    "main",
    "run_command",
    "ui_link",
]

DEFAULT_TASK_QUEUE = "golem"
DEFAULT_ADDRESS = "localhost:7233"
#: How long ``run`` waits for a worker to poll its task queue before saying none does.
NO_WORKER_AFTER = 3.0
WORKER_HINT = "golem worker --agent module:attribute"
#: How long ``conversation`` waits for a worker to answer a conversation's runs query.
QUERY_TIMEOUT = timedelta(seconds=5)
QUEUE_HELP = "the task queue golem workers poll"


class CliError(Exception):
    """A problem the user can fix; its message names the problem and the fix, in one line."""


def ui_base(address: str | None = None) -> str:
    """The Temporal UI for a server: GOLEM_UI_URL, Temporal Cloud's, or the dev server's
    (its UI listens on the gRPC port + 1000, as ``temporal server start-dev`` does)."""
    configured = os.environ.get("GOLEM_UI_URL")
    if configured:
        return configured.rstrip("/")
    host, _, port = (address or DEFAULT_ADDRESS).rpartition(":")
    if host.endswith(".tmprl.cloud"):
        return "https://cloud.temporal.io"
    ui_port = int(port) + 1000 if port.isdigit() else 8233
    return f"http://{host or 'localhost'}:{ui_port}"


def ui_link(run_id: str, namespace: str = "default", address: str | None = None) -> str:
    return f"{ui_base(address)}/namespaces/{namespace}/workflows/{run_id}"


def client_link(client: Client, run_id: str) -> str:
    return ui_link(run_id, client.namespace, client.service_client.config.target_host)


async def connect(
    plugins: Sequence[Any] = (), *, address: str | None = None, namespace: str | None = None
) -> Client:
    """A client for ``address``/``namespace``, else TEMPORAL_ADDRESS / TEMPORAL_NAMESPACE /
    profiles (default localhost:7233, namespace default)."""
    config = ClientConfig.load_client_connect_config()
    config.setdefault("target_host", DEFAULT_ADDRESS)
    if address:
        config["target_host"] = address
    if namespace:
        config["namespace"] = namespace
    target = config["target_host"]
    try:
        return await Client.connect(
            **config, data_converter=golem_converter(), plugins=list(plugins)
        )
    except RuntimeError as exc:
        reason = "connection refused" if "refused" in str(exc).lower() else str(exc).splitlines()[0]
        raise CliError(
            f"no Temporal server at {target} ({reason}): start one with `golem dev`, "
            "or point --address (or TEMPORAL_ADDRESS) at yours"
        ) from exc


async def connect_args(args: argparse.Namespace) -> Client:
    return await connect(address=args.address, namespace=args.namespace)


def load_agent(spec: str) -> Agent[Any, Any]:
    """Import ``module:attribute`` (the current directory is importable)."""
    module_name, _, attribute = spec.partition(":")
    if not attribute:
        raise SystemExit(f"--agent wants module:attribute, got {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise CliError(
            f"--agent {spec}: no module {exc.name!r} (run from the directory that holds it, "
            "or add it to PYTHONPATH)"
        ) from exc
    if not hasattr(module, attribute):
        raise CliError(f"--agent {spec}: module {module_name!r} has no {attribute!r}")
    agent = getattr(module, attribute)
    if not isinstance(agent, Agent):
        raise SystemExit(f"{spec} is a {type(agent).__name__}, not a golem Agent")
    return agent


def agent_name(spec: str) -> str:
    """``--agent`` of run/chat: ``module:attribute`` (imported for its name) or a bare name."""
    return load_agent(spec).name if ":" in spec else spec


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
    return line


def describe_error(exc: BaseException) -> str:
    """One line naming a problem and its fix."""
    if isinstance(exc, CliError):
        return str(exc)
    if (problem := codec_problem(exc)) is not None:
        return problem
    if isinstance(exc, UnknownAgentError):
        return f"{exc}; fix --agent, or start a worker that serves it ({WORKER_HINT})"
    if isinstance(exc, HistoryError):
        return f"the history is not valid: {exc}"
    if isinstance(exc, RunError):
        return f"run failed at stage {exc.stage}: {exc.detail}"
    if isinstance(exc, RPCError):
        if exc.status == RPCStatusCode.NOT_FOUND and "namespace" in exc.message.lower():
            return f"{exc.message}: pass --namespace (or TEMPORAL_NAMESPACE) naming one that exists"
        return f"Temporal answered {exc.status.name if exc.status else 'an error'}: {exc.message}"
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {first} (--debug prints the traceback)"


# -- the no-worker watch ---------------------------------------------------------------------


async def has_pollers(client: Client, task_queue: str) -> bool:
    response = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    return len(response.pollers) > 0


async def warn_without_worker(
    client: Client, task_queue: str, run_id: str, after: float = NO_WORKER_AFTER
) -> None:
    """Say so, once, when no worker polls ``task_queue``; the run keeps waiting for one."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + after
    while not await has_pollers(client, task_queue):
        if loop.time() >= deadline:
            print(
                f"golem: no worker polls task queue {task_queue!r} on "
                f"{client.service_client.config.target_host} (namespace {client.namespace}); "
                f"run {run_id} waits for one: start `{WORKER_HINT} --task-queue {task_queue}`",
                file=sys.stderr,
                flush=True,
            )
            return
        await asyncio.sleep(0.5)


@contextlib.asynccontextmanager
async def watching(client: Client, task_queue: str, run_id: str) -> AsyncIterator[None]:
    watch = asyncio.create_task(warn_without_worker(client, task_queue, run_id))
    try:
        yield
    finally:
        watch.cancel()
        with contextlib.suppress(asyncio.CancelledError, RPCError):
            await watch


# -- printing results ------------------------------------------------------------------------


def print_result(
    client: Client, result: Result[Any], as_json: bool, *, streamed: bool = False
) -> None:
    if as_json:
        print(
            json.dumps(
                {
                    "output": result.output,
                    "runId": result.run_id,
                    "conversationId": result.conversation_id,
                    "ui": client_link(client, result.run_id),
                },
                default=str,
            )
        )
        return
    if not streamed:  # streamed: the answer is out already, its line ended
        print(result.output)
    print()
    print(f"run id:          {result.run_id}")
    print(f"conversation id: {result.conversation_id}")
    print(f"UI:              {client_link(client, result.run_id)}")


def print_failure(client: Client, exc: RunError, run_id: str, conversation: str = "") -> int:
    """``conversation``: the run was a turn of that conversation workflow."""
    print(f"run failed at stage {exc.stage}: {exc.detail}", file=sys.stderr)
    print(f"run id:          {run_id}", file=sys.stderr)
    if conversation:  # the conversation kept the evidence: its next turn resumes it
        print(
            f"resume with:     golem run --conversation-id {conversation} PROMPT", file=sys.stderr
        )
    elif exc.partial:
        print(f"resume with:     golem resume {run_id} [PROMPT]", file=sys.stderr)
    print(f"inspect with:    golem show {run_id}", file=sys.stderr)
    print(f"UI:              {client_link(client, run_id)}", file=sys.stderr)
    return 1


# -- commands --------------------------------------------------------------------------------


def port_holder(port: int) -> str | None:
    """Which process listens on ``port`` (from /proc on Linux), or None when free."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
            return None
        except OSError:
            pass
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(f"socket:[{fields[9]}]")
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if any(os.readlink(fd) in inodes for fd in (proc / "fd").iterdir()):
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                return f"pid {proc.name} ({cmdline[:120].strip()})"
    return "a process you cannot inspect (another user's?)"


def cmd_dev(args: argparse.Namespace) -> int:
    try:
        binary = temporal_cli()
    except FileNotFoundError as exc:
        raise CliError(str(exc)) from exc
    ui_port = args.ui_port or args.port + 1000
    for port, flag in ((args.port, "--port"), (ui_port, "--ui-port")):
        holder = port_holder(port)
        if holder is not None:
            raise CliError(
                f"port {port} is busy, held by {holder}: stop it "
                f"(is `golem dev` already running?) or pick another with {flag}"
            )
    state = Path(args.dir)
    state.mkdir(parents=True, exist_ok=True)
    command = [
        binary,
        "server",
        "start-dev",
        "--db-filename",
        str(state / "temporal.sqlite"),
        "--port",
        str(args.port),
        "--ui-port",
        str(ui_port),
        # The server's WARN lines are mostly noise (poll errors while it stops).
        "--log-level",
        args.log_level,
        *DEV_SERVER_ARGS,
    ]
    for key in SEARCH_ATTRIBUTES:
        command += ["--search-attribute", f"{key.name}=Keyword"]
    (state / "ui-url").write_text(f"http://localhost:{ui_port}\n")  # the codec server's origin
    print(f"golem dev: Temporal on localhost:{args.port}, UI on http://localhost:{ui_port}")
    sys.stdout.flush()
    # Become the server, so a signal to `golem dev` reaches it and nothing is orphaned.
    os.execv(command[0], command)
    return 0  # not reached


async def cmd_worker(args: argparse.Namespace) -> int:
    agents = [load_agent(spec) for spec in args.agent]
    client = await connect_args(args)
    names = ", ".join(a.name for a in agents)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with Worker(client, task_queue=args.task_queue, plugins=[GolemPlugin(*agents)]):
            print(
                f"golem worker: serving {names} on task queue {args.task_queue!r} "
                f"({client.service_client.config.target_host}, namespace {client.namespace}); "
                "Ctrl-C stops",
                flush=True,
            )
            await stop.wait()
            print("golem worker: stopping", flush=True)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    return 0


async def conversation_history(client: Client, conversation_id: str) -> list[Message] | None:
    """The conversation as its newest run left it, or None when it has no runs."""
    runs = [run async for run in client.list_workflows(runs_query(conversation_id))]
    if not runs:
        return None
    newest = max(runs, key=lambda run: run.start_time)
    record = await fetch_run(client, newest.id)
    if record.status == "running":
        raise CliError(
            f"conversation {conversation_id}'s newest run {newest.id} is still running: "
            f"wait for it (`golem show {newest.id}`), then continue"
        )
    return record.messages


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


async def open_conversation(
    client: Client, durable: DurableAgent[Any], args: argparse.Namespace
) -> DurableConversation[Any]:
    """``--conversation-id``'s conversation workflow (started when absent), else a new one;
    a new one is seeded from ``--history`` or from the runs chained under that id."""
    if args.conversation_id and await conversation_workflow(client, args.conversation_id):
        if args.history:
            print(
                f"golem: conversation {args.conversation_id} exists: --history is ignored",
                file=sys.stderr,
            )
        return await durable.conversation(args.conversation_id)
    seed = await starting_history(client, args)
    return await durable.conversation(args.conversation_id, history=seed)


async def starting_history(client: Client, args: argparse.Namespace) -> list[Message] | None:
    if args.history:
        try:
            return load_messages(Path(args.history).read_bytes())
        except OSError as exc:
            raise CliError(f"--history {args.history}: {exc.strerror}") from exc
        except HistoryError as exc:
            raise CliError(
                f"--history {args.history} is not a golem history ({exc}); "
                "write one with `golem show RUN_ID --json`"
            ) from exc
    if args.conversation_id:
        history = await conversation_history(client, args.conversation_id)
        if history is None:
            print(
                f"golem: conversation {args.conversation_id} has no runs yet: starting it",
                file=sys.stderr,
            )
        return history
    return None


async def cmd_run(args: argparse.Namespace) -> int:
    name = agent_name(args.agent)
    client = await connect_args(args)
    durable: DurableAgent[Any] = DurableAgent(client, name, task_queue=args.task_queue)
    if args.conversation_id and await conversation_workflow(client, args.conversation_id):
        return await run_turn(client, await durable.conversation(args.conversation_id), args)
    history = await starting_history(client, args)
    started = await durable.start(
        args.prompt, history=history, conversation_id=args.conversation_id, stream=not args.json
    )
    streamed = False
    try:
        async with watching(client, args.task_queue, started.run_id):
            if args.json:
                result = await started.result()
            else:
                stream = started.stream()
                streamed = await write_text(stream, _echo)  # the answer as it streams
                result = stream.result
    except RunError as exc:
        return print_failure(client, exc, started.run_id)
    except asyncio.CancelledError:  # Ctrl-C: stop waiting, not the run
        print(
            f"golem run: stopped waiting; run {started.run_id} goes on "
            f"(`golem show {started.run_id}`)",
            file=sys.stderr,
        )
        raise
    print_result(client, result, args.json, streamed=streamed)
    return 0


async def run_turn(
    client: Client, conversation: DurableConversation[Any], args: argparse.Namespace
) -> int:
    """``golem run`` into a conversation workflow: the prompt is its next turn."""
    run_id = new_id()
    streamed = False
    try:
        async with watching(client, await queue_of(conversation), run_id):
            if args.json:
                result = await conversation.send(args.prompt, run_id=run_id)
            else:
                stream = conversation.send_stream(args.prompt, run_id=run_id)
                streamed = await write_text(stream, _echo)
                result = stream.result
    except RunError as exc:
        return print_failure(client, exc, run_id, conversation.id)
    print_result(client, result, args.json, streamed=streamed)
    return 0


async def queue_of(conversation: DurableConversation[Any]) -> str:
    """The task queue a conversation's turns run on (its workflow's, not ``--task-queue``)."""
    return (await conversation.handle.describe()).task_queue


async def cmd_resume(args: argparse.Namespace) -> int:
    client = await connect_args(args)
    run_id = await resolve_run_id(client, args.run_id)
    description = await client.get_workflow_handle(run_id).describe()
    name = description.typed_search_attributes.get(AGENT)
    if name is None:
        raise CliError(f"{run_id} is not a golem run (it has no GolemAgent search attribute)")
    task_queue = args.task_queue or description.task_queue
    durable: DurableAgent[Any] = DurableAgent(client, name, task_queue=task_queue)
    record = await fetch_run(client, run_id)
    if not isinstance(record.error, RunError):
        conversation = description.typed_search_attributes.get(CONVERSATION_ID) or "ID"
        raise CliError(
            f"run {run_id} is {record.status}, not failed: continue its conversation with "
            f"`golem run --agent {name} --conversation-id {conversation} PROMPT`"
        )
    if record.error.partial is None:
        raise CliError(f"run {run_id} failed before it did anything: start anew with `golem run`")
    started = await durable.start(
        args.prompt,
        history=record.error.partial.messages,
        conversation_id=record.error.partial.conversation_id,
        parent_run_id=run_id,
    )
    try:
        async with watching(client, task_queue, started.run_id):
            result = await started.result()
    except RunError as exc:
        return print_failure(client, exc, started.run_id)
    print(f"resumed {run_id} as run {result.run_id}", file=sys.stderr)
    print_result(client, result, args.json)
    return 0


def _echo(text: str) -> None:
    print(text, end="", flush=True)


def read_line(prompt: str) -> str:
    """One line from the person at the terminal."""
    return input(prompt)


async def cmd_chat(args: argparse.Namespace) -> int:
    name = agent_name(args.agent)
    client = await connect_args(args)
    durable: DurableAgent[Any] = DurableAgent(client, name, task_queue=args.task_queue)
    conversation: DurableConversation[Any] | None = None  # opened by the first turn
    interactive = sys.stdin.isatty()
    print(f"chatting with {name!r}; an empty line or end of input stops.", flush=True)
    while True:
        try:
            prompt = (await asyncio.to_thread(read_line, "you> " if interactive else "")).strip()
        except EOFError:
            prompt = ""
        if not prompt:
            if conversation is not None:
                print(f"conversation id: {conversation.id}")
            return 0
        if conversation is None:
            conversation = await open_conversation(client, durable, args)
            task_queue = await queue_of(conversation)
        if not interactive:
            print(f"you> {prompt}")  # piped input: show the turn, on its own line
        run_id = new_id()
        stream = conversation.send_stream(prompt, run_id=run_id)
        try:
            _echo(f"{name}> ")
            async with watching(client, task_queue, run_id):
                if not await write_text(stream, _echo):  # it ends the line it wrote
                    paused = stream.result.paused
                    print("(waits for your approval)" if paused else stream.result.output)
                result = stream.result
                while result.pending_approvals:  # the run waits in its workflow for us
                    decisions = {
                        c.id: await ask_approval(c, interactive) for c in result.pending_approvals
                    }
                    result = await conversation.approve(decisions)
                    print(f"{name}> {result.output or ''}")
        except RunError as exc:
            print(f"run failed at stage {exc.stage}: {exc.detail}")
            # The conversation keeps the failed turn's evidence: the next turn resumes it.
            print(f"      run {run_id} (failed; the next turn resumes from it)", flush=True)
            continue
        print(f"      run {run_id}", flush=True)


async def ask_approval(call: ToolCall, interactive: bool) -> bool:
    """The person's decision on one call (end of input denies)."""
    question = f"approve {call.name}({call.args})? [y/N] "
    try:
        answer = (await asyncio.to_thread(read_line, question if interactive else "")).strip()
    except EOFError:
        answer = ""
    if not interactive:
        print(f"{question}{answer}")  # piped input: show the decision
    return answer.lower() in ("y", "yes")


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


async def cmd_setup(args: argparse.Namespace) -> int:
    client = await connect_args(args)
    await client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace=client.namespace,
            search_attributes={
                key.name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD for key in SEARCH_ATTRIBUTES
            },
        )
    )
    print("registered:", ", ".join(key.name for key in SEARCH_ATTRIBUTES))
    return 0


def cmd_codec_server(args: argparse.Namespace) -> int:
    return codec_server.serve(args)


# -- arguments -------------------------------------------------------------------------------


class _Help(argparse.HelpFormatter):
    """Show each option's default, when it has a meaningful one."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            "%(default)" not in text
            and default not in (None, False, argparse.SUPPRESS)
            and action.option_strings
        ):
            text += " (default: %(default)s)"
        return text


def package_version() -> str:
    try:
        return version("golem-temporal")
    except PackageNotFoundError:
        return "unknown"


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="golem", description="Durable agents on Temporal.", formatter_class=_Help
    )
    top.add_argument("--version", action="version", version=f"golem {package_version()}")
    common = argparse.ArgumentParser(add_help=False, formatter_class=_Help)
    common.add_argument("--debug", action="store_true", help="print tracebacks and debug logs")
    server = argparse.ArgumentParser(add_help=False, formatter_class=_Help)
    server.add_argument(
        "--address",
        help=f"Temporal's host:port (default: TEMPORAL_ADDRESS, a profile's, or {DEFAULT_ADDRESS})",
    )
    server.add_argument(
        "--namespace", help="Temporal namespace (default: TEMPORAL_NAMESPACE or default)"
    )
    agent_help = "the agent: module:attribute, or the name a worker serves"
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help: str, *parents: argparse.ArgumentParser) -> Any:
        return sub.add_parser(
            name, help=help, description=help, parents=[common, *parents], formatter_class=_Help
        )

    dev = command("dev", "start the Temporal dev server tuned for agents")
    dev.add_argument("--dir", default=".golem", help="where the SQLite file lives")
    dev.add_argument("--port", type=int, default=7233, help="gRPC port")
    dev.add_argument("--ui-port", type=int, help="UI port (default: --port + 1000)")
    dev.add_argument(
        "--log-level",
        default="error",
        choices=["debug", "info", "warn", "error"],
        help="the server's log level",
    )
    worker = command("worker", "run a worker serving agents", server)
    worker.add_argument(
        "--agent", action="append", required=True, help="module:attribute (repeatable)"
    )
    worker.add_argument("--task-queue", default=DEFAULT_TASK_QUEUE, help=QUEUE_HELP)
    run = command("run", "start a run, wait, print the answer and ids", server)
    run.add_argument("--agent", required=True, help=agent_help)
    run.add_argument("--task-queue", default=DEFAULT_TASK_QUEUE, help=QUEUE_HELP)
    run.add_argument("--history", help="a JSON history to continue (`golem show --json`)")
    run.add_argument(
        "--conversation-id", help="continue this conversation from its newest run (or start it)"
    )
    run.add_argument("--json", action="store_true", help="print the result as JSON")
    run.add_argument("prompt")
    resume = command("resume", "continue a failed run in its conversation", server)
    resume.add_argument("run_id", help="the failed run's id (or the UI's Run ID)")
    resume.add_argument("prompt", nargs="?", default="continue", help="the next user message")
    resume.add_argument("--task-queue", help="default: the failed run's task queue")
    resume.add_argument("--json", action="store_true", help="print the result as JSON")
    chat = command("chat", "talk with an agent; each turn is a durable run", server)
    chat.add_argument("--agent", required=True, help=agent_help)
    chat.add_argument("--task-queue", default=DEFAULT_TASK_QUEUE, help=QUEUE_HELP)
    chat.add_argument("--history", help="a JSON history to continue (`golem show --json`)")
    chat.add_argument("--conversation-id", help="continue this conversation (or start it)")
    show = command("show", "print one run's conversation", server)
    show.add_argument("run_id", help="golem's run id (the Workflow ID) or the UI's Run ID")
    show.add_argument("--json", action="store_true", help="print the history as JSON")
    conversation = command("conversation", "list a conversation's runs in order", server)
    conversation.add_argument("conversation_id")
    conversation.add_argument("--json", action="store_true", help="print the runs as JSON")
    command("setup", "register golem's search attributes on the namespace", server)
    codec = command(
        "codec-server",
        "serve /encode and /decode for the Temporal UI (keys from GOLEM_ENCRYPTION_KEY; "
        "the UI's OIDC tokens or a bearer token from GOLEM_CODEC_TOKEN)",
    )
    codec_server.add_arguments(codec)
    return top


COMMANDS = {
    "worker": cmd_worker,
    "run": cmd_run,
    "resume": cmd_resume,
    "chat": cmd_chat,
    "show": cmd_show,
    "conversation": cmd_conversation,
    "setup": cmd_setup,
}


def run_command(argv: Sequence[str] | None = None) -> int:
    """Run one command; return its exit code. Problems are one line on stderr."""
    args = parser().parse_args(argv)
    configure_logging(debug=args.debug)
    try:
        if args.command == "dev":
            return cmd_dev(args)
        if args.command == "codec-server":
            return cmd_codec_server(args)
        return asyncio.run(COMMANDS[args.command](args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader stopped reading (`golem show RUN | head`): nothing to say, and nowhere
        # to say it; the shell's code for SIGPIPE.
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except SystemExit as exc:
        if isinstance(exc.code, str):
            print(f"golem {args.command}: {exc.code}", file=sys.stderr)
            return 2
        return exc.code or 0
    except Exception as exc:
        if args.debug:
            traceback.print_exc()
        print(f"golem {args.command}: {describe_error(exc)}", file=sys.stderr)
        return 1


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """The ``golem`` entry point. It ends with ``os._exit``: the Temporal core runtime's
    threads can abort the interpreter's teardown (exit 134/139) after all work is done."""
    code = run_command(argv)
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
