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
from collections.abc import AsyncIterator, Mapping, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.envconfig import ClientConfig
from temporalio.service import RPCError

from golem.agent import Agent
from golem.cli import recorded as dev_records
from golem.cli.queues import describe_queue
from golem.codec_server import DEV_UI_FILE, UI_URL_VARIABLES
from golem.worker import golem_converter

DEFAULT_TASK_QUEUE = "golem"
DEFAULT_ADDRESS = "localhost:7233"
#: How long ``run`` waits for a worker to poll its task queue before saying none does.
NO_WORKER_AFTER = 3.0
WORKER_HINT = "golem worker --agent module:attribute"
#: ``temporal server start-dev``'s UI when it serves the default address.
DEFAULT_UI = "http://localhost:8233"
LOOPBACK = ("localhost", "127.0.0.1", "::1", "")
UNKNOWN_UI = "unknown: pass --ui-url (or set TEMPORAL_UI_URL) to link the Temporal UI"
#: This command's ``--ui-url``.
UI_URL: ContextVar[str | None] = ContextVar("golem_ui_url", default=None)


class CliError(Exception):
    """A problem the user can fix; its message names the problem and the fix, in one line."""


def ui_base(
    address: str | None = None,
    configured: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    recorded: Path = DEV_UI_FILE,
) -> str | None:
    """The Temporal UI's address for a server, from configuration only: ``configured``
    (``--ui-url``), GOLEM_UI_URL or TEMPORAL_UI_URL, the UI of the server ``golem dev``
    runs from ``.golem/`` (for a server on this machine), Temporal Cloud's, or the dev server's
    default for the default address; ``None`` when nothing says where it is."""
    env = os.environ if environ is None else environ
    for url in (configured, *(env.get(name) for name in UI_URL_VARIABLES)):
        if url and url.strip():
            return url.strip().rstrip("/")
    target = address or DEFAULT_ADDRESS
    host = target.rpartition(":")[0].strip("[]")
    if host.endswith(".tmprl.cloud"):
        return "https://cloud.temporal.io"
    dev = dev_records.recorded(recorded.parent) if host in LOOPBACK else None
    if dev is not None and dev.address.rpartition(":")[2] == target.rpartition(":")[2]:
        return dev.ui_url
    # A bare ui-url is an older golem dev's; beside a record, only a live record counts.
    if host in LOOPBACK and not (recorded.parent / dev_records.RECORD).exists():
        with contextlib.suppress(OSError):
            written = recorded.read_text().strip()
            if written:
                return written.rstrip("/")
    if target in (DEFAULT_ADDRESS, "127.0.0.1:7233"):
        return DEFAULT_UI  # `temporal server start-dev`'s own, where nothing else is said
    return None


def ui_link(
    run_id: str,
    namespace: str = "default",
    address: str | None = None,
    ui_url: str | None = None,
) -> str | None:
    """The UI page of run ``run_id`` (``None``: where the UI is is not configured)."""
    base = ui_base(address, ui_url or UI_URL.get())
    return f"{base}/namespaces/{namespace}/workflows/{run_id}" if base else None


def client_link(client: Client, run_id: str) -> str:
    """``run_id``'s UI page for this client's server, or how to configure where the UI is."""
    link = ui_link(run_id, client.namespace, client.service_client.config.target_host)
    return link or UNKNOWN_UI


async def connect(
    plugins: Sequence[Any] = (), *, address: str | None = None, namespace: str | None = None
) -> Client:
    """A client for ``address``/``namespace``, else TEMPORAL_ADDRESS / TEMPORAL_NAMESPACE /
    profiles, else the server ``golem dev`` runs from ./.golem (default localhost:7233,
    namespace default)."""
    config = ClientConfig.load_client_connect_config()
    if "target_host" not in config:  # nothing configured: the server golem dev runs here
        dev = dev_records.recorded()
        config["target_host"] = dev.address if dev is not None else DEFAULT_ADDRESS
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
    """``connect`` with the command's ``--address``/``--namespace``; its ``--ui-url`` is
    where this command's UI links point."""
    UI_URL.set(getattr(args, "ui_url", None))
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


# -- the watch over a started run -----------------------------------------------------------


class Unserved(CliError):
    """No worker takes the run, and golem stopped waiting: the run stays queued
    (``golem run`` and ``resume`` exit ``UNSERVED``)."""


