"""``golem serve`` under tracemalloc, for ``benchmarks/serve.py --tracemalloc``.

On SIGUSR1 it notes the Python heap (its baseline); on SIGUSR2 it writes to
``$GOLEM_BENCH_TRACE`` the heap's growth since then (bytes, first line) and where it grew.
"""

from __future__ import annotations

import os
import signal
import sys
import tracemalloc
from types import FrameType

from golem.cli.app import main

OUT = os.environ["GOLEM_BENCH_TRACE"]
base: list[tracemalloc.Snapshot] = []


def baseline(signum: int, frame: FrameType | None) -> None:
    base[:] = [tracemalloc.take_snapshot()]


def growth(signum: int, frame: FrameType | None) -> None:
    snapshot = tracemalloc.take_snapshot()
    stats = snapshot.compare_to(base[0], "lineno")
    grown = sum(stat.size_diff for stat in stats)
    with open(OUT, "w") as out:
        out.write(f"{grown}\n")
        out.writelines(f"{stat}\n" for stat in stats[:25])


if __name__ == "__main__":
    tracemalloc.start(1)
    signal.signal(signal.SIGUSR1, baseline)
    signal.signal(signal.SIGUSR2, growth)
    main(sys.argv[1:])
