"""A benchmark's worker in a process of its own, so its CPU is read from the OS for it alone.

The script is started as ``python SCRIPT worker TARGET TASK_QUEUE [EXTRA...]``, prints
``ready`` once it polls, and stops when its stdin closes."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

TICK = os.sysconf("SC_CLK_TCK")


class WorkerProcess:
    def __init__(self, target: str, script: str, *extra: str, prefix: str = "bench") -> None:
        self.target, self.script, self.extra = target, script, extra
        self.task_queue = f"{prefix}-{uuid.uuid4().hex[:6]}"
        self.proc: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> WorkerProcess:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            self.script,
            "worker",
            self.target,
            self.task_queue,
            *self.extra,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert self.proc.stdout is not None
        if (await asyncio.wait_for(self.proc.stdout.readline(), 120)).strip() != b"ready":
            raise RuntimeError(f"the worker of {self.script} {' '.join(self.extra)} did not start")
        return self

    def cpu(self) -> float:
        """User + system CPU seconds the worker process has used so far."""
        assert self.proc is not None
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK

    async def __aexit__(self, *exc: Any) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.close()
        await asyncio.wait_for(self.proc.wait(), 60)


def side_by_side(
    serve: Callable[..., Awaitable[None]],
    main: Callable[[int, int, int], Awaitable[None]],
    conversations: int = 20,
    turns: int = 10,
) -> None:
    """A side-by-side benchmark's entry point: started as ``SCRIPT worker ARGS...`` (by a
    ``WorkerProcess``), ``serve(*ARGS)``; else ``main(repeats, conversations, turns)`` from
    the command line (``--repeats 3 --conversations N --turns N``)."""
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        asyncio.run(serve(*sys.argv[2:]))
        sys.exit(0)
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--conversations", type=int, default=conversations)
    parser.add_argument("--turns", type=int, default=turns)
    args = parser.parse_args()
    asyncio.run(main(args.repeats, args.conversations, args.turns))
    sys.stdout.flush()
    os._exit(0)  # the Temporal core runtime can abort at interpreter teardown
