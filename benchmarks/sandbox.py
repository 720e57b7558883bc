"""What Temporal's workflow sandbox costs a golem worker, side by side in one run.

    .venv/bin/python benchmarks/sandbox.py [--conversations 20] [--turns 10] [--repeats 3]

Two golem workers in processes of their own serve the same agent (benchmarks/
conversations.py's: a tool call, a 2 KB result, an answer): one with the default
``GolemPlugin``, one with ``GolemPlugin(sandboxed=False)`` (docs/adr/0038-the-sandbox-off.md).
The same work goes to each in interleaved repeats: plain runs (``DurableAgent.run``, as many
at once as there are conversations) and conversation turns. Printed per plain run and per
turn: each worker's CPU, read from the OS for its process alone, median (min-max) of the
repeats, and sandboxed / unsandboxed: how much more the sandbox costs.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _entity_floor import serve_side
from _worker_process import WorkerProcess, side_by_side
from conversations import turn_agent
from entity_floor import golem_conversations, summary

from golem.client import DurableAgent
from golem.testing import dev_server

AGENT = turn_agent("sandboxcmp")
SIDES = ("golem", "golem-unsandboxed")


async def serve(target: str, task_queue: str, side: str) -> None:
    await serve_side(target, task_queue, side, AGENT)


async def plain_runs(durable: DurableAgent[str], count: int, turns: int) -> None:
    await asyncio.gather(*(durable.run(f"page {n}?") for n in range(count * turns)))


async def main(repeats: int, count: int, turns: int) -> None:
    total = count * turns
    async with dev_server() as env:
        target = env.client.service_client.config.target_host
        async with (
            WorkerProcess(target, __file__, SIDES[0], prefix="sandboxed") as boxed,
            WorkerProcess(target, __file__, SIDES[1], prefix="unsandboxed") as bare,
        ):
            workers = {SIDES[0]: boxed, SIDES[1]: bare}
            durable = {
                side: DurableAgent(env.client, AGENT, task_queue=w.task_queue)
                for side, w in workers.items()
            }
            for side in SIDES:  # warm up: imports, the sandbox's module cache
                await golem_conversations(durable[side], 5, 2)
                await plain_runs(durable[side], 5, 2)
            cpu: dict[tuple[str, str], list[float]] = {}
            work: dict[str, Callable[[DurableAgent[str]], Awaitable[object]]] = {
                "plain run": lambda d: plain_runs(d, count, turns),
                "conversation turn": lambda d: golem_conversations(d, count, turns),
            }
            for repeat in range(repeats):
                for kind, do in work.items():
                    for side in SIDES:
                        print(f"  .. repeat {repeat + 1}: {kind}, {side}", file=sys.stderr)
                        before = workers[side].cpu()
                        await do(durable[side])
                        spent = (workers[side].cpu() - before) / total * 1e3
                        cpu.setdefault((kind, side), []).append(spent)
    print(
        f"worker CPU with and without the workflow sandbox: {total} plain runs and {count} "
        f"conversations x {turns} turns per repeat, {repeats} interleaved repeats"
    )
    print(f"   {'per':18s} {'sandboxed, ms':>22s} {'unsandboxed, ms':>22s}   sandboxed/unsandboxed")
    for kind in work:
        boxed_ms, bare_ms = cpu[(kind, SIDES[0])], cpu[(kind, SIDES[1])]
        ratio = statistics.median(b / u for b, u in zip(boxed_ms, bare_ms, strict=True))
        print(f"   {kind:18s} {summary(boxed_ms):>22s} {summary(bare_ms):>22s}   {ratio:.2f}x")


if __name__ == "__main__":
    side_by_side(serve, main, conversations=20, turns=10)
