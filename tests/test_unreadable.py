"""A run its worker cannot read ends, named, within seconds (issue 29, items 1 and 2).

Real worker processes on the real dev server: a keyed worker is SIGKILLed once the tool's
result is recorded; then a worker without the run's key (or whose store holds a damaged
blob) takes the run over. It must not retry its workflow task for ever: the run ends as a
``RunError`` at stage ``codec`` (or ``storage``) naming what is missing, its evidence
readable by a client that can read the run, and a keyed worker resumes it.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.converter import ExternalStorage
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker
from test_crash import worker_process
from test_storage_readers import cli
from unreadable_worker import DOCUMENT, fetcher
from waiting import eventually, within

from golem.agent import Agent
from golem.client import DurableAgent, DurableRun
from golem.history.repair import OUTCOME_UNKNOWN_RESULT
from golem.messages import Message, ToolCall
from golem.models import FunctionModel
from golem.results import RunError
from golem.storage import LocalDirectory
from golem.worker import GolemPlugin

WORKER = Path(__file__).parent / "unreadable_worker.py"
K1 = "k1:" + base64.b64encode(bytes(range(32))).decode()
K2 = "k2:" + base64.b64encode(bytes(range(1, 33))).decode()
#: How long a run its worker cannot read may take to end (the issue's bound).
ENDS_WITHIN = 30
ENDED = "the run to end on a worker that cannot read it (not retry its task for ever)"


@pytest.fixture
def crash_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GOLEM_CRASH_DIR", str(tmp_path))
    monkeypatch.delenv("GOLEM_CRASH_HANG", raising=False)
    return tmp_path


async def killed_after_the_tool(
    env: WorkflowEnvironment, durable: DurableAgent[str], crash_dir: Path, keyed: dict[str, str]
) -> DurableRun[str]:
    """A run started on a worker that is SIGKILLed once the tool's result is recorded (in
    the model call after it)."""
    settings: dict[str, str | None] = {**keyed, "GOLEM_CRASH_HANG": "1"}
    async with worker_process(env, durable.task_queue, settings, WORKER) as process:
        run = await durable.start("fetch the document")
        answering = crash_dir / "answering"
        await eventually(answering.exists, what="the model call after the tool", timeout=30)
        process.send_signal(signal.SIGKILL)
        await process.wait()
    return run


async def ended_on(
    env: WorkflowEnvironment, run: DurableRun[str], task_queue: str, settings: dict[str, str | None]
) -> RunError:
    """The ``RunError`` ``run`` ends with once a worker with ``settings`` takes it over."""
    async with worker_process(env, task_queue, settings, WORKER):
        with pytest.raises(RunError) as failure:
            await within(run.result(), what=ENDED, timeout=ENDS_WITHIN)
    return failure.value


async def task_failures(handle: WorkflowHandle[object, object]) -> list[str]:
    """What the run's workflow task failures say, as the server stores them (a task the
    server closed itself, e.g. for the termination, says nothing)."""
    return [
        event.workflow_task_failed_event_attributes.failure.message
        async for event in handle.fetch_history_events()
        if event.workflow_task_failed_event_attributes.HasField("failure")
    ]


def executions(crash_dir: Path) -> list[str]:
    return (crash_dir / "executions").read_text().split()


async def keyed_client(env: WorkflowEnvironment, **plugin: object) -> Client:
    config = env.client.config()
    config["plugins"] = [GolemPlugin(fetcher, **plugin)]  # type: ignore[arg-type]
    return Client(**config)


@pytest.mark.parametrize("other_key", [K2, None], ids=["another-key", "no-key"])
async def test_a_worker_without_the_runs_key_taking_over_ends_it_at_stage_codec_and_it_resumes(
    temporal_env: WorkflowEnvironment, crash_dir: Path, other_key: str | None
) -> None:
    client = await keyed_client(temporal_env, encryption_key=K1)
    task_queue = f"nokey-{uuid.uuid4().hex[:10]}"
    durable: DurableAgent[str] = DurableAgent(client, fetcher, task_queue=task_queue)
    keyed = {"GOLEM_ENCRYPTION_KEY": K1}
    run = await killed_after_the_tool(temporal_env, durable, crash_dir, keyed)
    error = await ended_on(temporal_env, run, task_queue, {"GOLEM_ENCRYPTION_KEY": other_key})

    assert error.stage == "codec"
    assert "key id 'k1'" in error.detail and "GOLEM_ENCRYPTION_KEY" in error.detail
    handle = temporal_env.client.get_workflow_handle(run.run_id)
    said = [str(error), *await task_failures(handle)]
    assert [s for s in said if "nondeterminism" in s.lower()] == []
    assert all("key id 'k1'" in s for s in said), said
    # The evidence, read by this keyed client from the run's history: the tool's result.
    partial = error.partial
    assert partial is not None and partial.run_id == run.run_id
    assert [m.role for m in partial.messages] == ["user", "assistant", "tool"]
    assert partial.messages[2].content == DOCUMENT
    async with Worker(client, task_queue=task_queue):
        resumed = await within(durable.resume(error), what="the resumed run on a keyed worker")
    assert resumed.output == f"read {len(DOCUMENT)} characters"
    assert executions(crash_dir) == ["fetch", "answer"]  # the tool never ran again


def tool_result_claim(events: list[object]) -> str:
    """The path the tool's stored result is filed under, as its reference in history says."""
    for event in events:
        if event.HasField("activity_task_completed_event_attributes"):  # type: ignore[attr-defined]
            [payload] = event.activity_task_completed_event_attributes.result.payloads  # type: ignore[attr-defined]
            if payload.metadata.get("encoding") == b"json/protobuf":
                return str(json.loads(payload.data)["claimData"]["path"])
    raise AssertionError("no activity result is stored")


