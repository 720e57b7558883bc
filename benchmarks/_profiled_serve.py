"""``golem serve`` under cProfile, for ``benchmarks/serve.py --profile``.

On SIGUSR1 it starts profiling; on SIGUSR2 it stops and writes to ``$GOLEM_BENCH_TRACE``
the functions that took the most CPU of their own (tottime) and cumulatively.
"""

from __future__ import annotations

import cProfile
import gc
import io
import os
import pstats
import signal
import sys
import time
import traceback
from collections import Counter
from types import FrameType

import temporalio.service

from golem.cli.app import main

OUT = os.environ["GOLEM_BENCH_TRACE"]
#: CPU of the event loop's thread only (Temporal's core runs its RPCs on threads of its own).
profile = cProfile.Profile(time.thread_time)
#: Temporal RPCs by name while profiling.
rpcs: Counter[str] = Counter()
callers: Counter[str] = Counter()
_rpc_call = temporalio.service._BridgeServiceClient._rpc_call


async def _counted(self: object, rpc: str, *args: object, **kwargs: object) -> object:
    if profile_on[0]:
        rpcs[rpc] += 1
        if os.environ.get("GOLEM_BENCH_WHO") == rpc:  # who asks: the golem frames of the task
            frames = traceback.extract_stack(limit=40)
            where = [
                f"{f.filename.rsplit('/', 1)[-1]}:{f.name}"
                for f in frames
                if "/golem/" in f.filename
            ]
            callers[" > ".join(where) or "?"] += 1
    return await _rpc_call(self, rpc, *args, **kwargs)  # type: ignore[arg-type]


profile_on = [False]
#: The garbage collector's passes while profiling, by generation: count, thread CPU seconds.
collections: dict[int, list[float]] = {0: [0, 0.0], 1: [0, 0.0], 2: [0, 0.0]}
_collecting = [0.0]


def _collected(phase: str, info: dict[str, int]) -> None:
    if not profile_on[0]:
        return
    if phase == "start":
        _collecting[0] = time.thread_time()
        return
    spent = collections[info["generation"]]
    spent[0] += 1
    spent[1] += time.thread_time() - _collecting[0]


gc.callbacks.append(_collected)
temporalio.service._BridgeServiceClient._rpc_call = _counted  # type: ignore[method-assign,assignment]


def start(signum: int, frame: FrameType | None) -> None:
    profile_on[0] = True
    profile.enable()


def stop(signum: int, frame: FrameType | None) -> None:
    profile.disable()
    profile_on[0] = False
    profile.dump_stats(OUT + ".pstats")
    text = io.StringIO()
    text.writelines(f"  {n} {who}\n" for who, n in callers.most_common(8))
    text.write(
        "garbage collections: "
        + ", ".join(
            f"gen{g} {int(n)} in {cpu * 1000:.1f} ms" for g, (n, cpu) in collections.items()
        )
        + "\n"
    )
    text.write("Temporal RPCs: " + ", ".join(f"{n} {rpc}" for rpc, n in rpcs.most_common()) + "\n")
    stats = pstats.Stats(profile, stream=text)
    stats.sort_stats("tottime").print_stats(30)
    stats.sort_stats("cumulative").print_stats(45)
    stats.print_callers(r"\(describe\)|\(start_update\)|\(query\)|\(signal\)")
    with open(OUT, "w") as out:
        out.write(text.getvalue())


if __name__ == "__main__":
    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    main(sys.argv[1:])
