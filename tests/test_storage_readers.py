"""Who reads a stored payload: the codec server the Temporal UI calls (a preview past
64 KiB; a reference without the store), and ``golem show`` with the store from the
environment."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import uuid
from typing import Any

import httpx
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.client import Client
from temporalio.converter import ExternalStorage
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from golem.agent import Agent
from golem.client import DurableAgent
from golem.codec_server import codec_app
from golem.messages import Message, ToolCall, load_messages
from golem.models import FunctionModel
from golem.storage import LocalDirectory
from golem.worker import GolemPlugin
from golem.worker.codec import EncryptionCodec
from golem.worker.display import PREVIEW_BYTES, for_display

KEY = bytes(range(32))
MARKER = "STORED-c4fe "


def reading_agent(name: str) -> Agent[Any, str]:
    def answer(messages: list[Message], tools: Any) -> Message:
        if messages[-1].role == "tool":
            return Message.assistant("read it")
        return Message.assistant("", [ToolCall(id="c1", name="fetch_doc", args="{}")])

    agent: Agent[Any, str] = Agent(FunctionModel(answer), name=name)

    @agent.tool
    def fetch_doc() -> str:
        """The document."""
        return MARKER * 50_000  # 600 KB

    return agent


async def stored_run(env: WorkflowEnvironment, store: LocalDirectory, **plugin: Any) -> str:
    agent = reading_agent(f"reader-{uuid.uuid4().hex[:6]}")
    config = env.client.config()
    storage = ExternalStorage(drivers=[store])
    config["plugins"] = [GolemPlugin(agent, external_storage=storage, **plugin)]
    client = Client(**config)
    task_queue = f"readers-{uuid.uuid4().hex[:10]}"
    async with Worker(client, task_queue=task_queue):
        result = await DurableAgent(client, agent, task_queue=task_queue).run("read")
    return result.run_id


async def tool_result_payload(client: Client, run_id: str) -> Payload:
    """The tool activity's result as history holds it."""
    async for event in client.get_workflow_handle(run_id).fetch_history_events():
        if event.HasField("activity_task_completed_event_attributes"):
            payload = event.activity_task_completed_event_attributes.result.payloads[0]
            if payload.external_payloads:
                return payload
    raise AssertionError("no stored activity result")


async def decode(app: Any, payload: Payload) -> httpx.Response:
    body = json_format.MessageToJson(Payloads(payloads=[payload]))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8081") as http:
        return await http.post("/decode", content=body, headers={"Origin": "http://localhost:8233"})


def shown(response: httpx.Response) -> tuple[str, bytes]:
    [payload] = response.json()["payloads"]
    return base64.b64decode(payload["metadata"]["encoding"]).decode(), base64.b64decode(
        payload["data"]
    )


async def test_the_codec_server_shows_a_stored_payload_as_a_preview_without_the_store_a_reference(
    temporal_env: WorkflowEnvironment, tmp_path: Any
) -> None:
    store = LocalDirectory(tmp_path / "blobs")
    run_id = await stored_run(temporal_env, store, encryption_key=KEY)
    reference = await tool_result_payload(temporal_env.client, run_id)
    assert MARKER.encode() not in reference.SerializeToString()  # history: a reference only
    assert b"driverName" in reference.data or b"driver_name" in reference.data

    codec = EncryptionCodec.parse(KEY)
    storage = ExternalStorage(drivers=[LocalDirectory(store.root)])
    encoding, data = shown(await decode(codec_app(codec, storage=storage), reference))
    assert encoding == "json/plain"
    preview = json.loads(data)
    assert preview["golemStoredPayload"]["bytes"] > 600_000
    assert preview["golemStoredPayload"]["shown"] == PREVIEW_BYTES
    assert preview["preview"].startswith('{"content":"' + MARKER)

    encoding, data = shown(await decode(codec_app(codec), reference))  # no store: as it is
    assert encoding == "json/protobuf" and data == reference.data

    [whole] = await for_display([reference], storage, codec, preview_bytes=10_000_000)
    assert json.loads(whole.data)["content"] == MARKER * 50_000


async def test_a_reference_to_a_blob_that_is_gone_is_a_400_naming_it(
    temporal_env: WorkflowEnvironment, tmp_path: Any
) -> None:
    store = LocalDirectory(tmp_path / "blobs")
    run_id = await stored_run(temporal_env, store)
    reference = await tool_result_payload(temporal_env.client, run_id)
    for blob in store.run_folder(run_id).iterdir():
        blob.unlink()
    storage = ExternalStorage(drivers=[LocalDirectory(store.root)])
    response = await decode(codec_app(None, storage=storage), reference)
    assert response.status_code == 400
    assert "is missing" in response.json()["error"]


async def test_golem_show_reads_a_stored_run_with_the_store_from_the_environment(
    temporal_env: WorkflowEnvironment, tmp_path: Any
) -> None:
    store = LocalDirectory(tmp_path / "blobs")
    run_id = await stored_run(temporal_env, store)
    address = temporal_env.client.service_client.config.target_host
    argv = [sys.executable, "-m", "golem.cli", "show", run_id, "--address", address, "--json"]
    with_store = {**os.environ, "GOLEM_STORAGE_DIR": str(store.root)}
    shown_out = await cli(argv, with_store)
    assert shown_out.returncode == 0, shown_out.stderr
    messages = load_messages(shown_out.stdout)
    assert [m.content for m in messages if m.role == "tool"] == [MARKER * 50_000]
    without = await cli(argv, {k: v for k, v in os.environ.items() if k != "GOLEM_STORAGE_DIR"})
    assert without.returncode != 0
    assert (
        b"keeps payloads in external storage, which this command does not read: set "
        b"GOLEM_STORAGE_DIR" in without.stderr
    )


async def cli(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    process = await asyncio.create_subprocess_exec(
        *argv, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await process.communicate()
    return subprocess.CompletedProcess(argv, process.returncode or 0, out, err)
