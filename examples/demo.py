"""`make demo`: a durable conversation that survives both kinds of worker crash.

1. uses the Temporal server on localhost:7233 if one answers there (with golem's search
   attributes), else starts the dev server (golem dev) on 7233, or on free ports when
   something else holds 7233 or 8233,
2. starts two worker processes serving the travel agent,
3. opens a conversation (one ConversationWorkflow; each turn is a child run) and streams
   each turn's answer as it arrives,
4. kills the worker running an idempotent tool (weather): the other worker runs it again,
5. kills the worker running an at-most-once tool (book_hotel): the call is never repeated;
   the failed turn's evidence closes it as "outcome unknown", and the next turn goes on
   from that evidence (the demo prints what history repair then had to do).

Offline and quick: the demo's workers notice a dead worker's tool after 2 s of silence.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest  # noqa: E402
from temporalio.client import Client  # noqa: E402
from temporalio.worker import Worker  # noqa: E402

from examples.demo_agent import agent, model_description  # noqa: E402
from golem import normalize_history  # noqa: E402
from golem.cli import connect, describe_run, format_message, ui_link  # noqa: E402
from golem.cli.connect import DEFAULT_ADDRESS, UNKNOWN_UI  # noqa: E402
from golem.client import (  # noqa: E402
    SEARCH_ATTRIBUTES,
    DurableAgent,
    DurableConversation,
)
from golem.results import Result, RunError  # noqa: E402
from golem.worker import GolemPlugin  # noqa: E402
from golem.worker.logs import configure_logging  # noqa: E402

#: A queue of its own, so demos run side by side on one server never share workers.
TASK_QUEUE = f"golem-demo-{uuid.uuid4().hex[:6]}"
#: The workers' log lines (one per run start and end) go here, not into the dialogue.
WORKER_LOG = ROOT / ".golem" / "demo-worker.log"
#: Where the dev server the demo starts keeps its data (`golem dev` finds it there later).
STATE = ROOT / ".golem"
#: How long a killed worker's tool stays silent before Temporal gives up on it.
HEARTBEAT = timedelta(seconds=2)
INDENT = "       "


def answering(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


async def wait_for(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"demo: gave up waiting for {what}")
        await asyncio.sleep(0.05)


def closing_hints(
    run_id: str, conversation_id: str, task_queue: str = TASK_QUEUE, server: Server | None = None
) -> list[str]:
    """What to try next, with the same commands as the README (naming the server's address
    when it is not golem's default)."""
    address = server.address if server is not None else DEFAULT_ADDRESS
    ui_url = server.ui_url if server is not None else None
    golem = ".venv/bin/golem"
    if address != DEFAULT_ADDRESS:
        golem = f"TEMPORAL_ADDRESS={address} {golem}"
    link = ui_link(conversation_id, address=address, ui_url=ui_url) or UNKNOWN_UI
    return [
        f"See it in the Temporal UI:       {link}",
        f"Every run of the conversation:   {golem} conversation {conversation_id}",
        f"The last run's messages:         {golem} show {run_id}",
        f"Go on talking (serve it first):  {golem} worker --agent "
        f"examples.demo_agent:agent --task-queue {task_queue}",
        f"                                 {golem} chat --agent travel --task-queue "
        f"{task_queue} --conversation-id {conversation_id}",
        f"The workers' log:                {WORKER_LOG.relative_to(ROOT)}",
    ]


# -- the workers -----------------------------------------------------------------------------


async def serve(task_queue: str) -> None:
    """A demo worker (``demo.py --worker QUEUE``): ``golem worker`` with short timeouts, so
    a killed worker's calls and workflows move on within seconds."""
    configure_logging()
    client = await connect()
    plugin = GolemPlugin(agent, heartbeat_timeout=HEARTBEAT)
    async with Worker(
        client,
        task_queue=task_queue,
        plugins=[plugin],
        sticky_queue_schedule_to_start_timeout=HEARTBEAT,
    ):
        print("ready", flush=True)
        await asyncio.Event().wait()


def start_worker(env: dict[str, str]) -> subprocess.Popen[bytes]:
    WORKER_LOG.parent.mkdir(exist_ok=True)
    with WORKER_LOG.open("ab") as log:
        return subprocess.Popen(
            [sys.executable, __file__, "--worker", TASK_QUEUE],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=log,
        )


async def ready(worker: subprocess.Popen[bytes]) -> None:
    assert worker.stdout is not None
    line = await asyncio.to_thread(worker.stdout.readline)
    if line.strip() != b"ready":
        raise SystemExit(f"demo: a worker did not start; see {WORKER_LOG}")


# -- turns -----------------------------------------------------------------------------------


class Printer:
    """Prints a turn's events as they stream: tool calls on their own lines, text inline."""

    def __init__(self) -> None:
        self.midline = False
        self.started: set[str] = set()  # tools whose start the reader has seen

    def line(self, text: str) -> None:
        if self.midline:
            print()
            self.midline = False
        print(text, flush=True)

    def text(self, text: str) -> None:
        if not self.midline:
            print("golem: ", end="")
            self.midline = True
        print(text, end="", flush=True)


async def turn(
    conversation: DurableConversation[Any], prompt: str, printer: Printer
) -> Result[Any] | RunError:
    """One streamed turn; its ``Result``, or the ``RunError`` it failed with."""
    printer.line(f"you:   {prompt}")
    stream = conversation.send_stream(prompt)
    try:
        async for event in stream:
            if event.kind == "tool_start" and event.call is not None:
                printer.line(f"{INDENT}-> {event.call.name}({event.call.args}) started")
                printer.started.add(event.call.name)
            elif event.kind == "tool_end" and event.message is not None:
                printer.line(f"{INDENT}<- {event.message.tool_name}: {event.message.content}")
            elif event.kind == "turn_restarted":
                printer.line(f"{INDENT}(the model call was retried: its answer restarts)")
            elif event.kind == "text_delta" and event.delta is not None and event.delta.text:
                printer.text(event.delta.text)
    except RunError as exc:
        printer.line(f"{INDENT}!! the turn failed at stage {exc.stage}: {exc.detail}")
        return exc
    result = stream.result
    printer.line(f"{INDENT}run {result.run_id}\n")
    return result


async def kill_when_claimed(
    tool: str, claim: Path, workers: list[subprocess.Popen[bytes]], after: str, printer: Printer
) -> None:
    """Kill the worker that claimed ``claim`` (it hangs in ``tool``), then start another."""
    await wait_for(
        lambda: tool in printer.started and claim.exists() and claim.read_text() != "",
        f"the {tool} call",
    )
    pid = int(claim.read_text())
    victim = next(w for w in workers if w.pid == pid)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    workers.remove(victim)
    printer.line(f"{INDENT}!! worker {pid} killed (SIGKILL) in the middle of {tool}")
    printer.line(f"{INDENT}   {after.format(worker=workers[0].pid, silent=HEARTBEAT.seconds)}")
    workers.append(start_worker(os.environ.copy()))  # back to two workers, for what follows


class Server:
    """The Temporal server the demo talks to; ``process`` when the demo started it."""

    def __init__(self, port: int, ui_url: str | None, process: Any = None) -> None:
        self.address = f"localhost:{port}"
        self.ui_url = ui_url
        self.process = process


async def is_temporal(address: str) -> bool:
    """Whether a Temporal server answers at ``address`` (not merely something listening)."""
    try:
        await asyncio.wait_for(Client.connect(address), timeout=5)
    except (RuntimeError, TimeoutError):
        return False
    return True


async def missing_search_attributes(address: str) -> list[str]:
    client = await Client.connect(address)
    response = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=client.namespace)
    )
    return [key.name for key in SEARCH_ATTRIBUTES if key.name not in response.custom_attributes]


