"""Calling user code (tools, history processors, instructions functions, model functions).

A sync function runs in a worker thread, so it never blocks the event loop: other runs on
the same worker keep going and an activity awaiting it keeps heartbeating. An async
function runs on the loop, and so does a sync one its application marks ``on_loop`` (it
never blocks, and the thread's round trip is most of what a quick call costs). Whatever
the function raises that would escape into the event loop (``SystemExit``,
``KeyboardInterrupt``, any other ``BaseException``, and a ``CancelledError`` the function
raised on its own) comes back as :class:`UserCodeError`, which fails only that call.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import contextvars
import functools
import inspect
import os
import queue
import threading
import types
from collections.abc import Callable
from typing import Any


class UserCodeError(Exception):
    """User code raised something that is not an ``Exception`` (e.g. ``SystemExit``)."""


def describe(fn: Any) -> str:
    """A short name for a user function, for error messages."""
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn))


def is_async_callable(fn: Any) -> bool:
    """Whether calling ``fn`` returns a coroutine (async functions and async ``__call__``)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.iscoroutinefunction(fn):
        return True
    if isinstance(fn, types.FunctionType | types.MethodType):
        return False  # its __call__ is the interpreter's own, never async
    return inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - an object with an async __call__
    )


#: Threads for sync user functions; started on demand, so an idle worker holds none.
_MAX_THREADS = 64

_Job = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[[], Any]]


class _Threads:
    """golem's threads for sync user functions: calls wait in one queue for the first free
    thread, a new one started only when none is free (at most ``_MAX_THREADS``), and they
    are joined at exit, as a thread pool's are. A thread hands its outcome straight to the
    loop's future: no ``concurrent.futures`` future chained to an asyncio one, no locks of a
    pool's bookkeeping (most of what a quick call's round trip cost, ADR 0037)."""

    def __init__(self) -> None:
        self.calls: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self.free: list[None] = []  # a token per thread back at the queue (atomic list ops)
        self.threads: list[threading.Thread] = []
        self.starting = threading.Lock()
        self.closed = False

    def submit(self, job: _Job) -> None:
        if self.closed:
            raise RuntimeError("cannot call a sync user function after interpreter shutdown")
        self.calls.put(job)
        try:
            self.free.pop()  # a free thread takes it
        except IndexError:
            with self.starting:
                if len(self.threads) < _MAX_THREADS:
                    name = f"golem-user-fn_{len(self.threads)}"
                    # A daemon joined by close at exit: threading's own join would wait for
                    # it before atexit could tell it to stop.
                    thread = threading.Thread(target=self._work, name=name, daemon=True)
                    thread.start()
                    self.threads.append(thread)

    def _work(self) -> None:
        while (job := self.calls.get()) is not None:
            self._run(*job)
            del job  # nothing of a finished call is kept while the thread waits

    def _run(self, loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], call: Any) -> None:
        value: Any = None
        error: BaseException | None = None
        if not future.cancelled():  # cancelled while it queued: never started
            try:
                value = call()
            except BaseException as exc:  # handed over whole: the caller converts what must be
                error = exc
        # Free before the caller learns the outcome: its next call finds this thread.
        self.free.append(None)
        if not future.cancelled():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
                loop.call_soon_threadsafe(_settle, future, value, error)

    def close(self) -> None:
        """At exit: queued and running calls finish, then the threads end."""
        self.closed = True
        for _ in self.threads:
            self.calls.put(None)
        for thread in self.threads:
            thread.join()


_threads: _Threads | None = None


def _pool() -> _Threads:
    global _threads
    if _threads is None:
        _threads = _Threads()
    return _threads


@atexit.register
def _join_threads() -> None:
    if _threads is not None:
        _threads.close()


def _forget_threads() -> None:
    global _threads
    _threads = None  # a forked child has none of its parent's threads: it would queue forever


if hasattr(os, "register_at_fork"):  # not on Windows, which cannot fork
    os.register_at_fork(after_in_child=_forget_threads)


_on_loop: dict[asyncio.Task[Any], str] = {}  # task -> the async user function it runs


class _OnTheLoop:
    """Names the user function the current task runs, while it runs (a loop watchdog reads
    it); a class, not a generator: it wraps every call on the loop."""

    __slots__ = ("outer", "task", "what")

    def __init__(self, what: str) -> None:
        self.what = what

    def __enter__(self) -> None:
        self.task = task = asyncio.current_task()
        if task is not None:
            self.outer = _on_loop.get(task)
            _on_loop[task] = self.what

    def __exit__(self, *exc: object) -> None:
        task = self.task
        if task is None:
            return
        if self.outer is None:
            _on_loop.pop(task, None)
        else:
            _on_loop[task] = self.outer


def running_on_loop(task: asyncio.Task[Any] | None) -> str | None:
    """The async user function ``task`` is running (``tool 'name'``), if any."""
    return None if task is None else _on_loop.get(task)


def _settle(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.done():
        return  # the caller was cancelled: the call was abandoned
    if error is None:
        future.set_result(value)
    else:
        future.set_exception(error)


async def call_user_function(fn: Any, *args: Any, what: str = "", on_loop: bool = False) -> Any:
    """Call a sync (in a thread) or async (on the loop) user function and return its value.

    ``what`` names the culprit in a :class:`UserCodeError` (default: the function's name).
    A thread cannot be interrupted: a cancelled call of a sync function is abandoned and
    runs to its end in the background. ``on_loop`` calls a sync function on the loop, with
    no thread: the application's word that it never blocks (docs/adr/0037-sync-on-the-loop.md).
    """
    try:
        if is_async_callable(fn):
            with _OnTheLoop(what or describe(fn)):
                value = await fn(*args)
        elif on_loop:
            with _OnTheLoop(f"{what or describe(fn)} (marked on_loop)"):  # for the watchdog
                value = fn(*args)
            if inspect.isawaitable(value):
                value = await value
        else:
            loop = asyncio.get_running_loop()
            future = loop.create_future()
            call = functools.partial(contextvars.copy_context().run, fn, *args)
            _pool().submit((loop, future, call))
            value = await future
            if inspect.isawaitable(value):  # a sync wrapper that returns a coroutine
                value = await value
        return value
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise  # a real cancellation of this call
        raise UserCodeError(f"{what or describe(fn)} raised asyncio.CancelledError") from None
    except Exception:
        raise
    except BaseException as exc:
        # Converted here, in the caller's coroutine: a task would re-raise it into the loop.
        raise UserCodeError(f"{what or describe(fn)} raised {type(exc).__name__}: {exc}") from exc


async def call_instructions_function(fn: Any, ctx: Any, what: str = "") -> str:
    """Call an instructions function: its text, ``""`` for ``None``; anything else is a
    :class:`UserCodeError` naming the function (``42`` is no system prompt)."""
    value = await call_user_function(fn, ctx, what=what)
    if value is None or isinstance(value, str):
        return value or ""
    raise UserCodeError(
        f"{what or describe(fn)} returned {type(value).__name__}, not a string: {value!r:.60}"
    )
