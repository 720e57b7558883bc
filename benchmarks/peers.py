"""golem and pydantic-ai's Temporal integration, measured side by side in one run.

The same agent (an offline FunctionModel in both, the same tool, the same turns) runs in
process, durably, and as a bare workflow of the same number of no-op activities (the
floor), on one tuned dev server this script starts. Each library's worker runs in its own
process, so worker CPU is read from the OS for that process alone. Repeats are
interleaved (golem, pydantic-ai, floor, rotating) and reported as median (min-max).

    .venv/bin/python benchmarks/peers.py            # everything: several minutes
    .venv/bin/python benchmarks/peers.py --quick    # fewer repeats, no failure search

Figures: in-process overhead per model request; per-activity latency and its ratio to the
floor (small and 2 KB tool results); history events and bytes at 10, 40 and 160 turns; the
first turn count at which each library's run fails (golem's search stops at 2000); worker
CPU per run at 50 and 200 concurrent runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import _peer_agents as peer
from _peer_floor import Floor, noop
from pydantic_ai.durable_exec.temporal import PydanticAIPlugin
from temporalio.client import Client, WorkflowFailureError
from temporalio.worker import Worker

from golem.client import DurableAgent
from golem.results import RunError
from golem.testing import dev_server
from golem.worker import GolemPlugin

LIBS = ("golem", "pydantic-ai", "floor")
SEARCH = (160, 200, 240, 320, 480, 640, 1000, 1500, 2000)
TICK = os.sysconf("SC_CLK_TCK")


def progress(text: str) -> None:
    print(f"  .. {text}", file=sys.stderr, flush=True)


# -- worker processes -------------------------------------------------------------------


async def serve(lib: str, target: str, task_queue: str) -> None:
    """One library's worker, in this process, until stdin closes."""
    options: dict[str, Any] = {
        "max_concurrent_activities": 400,
        "max_concurrent_workflow_tasks": 400,
    }
    if lib == "golem":
        client = await Client.connect(target, plugins=[GolemPlugin(peer.golem_agent)])
        worker = Worker(client, task_queue=task_queue, **options)
    elif lib == "pydantic-ai":
        client = await Client.connect(target, plugins=[PydanticAIPlugin()])
        worker = Worker(client, task_queue=task_queue, workflows=[peer.PydanticAIRun], **options)
    else:
        client = await Client.connect(target)
        worker = Worker(
            client, task_queue=task_queue, workflows=[Floor], activities=[noop], **options
        )
    async with worker:
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


class WorkerProcess:
    def __init__(self, lib: str, target: str) -> None:
        self.lib = lib
        self.target = target
        self.task_queue = f"peers-{lib}-{uuid.uuid4().hex[:6]}"
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "worker",
            self.lib,
            self.target,
            self.task_queue,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), 120)
        if line.strip() != b"ready":
            raise RuntimeError(f"{self.lib} worker did not start: {line!r}")

    def cpu_seconds(self) -> float:
        """User + system CPU of the worker process, from /proc."""
        assert self.proc is not None
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK

    async def stop(self) -> None:
        if self.proc is None:
            return
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 30)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()


# -- the runs ---------------------------------------------------------------------------


class Bench:
    def __init__(self, golem_client: Client, pai_client: Client, workers: dict[str, WorkerProcess]):
        self.golem_client = golem_client
        self.pai_client = pai_client
        self.workers = workers
        # The agent itself, as a user who imports it passes it: a name alone could mean
        # tools that need approval, and such a run asks its workflow for a pause first.
        self.durable = DurableAgent(
            golem_client, peer.golem_agent, task_queue=workers["golem"].task_queue
        )

    def client(self, lib: str) -> Client:
        return self.pai_client if lib == "pydantic-ai" else self.golem_client

    async def run(self, lib: str, turns: int, size: int) -> str:
        """One run; its workflow id. Raises on failure."""
        text = peer.prompt(turns, size)
        expected = f"done after {turns} tools"
        if lib == "golem":
            result = await self.durable.run(text)
            assert result.output == expected, result.output
            return result.run_id
        workflow_id = f"peers-{lib}-{uuid.uuid4()}"
        run = peer.PydanticAIRun.run if lib == "pydantic-ai" else Floor.run
        output = await self.client(lib).execute_workflow(
            run, text, id=workflow_id, task_queue=self.workers[lib].task_queue
        )
        assert output == expected, output
        return workflow_id

    async def history(self, lib: str, workflow_id: str) -> tuple[int, int]:
        handle = self.client(lib).get_workflow_handle(workflow_id)
        events = [e async for e in handle.fetch_history_events()]
        return len(events), sum(e.ByteSize() for e in events)


