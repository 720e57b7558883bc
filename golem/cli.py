"""``golem``: the command line.

    golem dev                                   # Temporal dev server, UI on :8233, data in .golem/
    golem worker --agent myapp.agents:support   # serve agents
    golem run --agent support "Where is my order?"
    golem chat --agent support                  # a conversation: each turn a durable run
    golem conversation <conversation-id>        # the runs of a conversation, in order
    golem show <run-id>                         # one run's conversation
    golem setup                                 # register golem's search attributes on a cluster

Against a real cluster or Temporal Cloud, the usual TEMPORAL_* settings apply.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.envconfig import ClientConfig
from temporalio.worker import Worker

from golem.agent import Agent
from golem.client import SEARCH_ATTRIBUTES, DurableAgent, fetch_run
from golem.messages import Message, load_messages
from golem.results import RunError
from golem.streaming import write_text
from golem.testing import DEV_SERVER_ARGS, temporal_cli
from golem.worker import GolemPlugin
from golem.worker.converter import golem_data_converter

__all__ = ["connect", "format_message", "load_agent", "main", "ui_link"]

DEFAULT_TASK_QUEUE = "golem"


def ui_link(run_id: str, namespace: str = "default") -> str:
    base = os.environ.get("GOLEM_UI_URL", "http://localhost:8233")
    return f"{base}/namespaces/{namespace}/workflows/{run_id}"


async def connect(plugins: Sequence[Any] = ()) -> Client:
    """A client for TEMPORAL_ADDRESS / TEMPORAL_NAMESPACE / profiles (default localhost:7233)."""
    config = ClientConfig.load_client_connect_config()
    config.setdefault("target_host", "localhost:7233")
    return await Client.connect(
        **config, data_converter=golem_data_converter, plugins=list(plugins)
    )


def load_agent(spec: str) -> Agent[Any, Any]:
    """Import ``module:attribute`` (the current directory is importable)."""
    module_name, _, attribute = spec.partition(":")
    if not attribute:
        raise SystemExit(f"--agent wants module:attribute, got {spec!r}")
    sys.path.insert(0, os.getcwd())
    agent = getattr(importlib.import_module(module_name), attribute)
    if not isinstance(agent, Agent):
        raise SystemExit(f"{spec} is a {type(agent).__name__}, not a golem Agent")
    return agent


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


# -- commands --------------------------------------------------------------------------


def cmd_dev(args: argparse.Namespace) -> int:
    state = Path(args.dir)
    state.mkdir(parents=True, exist_ok=True)
    command = [
        temporal_cli(),
        "server",
        "start-dev",
        "--db-filename",
        str(state / "temporal.sqlite"),
        "--port",
        str(args.port),
        "--ui-port",
        str(args.ui_port),
        "--log-level",
        "warn",
        *DEV_SERVER_ARGS,
    ]
    for key in SEARCH_ATTRIBUTES:
        command += ["--search-attribute", f"{key.name}=Keyword"]
    print(f"golem dev: Temporal on localhost:{args.port}, UI on http://localhost:{args.ui_port}")
    sys.stdout.flush()
    # Become the server, so a signal to `golem dev` reaches it and nothing is orphaned.
    os.execv(command[0], command)
    return 0  # not reached


async def cmd_worker(args: argparse.Namespace) -> int:
    agents = [load_agent(spec) for spec in args.agent]
    client = await connect()
    names = ", ".join(a.name for a in agents)
    async with Worker(client, task_queue=args.task_queue, plugins=[GolemPlugin(*agents)]):
        print(f"golem worker: serving {names} on task queue {args.task_queue!r}", flush=True)
        await asyncio.Event().wait()
    return 0


async def cmd_run(args: argparse.Namespace) -> int:
    client = await connect()
    history = load_messages(Path(args.history).read_bytes()) if args.history else None
    durable: DurableAgent[Any] = DurableAgent(client, args.agent, task_queue=args.task_queue)
    try:
        stream = durable.run_stream(
            args.prompt, history=history, conversation_id=args.conversation_id
        )
        streamed = await write_text(stream, _echo)  # the answer as it streams
        result = stream.result
    except RunError as exc:
        print(f"run failed at stage {exc.stage}: {exc.detail}", file=sys.stderr)
        if exc.partial:
            print(f"run id:          {exc.partial.run_id}", file=sys.stderr)
            print(f"resume with:     golem show {exc.partial.run_id}", file=sys.stderr)
        return 1
    if not streamed:
        print(result.output)
    print()
    print(f"run id:          {result.run_id}")
    print(f"conversation id: {result.conversation_id}")
    print(f"UI:              {ui_link(result.run_id)}")
    return 0


def _echo(text: str) -> None:
    print(text, end="", flush=True)


def read_line(prompt: str) -> str:
    """One line from the person at the terminal."""
    return input(prompt)


async def cmd_chat(args: argparse.Namespace) -> int:
    client = await connect()
    durable: DurableAgent[Any] = DurableAgent(client, args.agent, task_queue=args.task_queue)
    history: list[Message] = []
    print(f"chatting with {args.agent!r}; an empty line or end of input stops.")
    while True:
        try:
            prompt = (await asyncio.to_thread(read_line, "you> ")).strip()
        except EOFError:
            prompt = ""
        if not prompt:
            if history:
                print(f"conversation id: {history[-1].conversation_id}")
            return 0
        try:
            _echo(f"{args.agent}> ")
            stream = durable.run_stream(prompt, history=history)
            if not await write_text(stream, _echo):
                print(stream.result.output)
            result = stream.result
        except RunError as exc:
            print(f"run failed at stage {exc.stage}: {exc.detail}")
            if exc.partial:
                history = exc.partial.messages  # the next turn resumes; repair closes the gap
            continue
        history = result.messages


async def cmd_show(args: argparse.Namespace) -> int:
    client = await connect()
    record = await fetch_run(client, args.run_id)
    failure = f" ({record.error})" if record.error else ""
    print(f"run {args.run_id}: {record.status}{failure}")
    for index, message in enumerate(record.messages):
        print(format_message(index, message))
    print(f"UI: {ui_link(args.run_id)}")
    return 0


async def cmd_conversation(args: argparse.Namespace) -> int:
    client = await connect()
    query = f'GolemConversationId = "{args.conversation_id}"'
    runs = [run async for run in client.list_workflows(query)]
    runs.sort(key=lambda run: run.start_time)
    if not runs:
        print(f"no runs found for conversation {args.conversation_id}")
        return 1
    print(f"conversation {args.conversation_id}: {len(runs)} run(s)")
    for run in runs:
        attrs = run.typed_search_attributes
        parent = next((attrs.get(k) for k in SEARCH_ATTRIBUTES if k.name == "GolemParentRunId"), "")
        status = run.status.name.lower() if run.status else "unknown"
        answer = ""
        if run.status == WorkflowExecutionStatus.COMPLETED:
            output = (await fetch_run(client, run.id)).output
            answer = " ".join(str(output or "").split())[:80]
        print(
            f"  {run.start_time:%Y-%m-%d %H:%M:%S}  {run.id}  {status:<10} parent={parent or '-'}"
        )
        if answer:
            print(f"      answer: {answer}")
    return 0


async def cmd_setup(args: argparse.Namespace) -> int:
    client = await connect()
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


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="golem", description="Durable agents on Temporal.")
    sub = top.add_subparsers(dest="command", required=True)
    dev = sub.add_parser("dev", help="start the Temporal dev server tuned for agents")
    dev.add_argument("--dir", default=".golem", help="where the SQLite file lives")
    dev.add_argument("--port", type=int, default=7233)
    dev.add_argument("--ui-port", type=int, default=8233)
    worker = sub.add_parser("worker", help="run a worker serving agents")
    worker.add_argument("--agent", action="append", required=True, help="module:attribute")
    worker.add_argument("--task-queue", default=DEFAULT_TASK_QUEUE)
    run = sub.add_parser("run", help="start a run, wait, print the answer and ids")
    run.add_argument("--agent", required=True, help="the agent's name")
    run.add_argument("--task-queue", default=DEFAULT_TASK_QUEUE)
    run.add_argument("--history", help="a JSON file of messages to continue")
    run.add_argument("--conversation-id")
    run.add_argument("prompt")
    chat = sub.add_parser("chat", help="talk with an agent; each turn is a durable run")
    chat.add_argument("--agent", required=True, help="the agent's name")
    chat.add_argument("--task-queue", default=DEFAULT_TASK_QUEUE)
    show = sub.add_parser("show", help="print one run's conversation")
    show.add_argument("run_id")
    conversation = sub.add_parser("conversation", help="list a conversation's runs in order")
    conversation.add_argument("conversation_id")
    sub.add_parser("setup", help="register golem's search attributes on the namespace")
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "dev":
        return cmd_dev(args)
    commands = {
        "worker": cmd_worker,
        "run": cmd_run,
        "chat": cmd_chat,
        "show": cmd_show,
        "conversation": cmd_conversation,
        "setup": cmd_setup,
    }
    try:
        return asyncio.run(commands[args.command](args))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
