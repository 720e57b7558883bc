"""Record the MCP workflow histories replayed by tests/test_mcp_durable.py.

Run: .venv/bin/python tests/record_mcp_histories.py (it starts its own dev server and the
stdio test server). Histories go to tests/histories/mcp/ (apart from tests/histories/,
whose replay test serves other agents).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from mcp_agents import replayed
from temporalio.worker import Worker

from golem.client import DurableAgent
from golem.testing import dev_server
from golem.worker import GolemPlugin

OUT = Path(__file__).parent / "histories" / "mcp"


async def main() -> None:
    tools, approval = replayed(tempfile.mkdtemp())
    async with dev_server() as env:
        tq = f"replay-mcp-{uuid.uuid4().hex[:8]}"
        async with Worker(env.client, task_queue=tq, plugins=[GolemPlugin(tools, approval)]):
            ran = await DurableAgent(env.client, tools, task_queue=tq).run("use the tools")
            assert ran.output == "done", ran.output
            run = await DurableAgent(env.client, approval, task_queue=tq).start("delete a")
            assert (await run.result()).paused
            approved = await run.approve({"d1": True})
            assert approved.output == "deleted", approved.output
        OUT.mkdir(exist_ok=True)
        for name, run_id in (("mcp_tools", ran.run_id), ("mcp_approval", approved.run_id)):
            history = await env.client.get_workflow_handle(run_id).fetch_history()
            (OUT / f"{name}.json").write_text(history.to_json())
            print("recorded", name)


if __name__ == "__main__":
    asyncio.run(main())
    sys.stdout.flush()
    os._exit(0)  # the Temporal core runtime can abort at interpreter teardown
