"""Payloads of any size through Temporal's external storage, on a ``LocalDirectory``: the
run completes, its history stays small, the store holds each large content once, and a
client with no worker reads it back."""

from __future__ import annotations

import asyncio
import base64
import re
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from agents import ask, call, scripted
from google.protobuf import json_format
from storage_worker import DOCUMENT, reader
from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.converter import ExternalStorage, StorageDriver
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker
from test_conversation_boundaries import budgeted, continued
from test_crash import TAKEN_OVER
from waiting import within

from golem.agent import Agent
from golem.client import DurableAgent, fetch_run
from golem.messages import Message, Part
from golem.models.function import ScriptedModel
from golem.results import RunError
from golem.storage import LocalDirectory
from golem.worker import GolemPlugin
from golem.worker.codec import ENCODING, EncryptionCodec

MB = 1_000_000
SMALL_HISTORY = 64 * 1024


def big_text(size: int, seed: str = "") -> str:
    """``size`` characters that do not repeat every few bytes (a compressor cannot hide them)."""
    block = (seed + uuid.uuid4().hex) * 32
    return (block * (size // len(block) + 1))[:size]


def storing_client(
    env: WorkflowEnvironment, store: StorageDriver, *agents: Agent[Any, Any], **plugin: Any
) -> Client:
    """A client serving ``agents`` whose payloads over 256 KiB go to ``store``."""
    config = env.client.config()
    storage = ExternalStorage(drivers=[store])
    config["plugins"] = [GolemPlugin(*agents, external_storage=storage, **plugin)]
    return Client(**config)


@asynccontextmanager
async def serving(client: Client) -> AsyncIterator[str]:
    """A worker with ``client``'s plugin, on a task queue of its own."""
    task_queue = f"storage-{uuid.uuid4().hex[:10]}"
    async with Worker(client, task_queue=task_queue):
        yield task_queue


async def history_bytes(client: Client, run_id: str) -> int:
    events = client.get_workflow_handle(run_id).fetch_history_events()
    return sum([e.ByteSize() async for e in events])


def document_agent(
    document: str, answers: Sequence[Message]
) -> tuple[Agent[Any, Any], ScriptedModel]:
    """An agent answering from ``answers`` whose ``fetch_doc`` tool returns ``document``."""
    agent, model = scripted(answers)

    @agent.tool
    def fetch_doc() -> str:
        """The document."""
        return document

    return agent, model


def run_blob_bytes(store: LocalDirectory, run_id: str) -> int:
    """What the store holds for one run (its folder: its activities' and its own payloads)."""
    return sum(f.stat().st_size for f in store.run_folder(run_id).iterdir())


@pytest.fixture
def store(tmp_path: Path) -> LocalDirectory:
    return LocalDirectory(tmp_path / "blobs")


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
async def test_a_5_mb_tool_result_is_stored_once_and_the_run_history_stays_small(
    temporal_env: WorkflowEnvironment, store: LocalDirectory, encrypted: bool
) -> None:
    """Once even when encrypted: every write of the same content is a new ciphertext, so
    the store's content addressing cannot be what keeps it to one."""
    document = big_text(5 * MB, "doc")
    agent, model = document_agent(
        document,
        [
            ask(call("c1", "fetch_doc")),
            ask(call("c2", "note", text="a")),
            ask(call("c3", "note", text="b")),
            Message.assistant("read it"),
        ],
    )

    @agent.tool
    def note(text: str) -> str:
        """Take a note."""
        return text

    key = EncryptionCodec.new_key() if encrypted else None
    client = storing_client(temporal_env, store, agent, encryption_key=key)
    async with serving(client) as task_queue:
        result = await DurableAgent(client, agent, task_queue=task_queue).run("read the doc")

    assert result.output == "read it"
    tool = next(m for m in result.messages if m.tool_call_id == "c1")
    assert tool.content == document
    # Three more model calls read the document; the store holds it once.
    assert [len(r.messages) for r in model.requests] == [1, 3, 5, 7]
    assert all(r.messages[2].content == document for r in model.requests[1:])
    assert 5 * MB < store.bytes_written < 5 * MB + 200_000
    assert store.bytes_written == run_blob_bytes(store, result.run_id)
    assert await history_bytes(client, result.run_id) < SMALL_HISTORY
    # A replay reads the stored results again, to the same decisions.
    history = await client.get_workflow_handle(result.run_id).fetch_history()
    storage = ExternalStorage(drivers=[LocalDirectory(store.root)])
    plugin = GolemPlugin(agent, encryption_key=key, external_storage=storage)
    replay = await Replayer(workflows=[], plugins=[plugin]).replay_workflow(
        history, raise_on_replay_failure=False
    )
    assert replay.replay_failure is None, replay.replay_failure


async def test_without_storage_an_oversized_tool_result_fails_naming_the_setting(
    temporal_client: Client,
) -> None:
    agent, _ = document_agent("x" * (3 * MB), [ask(call("c1", "fetch_doc"))])

    task_queue = f"nostore-{uuid.uuid4().hex[:10]}"
    async with Worker(temporal_client, task_queue=task_queue, plugins=[GolemPlugin(agent)]):
        with pytest.raises(RunError) as failed:
            await DurableAgent(temporal_client, agent, task_queue=task_queue).run("go")
    assert failed.value.stage == "tool"
    assert "over Temporal's payload limit" in failed.value.detail
    assert "GolemPlugin(external_storage=...) or GOLEM_STORAGE_DIR" in failed.value.detail


async def test_a_3_mb_image_in_a_prompt_reaches_the_model_and_the_run_reads_back_without_a_worker(
    temporal_env: WorkflowEnvironment, store: LocalDirectory
) -> None:
    image = big_text(3 * MB, "png").encode()
    agent, model = scripted([Message.assistant("a cat")])
    client = storing_client(temporal_env, store, agent)
    async with serving(client) as task_queue:
        durable = DurableAgent(client, agent, task_queue=task_queue)
        result = await durable.run(
            "what is this?", parts=[Part(kind="image", data=image, media_type="image/png")]
        )
    assert result.output == "a cat"
    [request] = model.requests
    assert request.messages[-1].parts[0].data == image
    assert await history_bytes(client, result.run_id) < SMALL_HISTORY
    record = await fetch_run(client, result.run_id)  # the worker has stopped
    assert record.status == "completed" and record.messages == result.messages


async def test_a_25_mb_tool_result_completes_and_reads_back_without_a_worker(
    temporal_env: WorkflowEnvironment, store: LocalDirectory
) -> None:
    everything = big_text(25 * MB, "dump")
    agent, _ = scripted([ask(call("c1", "dump")), Message.assistant("done")])

    @agent.tool
    def dump() -> str:
        """Everything."""
        return everything

    client = storing_client(temporal_env, store, agent)
    async with serving(client) as task_queue:
        result = await DurableAgent(client, agent, task_queue=task_queue).run("dump it")
    assert await history_bytes(client, result.run_id) < SMALL_HISTORY
    record = await fetch_run(client, result.run_id)
    assert next(m for m in record.messages if m.tool_call_id == "c1").content == everything


async def test_encrypted_then_stored_the_blob_is_ciphertext_and_a_reader_needs_key_and_store(
    temporal_env: WorkflowEnvironment, store: LocalDirectory
) -> None:
    marker = "SECRET-3b1f-"
    document = big_text(MB, marker)
    agent, _ = document_agent(
        document, [ask(call("c1", "fetch_doc")), Message.assistant("read it")]
    )

    key = EncryptionCodec.new_key()
    client = storing_client(temporal_env, store, agent, encryption_key=key)
    async with serving(client) as task_queue:
        result = await DurableAgent(client, agent, task_queue=task_queue).run("read the doc")
    assert next(m for m in result.messages if m.tool_call_id == "c1").content == document

    blobs = list(store.run_folder(result.run_id).iterdir())
    assert blobs
    for blob in blobs:
        raw = blob.read_bytes()
        assert marker.encode() not in raw
        assert Payload.FromString(raw).metadata["encoding"] == ENCODING  # sealed, then stored
    record = await fetch_run(client, result.run_id)
    assert next(m for m in record.messages if m.tool_call_id == "c1").content == document

    no_key = storing_client(temporal_env, LocalDirectory(store.root))
    with pytest.raises(ApplicationError, match="sealed with encryption key id"):
        await fetch_run(no_key, result.run_id)
    config = temporal_env.client.config()
    config["plugins"] = [GolemPlugin(encryption_key=key)]
    no_store = Client(**config)
    with pytest.raises(RuntimeError, match="external storage is not configured"):
        await fetch_run(no_store, result.run_id)


async def test_a_conversation_takes_a_5_mb_tool_result_across_continue_as_new(
    temporal_env: WorkflowEnvironment, store: LocalDirectory
) -> None:
    document = big_text(5 * MB, "conv")
    answers = [Message.assistant(f"answer {n}") for n in range(4)]
    agent, _ = document_agent(document, [ask(call("c1", "fetch_doc")), *answers])

    client = storing_client(temporal_env, store, agent)
    async with serving(client) as task_queue:
        conv = await budgeted(client, agent, task_queue, turns_per_run=1)
        first = await conv.send("read the doc")
        await conv.send("did you?")
        after_two = store.bytes_written
        last = await conv.send("really?")
    # Each turn continued as new, the transcript by reference to the runs that hold it.
    assert await continued(client, conv.id) >= 2
    assert first.output == "answer 0" and last.output == "answer 2"
    assert [m.content for m in last.messages if m.tool_call_id == "c1"] == [document]
    # The tool's result and the turn's result the conversation takes in: later turns on
    # the worker that holds the conversation read the document again and store nothing.
    assert store.writes == 2 and store.bytes_written < 2 * (5 * MB + 1_000)
    assert store.bytes_written == after_two
    assert await history_bytes(client, conv.id) < SMALL_HISTORY
    record = await fetch_run(client, last.run_id)  # no worker: its base from the histories
    assert record.messages == last.messages


async def test_a_worker_killed_between_storing_and_completing_leaves_no_dangling_reference(
    temporal_env: WorkflowEnvironment, store: LocalDirectory
) -> None:
    task_queue = f"storage-crash-{uuid.uuid4().hex[:10]}"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(Path(__file__).parent / "storage_worker.py"),
        temporal_env.client.service_client.config.target_host,
        task_queue,
        str(store.root),
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        assert (await process.stdout.readline()).strip() == b"ready"
        agent = reader()
        client = storing_client(temporal_env, store, agent, heartbeat_timeout=timedelta(seconds=2))
        run = await DurableAgent(client, agent, task_queue=task_queue).start("read it")
        assert await asyncio.wait_for(process.wait(), 60) == -signal.SIGKILL  # stored, then died
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    stored_before = {p.name for p in store.run_folder(run.run_id).iterdir()}
    assert stored_before  # the dead worker's blob, which no history names yet

    async with Worker(client, task_queue=task_queue):
        result = await within(run.result(), what=TAKEN_OVER)
    assert result.output == f"read {len(DOCUMENT)} characters"
    named = await referenced_blobs(client, run.run_id)
    assert named and all((store.root / path).is_file() for path in named)
    record = await fetch_run(client, run.run_id)
    assert next(m for m in record.messages if m.role == "tool").content == DOCUMENT


async def referenced_blobs(client: Client, run_id: str) -> list[str]:
    """The store paths the run's history names (every reference payload, in any event)."""
    paths: list[str] = []
    async for event in client.get_workflow_handle(run_id).fetch_history_events():
        for data in re.findall(r'"data": "([A-Za-z0-9+/=]+)"', json_format.MessageToJson(event)):
            paths += re.findall(
                r'"path": ?"([^"]+)"', base64.b64decode(data).decode(errors="replace")
            )
    return paths


@pytest.mark.usefixtures("conversation_shapes")
async def test_a_turn_of_non_ascii_text_past_a_page_in_bytes_is_refused_not_stuck(
    temporal_client: Client,
) -> None:
    """600,000 characters of CJK text are 1.8 MB of UTF-8 (with a 100,000-character prompt,
    2.1 MB): a turn's result or record carrying them failed its workflow task for ever
    (Temporal's payload limit); the turn is refused as a 1 MB one is, and the next goes on."""
    text = "字" * 600_000
    agent, _ = document_agent(
        text, [ask(call("c1", "fetch_doc")), Message.assistant("read it"), Message.assistant("ok")]
    )
    task_queue = f"utf8-{uuid.uuid4().hex[:10]}"
    async with Worker(temporal_client, task_queue=task_queue, plugins=[GolemPlugin(agent)]):
        conv = await DurableAgent(temporal_client, agent, task_queue=task_queue).conversation()
        async with asyncio.timeout(60):  # before: its workflow task failed, the send waited
            with pytest.raises(ValueError, match="too many for the conversation"):
                await conv.send("字" * 100_000)
            assert (await conv.send("and now?")).output == "ok"
        await conv.close()


async def test_without_storage_a_conversation_refuses_a_1_mb_turn_naming_the_setting(
    temporal_client: Client,
) -> None:
    big = big_text(1_200_000)  # under the payload limit, over what a turn may add
    agent, _ = document_agent(big, [ask(call("c1", "fetch_doc")), Message.assistant("read it")])

    task_queue = f"nostore-{uuid.uuid4().hex[:10]}"
    async with Worker(temporal_client, task_queue=task_queue, plugins=[GolemPlugin(agent)]):
        conv = await DurableAgent(temporal_client, agent, task_queue=task_queue).conversation()
        with pytest.raises(ValueError, match="too many for the conversation") as refused:
            await conv.send("read the doc")
        await conv.close()
    assert "GolemPlugin(external_storage=...) or GOLEM_STORAGE_DIR" in str(refused.value)
