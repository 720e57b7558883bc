"""A worker process for runs a worker cannot read: ``python unreadable_worker.py ADDRESS
TASK_QUEUE``, its key from ``GOLEM_ENCRYPTION_KEY`` and its store from ``GOLEM_STORAGE_DIR``
(either may be unset), the plugin on the Client as a real deployment has it.

Its agent ``fetcher`` calls ``fetch`` once, then answers with what it read. With
``GOLEM_CRASH_HANG=1`` the model call after the tool announces itself (``answering`` in
``GOLEM_CRASH_DIR``) and hangs, so the test kills the worker once the tool's result is
recorded."""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from golem.agent import Agent
from golem.messages import Message, ToolCall
from golem.models import FunctionModel
from golem.worker import GolemPlugin

#: What ``fetch`` returns: over the store's threshold, so with storage on it is a blob.
DOCUMENT = "".join(f"{n:07d} " for n in range(100_000))  # 800 kB


def _log(what: str) -> None:
    with (Path(os.environ["GOLEM_CRASH_DIR"]) / "executions").open("a") as log:
        log.write(f"{what}\n")


async def _answer(messages: list[Message], tools: Any) -> Message:
    results = [m for m in messages if m.role == "tool"]
    if not results:
        return Message.assistant("", [ToolCall(id="call-1", name="fetch", args="{}")])
    if os.environ.get("GOLEM_CRASH_HANG") == "1":
        (Path(os.environ["GOLEM_CRASH_DIR"]) / "answering").write_text("model")
        await asyncio.Event().wait()
    _log("answer")
    return Message.assistant(f"read {len(results[-1].content)} characters")


fetcher: Agent[Any, str] = Agent(FunctionModel(_answer, model_name="fetch-model"), name="fetcher")


@fetcher.tool
def fetch() -> str:
    """The document."""
    _log("fetch")
    return DOCUMENT


def plugin() -> GolemPlugin:
    return GolemPlugin(fetcher, heartbeat_timeout=timedelta(seconds=2))


async def main(address: str, task_queue: str) -> None:
    client = await Client.connect(address, plugins=[plugin()])
    async with Worker(client, task_queue=task_queue):
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
