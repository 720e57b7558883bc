"""Reaching what a command works with: the Temporal server, its UI, the agents, a worker.

    client = await connect(address="localhost:7233")   # TEMPORAL_* settings otherwise
    agent = load_agent("myapp.agents:support")
    async with watching(client, "golem", run_id):     # says so when no worker polls
        ...

``CliError`` is a problem the user can fix, named in one line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import os
import sys
from collections.abc import AsyncIterator, Sequence
from typing import Any

from temporalio.client import Client
from temporalio.envconfig import ClientConfig
from temporalio.service import RPCError

from golem.agent import Agent
from golem.client.lookups import has_worker
from golem.worker import golem_converter

__all__ = [
    "DEFAULT_ADDRESS",
    "DEFAULT_TASK_QUEUE",
    "WORKER_HINT",
    "CliError",
    "agent_name",
    "client_link",
    "connect",
    "connect_args",
    "load_agent",
    "ui_base",
    "ui_link",
    "watching",
]

DEFAULT_TASK_QUEUE = "golem"
DEFAULT_ADDRESS = "localhost:7233"
#: How long ``run`` waits for a worker to poll its task queue before saying none does.
NO_WORKER_AFTER = 3.0
WORKER_HINT = "golem worker --agent module:attribute"


class CliError(Exception):
    """A problem the user can fix; its message names the problem and the fix, in one line."""


def ui_base(address: str | None = None) -> str:
    """The Temporal UI for a server: GOLEM_UI_URL, Temporal Cloud's, or the dev server's
    (its UI listens on the gRPC port + 1000, as ``temporal server start-dev`` does)."""
    configured = os.environ.get("GOLEM_UI_URL")
    if configured:
        return configured.rstrip("/")
    host, _, port = (address or DEFAULT_ADDRESS).rpartition(":")
    if host.endswith(".tmprl.cloud"):
        return "https://cloud.temporal.io"
    ui_port = int(port) + 1000 if port.isdigit() else 8233
    return f"http://{host or 'localhost'}:{ui_port}"


def ui_link(run_id: str, namespace: str = "default", address: str | None = None) -> str:
    return f"{ui_base(address)}/namespaces/{namespace}/workflows/{run_id}"


def client_link(client: Client, run_id: str) -> str:
    return ui_link(run_id, client.namespace, client.service_client.config.target_host)


async def connect(
    plugins: Sequence[Any] = (), *, address: str | None = None, namespace: str | None = None
) -> Client:
    """A client for ``address``/``namespace``, else TEMPORAL_ADDRESS / TEMPORAL_NAMESPACE /
    profiles (default localhost:7233, namespace default)."""
    config = ClientConfig.load_client_connect_config()
    config.setdefault("target_host", DEFAULT_ADDRESS)
    if address:
        config["target_host"] = address
    if namespace:
        config["namespace"] = namespace
    target = config["target_host"]
    try:
        return await Client.connect(
            **config, data_converter=golem_converter(), plugins=list(plugins)
        )
    except RuntimeError as exc:
        reason = "connection refused" if "refused" in str(exc).lower() else str(exc).splitlines()[0]
        raise CliError(
            f"no Temporal server at {target} ({reason}): start one with `golem dev`, "
            "or point --address (or TEMPORAL_ADDRESS) at yours"
        ) from exc


async def connect_args(args: argparse.Namespace) -> Client:
    return await connect(address=args.address, namespace=args.namespace)


def load_agent(spec: str) -> Agent[Any, Any]:
    """Import ``module:attribute`` (the current directory is importable)."""
    module_name, _, attribute = spec.partition(":")
    if not attribute:
        raise SystemExit(f"--agent wants module:attribute, got {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise CliError(
            f"--agent {spec}: no module {exc.name!r} (run from the directory that holds it, "
            "or add it to PYTHONPATH)"
        ) from exc
    if not hasattr(module, attribute):
        raise CliError(f"--agent {spec}: module {module_name!r} has no {attribute!r}")
    agent = getattr(module, attribute)
    if not isinstance(agent, Agent):
        raise SystemExit(f"{spec} is a {type(agent).__name__}, not a golem Agent")
    return agent


def agent_name(spec: str) -> str:
    """``--agent`` of run/chat: ``module:attribute`` (imported for its name) or a bare name."""
    return load_agent(spec).name if ":" in spec else spec


# -- the no-worker watch ---------------------------------------------------------------------


async def warn_without_worker(
    client: Client, task_queue: str, run_id: str, after: float = NO_WORKER_AFTER
) -> None:
    """Say so, once, when no worker polls ``task_queue``; the run keeps waiting for one."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + after
    while not await has_worker(client, task_queue):
        if loop.time() >= deadline:
            print(
                f"golem: no worker polls task queue {task_queue!r} on "
                f"{client.service_client.config.target_host} (namespace {client.namespace}); "
                f"run {run_id} waits for one: start `{WORKER_HINT} --task-queue {task_queue}`",
                file=sys.stderr,
                flush=True,
            )
            return
        await asyncio.sleep(0.5)


@contextlib.asynccontextmanager
async def watching(client: Client, task_queue: str, run_id: str) -> AsyncIterator[None]:
    watch = asyncio.create_task(warn_without_worker(client, task_queue, run_id))
    try:
        yield
    finally:
        watch.cancel()
        with contextlib.suppress(asyncio.CancelledError, RPCError):
            await watch
