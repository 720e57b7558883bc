"""Per-turn overhead of golem's in-process loop, beside pydantic-ai's, in one process.

    .venv/bin/pip install -e '.[bench]'
    .venv/bin/python benchmarks/loop_overhead.py [--profile]

A run is 20 turns: each turn the model (an instant function) asks for one tool call,
the tool answers at once, and after the 20th result the model gives its final text.
Both libraries get the same turns through their own ``FunctionModel``; what is
measured is everything else — request building, validation, tool dispatch, bookkeeping.

Target: golem's per-turn overhead at most half of pydantic-ai's.

Second figure: sync tools run in a thread, so 10 concurrent in-process runs, each with one
0.2 s sync tool (``time.sleep``, standing in for a blocking HTTP call), take about as long
as one such run (goal <= 1.5x; a sync tool called on the event loop would make it ~10x).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import time
from collections.abc import Awaitable, Callable

TURNS = 20
REPEAT_SECONDS = 0.5  # each timed repeat runs as many whole runs as fit in about this
REPEATS = 7  # best of


# -- golem ------------------------------------------------------------------------------


def golem_agent() -> Callable[[], Awaitable[object]]:
    from golem.agent import Agent
    from golem.messages import Message, ToolCall
    from golem.models.base import ToolDefinition
    from golem.models.function import FunctionModel

    def answer(messages: list[Message], tools: list[ToolDefinition]) -> Message:
        done = sum(1 for m in messages if m.role == "tool")
        if done >= TURNS:
            return Message.assistant(f"done after {done} lookups")
        call = ToolCall(id=f"call_{done}", name="lookup", args=f'{{"key": "k{done}"}}')
        return Message.assistant(tool_calls=[call])

    model = FunctionModel(answer)
    agent: Agent[None, str] = Agent(model, instructions="Look things up.", max_iterations=TURNS + 5)

    @agent.tool
    def lookup(key: str) -> str:
        """Look a key up.

        Args:
            key: The key.
        """
        return f"value of {key}"

    async def run() -> object:
        result = await agent.run("go")
        assert result.output == f"done after {TURNS} lookups", result.output
        model.requests.clear()  # the recording would otherwise grow across runs
        return result

    return run


# -- pydantic-ai --------------------------------------------------------------------------


def pydantic_ai_agent() -> Callable[[], Awaitable[object]]:
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import UsageLimits

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = sum(
            1
            for m in messages
            if isinstance(m, ModelRequest)
            for p in m.parts
            if isinstance(p, ToolReturnPart)
        )
        if done >= TURNS:
            return ModelResponse(parts=[TextPart(f"done after {done} lookups")])
        call = ToolCallPart("lookup", f'{{"key": "k{done}"}}', tool_call_id=f"call_{done}")
        return ModelResponse(parts=[call])

    agent = Agent(FunctionModel(answer), instructions="Look things up.")

    @agent.tool_plain
    def lookup(key: str) -> str:
        """Look a key up.

        Args:
            key: The key.
        """
        return f"value of {key}"

    limits = UsageLimits(request_limit=TURNS + 5)

    async def run() -> object:
        result = await agent.run("go", usage_limits=limits)
        assert result.output == f"done after {TURNS} lookups", result.output
        return result

    return run


# -- concurrent runs with a blocking sync tool ----------------------------------------------

SLOW_TOOL_SECONDS = 0.2
CONCURRENT_RUNS = 10


def blocking_tool_agent() -> Callable[[], Awaitable[object]]:
    from golem.agent import Agent
    from golem.messages import Message, ToolCall
    from golem.models.base import ToolDefinition
    from golem.models.function import FunctionModel

    async def answer(messages: list[Message], tools: list[ToolDefinition]) -> Message:
        if messages[-1].role == "tool":
            return Message.assistant(messages[-1].content)
        return Message.assistant(tool_calls=[ToolCall(id="c1", name="fetch", args="{}")])

    agent: Agent[None, str] = Agent(FunctionModel(answer))

    @agent.tool
    def fetch() -> str:
        """A blocking call, like requests.get."""
        time.sleep(SLOW_TOOL_SECONDS)
        return "fetched"

    async def run() -> object:
        result = await agent.run("go")
        assert result.output == "fetched", result.output
        return result

    return run


async def concurrent_ratio(run: Callable[[], Awaitable[object]]) -> tuple[float, float]:
    """Wall seconds of one run, and of CONCURRENT_RUNS runs started together."""
    await run()  # warm up
    start = time.perf_counter()
    await run()
    one = time.perf_counter() - start
    start = time.perf_counter()
    await asyncio.gather(*(run() for _ in range(CONCURRENT_RUNS)))
    return one, time.perf_counter() - start


# -- measuring ------------------------------------------------------------------------------


async def per_turn_us(run: Callable[[], Awaitable[object]]) -> tuple[float, int]:
    """Best-of-REPEATS microseconds per turn, and the runs each repeat made."""
    start = time.perf_counter()
    for _ in range(5):  # warm caches (schemas, validators, imports) and calibrate
        await run()
    runs = max(10, int(REPEAT_SECONDS / ((time.perf_counter() - start) / 5)))
    best = float("inf")
    for _ in range(REPEATS):
        start = time.perf_counter()
        for _ in range(runs):
            await run()
        best = min(best, time.perf_counter() - start)
    return best / (runs * TURNS) * 1e6, runs


async def profile(run: Callable[[], Awaitable[object]], top: int) -> None:
    await run()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(50):
        await run()
    profiler.disable()
    stats = pstats.Stats(profiler)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", action="store_true", help="cProfile golem's loop")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    golem_run = golem_agent()
    if args.profile:
        await profile(golem_run, args.top)
        return
    from importlib.metadata import version

    golem_us, golem_runs = await per_turn_us(golem_run)
    pydantic_ai_us, pydantic_ai_runs = await per_turn_us(pydantic_ai_agent())
    ratio = golem_us / pydantic_ai_us
    print(f"{TURNS} turns/run (1 tool call each), best of {REPEATS} repeats")
    for label, us, runs in (
        (f"golem {version('golem-temporal')}", golem_us, golem_runs),
        (f"pydantic-ai {version('pydantic-ai-slim')}", pydantic_ai_us, pydantic_ai_runs),
    ):
        print(f"{label:<20} {us:8.1f} µs/turn  ({runs} runs/repeat)")
    verdict = "meets" if ratio <= 0.5 else "misses"
    print(f"{'ratio':<20} {ratio:8.2f}  (golem / pydantic-ai; target <= 0.50: {verdict})")
    print()
    one, many = await concurrent_ratio(blocking_tool_agent())
    print(f"in process, one {SLOW_TOOL_SECONDS} s sync tool per run")
    print(f"{'1 run':<20} {one:8.3f} s")
    print(f"{f'{CONCURRENT_RUNS} concurrent runs':<20} {many:8.3f} s")
    verdict = "meets" if many / one <= 1.5 else "misses"
    print(f"{'ratio':<20} {many / one:8.2f}  (goal <= 1.50: {verdict})")


if __name__ == "__main__":
    asyncio.run(main())
