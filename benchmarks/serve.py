"""golem serve vs DurableAgent directly, side by side on one dev server.

N conversations at once (default 100) each run one streamed turn, first through
``DurableConversation.send_stream`` in this process, then through a ``golem serve`` process
(AG-UI: ``POST /agents/bench_stream/agui``); the worker runs in a process of its own.
Printed: time to the first event each path's reader receives (direct: the turn's first
``RunEvent``; golem serve: the first SSE event, ``RUN_STARTED``) and to the first text
event (median, p99), and the differences; CPU per turn of the worker, of the readers
(this process) and of the serve process; the serve process's memory per open stream (and
the direct readers' RSS growth, for scale); then each figure beside its goal, with a
verdict. Goals (issue 32): added first-event time <= 20 ms median, <= 100 ms p99; serve
CPU <= 30% of the worker's; <= 100 KB per open stream.

Memory per open stream, every figure printed:

- the timed rounds are the serve process's first burst: its peak RSS over its idle RSS
  (after a 5-stream warm-up), per stream. This is what a fresh process's RSS does the
  first time it sees N streams: arenas grow, native buffers are made, caches fill.
- then, untimed, bursts of N streams held open at once (the model waits after its first
  delta until a gate file exists, benchmarks/_serve_agents.py): before each the serve
  process settles (garbage collected, RSS still), then all N are opened, sampled once
  all are open, and let go. Sampled through benchmarks/_traced_serve.py: RSS, and the
  live bytes (malloc's bytes in use, native and Python's large objects, plus pymalloc's
  allocated blocks, Python's small objects). Burst 3 traces the Python heap the open
  streams hold (tracemalloc from the settled level on), and where it was allocated.

The target names the steady-state figure, burst 2's: a server process lives through many
bursts, and what one more open stream costs it is what that stream holds once the
process has warmed up, not the first burst's one-off growth. Its RSS growth, though,
depends on what the allocators kept from the bursts before (freed memory they reuse, or
give back: it can come out below zero), so the verdict on the target is the live bytes
an open stream holds in burst 2, with the RSS growth of every burst printed beside it.

Run: .venv/bin/python benchmarks/serve.py [N [ROUNDS]] [--profile] [--raw-client] [--inline-turns]
(``--inline-turns``: both paths' conversations run their turns inline, docs/adr/0050.)
(ROUNDS, default 1: rounds of N conversations through each path, alternated, pooled; on a
busy machine a small N with many rounds gives latencies that mean something.)
(``--profile`` runs the serve process under cProfile over the timed rounds and prints
where its CPU went (and the garbage collector's passes); its other figures are not
comparable then, and its memory figures are RSS only. ``--raw-client`` reads the served
streams with a minimal HTTP/1.1 reader instead of httpx: the load generator's own CPU per
turn shares the machine's cores with golem serve's. ``GOLEM_BENCH_GC_FREEZE=1`` in the environment: the serve process freezes
what its startup allocated (``gc.freeze()``), so the collector's full passes skip it: an
experiment, not what ``golem serve`` does.)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import statistics
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).parents[1]))
from benchmarks._serve_agents import HOLD, agent
from golem.client import DurableAgent
from golem.testing import dev_server

TICKS = os.sysconf("SC_CLK_TCK")
#: Between two samples of a serve process that settles after a burst (seconds).
SETTLE = 0.5


def cpu_seconds(pid: int, thread: int | None = None) -> float:
    """User + system CPU seconds of process ``pid`` so far (from /proc); with ``thread``, of
    that thread only (the main thread's id is the process's)."""
    where = f"/proc/{pid}/task/{thread}/stat" if thread is not None else f"/proc/{pid}/stat"
    fields = Path(where).read_text().rsplit(")", 1)[1].split()
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


def quantile(values: list[float], q: float) -> float:
    return sorted(values)[max(0, int(len(values) * q) - 1)]


def p99(values: list[float]) -> float:
    return quantile(values, 0.99)


async def at_once(n: int, one: Callable[[int], Awaitable[float]]) -> list[float]:
    return list(await asyncio.gather(*(one(i) for i in range(n))))


async def main(
    n: int, rounds: int, profiled: bool = False, raw: bool = False, inline: bool = False
) -> None:
    trace = Path(f"/tmp/golem-bench-serve-{os.getpid()}.trace")
    trace.unlink(missing_ok=True)
    # The probes answer only when asked (a signal): the timed rounds run golem serve as is.
    module = "benchmarks._profiled_serve" if profiled else "benchmarks._traced_serve"
    async with dev_server() as env:
        queue = f"bench-{uuid.uuid4().hex[:8]}"
        durable: DurableAgent[Any] = DurableAgent(env.client, agent, task_queue=queue)
        port = free_port()
        environ = {**os.environ, "TEMPORAL_ADDRESS": env.client.service_client.config.target_host}
        environ["GOLEM_BENCH_TRACE"] = str(trace)
        address = env.client.service_client.config.target_host
        worker = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "benchmarks._serve_worker", address, queue,
            stdout=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        serve = await asyncio.create_subprocess_exec(
            sys.executable, "-m", module, "serve", "--agent", "benchmarks._serve_agents:agent",
            "--port", str(port), "--task-queue", queue, *(["--inline-turns"] if inline else []),
            env=environ, stdout=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120) as http:
                while True:  # until golem serve answers
                    try:
                        if (await http.get("/openapi.json")).status_code == 200:
                            break
                    except httpx.TransportError:
                        await asyncio.sleep(0.1)

                peak, peak_here = [0], [0]
                # Time to the first event of any kind, by path (the first-text time is returned).
                direct_any: list[float] = []
                served_any: list[float] = []

                async def direct(i: int) -> float:
                    # Timed from before the conversation starts, as an AG-UI request for a
                    # new thread starts it: both paths time the same work.
                    start, first, any_ = time.perf_counter(), 0.0, 0.0
                    conversation = await durable.conversation(inline_turns=inline)
                    async for event in conversation.send_stream("go"):
                        any_ = any_ or time.perf_counter() - start
                        if event.kind == "text_delta" and not first:
                            first = time.perf_counter() - start
                            peak_here[0] = max(peak_here[0], rss_kb(os.getpid()))
                    direct_any.append(any_)
                    return first

                async def served(i: int) -> float:
                    body = {
                        "threadId": str(uuid.uuid4()),
                        "runId": "r",
                        "messages": [{"id": "u", "role": "user", "content": "go"}],
                    }
                    start, first, any_ = time.perf_counter(), 0.0, 0.0
                    async for line in lines(body):
                        if not any_ and line.startswith("data:"):  # RUN_STARTED
                            any_ = time.perf_counter() - start
                        if not first and "TEXT_MESSAGE_CONTENT" in line:
                            first = time.perf_counter() - start
                            peak[0] = max(peak[0], rss_kb(serve.pid))
                    served_any.append(any_)
                    return first

                async def httpx_lines(body: dict[str, Any]) -> AsyncIterator[str]:
                    async with http.stream("POST", "/agents/bench_stream/agui", json=body) as r:
                        async for line in r.aiter_lines():
                            yield line

                async def raw_lines(body: dict[str, Any]) -> AsyncIterator[str]:
                    # HTTP/1.1 by hand: the lines of the chunked body, chunk sizes among them
                    # (only "data:" lines are read), until the run's last event.
                    reader, writer = await asyncio.open_connection("127.0.0.1", port)
                    data = json.dumps(body).encode()
                    writer.write(
                        b"POST /agents/bench_stream/agui HTTP/1.1\r\nhost: bench\r\n"
                        b"content-type: application/json\r\n"
                        b"content-length: %d\r\n\r\n%s" % (len(data), data)
                    )
                    try:
                        while line := await reader.readline():
                            yield line.decode()
                            if line.startswith(
                                (b'data: {"type":"RUN_FINISHED', b'data: {"type":"RUN_ERROR')
                            ):
                                return
                    finally:
                        writer.close()

                lines = raw_lines if raw else httpx_lines
                await at_once(min(n, 5), direct)  # warm up both paths
                await at_once(min(n, 5), served)
                idle_here, peak_here[0] = rss_kb(os.getpid()), 0
                direct_any.clear(), served_any.clear()  # the warm-up's are not measured
                idle_rss = rss_kb(serve.pid)
                if profiled:
                    serve.send_signal(signal.SIGUSR1)
                direct_first: list[float] = []
                served_first: list[float] = []
                cpu = dict.fromkeys(["worker_direct", "here_direct", "worker_served"], 0.0)
                cpu.update(here_served=0.0, serve=0.0, serve_loop=0.0)
                for _ in range(rounds):  # alternated: a drift in the machine's load hits both
                    worker0, here0 = cpu_seconds(worker.pid), time.process_time()
                    direct_first += await at_once(n, direct)
                    cpu["worker_direct"] += cpu_seconds(worker.pid) - worker0
                    cpu["here_direct"] += time.process_time() - here0
                    serve0, here0 = cpu_seconds(serve.pid), time.process_time()
                    worker0, loop0 = cpu_seconds(worker.pid), cpu_seconds(serve.pid, serve.pid)
                    served_first += await at_once(n, served)
                    cpu["serve"] += cpu_seconds(serve.pid) - serve0
                    cpu["serve_loop"] += cpu_seconds(serve.pid, serve.pid) - loop0
                    cpu["worker_served"] += cpu_seconds(worker.pid) - worker0
                    cpu["here_served"] += time.process_time() - here0
                profile = ""
                if profiled:
                    serve.send_signal(signal.SIGUSR2)
                    while not trace.exists():  # until the serve process wrote it
                        await asyncio.sleep(0.1)
                    profile = trace.read_text()
                    trace.unlink()
                # Then memory: bursts of n streams held open at once (not timed).
                probes = Probes(serve.pid, trace, profiled)
                bursts = [await held(n, probes, lines, trace, i) for i in (1, 2)]
                heap = None if profiled else await traced(n, probes, lines, trace, serve)
        finally:
            for process in (serve, worker):
                with contextlib.suppress(ProcessLookupError):  # the serve process may be gone
                    process.terminate()
                await process.wait()

    ms = 1000
    dm, sm = statistics.median(direct_first) * ms, statistics.median(served_first) * ms
    dp, sp = p99(direct_first) * ms, p99(served_first) * ms

    def per_turn(seconds: float) -> float:
        return seconds / (n * rounds) * ms

    worker_direct, here_direct = cpu["worker_direct"], cpu["here_direct"]
    worker_served, here_served, serve_cpu = cpu["worker_served"], cpu["here_served"], cpu["serve"]

    stream_kb = (peak[0] - idle_rss) / n
    print(f"{n} conversations at once, one streamed turn each, {rounds} round(s) of each path")
    da, sa = statistics.median(direct_any) * ms, statistics.median(served_any) * ms
    dap, sap = p99(direct_any) * ms, p99(served_any) * ms
    # Not the same event on both paths: each is the first its reader gets.
    print(f"{'first event (ms)':32}{'RunEvent':>10}{'RUN_STARTED':>14}")
    print(f"{'  median':32}{da:10.1f}{sa:14.1f}")
    print(f"{'  p99':32}{dap:10.1f}{sap:14.1f}")
    print(f"{'first text event (ms)':32}{'direct':>10}{'golem serve':>14}")
    print(f"{'  median':32}{dm:10.1f}{sm:14.1f}")
    d95, s95 = quantile(direct_first, 0.95) * ms, quantile(served_first, 0.95) * ms
    print(f"{'  p95':32}{d95:10.1f}{s95:14.1f}")
    print(f"{'  p99':32}{dp:10.1f}{sp:14.1f}")
    # On a busy machine the added milliseconds drift with its load; the ratio drifts less.
    print(f"{'  golem serve / direct, p50 | p95':32}{sm / dm:10.2f}{s95 / d95:14.2f}")
    print(f"{'CPU per turn (ms)':32}{'direct':>10}{'golem serve':>14}")
    print(f"{'  worker process':32}{per_turn(worker_direct):10.2f}{per_turn(worker_served):14.2f}")
    print(
        f"{'  readers (this process)':32}{per_turn(here_direct):10.2f}{per_turn(here_served):14.2f}"
    )
    print(f"{'  serve process':32}{'':10}{per_turn(serve_cpu):14.2f}")
    # The rest is Temporal's core (its RPCs run on threads of its own) and the server's threads.
    print(f"{'    of which its event loop':32}{'':10}{per_turn(cpu['serve_loop']):14.2f}")
    print(f"serve RSS (KB): peak {peak[0]}, idle {idle_rss}")
    # The direct readers hold what the serve process holds for a stream, less HTTP and SSE.
    here_kb = (peak_here[0] - idle_here) / n
    print(f"direct readers' (this process's) RSS growth per open stream: {here_kb:.1f} KB")
    print(f"{'figure':44}{'measured':>10}{'target':>10}  verdict")
    verdict("added first event, median (ms)", sa - da, 20)
    verdict("added first event, p99 (ms)", sap - dap, 100)
    verdict("added first text event, median (ms)", sm - dm, 20)
    verdict("added first text event, p99 (ms)", sp - dp, 100)
    verdict("serve CPU / worker CPU (%)", serve_cpu / worker_served * 100, 30)
    # What a direct reader spends (polling the run's stream) moves into the serve process.
    added = (serve_cpu - here_direct) / worker_served * 100
    verdict("serve CPU less direct readers' / worker (%)", added, 30)
    # Every memory figure beside the target; the steady live bytes are the one it names.
    verdict("serve RSS per open stream, 1st burst (KB)", stream_kb, 100)
    steady = bursts[-1]
    verdict("serve RSS per open stream, steady (KB)", steady.per_stream("rss_kb", n), 100)
    if not profiled:  # its probes are RSS only
        verdict("serve memory per open stream, steady (KB)", steady.per_stream("live", n), 100)
    if heap is not None:
        print(f"{'  of which Python heap, burst 3 (KB)':44}{heap.per_stream('traced', n):10.1f}")
    print_memory(n, stream_kb, bursts, heap)
    if profiled:
        print(profile)


class Probes:
    """The serve process's memory, asked of benchmarks/_traced_serve.py (under ``--profile``,
    its RSS from /proc only)."""

    def __init__(self, pid: int, trace: Path, profiled: bool) -> None:
        self.pid, self.out, self.profiled = pid, trace, profiled
        self.command = Path(f"{trace}.cmd")

    def _answers(self) -> list[str]:
        return self.out.read_text().splitlines() if self.out.exists() else []

    async def ask(self, command: str = "sample") -> dict[str, Any]:
        if self.profiled:
            return {"rss_kb": rss_kb(self.pid)}
        before = len(self._answers())
        self.command.write_text(command)
        os.kill(self.pid, signal.SIGUSR1)
        async with asyncio.timeout(60):
            while len(answers := self._answers()) <= before:  # until the serve process answers
                await asyncio.sleep(0.05)
        answer: dict[str, Any] = json.loads(answers[-1])
        if "error" in answer:
            raise RuntimeError(f"the serve process's probe {command!r}: {answer['error']}")
        return answer

    async def settled(self) -> dict[str, Any]:
        """A sample once the RSS stops moving (two samples SETTLE apart within 256 KB)."""
        last = await self.ask()
        for _ in range(20):
            await asyncio.sleep(SETTLE)
            now = await self.ask()
            if abs(now["rss_kb"] - last["rss_kb"]) < 256:
                return now
            last = now
        return last


@dataclass
class Burst:
    """The serve process's memory before a burst of held streams, with all open, after."""

    before: dict[str, Any]
    held: dict[str, Any]
    after: dict[str, Any]
    top: list[dict[str, Any]]
    """With tracing: the Python heap the open streams hold, grouped by traceback."""

    def per_stream(self, figure: str, n: int, since: str = "before", at: str = "held") -> float:
        """``figure``'s growth per stream in KB, from ``since`` to ``at`` (``live``: malloc's
        bytes in use and pymalloc's, what the process holds whatever its allocators keep)."""
        if figure == "live":
            return sum(self.per_stream(f, n, since, at) for f in ("malloc_in_use", "pymalloc"))
        grown = getattr(self, at)[figure] - getattr(self, since)[figure]
        return float(grown / n / (1 if figure == "rss_kb" else 1024))


