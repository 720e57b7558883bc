"""`make demo`: a durable conversation that survives both kinds of worker crash.

    make demo                         # or: make demo PORT=7300 [UI_PORT=8300]
    .venv/bin/python examples/demo.py [--port P] [--ui-port U] [--dir .golem]

1. finds its Temporal server: TEMPORAL_ADDRESS's, else the one `golem dev` runs from
   `.golem/`, else one on localhost:7233 (or --port) with golem's search attributes; only
   when none answers does it start the dev server itself (golem dev, data in
   .golem/temporal.sqlite, never while another server has that file open), on 7233 and
   8233, or on free ports when something else holds them and you chose none,
2. starts two worker processes serving the travel agent,
3. opens a conversation (one ConversationWorkflow; each turn is a child run) and streams
   each turn's answer as it arrives,
4. kills the worker running an idempotent tool (weather): the other worker runs it again,
5. kills the worker running an at-most-once tool (book_hotel): the call is never repeated;
   the failed turn's evidence closes it as "outcome unknown", and the next turn goes on
   from that evidence (the demo prints what history repair then had to do),
6. lets the conversation rest (its workflow closes; its next turn reopens it), stops what
   it started, and prints commands that work as they are printed.

Offline and quick: the demo's workers notice a dead worker's tool after 2 s of silence; a
run whose workflow task the dead worker held moves on when that task times out (10 s).
"""

from __future__ import annotations

import argparse
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
from temporalio.client import Client, WorkflowExecutionStatus  # noqa: E402
from temporalio.worker import Worker  # noqa: E402

from examples.demo_agent import agent, model_description  # noqa: E402
from golem import normalize_history  # noqa: E402
from golem.cli.connect import DEFAULT_ADDRESS, UNKNOWN_UI, connect, ui_link  # noqa: E402
from golem.cli.output import format_message  # noqa: E402
from golem.cli.recorded import DevServer, forget, holder, recorded  # noqa: E402
from golem.cli.show import describe_run  # noqa: E402
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
#: A workflow task a killed worker held is handed on when it times out (Temporal's default).
WORKFLOW_TASK_TIMEOUT = timedelta(seconds=10)
#: The conversation rests (its workflow closes) after this long without a turn.
REST_AFTER = timedelta(seconds=5)
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
        self.killed: float | None = None  # when the demo last killed a worker

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

    def taken_over(self) -> None:
        """After a kill, the first sign that the run went on: say how long that took."""
        if self.killed is not None:
            took = time.monotonic() - self.killed
            self.line(f"{INDENT}   (the run went on {took:.1f} s after the kill)")
            self.killed = None


async def turn(
    conversation: DurableConversation[Any], prompt: str, printer: Printer
) -> Result[Any] | RunError:
    """One streamed turn; its ``Result``, or the ``RunError`` it failed with."""
    printer.line(f"you:   {prompt}")
    printer.started.clear()  # a kill waits for this turn's call, not an earlier one's
    stream = conversation.send_stream(prompt)
    try:
        async for event in stream:
            if event.kind == "tool_start" and event.call is not None:
                printer.line(f"{INDENT}-> {event.call.name}({event.call.args}) started")
                printer.started.add(event.call.name)
            elif event.kind == "tool_end" and event.message is not None:
                printer.taken_over()
                printer.line(f"{INDENT}<- {event.message.tool_name}: {event.message.content}")
            elif event.kind == "turn_restarted":
                printer.line(f"{INDENT}(the model call was retried: its answer restarts)")
            elif event.kind == "text_delta" and event.delta is not None and event.delta.text:
                printer.text(event.delta.text)
    except RunError as exc:
        printer.taken_over()
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
    printer.killed = time.monotonic()
    workers.remove(victim)
    printer.line(f"{INDENT}!! worker {pid} killed (SIGKILL) in the middle of {tool}")
    said = after.format(
        worker=workers[0].pid,
        silent=HEARTBEAT.seconds,
        task=WORKFLOW_TASK_TIMEOUT.seconds,
    )
    for line in said.split("\n"):
        printer.line(f"{INDENT}   {line}")
    workers.append(start_worker(os.environ.copy()))  # back to two workers, for what follows


