"""The first hour, third pass (issue 30): the CLI says who serves a queue, never hangs
silently, and keeps ids and answers on stdout (real ``golem`` command, dev server)."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import uuid
from pathlib import Path

from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker
from test_cli import GOLEM, address, golem, golem_worker, ids, one_line, queue
from waiting import eventually

from golem.testing import STARTUP_TIMEOUT, temporal_cli
from golem.worker import GolemPlugin

__all__ = ["address"]  # the fixture, shared with tests/test_cli.py

KEY = "k1:" + "A" * 43 + "="  # 32 zero bytes in base64, with its key id


def deployment() -> str:
    return f"dep{uuid.uuid4().hex[:8]}"


# -- item 1: a versioned worker before `golem deploy current` --------------------------------


async def test_run_on_a_queue_served_only_by_a_version_not_current_says_so_and_exits_4(
    address: str,
) -> None:
    tq, name = queue(), deployment()
    command = f"golem deploy current --deployment {name} --build-id v1"
    version = ("--deployment", name, "--build-id", "v1")
    async with golem_worker(tq, "echo", args=version) as worker:
        await eventually(
            lambda: "is not current" in "".join(worker.stderr), what="the worker to say so"
        )
        # It says so at its first looks at the queue (no hang; no timed assert on a shared box).
        ran = await golem("run", "--agent", "echo", "--task-queue", tq, "hi")
        run_id = ids(ran.out)["run id"]
        shown = await golem("show", run_id)
        deployed = await golem("deploy", "current", *version)
        finished = await golem("show", run_id)
    said = (
        f"task queue '{tq}' is served only by deployment {name} build v1, which is not current "
        f"(none is current): make it current with `{command}`"
    )
    assert f"golem worker: {name}.v1 is not current (none is current): runs on '{tq}' go" in (
        "".join(worker.stderr)
    )
    assert ran.code == 4, ran
    assert ran.err == f"golem run: {said}; run {run_id} waits until then\n"
    assert shown.code == 1 and f"{run_id} is running and waits: {said}" in shown.err
    assert deployed.code == 0, deployed.err
    assert finished.out.splitlines()[0] == f"run {run_id}: completed", finished


# -- item 2: agents, workers and queues --------------------------------------------------------


async def test_a_second_worker_with_other_agents_on_a_queue_is_refused_naming_the_conflict(
    address: str,
) -> None:
    tq = queue()
    async with golem_worker(tq, "echo") as first:
        refused = await golem("worker", "--agent", "cli_agents:counter", "--task-queue", tq)
        more = await golem(
            "worker", "--agent", "cli_agents:echo", "--agent", "cli_agents:counter",
            "--task-queue", tq,
        )  # fmt: skip
        async with golem_worker(tq, "echo"):  # the same agents: it joins
            slots = asyncio.Semaphore(4)

            async def one(n: int) -> int:
                async with slots:
                    done = await golem("run", "--agent", "echo", "--task-queue", tq, f"r{n}")
                    return done.code

            codes = await asyncio.gather(*(one(n) for n in range(20)))
    pid = first.proc.pid
    conflict = (
        f"golem worker: task queue '{tq}' is served by worker {pid}@{socket.gethostname()} with "
        "agents echo; this worker serves counter: a run would reach a worker without its agent. "
        "Serve the same agents on every worker of a task queue (repeat --agent), or give this "
        "one its own --task-queue"
    )
    assert one_line(refused) == conflict
    assert "this worker serves counter, echo" in one_line(more)
    assert codes == [0] * 20


# -- item 3: resume on a queue nobody serves -------------------------------------------------


async def test_resume_on_a_queue_nobody_serves_gives_up_after_the_wait_and_says_what_waits(
    address: str,
) -> None:
    tq, empty = queue(), queue()
    async with golem_worker(tq, "moody"):
        failed = await golem("run", "--agent", "moody", "--task-queue", tq, "explode please")
    failed_run = ids(failed.out)["run id"]
    resumed = await golem(
        "resume", failed_run, "calmly", "--task-queue", empty, "--worker-timeout", "4"
    )
    assert resumed.code == 4, resumed
    run_id = ids(resumed.out)["run id"]
    assert resumed.err.splitlines()[-1] == (
        f"golem resume: no worker took run {run_id} within 4 s: it stays queued on task queue "
        f"'{empty}' and starts when a worker polls it "
        f"(golem worker --agent module:attribute --task-queue {empty}); `golem show {run_id}`"
    )


# -- item 4: end of piped input at an approval prompt ------------------------------------------


async def test_chat_at_the_end_of_piped_input_leaves_the_call_waiting_and_exits_3(
    address: str,
) -> None:
    tq = queue()
    async with golem_worker(tq, "bank"):
        chat = await golem("chat", "--agent", "bank", "--task-queue", tq, stdin="pay\n")
        conversation = ids(chat.out)["conversation id"]
        shown = await golem("show", conversation)
        approved = await golem("approve", conversation)
    assert chat.code == 3, chat
    turn = ids(chat.out)["run id"]
    assert f"approve with:    golem approve {turn} t-1  (or --deny)" in chat.err
    assert "denied" not in chat.out + chat.err
    assert "waiting for approval of transfer" in shown.out
    assert approved.code == 0 and approved.out.splitlines()[0] == "transfer: moved 5"


# -- item 5: a typo in --agent -------------------------------------------------------------


async def test_an_agent_no_worker_of_the_queue_serves_is_refused_before_any_run_starts(
    address: str, temporal_client: Client
) -> None:
    tq = queue()
    async with golem_worker(tq, "echo", "counter"):
        typo = await golem("run", "--agent", "ecko", "--task-queue", tq, "hi")
    assert one_line(typo) == (
        f"golem run: unknown agent 'ecko': the workers on task queue '{tq}' serve counter, echo; "
        f"fix --agent, or start a worker that serves it "
        f"(golem worker --agent module:attribute --task-queue {tq})"
    )
    started = await temporal_client.count_workflows('GolemAgent = "ecko"')
    assert started.count == 0


async def test_an_unknown_agent_on_a_worker_that_does_not_say_what_it_serves_names_the_run(
    address: str, temporal_client: Client
) -> None:
    from cli_agents import echo

    tq = queue()
    async with Worker(temporal_client, task_queue=tq, plugins=[GolemPlugin(echo)]):
        typo = await golem("run", "--agent", "ecko", "--task-queue", tq, "hi")
    assert typo.code == 1
    run_id = ids(typo.out)["run id"]
    assert "unknown agent 'ecko'" in typo.err and run_id in typo.err


# -- item 6: storage configured on the worker only ------------------------------------------


async def test_a_result_in_storage_the_client_cannot_read_names_the_variable_and_the_run(
    address: str, tmp_path: Path
) -> None:
    tq = queue()
    store = {"GOLEM_STORAGE_DIR": str(tmp_path), "GOLEM_STORAGE_THRESHOLD": "200"}
    async with golem_worker(tq, "echo", env=store) as worker:
        ran = await golem("run", "--agent", "echo", "--task-queue", tq, "x" * 400)
        run_id = ids(ran.out)["run id"]
        shown = await golem("show", run_id)
        readable = await golem("show", run_id, env=store)
    assert f"payloads over 200 bytes stored in {tmp_path} (GOLEM_STORAGE_DIR)" in worker.started
    said = (
        f"run {run_id} keeps payloads in external storage, which this command does not read: "
        "set GOLEM_STORAGE_DIR to the workers' storage directory (GolemPlugin("
        "external_storage=...) in code)"
    )
    assert ran.code == 1 and ran.err == f"golem run: {said}\n", ran
    assert "TMPRL1105" not in ran.err + shown.err
    assert one_line(shown) == f"golem show: {said}"
    assert readable.code == 0 and readable.out.splitlines()[0] == f"run {run_id}: completed"


async def test_run_says_at_start_that_it_encrypts(address: str, tmp_path: Path) -> None:
    tq = queue()
    key = {"GOLEM_ENCRYPTION_KEY": KEY}
    async with golem_worker(tq, "echo", env=key) as worker:
        ran = await golem("run", "--agent", "echo", "--task-queue", tq, "hi", env=key)
    assert "payloads encrypted with key k1 (GOLEM_ENCRYPTION_KEY)" in worker.started
    assert ran.code == 0, ran.err
    assert ran.err == "golem run: payloads encrypted with key k1 (GOLEM_ENCRYPTION_KEY)\n"


# -- item 7 and 8: conversations ------------------------------------------------------------


async def test_show_of_a_conversation_of_chained_runs_prints_its_messages(
    address: str, temporal_client: Client
) -> None:
    tq = queue()
    async with golem_worker(tq, "counter"):
        first = ids((await golem("run", "--agent", "counter", "--task-queue", tq, "one")).out)
        conversation = first["conversation id"]
        query = f'GolemConversationId = "{conversation}"'

        async def visible(count: int) -> bool:
            return (await temporal_client.count_workflows(query)).count == count

        await eventually(lambda: visible(1), what="the first run in visibility")
        second = await golem(
            "run", "--agent", "counter", "--task-queue", tq, "--conversation-id", conversation,
            "two",
        )  # fmt: skip
        await eventually(lambda: visible(2), what="both runs in visibility")
        shown = await golem("show", conversation)
    assert second.code == 0, second.err
    lines = shown.out.splitlines()
    assert shown.code == 0, shown.err
    assert lines[0] == f"conversation {conversation} (2 chained runs, newest completed)"
    assert [line.split(maxsplit=2)[1:] for line in lines[1:5]] == [
        ["user", "one"],
        ["assistant", "1: one"],
        ["user", "two"],
        ["assistant", "2: two"],
    ]


async def test_a_resumed_turn_of_a_conversation_is_its_next_turn_listed_in_time_order(
    address: str,
) -> None:
    tq = queue()
    async with golem_worker(tq, "counter"):
        chat = await golem("chat", "--agent", "counter", "--task-queue", tq, stdin="explode now\n")
        conversation = chat.out.splitlines()[-1].split()[-1]
        failed = next(line.split()[1] for line in chat.out.splitlines() if "(failed" in line)
        resumed = await golem("resume", failed, "calmly")
        listed = await golem("conversation", "--json", conversation)
        shown = await golem("show", conversation)
    assert resumed.code == 0, resumed.err
    assert resumed.out.splitlines()[0] == "2: calmly"
    runs = json.loads(listed.out)["runs"]
    assert [r["runId"] for r in runs] == [failed, ids(resumed.out)["run id"]]
    starts = [r["startTime"] for r in runs]
    assert starts == sorted(starts)
    assert shown.out.splitlines()[-3].endswith("2: calmly"), shown.out


# -- item 9: stdout and stderr -----------------------------------------------------------------


async def test_ids_and_results_go_to_stdout_in_every_state_and_structured_output_as_json(
    address: str,
) -> None:
    tq = queue()
    async with golem_worker(tq, "bank", "planner", "moody"):
        waiting = await golem("run", "--agent", "bank", "--task-queue", tq, "pay")
        planned = await golem("run", "--agent", "planner", "--task-queue", tq, "plan")
        as_json = await golem("run", "--json", "--agent", "planner", "--task-queue", tq, "plan")
        failed = await golem("run", "--agent", "moody", "--task-queue", tq, "explode")
    assert waiting.code == 3 and ids(waiting.out)["run id"], waiting
    assert "waiting for approval of transfer" in waiting.err and "run id" not in waiting.err
    assert planned.out.splitlines()[0] == '{"city":"Lisbon","days":3}', planned
    assert json.loads(as_json.out)["output"] == {"city": "Lisbon", "days": 3}
    assert failed.code == 1 and ids(failed.out)["run id"] and "run id" not in failed.err
    assert failed.err.startswith("run failed at stage tool")


# -- item 10: a client without the key -------------------------------------------------------


async def test_a_client_without_the_key_says_so_once_naming_the_key_to_set(address: str) -> None:
    tq = queue()
    async with golem_worker(tq, "echo", env={"GOLEM_ENCRYPTION_KEY": KEY}):
        ran = await golem("run", "--agent", "echo", "--task-queue", tq, "hi")
    run_id = ids(ran.out)["run id"]
    assert ran.code == 1
    assert ran.err == (
        f"golem run: cannot decrypt run {run_id}'s payloads: they are sealed with encryption "
        "key id 'k1' and this command has no key: set GOLEM_ENCRYPTION_KEY to the workers' "
        "key(s)\n"
    )


# -- item 11: setup and --version --------------------------------------------------------------


async def test_setup_says_registered_only_for_what_it_added() -> None:
    bare = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_cli(), dev_server_startup_timeout=STARTUP_TIMEOUT
    )
    try:
        target = bare.client.service_client.config.target_host
        first = await golem("setup", "--address", target)
        again = await golem("setup", "--address", target)
    finally:
        await bare.shutdown()
    names = (
        "GolemConversationId, GolemAgent, GolemParentRunId, GolemOwner, GolemSummary, "
        "GolemWaiting, GolemTurnRuns"
    )
    assert (first.code, first.out) == (0, f"registered: {names}\n"), first.err
    assert (again.code, again.out) == (0, f"already present: {names}\n"), again.err


def test_version_imports_neither_temporalio_nor_the_agent_core() -> None:
    """``golem --version`` answers before the heavy imports: it is instant."""
    probe = (
        "import sys, golem.cli.entry as entry; shown = entry.answer_at_once(['--version']); "
        "print(shown, sorted(m for m in sys.modules if m.startswith(('temporalio', 'pydantic'))))"
    )
    python = str(Path(GOLEM).parent / "python")
    check = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=True)
    assert check.stdout == "golem 0.2.0\nTrue []\n", check
