"""Waiting in tests, bounded, with a failure that says what never happened.

    await eventually(lambda: seen == ["first"], what="the first turn reached the model")
    events = await eventually(fetch_events, what="the run recorded its history")
    result = await within(run.result(), what="the run to end on the second worker")

``eventually`` checks a plain or async callable until it gives a truthy value (returned).
Each check is followed by a pause of ``interval`` seconds (0: just yield to the event loop,
for a condition the same process changes). ``within`` awaits one awaitable. Past
``timeout`` seconds either fails the test with an ``AssertionError`` naming ``what``,
instead of hanging until pytest's own timeout.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

__all__ = ["eventually", "within"]

T = TypeVar("T")


async def eventually(
    condition: Callable[[], object],
    *,
    what: str,
    timeout: float = 10.0,
    interval: float = 0.05,
) -> Any:
    """The first truthy value of ``condition()``, checked until ``timeout`` seconds pass."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    checks = 0
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        checks += 1
        if value:
            return value
        if loop.time() >= deadline:
            raise AssertionError(
                f"never happened within {timeout:g} s ({checks} checks): {what}; "
                f"last seen: {value!r}"
            )
        await asyncio.sleep(interval)


async def within(work: Awaitable[T], *, what: str, timeout: float = 45.0) -> T:
    """What ``work`` returns (or raises), if it finishes within ``timeout`` seconds."""
    task = asyncio.ensure_future(work)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    finally:
        if not task.done():
            task.cancel()
    if not done:
        raise AssertionError(f"did not finish within {timeout:g} s: {what}")
    return task.result()
