"""A worker that dies (SIGKILL) right after it stores a large payload, before Temporal hears
of it: ``python storage_worker.py ADDRESS TASK_QUEUE STORE_DIR``."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.converter import ExternalStorage, StorageDriverClaim, StorageDriverStoreContext
from temporalio.worker import Worker

from golem.agent import Agent
from golem.messages import Message, ToolCall
from golem.models import FunctionModel
from golem.storage import LocalDirectory
from golem.worker import GolemPlugin

DOCUMENT = "".join(f"{n:07d} " for n in range(250_000))  # 2 MB


def reader() -> Agent[Any, str]:
    """Calls ``fetch_doc`` once, then answers with the length of what it read."""

    def answer(messages: list[Message], tools: Any) -> Message:
        if messages[-1].role == "tool":
            return Message.assistant(f"read {len(messages[-1].content)} characters")
        return Message.assistant("", [ToolCall(id="c1", name="fetch_doc", args="{}")])

    agent: Agent[Any, str] = Agent(FunctionModel(answer), name="reader")

    @agent.tool
    def fetch_doc() -> str:
        """The document."""
        return DOCUMENT

    return agent


class DyingDirectory(LocalDirectory):
    """Stores, then kills its process: the blob exists, no history names it yet."""

    async def store(
        self, context: StorageDriverStoreContext, payloads: Sequence[Payload]
    ) -> list[StorageDriverClaim]:
        claims = await super().store(context, payloads)
        os.kill(os.getpid(), signal.SIGKILL)
        return claims


async def main(address: str, task_queue: str, folder: str) -> None:
    storage = ExternalStorage(drivers=[DyingDirectory(folder)])
    plugin = GolemPlugin(reader(), heartbeat_timeout=timedelta(seconds=2), external_storage=storage)
    client = await Client.connect(address, plugins=[plugin])
    async with Worker(client, task_queue=task_queue):
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