class Server:
    """The Temporal server the demo talks to; ``process`` when the demo started it (and
    ``dev``, what that ``golem dev`` recorded)."""

    def __init__(
        self, address: str, ui_url: str | None, process: Any = None, dev: DevServer | None = None
    ) -> None:
        self.address = address
        self.ui_url = ui_url
        self.process = process
        self.dev = dev


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


async def usable(address: str, how: str) -> Server:
    """The Temporal server at ``address`` (found by ``how``), if it has golem's search
    attributes; one without them stops the demo, saying how to add them."""
    missing = await missing_search_attributes(address)
    if missing:
        raise SystemExit(
            f"demo: the Temporal server on {address} lacks golem's search attributes "
            f"{', '.join(missing)}: add them with `.venv/bin/golem setup --address {address}`,"
            " or stop that server and run `make demo` again"
        )
    print(f"Temporal: using the server {how}")
    return Server(address, None)


def shown(path: Path) -> str:
    """``path`` as the reader finds it: relative to the repository when it is inside."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def temporal_server(
    port: int = 7233, ui_port: int = 8233, state: Path = STATE, *, chosen: bool = False
) -> Server:
    """The server on ``port`` when it is Temporal and has golem's search attributes; else
    the dev server, its data in ``state``, started on ``port`` and ``ui_port`` (or, unless
    the user ``chosen`` them, on free ports when something else holds either). Never while
    another process has ``state``'s database open: two servers on one SQLite file corrupt
    each other."""
    address = f"localhost:{port}"
    if answering(port) and await is_temporal(address):
        return await usable(address, f"already on {address}")
    database = state / "temporal.sqlite"
    held = holder(database) if database.exists() else None
    if held is not None:
        raise SystemExit(
            f"demo: {shown(database)} is open in {held}: that server owns it; point "
            "TEMPORAL_ADDRESS at it, or stop it and run `make demo` again"
        )
    if answering(port) or answering(ui_port):
        busy = port if answering(port) else ui_port
        if chosen:
            raise SystemExit(
                f"demo: port {busy} is held by something that is not a Temporal server: "
                "choose others (make demo PORT=... UI_PORT=...)"
            )
        port, ui_port = free_port(), free_port()
        print(
            f"Temporal: port {busy} is held by something that is not a Temporal server; "
            f"the demo's dev server takes ports {port} and {ui_port}"
        )
    print(f"Temporal: starting the dev server (golem dev), data in {shown(database)}")
    state.mkdir(parents=True, exist_ok=True)
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
    # A port that answers is not yet a frontend that serves ("Frontend is not healthy yet").
    deadline = time.monotonic() + 60
    while process.poll() is None and not await is_temporal(f"localhost:{port}"):
        if time.monotonic() > deadline:
            raise SystemExit("demo: gave up waiting for the dev server to serve")
        await asyncio.sleep(0.1)
    if process.poll() is not None:
        raise SystemExit(f"demo: the dev server did not start: {log_file.read_text().strip()}")
    return Server(f"localhost:{port}", f"http://localhost:{ui_port}", process, recorded(state))


async def find_server(port: int | None, ui_port: int | None, state: Path) -> Server:
    """TEMPORAL_ADDRESS's server, else the one ``golem dev`` runs from ``state``, else
    ``temporal_server``'s choice."""
    configured = os.environ.get("TEMPORAL_ADDRESS")
    if configured:
        if not await is_temporal(configured):
            raise SystemExit(
                f"demo: no Temporal server answers at TEMPORAL_ADDRESS={configured}: start "
                "it, or unset TEMPORAL_ADDRESS to let the demo find or start one"
            )
        return await usable(configured, f"at TEMPORAL_ADDRESS={configured}")
    dev = recorded(state)
    if dev is not None and port in (None, int(dev.address.rpartition(":")[2])):
        server = await usable(dev.address, f"`golem dev` runs from {shown(state)}/ ({dev.address})")
        server.ui_url = dev.ui_url
        return server
    chosen = port is not None
    port = port or 7233
    return await temporal_server(port, ui_port or port + 1000, state, chosen=chosen)


