"""Many open conversations on one worker, golem beside the entity-workflow floor.

    .venv/bin/python benchmarks/scale.py [--conversations 1000 10000] [--turns 3]
        [--in-flight 100] [--resting 20] [--cache 1000] [--inline]

For each count N, each side (its worker in a process of its own, ``max_cached_workflows``
= ``--cache`` on both) opens N conversations and takes ``--turns`` turns in each, at most
``--in-flight`` conversations busy at once, and leaves them open. Printed per side:
throughput; turn latency p50, p99 and p99/p50; the worker's resident memory per open
conversation (its RSS once the N are open, less before); then a turn on each of
``--resting`` resting conversations, one at a time: golem's rest (its idle timeout ran out:
the workflow closed, the next send reopens it, docs/adr/0021), the floor's an entity
workflow the worker's cache no longer holds (it replays first; with N <= ``--cache`` it is
still cached). The agent and the floor are benchmarks/entity_floor.py's (three activities a
turn, a 2 KB tool result). ``--inline`` adds a third side: golem's conversations with their
turns inline (``conversation(inline_turns=True)``, docs/adr/0050-turns-inline.md). Issue
34's targets are printed beside: p99/p50 <= 1.6x, memory per open conversation <= the
floor's, a resting turn <= 1.5x the floor's.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _entity_floor import EntityChat, serve_side
from _worker_process import WorkerProcess
from conversations import turn_agent
from temporalio.client import Client

from golem.client import DurableAgent
from golem.testing import dev_server

AGENT = turn_agent("scale")
#: How long a golem conversation waits for a turn before it rests (then the resting turns).
IDLE = timedelta(seconds=20)


class _Unrecorded(list[object]):
    """A request list that keeps none: the offline model records every request it gets
    (for tests), which a provider's model does not, nor the floor's activity."""

    def append(self, item: object) -> None:
        pass


async def serve(target: str, task_queue: str, side: str, cache: str) -> None:
    """One side's worker, in this process, until stdin closes."""
    AGENT.model.requests = _Unrecorded()  # type: ignore[attr-defined]
    await serve_side(target, task_queue, side, AGENT, max_cached_workflows=int(cache))


def rss_kb(worker: WorkerProcess) -> int:
    assert worker.proc is not None
    for line in Path(f"/proc/{worker.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class Side:
    """One side's conversations: open one, take a turn in one."""

    def __init__(self, name: str, worker: WorkerProcess, client: Client) -> None:
        self.name, self.worker, self.client = name, worker, client
        self.durable: DurableAgent[str] = DurableAgent(client, AGENT, task_queue=worker.task_queue)
        self.open: list[object] = []

    async def start(self) -> object:
        if self.name != "floor":
            inline = self.name == "inline"
            return await self.durable.conversation(idle_timeout=IDLE, inline_turns=inline)
        return await self.client.start_workflow(
            EntityChat.run, None, id=f"entity-{uuid.uuid4()}", task_queue=self.worker.task_queue
        )

    async def turn(self, conversation: object, text: str) -> None:
        if self.name != "floor":
            await conversation.send(text)  # type: ignore[attr-defined]
        else:
            await conversation.execute_update(EntityChat.turn, text)  # type: ignore[attr-defined]


async def open_many(
    side: Side, count: int, turns: int, in_flight: int
) -> tuple[float, list[float]]:
    """``count`` conversations, ``turns`` turns each, at most ``in_flight`` busy: turns per
    second and each turn's latency."""
    gate = asyncio.Semaphore(in_flight)
    latencies: list[float] = []

    async def one() -> None:
        async with gate:
            conversation = await side.start()
            side.open.append(conversation)
            for n in range(turns):
                began = time.perf_counter()
                await side.turn(conversation, f"page {n}?")
                latencies.append(time.perf_counter() - began)

    began = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(count)))
    return count * turns / (time.perf_counter() - began), latencies


