"""Tools from MCP servers, measured side by side in one run (offline, the local dev server).

1. One MCP tool call (examples/mcp_notes_server.py's read_note, over stdio and over
   streamable HTTP): a direct call on an open mcp SDK ``Client``, back to back, and each
   after a pause as long as a durable run's between its calls (the server idle meanwhile,
   as it is in a run: a round trip to an idle server costs more); inside a golem run in
   process (tool_start to tool_end); inside a durable run (the call-tool activity,
   scheduled to completed, from the run's history). A local golem tool doing the same
   in-process work is the reference: durably its runs alternate with the MCP runs on the
   same worker, and durable/local is the MCP call's cost against it. floor/local is what no
   MCP call durably can beat: the local tool's activity plus the SDK's own round trip after
   the same pause.
2. The tool list, per run: a one-turn run with the MCP toolset minus the same run without
   it, run in turn (in process the run starts, lists and stops its stdio server; inside
   ``async with agent:`` the runs share one connection, so it only lists; durably one
   activity on a worker whose server stays up), and the list-tools activity alone.

Run: .venv/bin/python benchmarks/mcp_tools.py [--calls 20] [--runs 15]
(the ``mcp`` and ``dev-server`` extras). The machine is shared: read the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client as TemporalClient
from temporalio.worker import Worker

from golem import Agent, Message, ToolCall
from golem.client import DurableAgent
from golem.mcp import MCPServer
from golem.models import FunctionModel
from golem.testing import dev_server
from golem.worker import GolemPlugin

SERVER = Path(__file__).resolve().parent.parent / "examples" / "mcp_notes_server.py"
ARGS = {"name": "groceries"}
#: Durable runs of ``--calls`` calls each, MCP and local tool in turn.
DURABLE_ROUNDS = 3


def progress(text: str) -> None:
    print(f"  .. {text}", file=sys.stderr, flush=True)


def ms(seconds: list[float]) -> str:
    return f"{statistics.median(seconds) * 1000:8.2f}"


def calling(turns: int) -> FunctionModel:
    """Calls read_note once a turn, ``turns`` times, then answers."""

    def answer(messages: list[Message], tools: Any) -> Message:
        done = sum(1 for m in messages if m.role == "tool")
        if done < turns:
            return Message.assistant(
                "", [ToolCall(id=f"c{done}", name="read_note", args='{"name": "groceries"}')]
            )
        return Message.assistant("done")

    return FunctionModel(answer, model_name="bench")


def agent(name: str, turns: int, server: MCPServer | None) -> Agent[Any, str]:
    if server is not None:
        return Agent(calling(turns), name=name, toolsets=[server])
    local: Agent[Any, str] = Agent(calling(turns), name=name)

    @local.tool
    def read_note(name: str) -> str:
        """Read a note."""
        return "milk, bread"

    return local


async def direct(params: Any, calls: int, pause: float = 0.0) -> list[float]:
    """Each call's time on one open client, ``pause`` seconds after the last one ended."""
    async with Client(params, cache=None) as client:
        await client.call_tool("read_note", ARGS)  # warm
        times = []
        for _ in range(calls):
            await asyncio.sleep(pause)
            start = time.perf_counter()
            await client.call_tool("read_note", ARGS)
            times.append(time.perf_counter() - start)
        return times


async def in_process(subject: Agent[Any, str]) -> list[float]:
    """tool_start to tool_end of each call of one streamed run."""
    started: dict[str, float] = {}
    times = []
    async for event in subject.run_stream("go"):
        if event.kind == "tool_start" and event.call is not None:
            started[event.call.id] = time.perf_counter()
        elif event.kind == "tool_end" and event.call is not None:
            times.append(time.perf_counter() - started[event.call.id])
    return times


