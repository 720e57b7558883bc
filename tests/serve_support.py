"""``golem serve``'s app on a free port against the dev server, a worker beside it, and the
Node clients of tests/serve (the real ``@ag-ui/client`` and ``ai`` packages)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import sys
import uuid
from asyncio.subprocess import Process
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker
from uicheck import free_port
from waiting import eventually

from golem.agent import Agent
from golem.serve import Auth, create_app
from golem.worker import GolemPlugin

sys.path.insert(0, str(Path(__file__).parents[1]))
from examples.refunds import agent as refunds

DEADLINE = 60.0
CLIENTS = Path(__file__).parent / "serve"
NODE_MODULES = CLIENTS / "node_modules"

__all__ = ["DEADLINE", "Server", "golem_serve", "node_client", "refunds", "serving"]

#: Whether ``serving`` apps start conversations whose turns run inline (docs/adr/0050).
INLINE = False


@dataclass
class Server:
    url: str
    port: int
    task_queue: str


@asynccontextmanager
async def serving(
    env: WorkflowEnvironment | Client,
    agents: Sequence[Agent[Any, Any]] = (refunds,),
    *,
    auth: Auth | None = None,
    origins: Sequence[str] = (),
    max_body_bytes: int | None = None,
    worker: bool = True,
    by_name: bool = False,
) -> AsyncIterator[Server]:
    """A worker for ``agents`` (unless ``worker=False``: the test runs its own) and the app
    for them on a free 127.0.0.1 port (``by_name``: the app knows them by name only)."""
    client = env if isinstance(env, Client) else env.client
    port = free_port()
    task_queue = f"serve-{uuid.uuid4().hex[:8]}"
    options: dict[str, Any] = {} if max_body_bytes is None else {"max_body_bytes": max_body_bytes}
    served = [a.name for a in agents] if by_name else agents
    options["inline_turns"] = INLINE
    app = create_app(client, served, task_queue=task_queue, auth=auth, origins=origins, **options)
    plugin = GolemPlugin(*agents, heartbeat_timeout=timedelta(seconds=5))
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None)
    server = uvicorn.Server(config)
    async with contextlib.AsyncExitStack() as stack:
        if worker:
            await stack.enter_async_context(Worker(client, task_queue=task_queue, plugins=[plugin]))
        task = asyncio.create_task(server.serve())
        try:
            await eventually(
                lambda: server.started, what="the server to listen", timeout=DEADLINE, interval=0.01
            )
            yield Server(f"http://127.0.0.1:{port}", port, task_queue)
        finally:
            server.should_exit = True
            await task


@asynccontextmanager
async def golem_serve(client: Client, port: int, queue: str) -> AsyncIterator[Process]:
    """`golem serve` as a process (its workers are the test's), until it exits or is killed."""
    environ = {**os.environ, "TEMPORAL_ADDRESS": client.service_client.config.target_host}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "golem.cli", "serve", "--agent", "examples.refunds:agent",
        "--port", str(port), "--task-queue", queue, env=environ, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=2) as http:

            async def up() -> bool:
                try:
                    return (await http.get("/openapi.json")).status_code == 200
                except httpx.TransportError:
                    return False

            await eventually(up, what="golem serve to answer", timeout=DEADLINE)
        yield process
    finally:
        if process.returncode is None:
            process.terminate()
        await process.wait()


def need_node() -> None:
    """Skip where the Node clients are not installed (fail under CI: .ci/run installs them)."""
    missing = None
    if shutil.which("node") is None:
        missing = "no node: install Node.js 20+"
    elif not NODE_MODULES.is_dir():
        missing = "the Node clients are not installed: make browser (npm ci --prefix tests/serve)"
    if missing and os.environ.get("CI"):
        pytest.fail(missing)
    if missing:
        pytest.skip(missing)


async def node_client(script: str, job: dict[str, Any]) -> Any:
    """Run ``tests/serve/<script>`` with ``job`` as JSON on stdin; its stdout's JSON."""
    need_node()
    process = await asyncio.create_subprocess_exec(
        "node",
        str(CLIENTS / script),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(json.dumps(job).encode()), DEADLINE)
    if process.returncode != 0:
        raise AssertionError(f"{script} failed ({process.returncode}): {err.decode()}")
    return json.loads(out)