async def resting_turns(side: Side, count: int) -> list[float]:
    """A turn on each of the ``count`` oldest conversations, one at a time."""
    times = []
    for conversation in side.open[:count]:
        began = time.perf_counter()
        await side.turn(conversation, "again?")
        times.append(time.perf_counter() - began)
    return times


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def measure(args: argparse.Namespace, count: int) -> dict[str, dict[str, float]]:
    figures: dict[str, dict[str, float]] = {}
    async with dev_server() as env:
        target = env.client.service_client.config.target_host
        for name in ("floor", "golem", "inline") if args.inline else ("floor", "golem"):
            served = "floor" if name == "floor" else "golem"
            async with WorkerProcess(
                target, __file__, served, str(args.cache), prefix=name
            ) as worker:
                side = Side(name, worker, env.client)
                print(f"  .. {count} conversations: {name}", file=sys.stderr, flush=True)
                await open_many(side, 5, 1, 5)  # warm up
                side.open = []
                before = rss_kb(worker)
                rate, latencies = await open_many(side, count, args.turns, args.in_flight)
                memory = (rss_kb(worker) - before) / count
                if name != "floor":
                    await asyncio.sleep(IDLE.total_seconds() + 5)  # the conversations rest
                resting = await resting_turns(side, args.resting)
                figures[name] = {
                    "rate": rate,
                    "p50": p(latencies, 0.5) * 1e3,
                    "p99": p(latencies, 0.99) * 1e3,
                    "memory": memory,
                    "resting": statistics.median(resting) * 1e3,
                }
    return figures


def report(count: int, args: argparse.Namespace, figures: dict[str, dict[str, float]]) -> None:
    print(
        f"{count} conversations x {args.turns} turns, {args.in_flight} in flight, "
        f"cache {args.cache}, {args.resting} resting turns"
    )
    f = figures["floor"]
    for name in [n for n in figures if n != "floor"]:
        g = figures[name]
        label = "golem" if name == "golem" else "golem, inline turns"
        print(f"   {'':34s}{label:>20s}{'floor':>10s}{'ratio':>8s}")
        for what, key in (
            ("throughput, turns/s", "rate"),
            ("turn latency p50, ms", "p50"),
            ("turn latency p99, ms", "p99"),
        ):
            print(f"   {what:34s}{g[key]:20.1f}{f[key]:10.1f}{g[key] / f[key]:7.2f}x")
        gs, fs = g["p99"] / g["p50"], f["p99"] / f["p50"]
        met = "met" if gs <= 1.6 else "NOT met"
        print(f"   {'p99 / p50':34s}{gs:19.2f}x{fs:9.2f}x   (target golem <= 1.6x: {met})")
        gm, fm = g["memory"], f["memory"]
        met = "met" if gm <= fm else "NOT met"
        ratio = gm / fm if fm else 0
        print(
            f"   {'worker RSS per open conversation, KB':34s}{gm:20.1f}{fm:10.1f}{ratio:7.2f}x"
            f"  (target <= the floor's: {met})"
        )
        gr, fr = g["resting"], f["resting"]
        met = "met" if gr <= 1.5 * fr else "NOT met"
        print(
            f"   {'a resting turn, median ms':34s}{gr:20.1f}{fr:10.1f}{gr / fr:7.2f}x"
            f"  (target <= 1.5x: {met})"
        )


async def main(args: argparse.Namespace) -> None:
    for count in args.conversations:
        report(count, args, await measure(args, count))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        asyncio.run(serve(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]))
        sys.exit(0)
    parser = argparse.ArgumentParser()
    parser.add_argument("--conversations", type=int, nargs="+", default=[1000])
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--in-flight", type=int, default=100)
    parser.add_argument("--resting", type=int, default=20)
    parser.add_argument("--cache", type=int, default=1000)
    parser.add_argument("--inline", action="store_true", help="measure inline turns as well")
    asyncio.run(main(parser.parse_args()))
    sys.stdout.flush()
    import os

    os._exit(0)  # the Temporal core runtime can abort at interpreter teardown
