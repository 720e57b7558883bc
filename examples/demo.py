"""`make demo`: a durable conversation that survives both kinds of worker crash.

1. starts the Temporal dev server (unless one already answers on localhost:7233),
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

from temporalio.client import Client  # noqa: E402
from temporalio.worker import Worker  # noqa: E402

from examples.demo_agent import agent, model_description  # noqa: E402
from golem import normalize_history  # noqa: E402
from golem.cli import connect, describe_run, format_message, ui_link  # noqa: E402
from golem.client import DurableAgent, DurableConversation  # noqa: E402
from golem.results import Result, RunError  # noqa: E402
from golem.worker import GolemPlugin  # noqa: E402
from golem.worker.logs import configure_logging  # noqa: E402

#: A queue of its own, so demos run side by side on one server never share workers.
TASK_QUEUE = f"golem-demo-{uuid.uuid4().hex[:6]}"
#: The workers' log lines (one per run start and end) go here, not into the dialogue.
WORKER_LOG = ROOT / ".golem" / "demo-worker.log"
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


def closing_hints(run_id: str, conversation_id: str, task_queue: str = TASK_QUEUE) -> list[str]:
    """What to try next, with the same commands as the README."""
    return [
        f"See it in the Temporal UI:       {ui_link(conversation_id)}",
        f"Every run of the conversation:   .venv/bin/golem conversation {conversation_id}",
        f"The last run's messages:         .venv/bin/golem show {run_id}",
        "Go on talking (serve it first):  .venv/bin/golem worker --agent "
        f"examples.demo_agent:agent --task-queue {task_queue}",
        "                                 .venv/bin/golem chat --agent travel --task-queue "
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


async def main() -> None:
    server = None
    if answering(7233):
        print("Temporal: using the server already on localhost:7233")
    else:
        print("Temporal: starting the dev server (golem dev), data in .golem/temporal.sqlite")
        server = subprocess.Popen(
            [sys.executable, "-m", "golem.cli", "dev"],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        await wait_for(lambda: answering(7233), "the dev server")
    print(f"Model: {model_description}")
    crash_base = Path(tempfile.mkdtemp()) / "crash"
    os.environ.update(GOLEM_DEMO_CRASH_FILE=str(crash_base), PYTHONPATH=str(ROOT))
    workers = [start_worker(os.environ.copy()) for _ in range(2)]
    printer = Printer()
    try:
        await asyncio.gather(*(ready(w) for w in workers))
        print(f"Workers: pids {workers[0].pid} and {workers[1].pid} on task queue {TASK_QUEUE}")
        client: Client = await connect()
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
        for hint in closing_hints(last_id, conversation.id):
            print(hint)
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.wait(timeout=10)
        if server is not None:
            server.send_signal(signal.SIGINT)
            server.wait()
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
