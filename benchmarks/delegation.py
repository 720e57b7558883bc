"""The cost of a delegation, measured side by side in one run.

The same work three ways: a caller whose tool answers itself (a local tool), a caller that
asks a delegate (``Agent(delegates=[helper])``: a one-turn child run, durably a child
workflow), and a caller whose tool asks the helper with ``ctx.delegate`` (durably the tool
activity starts the helper's run as a workflow of its own). Printed: each one's latency in
process and durably (median and range of interleaved repeats) with its ratio to the local
tool, and durably the history events and bytes of the caller and of the child run, whose
sum is what a delegation costs in Temporal's storage. Beside them, interleaved, the floor:
bare workflows of the same shape (a no-op activity for each model call, and for the tool
call a no-op activity or a child workflow running one), on the same server and SDK. ``--steps`` adds where the durable
time goes: each step's median over the timed runs, read from the caller's and the child's
histories (the server's event times).

Run: .venv/bin/python benchmarks/delegation.py [--repeats N] [--steps]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any

from _floor import BareChild, BareDelegation, noop
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client
from temporalio.worker import Worker

from golem import Agent, Message, Result, RunContext, ToolCall
from golem.client import DurableAgent
from golem.models import FunctionModel
from golem.testing import dev_server
from golem.worker import GolemPlugin

ANSWER = "order 42 was charged twice; refund 19.90"


def caller(name: str, tool: str, **options: Any) -> Agent[Any, str]:
    """Calls ``tool`` once with a prompt, then answers with its result."""

    def answer(messages: list[Message], tools: Any) -> Message:
        if messages[-1].role == "tool":
            return Message.assistant(messages[-1].content)
        args = '{"prompt": "what happened to order 42?"}'
        return Message.assistant("", [ToolCall(id="c1", name=tool, args=args)])

    return Agent(FunctionModel(answer, model_name="bench"), name=name, **options)


def agents() -> dict[str, Agent[Any, str]]:
    helper: Agent[Any, str] = Agent(
        FunctionModel(lambda m, t: Message.assistant(ANSWER), model_name="bench"), name="helper"
    )
    local = caller("bench_local", "lookup")

    @local.tool
    def lookup(prompt: str) -> str:
        """Look it up."""
        return ANSWER

    delegated = caller("bench_delegated", "helper", delegates=[helper])
    in_tool = caller("bench_in_tool", "ask")

    @in_tool.tool
    async def ask(ctx: RunContext[Any], prompt: str) -> str:
        """Ask the helper."""
        return str((await ctx.delegate(helper, prompt)).output)

    return {"local tool": local, "delegates=": delegated, "ctx.delegate": in_tool, "": helper}


async def timed(
    runs: dict[str, Callable[[], Awaitable[Result[Any]]]],
    repeats: int,
    results: dict[str, list[Result[Any]]] | None = None,
) -> Any:
    """Seconds per run of each, over ``repeats`` interleaved rounds (after a warm-up); the
    timed runs' results go to ``results`` when given."""
    times: dict[str, list[float]] = {label: [] for label in runs}
    for run in runs.values():
        assert (await run()).output == ANSWER
    for _ in range(repeats):
        for label, run in runs.items():
            start = time.perf_counter()
            result = await run()
            times[label].append(time.perf_counter() - start)
            if results is not None:
                results.setdefault(label, []).append(result)
    return times


def cell(seconds: list[float], base: list[float]) -> str:
    ms = [s * 1000 for s in seconds]
    ratio = statistics.median(seconds) / statistics.median(base)
    return f"{statistics.median(ms):8.2f} ({min(ms):.2f}-{max(ms):.2f}) ms {ratio:5.2f}x"


def bare(client: Client, task_queue: str, child: bool) -> Callable[[], Awaitable[Any]]:
    """A run of the floor's ``BareDelegation``, answering as ``timed`` checks runs do."""

    async def run() -> Any:
        await client.execute_workflow(
            BareDelegation.run, child, id=str(uuid.uuid4()), task_queue=task_queue
        )
        return SimpleNamespace(output=ANSWER)

    return run


async def history(client: Client, run_id: str) -> tuple[int, int]:
    events = await read(client, run_id)
    return len(events), sum(e.ByteSize() for e in events)


async def read(client: Client, run_id: str) -> list[HistoryEvent]:
    return [e async for e in client.get_workflow_handle(run_id).fetch_history_events()]


#: The durable steps of the tool call, each between two milestones (see ``milestones``);
#: the indented ones divide the call's (a child run's, or its tool activity's) time.
STEPS = [
    ("caller's task: answer -> call issued", "answered", "issued"),
    ("call issued -> its result recorded", "issued", "learnt"),
    ("  issued -> child's first task starts", "issued", "child task"),
    ("  child's first task", "child task", "child model"),
    ("  child's model activity", "child model", "child answered"),
    ("  child's last task", "child answered", "child closed"),
    ("  child closed -> result recorded", "child closed", "learnt"),
    ("caller's task: result -> next call", "learnt", "next"),
]