#: Exit code of ``run``/``resume`` when no worker takes the run.
UNSERVED = 4
#: How long ``run`` and ``resume`` wait for a worker by default (``--worker-timeout``).
WORKER_TIMEOUT = 60.0


async def started(client: Client, run_id: str) -> bool:
    """Whether a worker took ``run_id``'s first workflow task (it is running for real)."""
    try:
        info = (await client.get_workflow_handle(run_id).describe()).raw_description
    except RPCError:
        return False  # a conversation's turn that is not started yet
    return info.workflow_execution_info.history_length > 2


async def unserved(
    client: Client, task_queue: str, run_id: str, patience: float | None
) -> str | None:
    """Why nobody will take ``run_id``: a queue served only by versions that are not
    current (said at once), or no worker for ``patience`` seconds (said after a warning at
    ``NO_WORKER_AFTER``); ``None`` once a worker took it."""
    loop = asyncio.get_running_loop()
    since = loop.time()
    warned, not_current = False, 0
    while not await started(client, run_id):
        queue = await describe_queue(client, task_queue)
        problem = queue.not_current()
        not_current = not_current + 1 if problem else 0
        if problem and not_current >= 2:  # twice in a row: not a routing change in flight
            return f"{problem}; run {run_id} waits until then"
        if queue.pollers:
            since = loop.time()
        elif not warned and loop.time() - since >= NO_WORKER_AFTER:
            warned = True
            bound = f" (for {patience:g} s: --worker-timeout)" if patience else ""
            print(
                f"golem: no worker polls task queue {task_queue!r} on "
                f"{client.service_client.config.target_host} (namespace {client.namespace}); "
                f"run {run_id} waits for one{bound}: start "
                f"`{WORKER_HINT} --task-queue {task_queue}`",
                file=sys.stderr,
                flush=True,
            )
        elif patience and loop.time() - since >= patience:
            return (
                f"no worker took run {run_id} within {patience:g} s: it stays queued on task "
                f"queue {task_queue!r} and starts when a worker polls it "
                f"({WORKER_HINT} --task-queue {task_queue}); `golem show {run_id}`"
            )
        await asyncio.sleep(0.5)
    return None


@contextlib.asynccontextmanager
async def watching(
    client: Client, task_queue: str, run_id: str, patience: float | None = None
) -> AsyncIterator[None]:
    """While the body waits for ``run_id``: say when no worker polls ``task_queue``, and
    stop the body with ``Unserved`` when none will take the run (none polls for
    ``patience`` seconds, ``None``: wait on; or only versions that are not current do)."""
    waiter = asyncio.current_task()
    assert waiter is not None
    verdict: list[str] = []

    async def watch() -> None:
        problem = await unserved(client, task_queue, run_id, patience)
        if problem is not None:
            verdict.append(problem)
            waiter.cancel()

    task = asyncio.create_task(watch())
    try:
        yield
    except asyncio.CancelledError:
        if verdict and waiter.uncancel() == 0:  # we stopped it, not Ctrl-C
            raise Unserved(verdict[0]) from None
        raise
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, RPCError):
            await task


def payload_settings(client: Client) -> list[str]:
    """What this client does to payloads, as ``worker`` and ``run`` say at start: encryption
    (and its key id), external storage (and where)."""
    converter = client.data_converter
    said = []
    codec = converter.payload_codec
    if codec is not None:
        key = getattr(codec, "key_id", "")
        said.append(f"payloads encrypted with key {key} (GOLEM_ENCRYPTION_KEY)")
    storage = converter.external_storage
    if storage is not None:
        where = ", ".join(str(getattr(d, "root", d)) for d in storage.drivers)
        said.append(
            f"payloads over {storage.payload_size_threshold} bytes stored in {where} "
            "(GOLEM_STORAGE_DIR)"
        )
    return said


def stored_problem(exc: BaseException, run_id: str) -> str | None:
    """What a payload kept in external storage that this command cannot read means (the
    SDK's TMPRL1105), in one line; ``None`` for any other error."""
    if not isinstance(exc, RuntimeError) or "[TMPRL1105]" not in str(exc):
        return None
    return (
        f"run {run_id} keeps payloads in external storage, which this command does not read: "
        "set GOLEM_STORAGE_DIR to the workers' storage directory (GolemPlugin("
        "external_storage=...) in code)"
    )
