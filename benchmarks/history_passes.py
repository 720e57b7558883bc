"""Cost of the history passes per message, against a bare loop over the same history.

    .venv/bin/python benchmarks/history_passes.py

Targets: normalize on a clean history within 5x the bare loop; every pass linear
(per-message cost at 100k within 1.5x of the one at 1k).
"""

from __future__ import annotations

import gc
import json
import random
import time
from collections.abc import Callable
from functools import partial

from golem import (
    Message,
    Part,
    ToolCall,
    dump_messages,
    load_messages,
    normalize_history,
    sanitize_history,
    trim_history,
)

SIZES = (1_000, 10_000, 100_000)
CITIES = ("Paris", "Berlin", "Lisbon", "Osaka", "Quito", "Nairobi")


def build_history(size: int, *, broken: bool = False, seed: int = 7) -> list[Message]:
    """A realistic conversation of about ``size`` messages: prompts, tool turns, results, answers.

    It ends on a whole exchange (a plain assistant answer), so a clean history needs no repair.
    ``broken`` leaves every 50th call unanswered and adds an orphan result every 97 messages.
    """
    rng = random.Random(seed)
    history: list[Message] = []
    call_number = 0
    while len(history) < size:
        city = rng.choice(CITIES)
        parts = (
            [Part(kind="image", url=f"https://maps.example/{city}.png")]
            if rng.random() < 0.1
            else []
        )
        history.append(Message.user(f"What should I pack for {city} this week?", parts=parts))
        for _ in range(rng.randint(0, 3)):
            calls = []
            for _ in range(rng.randint(1, 3)):
                call_number += 1
                args = json.dumps({"city": rng.choice(CITIES), "days": rng.randint(1, 7)})
                calls.append(ToolCall(id=f"call_{call_number:07d}", name="forecast", args=args))
            history.append(Message.assistant("", calls))
            for call in calls:
                if broken and int(call.id[5:]) % 50 == 0:
                    continue
                result = json.dumps({"high": rng.randint(5, 35), "rain": rng.random() < 0.3})
                history.append(Message.tool(call.id, call.name, result))
            if broken and len(history) % 97 == 0:
                history.append(Message.tool("call_unknown", "forecast", "{}"))
        history.append(Message.assistant(f"Pack light layers for {city}; rain is possible."))
    return history


def bare_loop(history: list[Message]) -> None:
    """The floor: read each message's role and ids, nothing else."""
    for message in history:
        message.role  # noqa: B018
        message.tool_call_id  # noqa: B018
        [call.id for call in message.tool_calls]


def best_us_per_message(
    passes: dict[str, tuple[Callable[[], object], int]], repeats: int
) -> dict[str, float]:
    """Best of ``repeats`` rounds per pass, in µs per message.

    Rounds interleave the passes so machine noise hits them alike; the collector is off,
    as ``timeit`` does.
    """
    best = dict.fromkeys(passes, float("inf"))
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeats):
            for name, (run, _count) in passes.items():
                started = time.perf_counter()
                run()
                best[name] = min(best[name], time.perf_counter() - started)
    finally:
        gc.enable()
    return {name: best[name] / count * 1e6 for name, (_run, count) in passes.items()}


def main() -> None:
    trim = trim_history(500)
    table: dict[str, list[float]] = {}
    for size in SIZES:
        clean = build_history(size)
        broken = build_history(size, broken=True)
        data = dump_messages(clean)
        passes: dict[str, tuple[Callable[[], object], int]] = {
            "bare loop": (partial(bare_loop, clean), len(clean)),
            "normalize (clean)": (partial(normalize_history, clean), len(clean)),
            "normalize (broken)": (partial(normalize_history, broken), len(broken)),
            "sanitize": (partial(sanitize_history, clean), len(clean)),
            "trim": (partial(trim, clean), len(clean)),
            "dump": (partial(dump_messages, clean), len(clean)),
            "load": (partial(load_messages, data), len(clean)),
        }
        costs = best_us_per_message(passes, repeats=max(7, 300_000 // size))
        for name, per_message in costs.items():
            table.setdefault(name, []).append(per_message)

    bare = table["bare loop"]
    sizes = "".join(f"{f'{size // 1000}k µs/msg':>13}" for size in SIZES)
    ratios = "".join(f"{f'x bare {size // 1000}k':>12}" for size in SIZES)
    print(f"{'pass':<20}{sizes}{ratios}{'100k/1k':>9}{'vs bare':>9}")
    for name, cost in table.items():
        print(
            f"{name:<20}"
            + "".join(f"{value:13.3f}" for value in cost)
            + "".join(f"{value / floor:12.2f}" for value, floor in zip(cost, bare, strict=True))
            + f"{cost[-1] / cost[0]:9.2f}"
            + f"{(cost[-1] / cost[0]) / (bare[-1] / bare[0]):9.2f}"
        )
    print(
        "x bare: cost over the bare loop at the same size (target for normalize (clean): <= 5).\n"
        "100k/1k: per-message cost at 100k over 1k (target <= 1.5); vs bare: the same ratio\n"
        "divided by the bare loop's own, which grows once the history outgrows the CPU caches."
    )


if __name__ == "__main__":
    main()