def milestones(caller: list[HistoryEvent], child: list[HistoryEvent]) -> dict[str, float]:
    """When (ms) the caller's first model answer came, its tool call was issued (a tool
    activity or a child workflow scheduled), the caller learnt its result and issued its
    next model call; and the child's first workflow task started, its model call was
    issued and answered, and it closed."""
    E = EventType

    def at(event: HistoryEvent) -> float:
        return event.event_time.ToNanoseconds() / 1e6

    def first(events: list[HistoryEvent], *kinds: int, after: int = 0) -> HistoryEvent:
        return next(e for e in events if e.event_type in kinds and e.event_id > after)

    answered = first(caller, E.EVENT_TYPE_ACTIVITY_TASK_COMPLETED)
    issued = first(
        caller,
        E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
        E.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED,
        after=answered.event_id,
    )
    learnt = first(
        caller,
        E.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
        E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED,
        after=issued.event_id,
    )
    nxt = first(caller, E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, after=learnt.event_id)
    times = {"answered": at(answered), "issued": at(issued), "learnt": at(learnt), "next": at(nxt)}
    if child:
        model = first(child, E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
        times["child task"] = at(first(child, E.EVENT_TYPE_WORKFLOW_TASK_STARTED))
        times["child model"] = at(model)
        times["child answered"] = at(first(child, E.EVENT_TYPE_ACTIVITY_TASK_COMPLETED))
        times["child closed"] = at(child[-1])
    return times


Spans = dict[str, dict[str, list[float]]]

#: The floor's two shapes of the tool call (``BareDelegation``).
FLOOR = ["an activity", "a child workflow"]


async def steps(client: Client, results: dict[str, list[Result[Any]]]) -> Spans:
    """Each step's durations (ms) for each way, over its timed runs."""
    spans: dict[str, dict[str, list[float]]] = {}
    for label, runs in results.items():
        for result in runs:
            child = await read(client, result.sub_runs[0]) if result.sub_runs else []
            times = milestones(await read(client, result.run_id), child)
            for step, start, end in STEPS:
                if start in times and end in times:
                    spans.setdefault(step, {}).setdefault(label, []).append(
                        times[end] - times[start]
                    )
    return spans


def print_steps(spans: Spans, labels: list[str]) -> None:
    print("\nwhere the durable time goes: median ms per step, from the histories")
    print(f"{'':<40}" + "".join(f"{label:>14}" for label in labels))
    for step, _, _ in STEPS:
        cells = [spans.get(step, {}).get(label) for label in labels]
        print(
            f"{step:<40}"
            + "".join(f"{statistics.median(c):14.2f}" if c else " " * 14 for c in cells)
        )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--steps", action="store_true", help="where the durable time goes")
    args = parser.parse_args()
    repeats = args.repeats
    named = agents()
    helper = named.pop("")
    local = await timed({k: (lambda a=a: a.run("go")) for k, a in named.items()}, repeats * 10)

    print("starting the dev server...", file=sys.stderr)
    async with dev_server() as env:
        client = env.client
        task_queue = f"bench-{uuid.uuid4().hex[:8]}"
        plugin = GolemPlugin(*named.values(), helper)
        floor = Worker(
            client,
            task_queue=f"{task_queue}-floor",
            workflows=[BareDelegation, BareChild],
            activities=[noop],
        )
        async with Worker(client, task_queue=task_queue, plugins=[plugin]), floor:
            durables = {k: DurableAgent(client, a, task_queue=task_queue) for k, a in named.items()}
            runs = {k: (lambda d=d: d.run("go")) for k, d in durables.items()}
            bares = {
                f"floor: {k}": bare(client, floor.task_queue, k == "a child workflow")
                for k in FLOOR
            }
            results: dict[str, list[Result[Any]]] = {}
            durable = await timed({**runs, **bares}, repeats, results)
            sizes = {}
            for label, agent in durables.items():
                result = await agent.run("go")
                child = await history(client, result.sub_runs[0]) if result.sub_runs else (0, 0)
                sizes[label] = (await history(client, result.run_id), child)
            spans = await steps(client, {k: results[k] for k in named}) if args.steps else {}

    base_local, base_durable = local["local tool"], durable["local tool"]
    print("one delegation vs the same work as a local tool; median (range), ratio to the tool")
    print(
        f"{'':<14}{'in process (' + str(repeats * 10) + ' rounds)':>38}{'durably (' + str(repeats) + ' rounds)':>38}"
    )
    for label in named:
        print(
            f"{label:<14}{cell(local[label], base_local):>38}{cell(durable[label], base_durable):>38}"
        )
    print("the floor: bare workflows of the same shape, the tool call as")
    for label in FLOOR:
        times = durable[f"floor: {label}"]
        print(f"{'  ' + label:<14}{'':>38}{cell(times, durable['floor: ' + FLOOR[0]]):>38}")
    print("\ndurable history, events / bytes: the caller's, the child run's, both")
    tool_bytes = sizes["local tool"][0][1]
    for label, ((events, size), (child_events, child_size)) in sizes.items():
        total = size + child_size
        print(
            f"{label:<14}{events:>5} / {size:>6,}   {child_events:>4} / {child_size:>6,}   "
            f"{events + child_events:>4} / {total:>6,}  {total / tool_bytes:5.2f}x the tool's"
        )
    if spans:
        print_steps(spans, list(named))


if __name__ == "__main__":
    asyncio.run(main())
