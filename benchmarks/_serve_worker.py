"""The worker ``benchmarks/serve.py`` runs in a process of its own (its CPU measured apart).

Run: python -m benchmarks._serve_worker ADDRESS TASK_QUEUE
"""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta

from temporalio.client import Client
from temporalio.worker import Worker

from benchmarks._serve_agents import agent
from golem.wire.converter import golem_data_converter
from golem.worker import GolemPlugin


async def main(address: str, queue: str) -> None:
    client = await Client.connect(address, data_converter=golem_data_converter)
    plugin = GolemPlugin(agent, heartbeat_timeout=timedelta(seconds=10))
    worker = Worker(client, task_queue=queue, plugins=[plugin], max_concurrent_activities=200)
    await worker.run()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
