"""A worker process for the MCP crash tests: ``python mcp_worker.py ADDRESS TASK_QUEUE``
(its MCP servers log to ``MCP_TEST_DIR``)."""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from mcp_agents import agents
from temporalio.client import Client
from temporalio.worker import Worker

from golem.wire.converter import golem_data_converter
from golem.worker import GolemPlugin


async def main(address: str, task_queue: str) -> None:
    client = await Client.connect(address, data_converter=golem_data_converter)
    served = agents(os.environ["MCP_TEST_DIR"])
    plugin = GolemPlugin(*served, heartbeat_timeout=timedelta(seconds=2))
    async with Worker(client, task_queue=task_queue, plugins=[plugin]):
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
