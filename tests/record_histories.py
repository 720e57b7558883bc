"""Record the workflow histories replayed by tests/test_replay.py."""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from replay_agents import AGENTS, Deps, stop_agent, tools_agent
from temporalio.client import Client
from temporalio.worker import Worker

from golem.client import DurableAgent
from golem.results import RunError
from golem.testing import dev_server
from golem.worker import GolemPlugin

OUT = Path(__file__).parent / "histories"


async def main() -> None:
    async with dev_server() as env:
        tq = f"replay-{uuid.uuid4().hex[:8]}"
        async with Worker(env.client, task_queue=tq, plugins=[GolemPlugin(*AGENTS)]):
            runs = {}
            first = await DurableAgent(env.client, tools_agent, task_queue=tq).run(
                "weather?", deps=Deps(user="Ada")
            )
            runs["tools_batch_failed_unknown"] = first.run_id
            second = await DurableAgent(env.client, tools_agent, task_queue=tq).run(
                "again", history=first.messages, deps=Deps(user="Ada")
            )
            runs["continued_conversation"] = second.run_id
            try:
                await DurableAgent(env.client, stop_agent, task_queue=tq).run("stop")
            except RunError as exc:
                assert exc.partial is not None
                runs["tool_canceled"] = exc.partial.run_id
            runs["streamed_run"] = await record_streamed(env.client, tq)
        for name, run_id in runs.items():
            history = await env.client.get_workflow_handle(run_id).fetch_history()
            (OUT / f"{name}.json").write_text(history.to_json())
            print("recorded", name)


async def record_streamed(client: Client, tq: str) -> str:
    """A streamed run (deltas as signals) read by a live subscriber (its polls as updates)."""
    stream = DurableAgent(client, tools_agent, task_queue=tq).run_stream(
        "weather?", deps=Deps(user="Ada")
    )
    async for _ in stream:
        pass
    return stream.run.run_id


if __name__ == "__main__":
    asyncio.run(main())
