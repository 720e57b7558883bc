"""The commands that serve: ``golem dev``, ``worker``, ``setup`` and ``codec-server``.

    golem dev                                   # Temporal dev server, UI on :8233
    golem worker --agent myapp.agents:support   # serve agents
    golem worker --agent myapp.agents:support --deployment support --build-id v2
    golem setup                                 # register golem's search attributes
    golem codec-server                          # decrypt payloads for the Temporal UI

``dev`` becomes the server process, so a signal to it reaches the server.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import sys
from pathlib import Path

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.worker import Worker

from golem import codec_server
from golem.cli import recorded
from golem.cli.connect import CliError, connect_args, load_agent, payload_settings
from golem.cli.queues import describe_queue, worker_identity
from golem.client import SEARCH_ATTRIBUTES
from golem.testing import DEV_SERVER_ARGS, temporal_cli
from golem.worker import Deployment, GolemPlugin
from golem.worker.deployment import deployment_version


def port_holder(port: int) -> str | None:
    """Which process listens on ``port`` (from /proc on Linux), or None when free."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
            return None
        except OSError:
            pass
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(f"socket:[{fields[9]}]")
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if any(os.readlink(fd) in inodes for fd in (proc / "fd").iterdir()):
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                return f"pid {proc.name} ({cmdline[:120].strip()})"
    return "a process you cannot inspect (another user's?)"


def cmd_dev(args: argparse.Namespace) -> int:
    try:
        binary = temporal_cli()
    except FileNotFoundError as exc:
        raise CliError(str(exc)) from exc
    ui_port = args.ui_port or args.port + 1000
    for port, flag in ((args.port, "--port"), (ui_port, "--ui-port")):
        holder = port_holder(port)
        if holder is not None:
            raise CliError(
                f"port {port} is busy, held by {holder}: stop it "
                f"(is `golem dev` already running?) or pick another with {flag}"
            )
    state = Path(args.dir)
    state.mkdir(parents=True, exist_ok=True)
    database = state / "temporal.sqlite"
    held = recorded.holder(database)
    if held is not None:  # two servers on one SQLite file corrupt each other's state
        raise CliError(
            f"{database} is open in {held}: a server already uses it; stop that one, or "
            f"pass another --dir"
        )
    command = [
        binary,
        "server",
        "start-dev",
        "--db-filename",
        str(database),
        "--port",
        str(args.port),
        "--ui-port",
        str(ui_port),
        # The server's WARN lines are mostly noise (poll errors while it stops).
        "--log-level",
        args.log_level,
        *DEV_SERVER_ARGS,
    ]
    for key in SEARCH_ATTRIBUTES:
        kind = "".join(part.title() for part in key.indexed_value_type.name.split("_"))
        command += ["--search-attribute", f"{key.name}={kind}"]  # KEYWORD_LIST: KeywordList
    address, ui_url = f"localhost:{args.port}", f"http://localhost:{ui_port}"
    # This process becomes the server (execv keeps the pid): the record lives as long as it.
    server = recorded.DevServer(address, ui_url, os.getpid(), str(database.resolve()))
    recorded.record(state, server)
    print(f"golem dev: Temporal on {address}, UI on {ui_url}")
    if (args.port, ui_port) != (7233, 8233) or state.resolve() != recorded.DEV_DIR.resolve():
        # Commands run in this directory find the server in .golem/; elsewhere, say so.
        print(
            f"golem dev: elsewhere: export TEMPORAL_ADDRESS=localhost:{args.port} "
            f"TEMPORAL_UI_URL=http://localhost:{ui_port}"
        )
    sys.stdout.flush()
    # Become the server, so a signal to `golem dev` reaches it and nothing is orphaned.
    os.execv(command[0], command)
    return 0  # not reached


async def cmd_worker(args: argparse.Namespace) -> int:
    agents = [load_agent(spec) for spec in args.agent]
    deployment = _deployment(args)
    client = await connect_args(args)
    version = f" as {args.deployment}.{args.build_id}" if deployment else ""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        plugin = GolemPlugin(*agents, deployment=deployment)
        served = [a.name for a in plugin.agents]  # and the agents they delegate to
        names = ", ".join(served)  # what a run may reach here, as the worker identity says
        label = f"{args.deployment}.{args.build_id}" if deployment else ""
        queue = await describe_queue(client, args.task_queue)
        conflict = queue.conflict(served, label)
        if conflict is not None:
            raise CliError(conflict)
        settings = "".join(f"; {line}" for line in payload_settings(client))
        async with Worker(
            client,
            task_queue=args.task_queue,
            plugins=[plugin],
            identity=worker_identity(served),
        ):
            print(
                f"golem worker: serving {names} on task queue {args.task_queue!r}{version} "
                f"({client.service_client.config.target_host}, namespace {client.namespace})"
                f"{settings}; Ctrl-C stops",
                flush=True,
            )
            if deployment is not None and queue.current != label:
                say_not_current(args, queue.current)
            await stop.wait()
            print("golem worker: stopping", flush=True)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    return 0


def say_not_current(args: argparse.Namespace, current: str) -> None:
    """A worker of a version that is not current (``current`` is, or none when ``""``)
    takes no new runs: say so, and how."""
    now = f"current is {current}" if current else "none is current"
    print(
        f"golem worker: {args.deployment}.{args.build_id} is not current ({now}): runs on "
        f"{args.task_queue!r} go to the current version; make this one current with "
        f"`golem deploy current --deployment {args.deployment} --build-id {args.build_id}`",
        file=sys.stderr,
        flush=True,
    )


def _deployment(args: argparse.Namespace) -> Deployment | None:
    if not args.deployment and not args.build_id:
        return None
    if not (args.deployment and args.build_id):
        raise CliError("--deployment and --build-id go together: a version is both")
    try:
        return deployment_version((args.deployment, args.build_id))
    except ValueError as exc:
        raise CliError(str(exc)) from None


async def cmd_setup(args: argparse.Namespace) -> int:
    client = await connect_args(args)
    present = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=client.namespace)
    )
    missing = [key.name for key in SEARCH_ATTRIBUTES if key.name not in present.custom_attributes]
    if missing:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(
                namespace=client.namespace,
                search_attributes={
                    key.name: IndexedValueType.ValueType(key.indexed_value_type.value)
                    for key in SEARCH_ATTRIBUTES
                    if key.name in missing
                },
            )
        )
        print("registered:", ", ".join(missing))
    there = [key.name for key in SEARCH_ATTRIBUTES if key.name not in missing]
    if there:
        print("already present:", ", ".join(there))
    return 0


def cmd_codec_server(args: argparse.Namespace) -> int:
    return codec_server.serve(args)
