"""golem serve vs DurableAgent directly, side by side on one dev server.

N conversations at once (default 100) each run one streamed turn, first through
``DurableConversation.send_stream`` in this process, then through a ``golem serve`` process
(AG-UI: ``POST /agents/bench_stream/agui``). Printed: time to the first text event (median,
p99) and the difference; CPU seconds per turn of the serve process against this process's
(the worker's and the direct readers'); resident memory of the serve process per open
stream. Goals (issue 32): added first-event time <= 20 ms median, <= 100 ms p99; serve CPU
<= 30% of the worker's; <= 100 KB per open stream.

Run: .venv/bin/python benchmarks/serve.py [N]
"""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
from temporalio.worker import Worker

sys.path.insert(0, str(Path(__file__).parents[1]))
from benchmarks._serve_agents import agent
from golem.client import DurableAgent
from golem.testing import dev_server
from golem.worker import GolemPlugin

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def p99(values: list[float]) -> float:
    return sorted(values)[max(0, int(len(values) * 0.99) - 1)]


async def at_once(n: int, one: Callable[[int], Awaitable[float]]) -> list[float]:
    return list(await asyncio.gather(*(one(i) for i in range(n))))


async def main(n: int) -> None:
    async with dev_server() as env:
        queue = f"bench-{uuid.uuid4().hex[:8]}"
        plugin = GolemPlugin(agent, heartbeat_timeout=timedelta(seconds=10))
        durable: DurableAgent[Any] = DurableAgent(env.client, agent, task_queue=queue)
        port = free_port()
        environ = {**os.environ, "TEMPORAL_ADDRESS": env.client.service_client.config.target_host}
        serve = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "golem.cli", "serve", "--agent", "benchmarks._serve_agents:agent",
            "--port", str(port), "--task-queue", queue, env=environ,
            stdout=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        try:
            async with (
                Worker(
                    env.client, task_queue=queue, plugins=[plugin], max_concurrent_activities=200
                ),
                httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120) as http,
            ):
                while True:  # until golem serve answers
                    try:
                        if (await http.get("/openapi.json")).status_code == 200:
                            break
                    except httpx.TransportError:
                        await asyncio.sleep(0.1)

                async def direct(i: int) -> float:
                    conversation = await durable.conversation()
                    start, first = time.perf_counter(), 0.0
                    async for event in conversation.send_stream("go"):
                        if event.kind == "text_delta" and not first:
                            first = time.perf_counter() - start
                    return first

                peak = [0]

                async def served(i: int) -> float:
                    body = {
                        "threadId": str(uuid.uuid4()),
                        "runId": "r",
                        "messages": [{"id": "u", "role": "user", "content": "go"}],
                    }
                    start, first = time.perf_counter(), 0.0
                    async with http.stream("POST", "/agents/bench_stream/agui", json=body) as r:
                        async for line in r.aiter_lines():
                            if not first and "TEXT_MESSAGE_CONTENT" in line:
                                first = time.perf_counter() - start
                                peak[0] = max(peak[0], rss_kb(serve.pid))
                    return first

                await at_once(min(n, 5), direct)  # warm up both paths
                await at_once(min(n, 5), served)
                here0 = time.process_time()
                direct_first = await at_once(n, direct)
                here_direct = time.process_time() - here0
                idle_rss = rss_kb(serve.pid)
                serve0, here0 = cpu_seconds(serve.pid), time.process_time()
                served_first = await at_once(n, served)
                serve_cpu = cpu_seconds(serve.pid) - serve0
                here_served = time.process_time() - here0
        finally:
            serve.terminate()
            await serve.wait()

    ms = 1000
    dm, sm = statistics.median(direct_first) * ms, statistics.median(served_first) * ms
    dp, sp = p99(direct_first) * ms, p99(served_first) * ms
    print(f"{n} conversations at once, one streamed turn each")
    print(f"{'':32}{'direct':>10}{'golem serve':>14}{'added':>10}{'goal':>10}")
    print(f"{'first text event, median (ms)':32}{dm:10.1f}{sm:14.1f}{sm - dm:10.1f}{'<= 20':>10}")
    print(f"{'first text event, p99 (ms)':32}{dp:10.1f}{sp:14.1f}{sp - dp:10.1f}{'<= 100':>10}")
    per = serve_cpu / n * ms
    worker = here_served / n * ms
    print(
        f"serve process CPU per turn: {per:.2f} ms; this process (worker + readers) per turn: "
        f"{worker:.2f} ms (direct run: {here_direct / n * ms:.2f} ms); "
        f"serve / worker = {serve_cpu / here_served:.0%} (goal <= 30%)"
    )
    print(
        f"serve memory per open stream: {(peak[0] - idle_rss) / n:.1f} KB "
        f"(peak RSS {peak[0]} KB, idle {idle_rss} KB; goal <= 100 KB)"
    )


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 100))