Lines = Callable[[dict[str, Any]], AsyncIterator[str]]


async def held(
    n: int, probes: Probes, lines: Lines, trace: Path, index: int, traced: bool = False
) -> Burst:
    """N streams open at once, each held after its first text until all are open (the
    model waits for a gate file), sampled then, and let go; ``traced``: the Python heap
    allocated from the settled level on is traced, and its snapshot taken while held."""
    gate = Path(f"{trace}.gate{index}")
    before = await probes.settled()
    if traced:
        await probes.ask("trace")
    opened, all_open = [0], asyncio.Event()

    async def one(i: int) -> None:
        body = {
            "threadId": str(uuid.uuid4()),
            "runId": "r",
            "messages": [{"id": "u", "role": "user", "content": f"{HOLD}{gate}"}],
        }
        seen = False
        async for line in lines(body):
            if not seen and "TEXT_MESSAGE_CONTENT" in line:
                seen, opened[0] = True, opened[0] + 1
                if opened[0] == n:
                    all_open.set()

    streams = asyncio.ensure_future(asyncio.gather(*(one(i) for i in range(n))))
    waiting = asyncio.ensure_future(all_open.wait())
    await asyncio.wait([streams, waiting], return_when=asyncio.FIRST_COMPLETED)
    if not all_open.is_set():
        await streams  # raises what ended a stream early
        raise RuntimeError(f"{n - opened[0]} held streams ended before the first text")
    at = await probes.ask()
    top = (await probes.ask("snapshot"))["top"] if traced else []
    gate.touch()
    await streams
    after = await probes.settled()
    gate.unlink()
    return Burst(before, at, after, top)


