"""Each run's deployment version, in the real Temporal UI: a run started on v1 stays there
(pinned) while its conversation moves to v2 at its next turn. The workers are
``golem worker --deployment ... --build-id ...`` processes (benchmarks/deploy_rollout.py)."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

from uicheck import Page, TemporalUI, run_page, snap

from golem.client import DurableAgent
from golem.client.deployments import WorkerDeployment

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from deploy_rollout import Fleet, support_v1


def version_panel(name: str, build_id: str) -> str:
    """What the workflow page's header says of a pinned run's version."""
    return f"Deployment\n{name}\nBuild ID\n{build_id}\nVersioning Behavior\nPinned"


async def test_a_runs_page_shows_the_version_it_is_pinned_to_across_a_switch(
    temporal_ui: TemporalUI,
) -> None:
    client = temporal_ui.client
    tag = uuid.uuid4().hex[:6]
    name, task_queue = f"support-{tag}", f"ui-{tag}"
    deployment = WorkerDeployment(client, name)
    fleet = Fleet(client.service_client.config.target_host, task_queue, name)
    try:
        await fleet.start("v1")
        await deployment.set_current("v1")
        durable = DurableAgent(client, support_v1, task_queue=task_queue)
        conv = await durable.conversation()
        before = await conv.send("hello")
        waiting = await durable.start("call legacy_refund")
        assert (await waiting.result()).pending_approvals  # a run waiting on v1
        await fleet.start("v2")
        await deployment.set_current("v2")
        after = await conv.send("and now?")
        pages = [
            Page("waiting_run", run_page(temporal_ui.url, waiting.run_id), wait=["RUNNING"]),
            Page("turn_on_v1", run_page(temporal_ui.url, before.run_id), wait=["COMPLETED"]),
            Page("turn_on_v2", run_page(temporal_ui.url, after.run_id), wait=["COMPLETED"]),
            Page("conversation", run_page(temporal_ui.url, conv.id), wait=["RUNNING"]),
        ]
        seen = await snap("versioned_run_pages", pages)
    finally:
        await fleet.close()
    assert all(not s.missing for s in seen.values()), {k: s.missing for k, s in seen.items()}
    assert version_panel(name, "v1") in seen["waiting_run"].text
    assert version_panel(name, "v1") in seen["turn_on_v1"].text
    assert version_panel(name, "v2") in seen["turn_on_v2"].text
    assert version_panel(name, "v2") in seen["conversation"].text  # its run after the move
