"""`make demo`: a durable multi-turn conversation that survives a worker crash.

1. starts the Temporal dev server (unless one already answers on localhost:7233),
2. starts a worker process serving the travel agent,
3. runs a conversation of three durable runs, printing ids and UI links,
4. kills the worker (SIGKILL) in the middle of a tool call and lets a second worker
   finish that run.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from temporalio.client import Client  # noqa: E402

from examples.demo_agent import agent, model_description  # noqa: E402
from golem.cli import connect, format_message, ui_link  # noqa: E402
from golem.client import DurableAgent  # noqa: E402

TASK_QUEUE = "golem-demo"
#: The workers' log lines (one per run start and end) go here, not into the dialogue.
WORKER_LOG = ROOT / ".golem" / "demo-worker.log"


def answering(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


async def wait_for(condition, what: str, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"demo: gave up waiting for {what}")
        await asyncio.sleep(0.1)


def closing_hints(run_id: str, conversation_id: str) -> list[str]:
    """What to try next, with the same commands as the README."""
    return [
        f"See it in the Temporal UI: {ui_link(run_id)}",
        f"Every run of the conversation:  .venv/bin/golem conversation {conversation_id}",
        f"This run's messages:            .venv/bin/golem show {run_id}",
        f"The workers' log:               {WORKER_LOG.relative_to(ROOT)}",
    ]


def start_worker(env: dict[str, str]) -> subprocess.Popen[bytes]:
    WORKER_LOG.parent.mkdir(exist_ok=True)
    with WORKER_LOG.open("ab") as log:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "golem.cli",
                "worker",
                "--agent",
                "examples.demo_agent:agent",
                "--task-queue",
                TASK_QUEUE,
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )


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
    print(f"Model: {model_description}\n")
    crash_file = Path(tempfile.mkdtemp()) / "crashed"
    env = {**os.environ, "GOLEM_DEMO_CRASH_FILE": str(crash_file), "PYTHONPATH": str(ROOT)}
    workers = [start_worker(env)]
    try:
        client: Client = await connect()
        durable = DurableAgent(client, agent, task_queue=TASK_QUEUE)
        history = None
        for prompt in ["Hello! I'm planning a trip.", "Is it nice in Lisbon today?"]:
            result = await durable.run(prompt, history=history)
            history = result.messages
            print(f"you:   {prompt}\ngolem: {result.output}")
            print(f"       run {result.run_id} · conversation {result.conversation_id}\n")

        prompt = "What about Paris and Oslo?"
        print(f"you:   {prompt}")
        Path(f"{crash_file}.armed").touch()
        run = await durable.start(prompt, history=history)
        await wait_for(crash_file.exists, "the weather tool to start")
        workers[0].send_signal(signal.SIGKILL)
        workers[0].wait()
        print(f"       !! worker {workers[0].pid} killed (SIGKILL) in the middle of a weather call")
        workers.append(start_worker(env))
        print(f"       a second worker (pid {workers[1].pid}) picks the run up...")
        result = await run.result()
        print(f"golem: {result.output}")
        print(f"       run {result.run_id} · conversation {result.conversation_id}\n")

        print("The whole conversation (what the next run would receive as history):")
        for index, message in enumerate(result.messages):
            print("  " + format_message(index, message))
        print()
        for hint in closing_hints(result.run_id, result.conversation_id):
            print(hint)
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.wait()
        if server is not None:
            server.send_signal(signal.SIGINT)
            server.wait()
            print("(dev server stopped; `.venv/bin/golem dev` brings it back with these runs)")


if __name__ == "__main__":
    asyncio.run(main())
    sys.stdout.flush()
    os._exit(0)  # the Temporal core runtime can abort at interpreter teardown; all work is done
