"""Calling user code from a process forked after sync user code already ran (a worker
forked by a process manager, or mutmut's forked test runs)."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import threading

import pytest

from golem.user_functions import UserCodeError, call_user_function, is_async_callable

GUARD = 20.0  # seconds: a guard against the hang this test pins, never a wait for the outcome


def _in_child() -> int:
    """The child's exit code: 0 when a sync function ran, 3 when it never did."""

    async def call() -> int:
        value: int = await asyncio.wait_for(call_user_function(lambda: 2), GUARD)
        return value

    try:
        return 0 if asyncio.run(call()) == 2 else 1
    except TimeoutError:
        return 3  # queued on the parent's threads, which do not exist in the child


def test_a_forked_child_runs_sync_user_functions_on_threads_of_its_own() -> None:
    assert asyncio.run(call_user_function(lambda: 1)) == 1  # the parent's pool has a thread

    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit code only
        os._exit(_in_child())
    _, status = os.waitpid(pid, 0)

    assert os.waitstatus_to_exitcode(status) == 0


class _Handler:
    async def handle(self) -> int:
        return 1

    def sync(self) -> int:
        return 1


class _AsyncCall:
    async def __call__(self) -> int:
        return 1


class _SyncCall:
    def __call__(self) -> int:
        return 1


async def _async_fn(x: int = 0) -> int:
    return x


def _sync_fn(x: int = 0) -> int:
    return x


@pytest.mark.parametrize(
    ("fn", "is_async"),
    [
        (_async_fn, True),
        (_sync_fn, False),
        (_Handler().handle, True),
        (_Handler().sync, False),
        (_AsyncCall(), True),
        (_SyncCall(), False),
        (functools.partial(functools.partial(_async_fn), x=1), True),
        (functools.partial(_sync_fn, 1), False),
        (len, False),
    ],
    ids=lambda v: type(v).__name__ if not isinstance(v, bool) else str(v),
)
def test_what_runs_on_the_loop_as_a_coroutine(fn: object, is_async: bool) -> None:
    """An async function, method, ``__call__`` or a partial of one is awaited on the loop;
    anything else is sync (a thread, unless marked on_loop)."""
    assert is_async_callable(fn) is is_async


_REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="")


async def test_a_sync_function_in_a_thread_sees_the_callers_context_variables() -> None:
    _REQUEST_ID.set("r-1")

    def read() -> tuple[str, bool]:
        return _REQUEST_ID.get(), threading.current_thread() is threading.main_thread()

    assert await call_user_function(read) == ("r-1", False)


async def test_a_sync_function_cancelled_mid_call_is_abandoned_and_runs_to_its_end() -> None:
    started, release, finished = threading.Event(), threading.Event(), threading.Event()

    def slow() -> str:
        started.set()
        release.wait(GUARD)
        finished.set()
        return "late"

    call = asyncio.ensure_future(call_user_function(slow))
    await asyncio.to_thread(started.wait, GUARD)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call  # at once: the caller does not wait for the thread
    assert not finished.is_set()
    release.set()
    assert await asyncio.to_thread(finished.wait, GUARD)  # it ran on, its answer dropped


async def test_a_sync_functions_base_exception_comes_back_as_user_code_error() -> None:
    def leave() -> None:
        raise SystemExit(3)

    with pytest.raises(UserCodeError, match="leave raised SystemExit: 3"):
        await call_user_function(leave, what="leave")


_ABANDONED_AT_EXIT = """
import asyncio, sys, threading, time
from golem.user_functions import call_user_function

started = threading.Event()

def slow() -> None:
    started.set()
    time.sleep(0.3)  # the process is exiting meanwhile
    print("finished", flush=True)

async def main() -> None:
    call = asyncio.ensure_future(call_user_function(slow))
    await asyncio.to_thread(started.wait, 20)
    call.cancel()  # abandoned: the process exits while it runs

asyncio.run(main())
print("exiting", flush=True)
"""


def test_a_process_exits_only_once_an_abandoned_sync_function_has_finished() -> None:
    """Its threads are joined at exit, as a thread pool's are: a sync call left running is
    never cut off mid-effect."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _ABANDONED_AT_EXIT], capture_output=True, text=True, timeout=60
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["exiting", "finished"]
