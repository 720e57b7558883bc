"""A golem conversation turn beside the floor a Temporal engineer would hand-write.

    .venv/bin/python benchmarks/entity_floor.py [--conversations 20] [--turns 10] [--repeats 3]

The floor is a plain "entity" chat workflow: one workflow per conversation, an update per
turn that runs the same three activities inline (model: a tool call; tool: a 2 KB result;
model: the answer), the transcript in workflow state, continue-as-new when the server
suggests it. golem runs the same work as a ``ConversationWorkflow`` (benchmarks/
conversations.py's agent), each turn a child run, and again with its turns inline
(``conversation(inline_turns=True)``, docs/adr/0050-turns-inline.md), sandboxed and not,
and inline with Results that carry the answer alone (``with_messages = False``).
Each side has its own worker process, so its CPU is read from the
OS for that process alone; repeats are interleaved (floor, golem, ...) and reported as median
(min-max). Printed per turn: worker CPU, throughput, history bytes, events and workflow tasks
(summed over every workflow the turns touched), and each ratio beside issue 34's target.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _entity_floor import serve_side
from _worker_process import WorkerProcess, side_by_side
from conversations import RESULT_BYTES, turn_agent
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from golem.client import DurableAgent
from golem.testing import dev_server

AGENT = turn_agent("floorcmp")


async def serve(target: str, task_queue: str, side: str) -> None:
    """One side's worker, in this process, until stdin closes."""
    await serve_side(target, task_queue, side, AGENT)


async def entity_conversations(
    client: Client, tq: str, count: int, turns: int, workflow: str, *args: Any
) -> list[str]:
    """``count`` conversations of an entity workflow (``workflow``: the floor's, or the
    inline-turns prototype's) at once, ``turns`` updates each, then closed."""

    async def one() -> str:
        handle = await client.start_workflow(
            workflow, args=list(args), id=f"entity-{uuid.uuid4()}", task_queue=tq
        )
        for n in range(turns):
            await handle.execute_update("turn", f"page {n}?")
        await handle.signal("close")
        await handle.result()
        return handle.id

    return list(await asyncio.gather(*(one() for _ in range(count))))


async def golem_conversations(
    durable: DurableAgent[str], count: int, turns: int, inline: bool = False, whole: bool = True
) -> list[str]:
    async def one() -> str:
        conv = await durable.conversation(inline_turns=inline)
        conv.with_messages = whole  # False: each Result its answer alone, no transcript read
        for n in range(turns):
            await conv.send(f"page {n}?")
        await conv.close()
        return conv.id

    return list(await asyncio.gather(*(one() for _ in range(count))))


@dataclass
class Shape:
    bytes: int = 0
    events: int = 0
    tasks: int = 0


async def shape(client: Client, workflow_ids: list[str], children: bool) -> Shape:
    """History bytes, events and workflow tasks of every run of these workflows (and of
    the child runs they started, for golem's turns)."""
    total = Shape()
    queue = list(workflow_ids)
    while queue:
        workflow_id = queue.pop()
        async for execution in client.list_workflows(f"WorkflowId = '{workflow_id}'"):
            handle = client.get_workflow_handle(workflow_id, run_id=execution.run_id)
            async for event in handle.fetch_history_events():
                total.bytes += event.ByteSize()
                total.events += 1
                if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
                    total.tasks += 1
                started = event.start_child_workflow_execution_initiated_event_attributes
                if children and started.workflow_id:
                    queue.append(started.workflow_id)
    return total


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):8.2f} ({min(values):.2f}-{max(values):.2f})"


def verdict(ratio: float, target: float, at_most: bool) -> str:
    met = ratio <= target if at_most else ratio >= target
    return f"target {'<=' if at_most else '>='} {target}x: {'met' if met else 'NOT met'}"


#: The sides measured, each against the floor: golem's conversation with a child run per
#: turn, and with its turns inline, sandboxed and not (what is left of the gap once the
#: shape is the floor's).
SIDES = ("golem", "inline", "inline-answers", "inline-unsandboxed")


