"""The local Temporal dev server the offline examples run their durable half on.

    async with quiet_dev_server() as env:     # env.client reaches it; stopped on exit
        ...

``golem.testing.dev_server`` with the server's start-up banner and warnings kept off the
reader's terminal: what an example prints is the example's own output.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator, Iterator

from temporalio.testing import WorkflowEnvironment

from golem.testing import dev_server

__all__ = ["quiet_dev_server"]


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