async def activity_times(client: TemporalClient, run_id: str, kind: str) -> list[float]:
    """Scheduled-to-completed of each activity whose type ends with ``kind``."""
    scheduled: dict[int, float] = {}
    names: dict[int, str] = {}
    times = []
    async for e in client.get_workflow_handle(run_id).fetch_history_events():
        at = e.event_time.ToDatetime().timestamp()
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            scheduled[e.event_id] = at
            names[e.event_id] = e.activity_task_scheduled_event_attributes.activity_type.name
        elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            first = e.activity_task_completed_event_attributes.scheduled_event_id
            if names[first].endswith(kind):
                times.append(at - scheduled[first])
    return times


async def pauses(client: TemporalClient, run_id: str, kind: str) -> list[float]:
    """From each activity whose type ends with ``kind`` completing to the next's scheduling."""
    completed: float | None = None
    names: dict[int, str] = {}
    times = []
    async for e in client.get_workflow_handle(run_id).fetch_history_events():
        at = e.event_time.ToDatetime().timestamp()
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            names[e.event_id] = e.activity_task_scheduled_event_attributes.activity_type.name
            if names[e.event_id].endswith(kind) and completed is not None:
                times.append(at - completed)
        elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            first = e.activity_task_completed_event_attributes.scheduled_event_id
            if names[first].endswith(kind):
                completed = at
    return times