async def main(repeats: int, count: int, turns: int) -> None:
    async with dev_server() as env:
        target = env.client.service_client.config.target_host
        async with (
            WorkerProcess(target, __file__, "floor", prefix="floor") as floor_worker,
            WorkerProcess(target, __file__, "golem", prefix="golem") as golem_worker,
            WorkerProcess(target, __file__, "golem", prefix="inline") as inline_worker,
            WorkerProcess(target, __file__, "golem", prefix="answers") as answers_worker,
            WorkerProcess(target, __file__, "golem-unsandboxed", prefix="bare") as bare_worker,
        ):
            client = env.client
            workers = {
                "floor": floor_worker,
                "golem": golem_worker,
                "inline": inline_worker,
                "inline-answers": answers_worker,
                "inline-unsandboxed": bare_worker,
            }

            async def run(side: str, n: int, k: int) -> list[str]:
                if side == "floor":
                    return await entity_conversations(
                        client, floor_worker.task_queue, n, k, "EntityChat", None
                    )
                on = DurableAgent(client, AGENT, task_queue=workers[side].task_queue)
                whole = side != "inline-answers"
                return await golem_conversations(on, n, k, side != "golem", whole)

            for side in workers:
                await run(side, 5, 2)  # warm up
            total = count * turns
            cpu: dict[str, list[float]] = {side: [] for side in workers}
            rate: dict[str, list[float]] = {side: [] for side in workers}
            ids: dict[str, list[str]] = {}
            for repeat in range(repeats):
                for side, worker in workers.items():
                    print(f"  .. repeat {repeat + 1}: {side}", file=sys.stderr, flush=True)
                    before, wall = worker.cpu(), time.perf_counter()
                    ids[side] = await run(side, count, turns)
                    wall = time.perf_counter() - wall
                    cpu[side].append((worker.cpu() - before) / total * 1e3)
                    rate[side].append(total / wall)
            shapes = {side: await shape(client, ids[side], side == "golem") for side in workers}
    print(
        f"a conversation turn vs the entity-workflow floor: {count} conversations at once x "
        f"{turns} turns, {RESULT_BYTES} B tool result, {repeats} interleaved repeats"
    )
    print("   golem: a ConversationWorkflow, each turn a child run (golem today)")
    print("   inline: the same conversation with inline_turns=True (docs/adr/0050-turns-inline.md)")
    print("   inline-answers: the same, its Results without messages (with_messages = False):")
    print("     no transcript read per turn, as the floor's client reads the answer alone")
    print("   inline-unsandboxed: inline on a worker without Temporal's workflow sandbox")
    for side in SIDES:
        cpu_ratio = statistics.median(g / f for g, f in zip(cpu[side], cpu["floor"], strict=True))
        rate_ratio = statistics.median(
            g / f for g, f in zip(rate[side], rate["floor"], strict=True)
        )
        print(f"   {'per turn':24s} {side:>22s} {'floor':>22s}   ratio")
        print(
            f"   {'worker CPU, ms':24s} {summary(cpu[side]):>22s} {summary(cpu['floor']):>22s}"
            f"   {cpu_ratio:.2f}x  ({verdict(cpu_ratio, 1.2, True)})"
        )
        print(
            f"   {'throughput, turns/s':24s} {summary(rate[side]):>22s} "
            f"{summary(rate['floor']):>22s}   {rate_ratio:.2f}x  "
            f"({verdict(rate_ratio, 0.85, False)})"
        )
        for name, attr in (
            ("history bytes", "bytes"),
            ("events", "events"),
            ("workflow tasks", "tasks"),
        ):
            g = getattr(shapes[side], attr) / total
            f = getattr(shapes["floor"], attr) / total
            note = f"  ({verdict(g / f, 1.2, True)})" if attr == "bytes" else ""
            print(f"   {name:24s} {g:22.1f} {f:22.1f}   {g / f:.2f}x{note}")


if __name__ == "__main__":
    side_by_side(serve, main, conversations=20, turns=10)
