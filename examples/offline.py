"""The local Temporal dev server the offline examples run their durable half on.

    async with quiet_dev_server() as env:     # env.client reaches it; stopped on exit
        ...

``golem.testing.dev_server`` with the server's start-up banner and warnings kept off the
reader's terminal: what an example prints is the example's own output.

    run_then_exit(in_process, durably)         # each in its own event loop, then os._exit
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import traceback
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, NoReturn

from temporalio.testing import WorkflowEnvironment

from golem.testing import dev_server

__all__ = ["quiet_dev_server", "run_then_exit"]


@contextlib.contextmanager
def _silenced() -> Iterator[None]:
    """This process's stdout and stderr go to /dev/null meanwhile, so a server started now
    inherits /dev/null for both (it writes its banner to the file descriptors directly)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (null, *saved):
            os.close(fd)


@contextlib.asynccontextmanager
async def quiet_dev_server() -> AsyncIterator[WorkflowEnvironment]:
    """A dev server (in memory, free ports) that prints nothing; stopped on exit."""
    server = dev_server(extra_args=("--log-level", "error"))
    with _silenced():
        env = await server.__aenter__()
    try:
        yield env
    finally:
        await server.__aexit__(None, None, None)


def run_then_exit(*mains: Callable[[], Coroutine[Any, Any, None]]) -> NoReturn:
    """Run each of ``mains`` in its own event loop, then leave by ``os._exit`` (1 after an
    error, printed): the Temporal core runtime's threads can abort the interpreter's teardown
    (``PyGILState_Release``, exit -6) after all the example's work is done."""
    code = 0
    try:
        for main in mains:
            asyncio.run(main())
    except KeyboardInterrupt:
        code = 130
    except BaseException:
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
