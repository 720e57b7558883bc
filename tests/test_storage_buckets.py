"""temporalio's own S3 and GCS drivers under golem, each against a server on 127.0.0.1 from
the dev extra (moto's S3, gcp-storage-emulator's GCS): a 5 MB tool result goes to the
bucket once, history keeps a reference, a client with no worker reads it back."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
from agents import ask, call, scripted
from temporalio.converter import StorageDriver
from temporalio.testing import WorkflowEnvironment
from test_storage import MB, SMALL_HISTORY, big_text, history_bytes, serving, storing_client

from golem.client import DurableAgent, fetch_run
from golem.messages import Message
from golem.results import Result

aioboto3 = pytest.importorskip("aioboto3")
moto_server = pytest.importorskip("moto.server")
gcs_emulator = pytest.importorskip("gcp_storage_emulator.server")
gcloud_storage = pytest.importorskip("gcloud.aio.storage")
from temporalio.contrib.aws.s3driver import S3StorageDriver  # noqa: E402
from temporalio.contrib.aws.s3driver.aioboto3 import new_aioboto3_client  # noqa: E402
from temporalio.contrib.gcp.gcsdriver import GCSStorageDriver  # noqa: E402
from temporalio.contrib.gcp.gcsdriver.gcloud_aio import new_gcloud_aio_client  # noqa: E402

BUCKET = "golem-payloads"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def s3_endpoint() -> Iterator[str]:
    """moto's S3 server in this process, on a free port of 127.0.0.1."""
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def gcs_endpoint() -> Iterator[str]:
    """gcp-storage-emulator's GCS server in this process, in memory, with the bucket."""
    port = free_port()
    server = gcs_emulator.create_server("127.0.0.1", port, in_memory=True, default_bucket=BUCKET)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


async def run_reading(env: WorkflowEnvironment, driver: StorageDriver) -> tuple[Result[Any], str]:
    """A durable run whose tool returns 5 MB, stored by ``driver``; and the record of it a
    client reads with no worker, checked."""
    document = big_text(5 * MB, driver.name())
    agent, _ = scripted([ask(call("c1", "fetch_doc")), Message.assistant("read it")])

    @agent.tool
    def fetch_doc() -> str:
        """The document."""
        return document

    client = storing_client(env, driver, agent)
    async with serving(client) as task_queue:
        result = await DurableAgent(client, agent, task_queue=task_queue).run("read")
    record = await fetch_run(client, result.run_id)  # no worker: read from the bucket
    assert next(m for m in record.messages if m.tool_call_id == "c1").content == document
    assert await history_bytes(client, result.run_id) < SMALL_HISTORY
    return result, document


async def test_the_sdks_s3_driver_stores_a_5_mb_tool_result_in_the_bucket_once(
    temporal_env: WorkflowEnvironment, s3_endpoint: str
) -> None:
    session = aioboto3.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
    )
    s3: Any
    async with session.client("s3", endpoint_url=s3_endpoint) as s3:
        await s3.create_bucket(Bucket=BUCKET)
        driver = S3StorageDriver(new_aioboto3_client(s3), bucket=BUCKET)
        result, _ = await run_reading(temporal_env, driver)
        objects = (await s3.list_objects_v2(Bucket=BUCKET))["Contents"]
    assert any(result.run_id in o["Key"] and o["Size"] > 5 * MB for o in objects)
    assert sum(o["Size"] for o in objects) < 5 * MB + 200_000  # the document, once


async def test_the_sdks_gcs_driver_stores_a_5_mb_tool_result_in_the_bucket_once(
    temporal_env: WorkflowEnvironment, gcs_endpoint: str
) -> None:
    async with gcloud_storage.Storage(api_root=gcs_endpoint) as gcs:
        driver = GCSStorageDriver(new_gcloud_aio_client(gcs), bucket=BUCKET)
        result, _ = await run_reading(temporal_env, driver)
        listed = await gcs.list_objects(BUCKET)
    objects = listed.get("items", [])
    assert any(result.run_id in o["name"] and int(o["size"]) > 5 * MB for o in objects)
    assert sum(int(o["size"]) for o in objects) < 5 * MB + 200_000
