"""`golem serve` as a process: it serves a worker's agents on loopback, and refuses another
address without auth."""

from __future__ import annotations

import asyncio
import sys
import uuid
from datetime import timedelta

import httpx
from serve_support import DEADLINE, golem_serve, refunds
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker
from uicheck import free_port

from golem.worker import GolemPlugin

GOLEM = [sys.executable, "-m", "golem.cli"]


async def test_golem_serve_answers_a_turn_of_a_workers_agent(
    temporal_env: WorkflowEnvironment,
) -> None:
    port, queue = free_port(), f"cli-{uuid.uuid4().hex[:8]}"
    plugin = GolemPlugin(refunds, heartbeat_timeout=timedelta(seconds=5))
    async with (
        Worker(temporal_env.client, task_queue=queue, plugins=[plugin]),
        golem_serve(temporal_env.client, port, queue) as process,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=DEADLINE) as http,
    ):
        assert process.stdout is not None
        said = (await asyncio.wait_for(process.stdout.readline(), DEADLINE)).decode()
        conversation = (await http.post("/conversations", json={"agent": "refunds"})).json()
        url = f"/conversations/{conversation['id']}"
        await http.post(f"{url}/messages", json={"text": "Refund 1"})
        await http.get(f"{url}/events")
        decided = await http.post(f"{url}/decisions", json={"decisions": {"refund-1": True}})

    assert said.startswith(f"golem serve: http://127.0.0.1:{port}/ for refunds on task queue ")
    assert decided.json()["output"] == "Done: order 1 refunded 150."


async def test_golem_serve_refuses_a_public_address_without_auth() -> None:
    process = await asyncio.create_subprocess_exec(
        *GOLEM, "serve", "--agent", "examples.refunds:agent", "--host", "0.0.0.0",
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(process.communicate(), DEADLINE)
    assert process.returncode == 2
    assert err.decode() == (
        "golem serve: refusing to serve 0.0.0.0 without auth: pass --auth jwt (with --issuer, "
        "--audience and a key), or --insecure\n"
    )


async def test_golem_serve_inline_turns_refuses_an_agent_that_needs_the_whole_history() -> None:
    """Inline turns cannot run a history processor yet: said at start, naming the agent,
    nothing served."""
    process = await asyncio.create_subprocess_exec(
        *GOLEM, "serve", "--agent", "examples.demo_agent:agent", "--inline-turns",
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(process.communicate(), DEADLINE)
    assert process.returncode == 2
    assert err.decode().startswith(
        "golem serve: --inline-turns cannot serve agent 'travel', which needs the whole history"
    )