async def rests(client: Client, conversation_id: str) -> None:
    """Wait until the conversation rests: its workflow closes after ``REST_AFTER`` idle."""
    handle = client.get_workflow_handle(conversation_id)
    limit = REST_AFTER.total_seconds() + 30
    deadline = time.monotonic() + limit
    while (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
        if time.monotonic() > deadline:
            raise SystemExit(f"demo: the conversation did not rest within {limit:.0f} s")
        await asyncio.sleep(0.2)


def stop(server: Server, state: Path) -> str | None:
    """Stop the dev server the demo started; the command that brings it back, with the
    demo's runs (``None`` when the demo started none)."""
    if server.process is None:
        return None
    server.process.send_signal(signal.SIGINT)
    server.process.wait()
    if server.dev is not None:
        forget(state, server.dev)  # no stale address or UI port left for later commands
    again = ".venv/bin/golem dev"
    port, ui_port = server.address.rpartition(":")[2], (server.ui_url or "").rpartition(":")[2]
    if (port, ui_port) != ("7233", "8233"):
        again += f" --port {port} --ui-port {ui_port}"
    if state.resolve() != STATE.resolve():
        again += f" --dir {shown(state)}"
    return again


def arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="examples/demo.py", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, help="the Temporal server's port (default 7233)")
    parser.add_argument("--ui-port", type=int, help="the UI's port, when the demo starts it")
    parser.add_argument("--dir", type=Path, default=STATE, help="where the dev server's data is")
    return parser.parse_args(argv)


async def main(args: argparse.Namespace) -> None:
    state: Path = args.dir.resolve()
    server = await find_server(args.port, args.ui_port, state)
    os.environ["TEMPORAL_ADDRESS"] = server.address  # the workers', and the hints' commands
    print(f"Model: {model_description}")
    crash_base = Path(tempfile.mkdtemp()) / "crash"
    os.environ.update(GOLEM_DEMO_CRASH_FILE=str(crash_base), PYTHONPATH=str(ROOT))
    workers = [start_worker(os.environ.copy()) for _ in range(2)]
    printer = Printer()
    hints: list[str] = []
    try:
        await asyncio.gather(*(ready(w) for w in workers))
        print(f"Workers: pids {workers[0].pid} and {workers[1].pid} on task queue {TASK_QUEUE}")
        client: Client = await connect(address=server.address)
        durable = DurableAgent(client, agent, task_queue=TASK_QUEUE)
        conversation = await durable.conversation(idle_timeout=REST_AFTER)
        print(f"Conversation {conversation.id}: one workflow, each turn a child run\n")

        await turn(conversation, "Hello! I'm planning a trip.", printer)
        await turn(conversation, "Is it nice in Lisbon today?", printer)

        print("-- crash 1: an idempotent tool (weather) is simply run again elsewhere")
        Path(f"{crash_base}.weather.armed").touch()
        retried = (
            "once the call is {silent} s silent, worker {worker} runs it again\n"
            "(up to {task} s later when the dead worker also held the run's workflow task:"
            " Temporal hands it on when it times out)"
        )
        claim = Path(f"{crash_base}.weather")
        killing = asyncio.ensure_future(
            kill_when_claimed("weather", claim, workers, retried, printer)
        )
        await turn(conversation, "What about Paris and Oslo?", printer)
        await killing

        print("-- crash 2: an at-most-once tool (book_hotel) is never run twice")
        await ready(workers[-1])
        Path(f"{crash_base}.book_hotel.armed").touch()
        closed = (
            "once the call is {silent} s silent it is closed, never run again\n"
            "(up to {task} s later when the dead worker also held the run's workflow task:"
            " Temporal hands it on when it times out)"
        )
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
        await rests(client, conversation.id)
        print(
            f"\nThe conversation rests: {REST_AFTER.seconds} s without a turn closed its "
            "workflow (the transcript stays; its next turn reopens it)."
        )
        last_id = last.run_id if isinstance(last, Result) else (await conversation.runs())[-1]
        hints = closing_hints(last_id, conversation.id, server=server)
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.wait(timeout=10)
        again = stop(server, state)
    print()
    if again is not None:
        print(f"Bring back its dev server first:  {again}   (the demo stopped it; the runs stay)")
    for hint in hints:
        print(hint)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        asyncio.run(serve(sys.argv[2]))
    else:
        started = time.monotonic()
        asyncio.run(main(arguments(sys.argv[1:])))
        print(f"(demo took {time.monotonic() - started:.1f} s)")
    sys.stdout.flush()
    os._exit(0)  # the Temporal core runtime can abort at interpreter teardown; all work is done
