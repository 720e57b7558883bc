"""temporalio's own S3 driver under golem, against an S3 server on 127.0.0.1 (moto's, from
the dev extra): a 5 MB tool result goes to the bucket, history keeps a reference."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from agents import ask, call, scripted
from temporalio.testing import WorkflowEnvironment
from test_storage import MB, SMALL_HISTORY, big_text, history_bytes, serving, storing_client

from golem.client import DurableAgent, fetch_run
from golem.messages import Message

aioboto3 = pytest.importorskip("aioboto3")
moto_server = pytest.importorskip("moto.server")
from temporalio.contrib.aws.s3driver import S3StorageDriver  # noqa: E402
from temporalio.contrib.aws.s3driver.aioboto3 import new_aioboto3_client  # noqa: E402

BUCKET = "golem-payloads"


@pytest.fixture
def s3_endpoint() -> Iterator[str]:
    """An S3 server in this process, on a free port of 127.0.0.1."""
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()


async def test_the_sdks_s3_driver_stores_a_5_mb_tool_result_in_the_bucket(
    temporal_env: WorkflowEnvironment, s3_endpoint: str
) -> None:
    document = big_text(5 * MB, "s3")
    agent, _ = scripted([ask(call("c1", "fetch_doc")), Message.assistant("read it")])

    @agent.tool
    def fetch_doc() -> str:
        """The document."""
        return document

    session = aioboto3.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
    )
    s3: Any
    async with session.client("s3", endpoint_url=s3_endpoint) as s3:
        await s3.create_bucket(Bucket=BUCKET)
        driver = S3StorageDriver(new_aioboto3_client(s3), bucket=BUCKET)
        client = storing_client(temporal_env, driver, agent)
        async with serving(client) as task_queue:
            result = await DurableAgent(client, agent, task_queue=task_queue).run("read")
        listed = await s3.list_objects_v2(Bucket=BUCKET)
        record = await fetch_run(client, result.run_id)  # no worker: read from the bucket
    objects = listed["Contents"]
    assert any(result.run_id in o["Key"] and o["Size"] > 5 * MB for o in objects)
    assert sum(o["Size"] for o in objects) < 5 * MB + 200_000  # the document, once
    assert await history_bytes(client, result.run_id) < SMALL_HISTORY
    assert next(m for m in record.messages if m.tool_call_id == "c1").content == document
