"""``golem serve`` with memory probes, for ``benchmarks/serve.py``'s memory bursts.

On SIGUSR1 it reads a command from ``$GOLEM_BENCH_TRACE.cmd`` and appends one JSON line
to ``$GOLEM_BENCH_TRACE``:

- ``sample``: after a full garbage collection (what is left is what is held), the
  resident memory (VmRSS, KB), the bytes malloc has handed out and not taken back
  (``mallinfo2``, every arena's in-use chunks and mmapped ones: Temporal's native core,
  C extensions, Python's objects over 512 bytes), the bytes in Python's own allocator's
  allocated blocks (its small objects: ``sys._debugmallocstats``), and, while tracing,
  the Python heap traced (its small and large objects);
- ``trace``: starts tracemalloc (25 frames), so what it traces is what was allocated
  after and is still held;
- ``snapshot``: the traced heap grouped by where it was allocated (the newest frames of
  golem and the libraries it runs on), the largest first, then tracing stops (the
  whole snapshot is left in ``$GOLEM_BENCH_TRACE.snapshot``).

Without a signal it is ``golem serve``, nothing more.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import signal
import sys
import tempfile
import tracemalloc
from pathlib import Path
from types import FrameType

from golem.cli.app import main

OUT = Path(os.environ["GOLEM_BENCH_TRACE"])
COMMAND = Path(f"{OUT}.cmd")
FRAMES = 25
TOP = 30
#: Frames that name a place in the snapshot's groups.
WHERE = 4


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
            "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


def _malloc_in_use() -> int:
    """Bytes malloc has handed out and not been given back, over all arenas (glibc)."""
    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = _Mallinfo2
    info = libc.mallinfo2()
    return int(info.uordblks + info.hblkhd)


def _rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _pymalloc_bytes() -> int:
    """The bytes in pymalloc's allocated blocks (its statistics go to fd 2 only; 0 while
    tracemalloc hooks the allocators: it has none to say then)."""
    if tracemalloc.is_tracing():
        return 0
    saved = os.dup(2)
    with tempfile.TemporaryFile() as stats:
        os.dup2(stats.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        stats.seek(0)
        text = stats.read().decode()
    line = next(line for line in text.splitlines() if "bytes in allocated blocks" in line)
    return int(line.split("=")[1].replace(",", ""))


def _sample() -> dict[str, object]:
    gc.collect()
    traced = tracemalloc.get_traced_memory()[0] if tracemalloc.is_tracing() else 0
    return {
        "rss_kb": _rss_kb(),
        "malloc_in_use": _malloc_in_use(),
        "pymalloc": _pymalloc_bytes(),
        "traced": traced,
    }


def _where(frames: tracemalloc.Traceback) -> str:
    """The newest frames of golem and its libraries, newest first."""
    kept = [
        f"{frame.filename.rsplit('site-packages/', 1)[-1].rsplit('/golem/', 1)[-1]}:{frame.lineno}"
        for frame in frames
        if "golem" in frame.filename or "site-packages" in frame.filename
    ]
    return " < ".join(reversed(kept[-WHERE:]))


def _snapshot() -> dict[str, object]:
    gc.collect()
    snapshot = tracemalloc.take_snapshot()
    tracemalloc.stop()
    snapshot.dump(f"{OUT}.snapshot")  # for a closer look: tracemalloc.Snapshot.load
    grouped: dict[str, list[int]] = {}
    for stat in snapshot.statistics("traceback"):
        sizes = grouped.setdefault(_where(stat.traceback), [0, 0])
        sizes[0] += stat.size
        sizes[1] += stat.count
    top = sorted(grouped.items(), key=lambda item: -item[1][0])[:TOP]
    return {"top": [{"size": size, "count": count, "where": w} for w, (size, count) in top]}


def _command(signum: int, frame: FrameType | None) -> None:
    command = COMMAND.read_text().strip()
    try:
        if command == "trace":
            tracemalloc.start(FRAMES)
            answer: dict[str, object] = {"tracing": True}
        elif command == "snapshot":
            answer = _snapshot()
        else:
            answer = _sample()
    except Exception as exc:  # said to the benchmark: raised here, it would stop the server
        answer = {"error": repr(exc)}
    with OUT.open("a") as out:
        out.write(json.dumps(answer) + "\n")


if __name__ == "__main__":
    signal.signal(signal.SIGUSR1, _command)
    if os.environ.get("GOLEM_BENCH_GC_FREEZE"):  # an experiment: startup's objects never scanned
        import uvicorn  # noqa: F401  (what golem serve imports once it starts, loaded now)

        import benchmarks._serve_agents  # noqa: F401
        import golem.serve  # noqa: F401

        gc.collect()
        gc.freeze()
    main(sys.argv[1:])