def shown(path: Path) -> str:
    """``path`` as the reader finds it: relative to the repository when it is inside."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def temporal_server(port: int = 7233, ui_port: int = 8233, state: Path = STATE) -> Server:
    """The server on ``port`` when it is Temporal and has golem's search attributes (one
    without them stops the demo, saying how to add them); else the dev server, its data in
    ``state``, started on ``port`` and ``ui_port``, or on free ports when something else
    holds either."""
    address = f"localhost:{port}"
    if answering(port) and await is_temporal(address):
        missing = await missing_search_attributes(address)
        if missing:
            raise SystemExit(
                f"demo: the Temporal server on {address} lacks golem's search attributes "
                f"{', '.join(missing)}: add them with `.venv/bin/golem setup --address {address}`,"
                " or stop that server and run `make demo` again"
            )
        print(f"Temporal: using the server already on {address}")
        return Server(port, None)
    if answering(port) or answering(ui_port):
        held = port if answering(port) else ui_port
        port, ui_port = free_port(), free_port()
        print(
            f"Temporal: port {held} is held by something that is not a Temporal server; "
            f"the demo's dev server takes ports {port} and {ui_port}"
        )
    print(f"Temporal: starting the dev server (golem dev), data in {shown(state)}/temporal.sqlite")
    state.mkdir(exist_ok=True)
    log_file = state / "demo-server.log"
    with log_file.open("wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "golem.cli",
                "dev",
                "--port",
                str(port),
                "--ui-port",
                str(ui_port),
                "--dir",
                str(state),
            ],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    await wait_for(lambda: answering(port) or process.poll() is not None, "the dev server")
    if process.poll() is not None:
        raise SystemExit(f"demo: the dev server did not start: {log_file.read_text().strip()}")
    return Server(port, f"http://localhost:{ui_port}", process)


async def main() -> None:
    server = await temporal_server()
    os.environ["TEMPORAL_ADDRESS"] = server.address  # the workers', and the hints' commands
    print(f"Model: {model_description}")
    crash_base = Path(tempfile.mkdtemp()) / "crash"
    os.environ.update(GOLEM_DEMO_CRASH_FILE=str(crash_base), PYTHONPATH=str(ROOT))
    workers = [start_worker(os.environ.copy()) for _ in range(2)]
    printer = Printer()
    try:
        await asyncio.gather(*(ready(w) for w in workers))
        print(f"Workers: pids {workers[0].pid} and {workers[1].pid} on task queue {TASK_QUEUE}")
        client: Client = await connect(address=server.address)
        durable = DurableAgent(client, agent, task_queue=TASK_QUEUE)
        conversation = await durable.conversation()
        print(f"Conversation {conversation.id}: one workflow, each turn a child run\n")

        await turn(conversation, "Hello! I'm planning a trip.", printer)
        await turn(conversation, "Is it nice in Lisbon today?", printer)

        print("-- crash 1: an idempotent tool (weather) is simply run again elsewhere")
        Path(f"{crash_base}.weather.armed").touch()
        retried = "once the call is {silent} s silent, worker {worker} runs it again"
        claim = Path(f"{crash_base}.weather")
        killing = asyncio.ensure_future(
            kill_when_claimed("weather", claim, workers, retried, printer)
        )
        await turn(conversation, "What about Paris and Oslo?", printer)
        await killing

        print("-- crash 2: an at-most-once tool (book_hotel) is never run twice")
        await ready(workers[-1])
        Path(f"{crash_base}.book_hotel.armed").touch()
        closed = "once the call is {silent} s silent it is closed, never run again"
        claim = Path(f"{crash_base}.book_hotel")
        killing = asyncio.ensure_future(
            kill_when_claimed("book_hotel", claim, workers, closed, printer)
        )
        failed = await turn(conversation, "Please book me a hotel in Oslo.", printer)
        await killing
        transcript = await conversation.messages()
        if isinstance(failed, RunError) and failed.partial is not None:
            run_id = failed.partial.run_id
            printer.line(f"{INDENT}the failed run {run_id} left its evidence in the conversation:")
            for index, message in enumerate(transcript):
                if message.run_id == run_id:
                    printer.line(f"{INDENT}  {format_message(index, message)}")
        _, repair = normalize_history(transcript)
        printer.line(
            f"{INDENT}history repair for the next turn (normalize_history, as the conversation "
            "does before it): "
            f"synthesized={repair.synthesized} dropped={repair.dropped} "
            f"relocated={repair.relocated} changed={repair.changed}"
        )
        if not repair.changed:
            printer.line(
                f"{INDENT}nothing to repair: the evidence already answers every call (the "
                "booking as outcome unknown), so the next turn goes on from it as it is\n"
            )
        last = await turn(conversation, "Did the booking go through?", printer)

        print("The whole conversation (held by its workflow; no turn ships it again):")
        for index, message in enumerate(await conversation.messages()):
            print("  " + format_message(index, message))
        print("\nIts runs, in order (what `golem conversation` lists):")
        for run_id in await conversation.runs():
            entry = await describe_run(client, run_id)
            said = entry["answer"] or entry["outcome"]
            print(f"  {entry['runId']}  {entry['status']:<10} {said[:60]}")
        print()
        last_id = last.run_id if isinstance(last, Result) else (await conversation.runs())[-1]
        for hint in closing_hints(last_id, conversation.id, server=server):
            print(hint)
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.wait(timeout=10)
        if server.process is not None:
            server.process.send_signal(signal.SIGINT)
            server.process.wait()
            print("(dev server stopped; `.venv/bin/golem dev` brings it back with these runs)")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        asyncio.run(serve(sys.argv[2]))
    else:
        started = time.monotonic()
        asyncio.run(main())
        print(f"(demo took {time.monotonic() - started:.1f} s)")
    sys.stdout.flush()
    os._exit(0)  # the Temporal core runtime can abort at interpreter teardown; all work is done