async def interleaved(
    first: Callable[[], Awaitable[Any]], second: Callable[[], Awaitable[Any]], runs: int
) -> tuple[list[float], list[float]]:
    """Wall times of ``first`` and ``second``, run in turn (so a busy moment hits both)."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(runs):
        for work, into in ((first, times[0]), (second, times[1])):
            start = time.perf_counter()
            await work()
            into.append(time.perf_counter() - start)
    return times


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def http_server(folder: Path) -> tuple[asyncio.subprocess.Process, str]:
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(SERVER), str(folder), "--http", str(port)
    )
    async with asyncio.timeout(60):
        while True:
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                break
            except OSError:
                await asyncio.sleep(0.1)
    return process, f"http://127.0.0.1:{port}/mcp"


async def main(calls: int, runs: int) -> None:
    folder = Path(tempfile.mkdtemp())
    (folder / "groceries.txt").write_text("milk, bread")
    stdio = MCPServer.stdio("notes", command=sys.executable, args=[str(SERVER), str(folder)])
    process, url = await http_server(folder)
    http = MCPServer.http("notes_http", url=url)
    servers = {"stdio": stdio, "http": http}
    rows: dict[str, dict[str, list[float]]] = {}
    try:
        async with dev_server() as env:
            client = env.client
            for transport, server in servers.items():
                progress(f"{transport}: direct SDK calls")
                params = StdioServerParameters(
                    command=sys.executable, args=[str(SERVER), str(folder)]
                )
                target = params if transport == "stdio" else url
                row = rows[transport] = {"direct": await direct(target, calls)}
                progress(f"{transport}: in process")
                row["in process"] = await in_process(agent("bench_local", calls, server))
                progress(f"{transport}: durably, in turn with a local tool's run")
                subject = agent(f"bench_{transport}", calls, server)
                local = agent(f"bench_local_{transport}", calls, None)
                tq = f"bench-mcp-{uuid.uuid4().hex[:6]}"
                async with Worker(client, task_queue=tq, plugins=[GolemPlugin(subject, local)]):
                    durable = DurableAgent(client, subject, task_queue=tq)
                    reference = DurableAgent(client, local, task_queue=tq)
                    await durable.run("warm")  # the worker starts its server once
                    await reference.run("warm")
                    for key in ("durable", "pause", "local durable"):
                        row[key] = []
                    for _ in range(DURABLE_ROUNDS):  # in turn, so a busy moment hits both
                        result = await durable.run("go")
                        row["durable"] += await activity_times(client, result.run_id, ".call-tool")
                        row["pause"] += await pauses(client, result.run_id, ".call-tool")
                        result = await reference.run("go")
                        row["local durable"] += await activity_times(
                            client, result.run_id, "golem.tool"
                        )
                    progress(f"{transport}: direct SDK calls, paused as the durable run's")
                    pause = statistics.median(row["pause"])
                    row["direct paused"] = await direct(target, calls, pause)
                    progress(f"{transport}: the tool list per run")
                    lister = agent(f"bench_list_{transport}", 0, server)
                    plain = agent(f"bench_plain_{transport}", 0, None)
                    row["list in process"], row["no list in process"] = await interleaved(
                        lambda a=lister: a.run("hi"), lambda a=plain: a.run("hi"), runs
                    )
                    async with lister:  # runs share one connection: the server starts once
                        await lister.run("warm")
                        row["list shared"], row["no list shared"] = await interleaved(
                            lambda a=lister: a.run("hi"), lambda a=plain: a.run("hi"), runs
                        )
                    tq2 = f"bench-list-{uuid.uuid4().hex[:6]}"
                    async with Worker(client, task_queue=tq2, plugins=[GolemPlugin(lister, plain)]):
                        listing = DurableAgent(client, lister, task_queue=tq2)
                        bare = DurableAgent(client, plain, task_queue=tq2)
                        await listing.run("warm")
                        row["list durably"], row["no list durably"] = await interleaved(
                            lambda d=listing: d.run("hi"), lambda d=bare: d.run("hi"), runs
                        )
                        last = await listing.run("hi")
                        row["list activity"] = await activity_times(
                            client, last.run_id, ".list-tools"
                        )
            progress("reference: a local golem tool")
            local_in_process = await in_process(agent("bench_local_tool", calls, None))
    finally:
        process.kill()
        await process.wait()

    print(
        f"1. one tool call, median of {calls} ({calls * DURABLE_ROUNDS} durably), ms"
        " (paused: direct, each call after a pause)"
    )
    print(
        f"   {'':<22}{'direct SDK':>11}{'paused':>8}{'(pause)':>8}{'in process':>11}"
        f"{'durable':>9}{'local':>7}{'in proc/direct':>16}{'durable/direct':>16}"
        f"{'durable/local':>15}{'floor/local':>13}"
    )
    for transport, row in rows.items():
        d, s, g, p, u, t = (
            statistics.median(row[k])
            for k in ("direct", "direct paused", "pause", "in process", "durable", "local durable")
        )
        print(
            f"   MCP over {transport:<13}{d * 1000:11.2f}{s * 1000:8.2f}{g * 1000:8.2f}"
            f"{p * 1000:11.2f}{u * 1000:9.2f}{t * 1000:7.2f}{p / d:16.2f}{u / d:16.2f}"
            f"{u / t:15.2f}{(t + s) / t:13.2f}"
        )
    p = statistics.median(local_in_process)
    print(f"   {'local golem tool':<22}{'':>27}{p * 1000:11.2f}")
    print(
        "   local: a local golem tool's activity, its runs in turn with the MCP runs on the same"
        " worker;\n   floor: that activity plus the SDK's own call after the same pause (an MCP"
        " call durably\n   is an activity and a round trip to the server; issue 34's target:"
        " durable/local <= 1.5)"
    )
    print(
        f"2. the tool list, per run: a 1-turn run with the toolset minus without it, median of {runs}, ms"
    )
    print(
        f"   {'':<22}{'in process':>11}{'async with':>11}{'durably':>11}{'list activity':>15}"
        f"{'in proc/durably':>17}{'with/durably':>14}"
    )
    for transport, row in rows.items():
        p = statistics.median(row["list in process"]) - statistics.median(row["no list in process"])
        w = statistics.median(row["list shared"]) - statistics.median(row["no list shared"])
        u = statistics.median(row["list durably"]) - statistics.median(row["no list durably"])
        a = statistics.median(row["list activity"])
        print(
            f"   MCP over {transport:<13}{p * 1000:11.2f}{w * 1000:11.2f}{u * 1000:11.2f}"
            f"{a * 1000:15.2f}{p / u:17.2f}{w / u:14.2f}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--runs", type=int, default=15)
    options = parser.parse_args()
    asyncio.run(main(options.calls, options.runs))
