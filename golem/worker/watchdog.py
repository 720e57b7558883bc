"""A watchdog on a worker's event loop: one warning naming the tool that blocks it.

    async with watching_loop():      # GolemPlugin runs every worker inside it (worker_watchdog)
        await worker.run()

An ``async def`` tool runs on the worker's event loop, so blocking code in it (``time.sleep``,
a synchronous HTTP client) stalls every run on that worker: their model calls, tools and
heartbeats all wait. golem cannot make such a tool safe, but it can say so. A thread asks
the loop to answer every fraction of :data:`BLOCKED_AFTER`; when the loop has not answered
for longer, it logs one warning naming the async user function the loop is running, once
per function. Blocking code belongs in a plain ``def`` tool, which runs in a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator

from golem.user_functions import running_on_loop

#: Seconds the loop may go unanswered before the watchdog warns.
BLOCKED_AFTER = 1.0

logger = logging.getLogger("golem.worker")


class LoopWatchdog:
    """Watches ``loop`` from a daemon thread; ``stop()`` ends the thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop, blocked_after: float = BLOCKED_AFTER):
        self.loop = loop
        self.blocked_after = blocked_after
        self.warned: set[str] = set()
        """The culprits warned about (each once)."""
        self._asked: float | None = None  # when the unanswered ping was sent
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="golem-loop-watchdog", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()

    def _answer(self) -> None:
        self._asked = None

    def _watch(self) -> None:
        while not self._stopped.wait(self.blocked_after / 4):
            asked = self._asked
            if asked is None:
                self._asked = time.monotonic()
                with contextlib.suppress(RuntimeError):  # the loop closed under us
                    self.loop.call_soon_threadsafe(self._answer)
            elif time.monotonic() - asked > self.blocked_after:
                self._blamed(time.monotonic() - asked)

    def _blamed(self, seconds: float) -> None:
        task = asyncio.current_task(self.loop)
        culprit = running_on_loop(task)
        if culprit is None:
            culprit = f"task {task.get_name()!r}" if task is not None else "a callback"
        if culprit in self.warned:
            return
        self.warned.add(culprit)
        logger.warning(
            "%s has held this worker's event loop for %.1f s: every run on this worker waits "
            "meanwhile. Blocking code belongs in a plain `def` tool not marked on_loop, which "
            "runs in a thread "
            "(or await an async client instead)",
            culprit,
            seconds,
        )


@contextlib.asynccontextmanager
async def watching_loop(blocked_after: float | None = None) -> AsyncIterator[LoopWatchdog]:
    """Watch the running loop while the block runs."""
    watchdog = LoopWatchdog(
        asyncio.get_running_loop(), BLOCKED_AFTER if blocked_after is None else blocked_after
    )
    watchdog.start()
    try:
        yield watchdog
    finally:
        watchdog.stop()


@contextlib.asynccontextmanager
async def worker_watchdog() -> AsyncIterator[None]:
    """What ``GolemPlugin`` wraps around a worker's run."""
    async with watching_loop():
        yield