async def traced(
    n: int, probes: Probes, lines: Lines, trace: Path, serve: asyncio.subprocess.Process
) -> Burst | None:
    """Burst 3, traced; ``None`` when tracing killed the serve process: CPython 3.11's
    tracemalloc can segfault (in ``traceback_new``) when a thread Python did not start, one
    of Temporal's core runtime threads, allocates while it traces (cpython gh-155725). The
    other figures stand: they were measured without tracing."""
    try:
        return await held(n, probes, lines, trace, 3, traced=True)
    except (TimeoutError, RuntimeError, httpx.TransportError):
        with contextlib.suppress(TimeoutError):  # dead: its exit is reaped at once
            await asyncio.wait_for(serve.wait(), SETTLE)
        if serve.returncode is None:
            raise
        print(f"burst 3: the serve process died while traced (exit {serve.returncode}):")
        print("  CPython's tracemalloc and Temporal's core threads; no heap figures")
        return None


#: The memory figures of a burst, by column.
COLUMNS = {"RSS": "rss_kb", "live": "live", "malloc": "malloc_in_use", "pymalloc": "pymalloc"}


def print_memory(n: int, first: float, bursts: list[Burst], heap: Burst | None) -> None:
    """The memory figures, per open stream: every burst's, the first one's too."""
    print(f"serve memory per open stream ({n} at once), KB")
    print(f"  timed rounds (the process's 1st burst), RSS peak over idle {first:10.1f}")
    names = columns(bursts[0])
    print(f"{'  held, all open, over settled':44}" + "".join(f"{c:>9}" for c in names))
    for index, burst in enumerate(bursts, 1):
        print(f"{'    burst ' + str(index):44}" + row(burst, n, "held"))
    for index, burst in enumerate(bursts, 1):
        print(f"{'    kept once burst ' + str(index) + ' settled':44}" + row(burst, n, "after"))
    print(f"  serve RSS (KB) settled before each burst: {[b.before['rss_kb'] for b in bursts]}")
    if heap is None:
        return
    print(
        f"  burst 3 (traced): Python heap held per open stream {heap.per_stream('traced', n):.1f}"
    )
    print("  where (per stream: bytes, blocks; the newest frames of golem and its libraries):")
    for stat in heap.top:
        print(f"{stat['size'] / n:9.0f} B {stat['count'] / n:5.1f}  {stat['where']}")


def columns(burst: Burst) -> dict[str, str]:
    """The figures the burst's probes gave (RSS only, under ``--profile``), by column."""
    return COLUMNS if "pymalloc" in burst.held else {"RSS": "rss_kb"}


def row(burst: Burst, n: int, at: str) -> str:
    return "".join(f"{burst.per_stream(f, n, at=at):9.1f}" for f in columns(burst).values())


def verdict(name: str, measured: float, target: float) -> None:
    """One figure beside its target (at most) and whether it meets it."""
    met = "met" if measured <= target else "OVER"
    print(f"{name:44}{measured:10.1f}{'<= ' + str(target):>10}  {met}")


if __name__ == "__main__":
    numbers = [int(arg) for arg in sys.argv[1:] if arg.isdigit()]
    n = numbers[0] if numbers else 100
    rounds = numbers[1] if len(numbers) > 1 else 1
    flags = [flag in sys.argv for flag in ("--profile", "--raw-client", "--inline-turns")]
    asyncio.run(main(n, rounds, *flags))
    sys.stdout.flush()
    os._exit(0)  # the Temporal core runtime can abort at interpreter teardown
