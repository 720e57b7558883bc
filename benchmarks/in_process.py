"""golem's in-process overhead per model request over a no-framework loop, at two run lengths.

    .venv/bin/python benchmarks/in_process.py [--turns 10 200] [--profile TURNS]

Both sides run the same run: each turn an instant model (it reads only the last message, so
its own cost does not grow with the run) asks for one call of a sync tool that answers at
once; after the last result it answers. The bare loop is what a person writes with no
framework: a list of dicts, ``json.loads`` of the arguments, the tool called on the loop.
What is left is golem's own work per request: building and validating the request,
repairing the history, dispatching the tool, bookkeeping, and (by default) two thread round
trips, since a sync model function and a sync tool each run in a thread; golem's side runs
twice, by default and with both marked ``on_loop`` (called on the loop, docs/adr/0037).
Printed per run length: µs per request for each, golem's overhead (golem - bare), the
on-loop overhead over the default's, and overhead(long) / overhead(short), which is 1.0 when
the cost per request does not grow with the run. Last, the offline models'
usage estimate alone, per request, over one run's requests: each counted whole, as before
issue 34, against counted by what each request adds (``golem.models.function.SentChars``).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import time
from collections.abc import Awaitable, Callable
from typing import Any

REPEAT_SECONDS = 0.4  # each timed repeat runs as many whole runs as fit in about this
REPEATS = 7  # best of


def next_call(last_role: str, last_call_id: str, turns: int) -> int | None:
    """The index of the next call to ask for, or None to answer: O(1) in the run's length."""
    if last_role == "user":
        return 0
    done = int(last_call_id.removeprefix("call_")) + 1
    return None if done >= turns else done


def lookup(key: str) -> str:
    return f"value of {key}"


def golem_agent(turns: int, on_loop: bool = False) -> tuple[Any, Any]:
    """The agent of golem's side and its model (which records every request); with
    ``on_loop``, the model function and the tool are called on the loop (no thread)."""
    from golem.agent import Agent
    from golem.messages import Message, ToolCall
    from golem.models.base import ToolDefinition
    from golem.models.function import FunctionModel
    from golem.usage import UsageLimits

    def answer(messages: list[Message], tools: list[ToolDefinition]) -> Message:
        last = messages[-1]
        n = next_call(last.role, last.tool_call_id or "", turns)
        if n is None:
            return Message.assistant(f"done after {turns} lookups")
        return Message.assistant(
            tool_calls=[ToolCall(id=f"call_{n}", name="lookup", args=f'{{"key": "k{n}"}}')]
        )

    model = FunctionModel(answer, on_loop=on_loop)
    agent: Agent[None, str] = Agent(
        model,
        instructions="Look things up.",
        max_iterations=turns + 5,
        usage_limits=UsageLimits(request_limit=None),
    )
    agent.tool(on_loop=on_loop)(lookup)
    return agent, model


def golem_run(turns: int, on_loop: bool = False) -> Callable[[], Awaitable[object]]:
    agent, model = golem_agent(turns, on_loop)

    async def run() -> object:
        result = await agent.run("go")
        assert result.output == f"done after {turns} lookups", result.output
        model.requests.clear()  # the recording would otherwise grow across runs
        return result

    return run


async def usage_estimate_us(turns: int) -> tuple[float, float]:
    """Best-of-REPEATS µs per request of the offline models' usage estimate over one run's
    requests: each counted whole (a new counter each), and as a model counts them (one)."""
    from golem.models.function import SentChars, estimate_usage

    agent, model = golem_agent(turns)
    result = await agent.run("go")
    requests, answer = list(model.requests), result.messages[-1]

    def timed(one_counter: bool) -> float:
        best = float("inf")
        for _ in range(REPEATS):
            start = time.perf_counter()
            shared = SentChars()
            for request in requests:
                estimate_usage(request, answer, shared if one_counter else SentChars())
            best = min(best, time.perf_counter() - start)
        return best / len(requests) * 1e6

    return timed(False), timed(True)


def bare_run(turns: int) -> Callable[[], Awaitable[object]]:
    async def model(messages: list[dict[str, Any]]) -> dict[str, Any]:
        last = messages[-1]
        n = next_call(last["role"], last.get("tool_call_id", ""), turns)
        if n is None:
            return {"role": "assistant", "content": f"done after {turns} lookups"}
        call = {"id": f"call_{n}", "name": "lookup", "args": f'{{"key": "k{n}"}}'}
        return {"role": "assistant", "content": "", "tool_calls": [call]}

    tools = {"lookup": lookup}

    async def run() -> object:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": "Look things up."},
            {"role": "user", "content": "go"},
        ]
        while True:
            reply = await model(messages)
            messages.append(reply)
            if not reply.get("tool_calls"):
                return reply["content"]
            for call in reply["tool_calls"]:
                result = tools[call["name"]](**json.loads(call["args"]))
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})

    return run


async def per_request_us(run: Callable[[], Awaitable[object]], requests: int) -> float:
    """Best-of-REPEATS wall time of one run, in µs per model request."""
    await run()  # warm up: imports, schema building, caches
    start = time.perf_counter()
    await run()
    runs = max(1, int(REPEAT_SECONDS / max(time.perf_counter() - start, 1e-6)))
    best = float("inf")
    for _ in range(REPEATS):
        start = time.perf_counter()
        for _ in range(runs):
            await run()
        best = min(best, (time.perf_counter() - start) / runs)
    return best / requests * 1e6


async def main(lengths: list[int], profile: int | None) -> None:
    if profile:
        run = golem_run(profile)
        await run()
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(20):
            await run()
        profiler.disable()
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(40)
        return
    print("in-process overhead per model request (instant model, instant sync tool), best of 7")
    print("  threads: the sync model function and tool each run in a thread (the default);")
    print("  on loop: both marked on_loop=True, called on the event loop (docs/adr/0037)")
    print(
        f"   {'turns':>6s} {'threads µs':>11s} {'on loop µs':>11s} {'bare µs':>8s}"
        f" {'overhead: threads':>18s} {'on loop':>8s} {'on loop/threads':>16s}"
    )
    overheads: dict[bool, list[float]] = {False: [], True: []}
    for turns in lengths:
        requests = turns + 1
        threads_us = await per_request_us(golem_run(turns), requests)
        loop_us = await per_request_us(golem_run(turns, on_loop=True), requests)
        bare_us = await per_request_us(bare_run(turns), requests)
        overheads[False].append(threads_us - bare_us)
        overheads[True].append(loop_us - bare_us)
        print(
            f"   {turns:6d} {threads_us:11.1f} {loop_us:11.1f} {bare_us:8.1f}"
            f" {threads_us - bare_us:18.1f} {loop_us - bare_us:8.1f}"
            f" {(loop_us - bare_us) / (threads_us - bare_us):15.2f}x"
        )
    for on_loop, name in ((False, "threads"), (True, "on loop")):
        grown = overheads[on_loop][-1] / overheads[on_loop][0]
        print(
            f"   {name}: overhead at {lengths[-1]} turns / at {lengths[0]} turns: {grown:.2f}x"
            " (1.00: the cost per request does not grow)"
        )
    print("offline models' usage estimate per request: counted whole / by what each adds")
    for turns in lengths:
        whole, added = await usage_estimate_us(turns)
        print(f"   {turns:6d} {whole:8.2f} µs / {added:6.2f} µs = {whole / added:5.1f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, nargs="+", default=[10, 200])
    parser.add_argument("--profile", type=int, default=None)
    args = parser.parse_args()
    asyncio.run(main(args.turns, args.profile))
