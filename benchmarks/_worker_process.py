"""A benchmark's worker in a process of its own, so its CPU is read from the OS for it alone.

The script is started as ``python SCRIPT worker TARGET TASK_QUEUE [EXTRA...]``, prints
``ready`` once it polls, and stops when its stdin closes."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
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
