"""A damaged stored blob ends the run that reads it, named, within seconds (issue 29 item 2).

Real worker processes on the real dev server: a worker with a ``LocalDirectory`` is
SIGKILLed once the tool's (stored) result is recorded; its blob is deleted, truncated or
corrupted; a second worker takes the run over. The run ends as a ``RunError`` at stage
``storage`` naming the blob and what is wrong, with the evidence up to the last readable
message; a conversation turn that meets such a blob fails the same way, and a fork at an
earlier turn goes on.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.converter import ExternalStorage
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker
from test_storage_readers import cli
from test_unreadable import (
    ENDED,
    ENDS_WITHIN,
    crash_dir,
    ended_on,
    keyed_client,
    killed_after_the_tool,
    task_failures,
)
from unreadable_worker import DOCUMENT, fetcher
from waiting import within

from golem.agent import Agent
from golem.client import DurableAgent
from golem.history.repair import OUTCOME_UNKNOWN_RESULT
from golem.messages import Message, ToolCall
from golem.models import FunctionModel
from golem.results import RunError
from golem.storage import LocalDirectory
from golem.worker import GolemPlugin

__all__ = ["crash_dir"]  # the fixture, shared with the key tests


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
