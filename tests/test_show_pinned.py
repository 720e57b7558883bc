"""``golem show`` of a run pinned to a deployment version whose workers are gone: the hint
names the deployment, the build id, and the commands that serve or move it
(docs/adr/0020-versioned-deploys.md)."""

from __future__ import annotations

import uuid

from agents import ask, call, scripted
from temporalio.client import Client
from temporalio.worker import Worker
from test_cli import address, golem

from golem.client import DurableAgent
from golem.client.deployments import WorkerDeployment
from golem.worker import GolemPlugin

_ = address  # a fixture, shared with test_cli


async def test_show_of_a_pinned_run_without_its_versions_workers_names_the_version(
    address: str, temporal_client: Client
) -> None:
    agent, _ = scripted([ask(call("c1", "refund"))], name="pinned_show")
    agent.tool(name="refund", requires_approval=True)(lambda: "refunded")
    task_queue, name = f"show-{uuid.uuid4().hex[:8]}", f"shown-{uuid.uuid4().hex[:6]}"
    plugin = GolemPlugin(agent, deployment=(name, "v1"))
    async with Worker(temporal_client, task_queue=task_queue, plugins=[plugin]):
        await WorkerDeployment(temporal_client, name).set_current("v1", timeout=30)
        waiting = await DurableAgent(temporal_client, agent, task_queue=task_queue).run("go")
    assert waiting.paused

    shown = await golem("show", waiting.run_id)

    assert shown.code == 1
    assert (
        f"{waiting.run_id} is running, pinned to build id v1 of deployment {name}, and no "
        f"worker of that version answered for it: start one (`golem worker --agent "
        f"module:attribute --task-queue {task_queue} --deployment {name} --build-id v1`), "
        f"then ask again; `golem deploy status --deployment {name}` shows each version's "
        "workers and runs"
    ) in shown.err


async def test_show_of_a_running_run_without_workers_says_so_at_once(
    address: str, temporal_client: Client
) -> None:
    agent, _ = scripted([ask(call("c1", "refund"))], name="unpinned_show")
    agent.tool(name="refund", requires_approval=True)(lambda: "refunded")
    task_queue = f"show-{uuid.uuid4().hex[:8]}"
    async with Worker(temporal_client, task_queue=task_queue, plugins=[GolemPlugin(agent)]):
        waiting = await DurableAgent(temporal_client, agent, task_queue=task_queue).run("go")
    assert waiting.paused

    shown = await golem("show", waiting.run_id)

    assert (shown.code, shown.err) == (
        1,
        f"golem show: {waiting.run_id} is running and no worker answered for it: start one "
        f"(`golem worker --agent module:attribute --task-queue {task_queue}`), then ask again\n",
    )
