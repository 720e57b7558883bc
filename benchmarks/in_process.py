"""golem's in-process overhead per model request over a no-framework loop, at two run lengths.

    .venv/bin/python benchmarks/in_process.py [--turns 10 200] [--profile TURNS [--on-loop]]
    .venv/bin/python benchmarks/in_process.py --against 42ee785 [--rounds 3]

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

``--against REV`` measures side by side with the golem of a commit (42ee785 is 0.2.0): its
``golem/`` package is taken from git into a temporary directory, and each round runs that
golem and then this one, each in a fresh process with its own bare loop. Printed per round
and run length: each side's overhead and each path of this golem over the same path of the
other's (over its threads where it has no ``on_loop``, as 0.2.0 has not; issue 34's target:
at most a third of 0.2.0's).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import inspect
import io
import json
import os
import pstats
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
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

    marked: dict[str, Any] = {"on_loop": True} if on_loop else {}  # 0.2.0 has no on_loop
    model = FunctionModel(answer, **marked)
    agent: Agent[None, str] = Agent(
        model,
        instructions="Look things up.",
        max_iterations=turns + 5,
        usage_limits=UsageLimits(request_limit=None),
    )
    agent.tool(**marked)(lookup)
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


async def overheads(lengths: list[int]) -> dict[str, float]:
    """golem's overhead over the bare loop per request, µs, by run length: sync functions in
    threads, and on the loop where this golem has ``on_loop`` (0.2.0 has not)."""
    from golem.models.function import FunctionModel

    has_on_loop = "on_loop" in inspect.signature(FunctionModel).parameters
    measured: dict[str, float] = {}
    for turns in lengths:
        requests = turns + 1
        bare_us = await per_request_us(bare_run(turns), requests)
        measured[f"threads {turns}"] = await per_request_us(golem_run(turns), requests) - bare_us
        if has_on_loop:
            loop_us = await per_request_us(golem_run(turns, on_loop=True), requests)
            measured[f"on loop {turns}"] = loop_us - bare_us
    return measured


def measured_in_process(lengths: list[int], golem_dir: Path | None) -> dict[str, float]:
    """``overheads`` in a fresh process: this golem's, or (``golem_dir``) that one's."""
    env = dict(os.environ)
    if golem_dir is not None:
        env["PYTHONPATH"] = str(golem_dir)  # ahead of this checkout's editable install
    command = [sys.executable, __file__, "--overheads", *map(str, lengths)]
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    measured: dict[str, float] = json.loads(out.splitlines()[-1])
    return measured


def golem_at(rev: str, into: Path) -> Path:
    """The ``golem/`` package of commit ``rev``, written under ``into``."""
    repo = Path(__file__).resolve().parent.parent
    tar = subprocess.run(
        ["git", "-C", str(repo), "archive", "--format=tar", rev, "golem"],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        archive.extractall(into, filter="data")
    return into


def against(rev: str, lengths: list[int], rounds: int) -> None:
    """``rounds`` rounds of ``rev``'s golem, then this one; each path of this golem over the
    same path of ``rev``'s (over its threads where it has no ``on_loop``)."""
    print(
        f"in-process overhead per model request (golem - bare loop, µs, best of {REPEATS}), "
        f"{rounds} rounds in turn with {rev}'s golem; each path over the same path of {rev}'s"
        " (its threads if it has no on_loop)"
    )
    print(
        f"   {'round':>5s} {'turns':>6s} {rev + ' threads':>17s} {'on loop':>8s}"
        f" {'threads':>8s} {'on loop':>8s} {'threads/' + rev:>17s} {'on loop/' + rev:>17s}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        other = golem_at(rev, Path(tmp))
        for number in range(1, rounds + 1):
            theirs = measured_in_process(lengths, other)
            ours = measured_in_process(lengths, None)
            for turns in lengths:
                base = theirs[f"threads {turns}"]
                base_loop = theirs.get(f"on loop {turns}")
                threads, on_loop = ours[f"threads {turns}"], ours[f"on loop {turns}"]
                shown = "-" if base_loop is None else f"{base_loop:.1f}"
                print(
                    f"   {number:5d} {turns:6d} {base:17.1f} {shown:>8s} {threads:8.1f}"
                    f" {on_loop:8.1f} {threads / base:16.2f}x"
                    f" {on_loop / (base_loop or base):16.2f}x"
                )
            first, last = lengths[0], lengths[-1]
            grown = [
                f"{name} {side[f'{key} {last}'] / side[f'{key} {first}']:.2f}x"
                for name, side, key in (
                    (f"{rev} threads", theirs, "threads"),
                    ("threads", ours, "threads"),
                    ("on loop", ours, "on loop"),
                )
            ]
            print(f"   {number:5d} overhead at {last} turns / at {first}: " + ", ".join(grown))


async def main(lengths: list[int], profile: int | None, on_loop: bool) -> None:
    if profile:
        run = golem_run(profile, on_loop)
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
    parser.add_argument("--on-loop", action="store_true", help="with --profile: on the loop")
    parser.add_argument("--against", metavar="REV", help="side by side with REV's golem")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--overheads", type=int, nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.overheads:  # one side of --against, in its own process: JSON on the last line
        print(json.dumps(asyncio.run(overheads(args.overheads))))
    elif args.against:
        against(args.against, args.turns, args.rounds)
    else:
        asyncio.run(main(args.turns, args.profile, args.on_loop))