def summary(values: list[float], scale: float = 1.0, digits: int = 2) -> str:
    median = statistics.median(values) * scale
    low, high = min(values) * scale, max(values) * scale
    return f"{median:.{digits}f} ({low:.{digits}f}-{high:.{digits}f})"


async def timed(fn: Callable[[], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    await fn()
    return time.perf_counter() - start


# -- figures ------------------------------------------------------------------------------


async def in_process(repeats: int, turns: int = 10) -> None:
    from pydantic_ai.usage import UsageLimits

    text = peer.prompt(turns, 0)
    limits = UsageLimits(request_limit=None)

    async def golem_run() -> None:
        await peer.golem_agent.run(text)
        peer.golem_agent.model.requests.clear()  # type: ignore[attr-defined]

    async def pai_run() -> None:
        await peer.pai_agent.run(text, usage_limits=limits)

    runs = {"golem": golem_run, "pydantic-ai": pai_run}
    times: dict[str, list[float]] = {lib: [] for lib in runs}
    batch = 20
    for _ in range(3):  # warm up
        for fn in runs.values():
            await fn()
    for r in range(repeats):
        for lib in list(runs)[r % 2 :] + list(runs)[: r % 2]:
            start = time.perf_counter()
            for _ in range(batch):
                await runs[lib]()
            times[lib].append((time.perf_counter() - start) / batch / (turns + 1))
    ratio = [g / p for g, p in zip(times["golem"], times["pydantic-ai"], strict=True)]
    print(f"\n1. in process: overhead per model request ({turns}-turn run, {repeats} repeats)")
    for lib, values in times.items():
        print(f"   {lib:12s} {summary(values, 1e6, 1):>24s} µs")
    print(f"   golem / pydantic-ai {summary(ratio):>21s}")


async def per_activity(bench: Bench, repeats: int, turns: int = 10) -> None:
    activities = 2 * turns + 1
    print(
        f"\n2. durable: latency per activity, {turns}-turn runs ({activities} activities), "
        f"{repeats} interleaved repeats, ms"
    )
    print(
        f"   {'tool result':12s} {'golem':>22s} {'pydantic-ai':>22s} {'floor':>22s}"
        f" {'golem/floor':>18s} {'pydantic-ai/floor':>18s}"
    )
    for size in (0, 2048):
        for lib in LIBS:  # warm up
            await bench.run(lib, turns, size)
        times: dict[str, list[float]] = {lib: [] for lib in LIBS}
        for r in range(repeats):
            order = LIBS[r % 3 :] + LIBS[: r % 3]
            for lib in order:
                times[lib].append(
                    await timed(lambda lib=lib, size=size: bench.run(lib, turns, size)) / activities
                )
            progress(f"per-activity, {size} B results: repeat {r + 1}/{repeats}")
        ratios = {
            lib: [t / f for t, f in zip(times[lib], times["floor"], strict=True)]
            for lib in ("golem", "pydantic-ai")
        }
        label = "2 KB" if size else "small"
        print(
            f"   {label:12s} {summary(times['golem'], 1e3):>22s} "
            f"{summary(times['pydantic-ai'], 1e3):>22s} {summary(times['floor'], 1e3):>22s}"
            f" {summary(ratios['golem']):>18s} {summary(ratios['pydantic-ai']):>18s}"
        )


async def history_size(bench: Bench, turn_counts: tuple[int, ...]) -> None:
    print("\n3. history per run, 2 KB tool results (events / bytes)")
    print(
        f"   {'turns':>6s} {'golem':>22s} {'pydantic-ai':>22s} {'floor':>22s} {'golem/pydantic-ai':>18s}"
    )
    for turns in turn_counts:
        cells: dict[str, tuple[int, int] | None] = {}
        for lib in LIBS:
            progress(f"history: {lib}, {turns} turns")
            try:
                cells[lib] = await bench.history(lib, await bench.run(lib, turns, 2048))
            except (WorkflowFailureError, RunError) as exc:
                cells[lib] = None
                progress(f"{lib} failed at {turns} turns: {exc}")
        text = {lib: f"{c[0]:,} / {c[1]:,}" if c else "failed" for lib, c in cells.items()}
        golem, pai = cells["golem"], cells["pydantic-ai"]
        ratio = f"{golem[1] / pai[1]:.3f}x" if golem and pai else "-"
        print(
            f"   {turns:6d} {text['golem']:>22s} {text['pydantic-ai']:>22s} "
            f"{text['floor']:>22s} {ratio:>18s}"
        )


async def first_failure(bench: Bench) -> None:
    print("\n4. longest run: the first turn count (2 KB results) at which a run fails")
    for lib in ("golem", "pydantic-ai"):
        passed = 0
        failed: tuple[int, str] | None = None
        for turns in SEARCH:
            progress(f"failure search: {lib}, {turns} turns")
            start = time.perf_counter()
            try:
                await bench.run(lib, turns, 2048)
            except (WorkflowFailureError, RunError) as exc:
                cause = exc.cause if isinstance(exc, WorkflowFailureError) else exc
                failed = (turns, str(getattr(cause, "message", cause))[:90])
                break
            passed = turns
            progress(f"{lib} {turns} turns ok in {time.perf_counter() - start:.1f} s")
        if failed:
            print(f"   {lib:12s} completes {passed} turns, fails at {failed[0]}: {failed[1]}")
        else:
            print(f"   {lib:12s} completes {passed} turns (search stops there)")


async def worker_cpu(bench: Bench, concurrency: tuple[int, ...], turns: int = 3) -> None:
    print(f"\n5. worker CPU per {turns}-turn run (worker process only, from /proc), ms")
    print(
        f"   {'runs at once':>12s} {'golem':>10s} {'pydantic-ai':>12s} {'floor':>10s}"
        f" {'golem/floor':>12s} {'pydantic-ai/floor':>18s}"
    )
    for n in concurrency:
        cpu: dict[str, float] = {}
        for lib in LIBS:
            progress(f"worker CPU: {lib}, {n} concurrent runs")
            worker = bench.workers[lib]
            before = worker.cpu_seconds()
            await asyncio.gather(*(bench.run(lib, turns, 0) for _ in range(n)))
            cpu[lib] = (worker.cpu_seconds() - before) / n
        print(
            f"   {n:12d} {cpu['golem'] * 1e3:10.1f} {cpu['pydantic-ai'] * 1e3:12.1f} "
            f"{cpu['floor'] * 1e3:10.1f} {cpu['golem'] / cpu['floor']:11.2f}x "
            f"{cpu['pydantic-ai'] / cpu['floor']:17.2f}x"
        )


def machine() -> str:
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor() or "unknown CPU",
    )
    return f"{os.cpu_count()} cores, {model}, Python {platform.python_version()}"


async def main(quick: bool) -> None:
    print("golem vs pydantic-ai's Temporal integration, one run, one dev server")
    print(f"machine: {machine()}")
    print(
        f"golem-temporal {version('golem-temporal')}, pydantic-ai-slim {version('pydantic-ai-slim')}, "
        f"temporalio {version('temporalio')}"
    )
    await in_process(repeats=5 if quick else 15)
    async with dev_server() as env:
        target = env.client.service_client.config.target_host
        workers = {lib: WorkerProcess(lib, target) for lib in LIBS}
        try:
            await asyncio.gather(*(w.start() for w in workers.values()))
            pai_client = await Client.connect(target, plugins=[PydanticAIPlugin()])
            bench = Bench(env.client, pai_client, workers)
            await per_activity(bench, repeats=3 if quick else 7)
            await history_size(bench, (10, 40) if quick else (10, 40, 160))
            if not quick:
                await first_failure(bench)
            await worker_cpu(bench, (50,) if quick else (50, 200))
        finally:
            await asyncio.gather(*(w.stop() for w in workers.values()))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        asyncio.run(serve(*sys.argv[2:5]))
    else:
        parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
        parser.add_argument("--quick", action="store_true", help="fewer repeats, no failure search")
        asyncio.run(main(parser.parse_args().quick))
    sys.stdout.flush()
    os._exit(0)  # the Temporal core runtime can abort at interpreter teardown