DAMAGES = {
    "deleted": ("is missing", lambda blob: blob.unlink()),
    "truncated": (
        "is 1000 bytes, not the",
        lambda blob: blob.write_bytes(blob.read_bytes()[:1000]),
    ),
    "corrupted": (
        "does not match its SHA-256",
        lambda blob: blob.write_bytes(blob.read_bytes().replace(b"0000007", b"0000008", 1)),
    ),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
async def test_a_damaged_blob_read_mid_run_ends_it_at_stage_storage_naming_the_blob(
    temporal_env: WorkflowEnvironment, crash_dir: Path, tmp_path: Path, damage: str
) -> None:
    folder = tmp_path / "blobs"
    storage = ExternalStorage(drivers=[LocalDirectory(folder)])
    client = await keyed_client(temporal_env, external_storage=storage)
    task_queue = f"blob-{uuid.uuid4().hex[:10]}"
    durable: DurableAgent[str] = DurableAgent(client, fetcher, task_queue=task_queue)
    stored = {"GOLEM_STORAGE_DIR": str(folder)}
    run = await killed_after_the_tool(temporal_env, durable, crash_dir, stored)
    handle = temporal_env.client.get_workflow_handle(run.run_id)
    relative = tool_result_claim([e async for e in handle.fetch_history_events()])
    what, damaging = DAMAGES[damage]
    damaging(folder / relative)
    error = await ended_on(temporal_env, run, task_queue, stored)

    assert error.stage == "storage"
    assert f"the stored payload {relative} {what}" in error.detail, error.detail
    assert [s for s in await task_failures(handle) if relative not in s] == []
    # Evidence up to the last readable message: the tool ran; its result cannot be read.
    partial = error.partial
    assert partial is not None
    assert [(m.role, m.content) for m in partial.messages[1:]] == [
        ("assistant", ""),
        ("tool", OUTCOME_UNKNOWN_RESULT),
    ]
    address = temporal_env.client.service_client.config.target_host
    argv = [sys.executable, "-m", "golem.cli", "show", run.run_id, "--address", address]
    shown = await cli(argv, {**os.environ, **stored})
    assert relative in (shown.stdout + shown.stderr).decode(), shown


def chatty() -> Agent[Any, str]:
    """Fetches the document when asked to ``fetch``; else says how many messages it sees."""

    def answer(messages: list[Message], tools: Any) -> Message:
        if messages[-1].role == "user" and messages[-1].content == "fetch":
            return Message.assistant("", [ToolCall(id="fetch-1", name="fetch", args="{}")])
        return Message.assistant(f"seen {len(messages)} messages")

    agent: Agent[Any, str] = Agent(FunctionModel(answer), name="chatty")

    @agent.tool
    def fetch() -> str:
        """The document."""
        return DOCUMENT

    return agent


async def test_a_damaged_blob_only_a_later_turn_reads_fails_that_turn_and_a_fork_goes_on(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    agent = chatty()
    folder = tmp_path / "blobs"

    def client() -> Client:
        storage = ExternalStorage(drivers=[LocalDirectory(folder)])
        config = temporal_env.client.config()
        config["plugins"] = [GolemPlugin(agent, external_storage=storage)]
        return Client(**config)

    task_queue = f"conv-blob-{uuid.uuid4().hex[:10]}"
    first = client()
    async with Worker(first, task_queue=task_queue):
        conv = await DurableAgent(first, agent, task_queue=task_queue).conversation()
        hello = await conv.send("hello")
        fetched = await conv.send("fetch")
    assert fetched.output == "seen 5 messages"
    damaged = sorted(p for p in folder.rglob("*") if p.is_file() and len(p.name) == 64)
    assert damaged  # the document, stored (as the tool's result and the turn's)
    for blob in damaged:
        blob.write_bytes(blob.read_bytes()[:1000])
    later = client()  # a fresh worker: it holds nothing of the conversation
    durable = DurableAgent(later, agent, task_queue=task_queue)
    async with Worker(later, task_queue=task_queue):
        again = await durable.conversation(conv.id)
        with pytest.raises(RunError) as failure:
            await within(again.send("more"), what=ENDED, timeout=ENDS_WITHIN)
        assert failure.value.stage == "storage"
        assert "is 1000 bytes, not the" in failure.value.detail
        forked = await again.fork(at_run_id=hello.run_id)
        answer = await within(forked.send("more"), what="the forked conversation's turn")
    assert answer.output == "seen 3 messages"  # hello, its answer, and this turn
