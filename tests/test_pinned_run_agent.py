"""``run_agent`` behaviours a planted bug once slipped past (issue 20, "Pin first"): a child
run started with a history names its parent run, and a failed child's evidence keeps the
history it was given."""

from __future__ import annotations

import uuid
from datetime import timedelta

from pinned_workflows import HistoryChildrenWorkflow, helper
from temporalio.client import Client
from temporalio.worker import Worker

from golem import Message
from golem.client import PARENT_RUN_ID
from golem.worker import GolemPlugin


async def test_a_child_run_with_history_names_its_parent_and_its_failure_keeps_that_history(
    temporal_client: Client,
) -> None:
    tq = f"pin-{uuid.uuid4().hex[:8]}"
    plugin = GolemPlugin(helper, heartbeat_timeout=timedelta(seconds=5))
    async with Worker(
        temporal_client, task_queue=tq, workflows=[HistoryChildrenWorkflow], plugins=[plugin]
    ):
        report = await temporal_client.execute_workflow(
            HistoryChildrenWorkflow.run, id=f"pin-children-{uuid.uuid4()}", task_queue=tq
        )
    first, second, failed = report["runs"]
    parents = []
    for run_id in (first, second, failed):
        description = await temporal_client.get_workflow_handle(run_id).describe()
        parents.append(description.typed_search_attributes.get(PARENT_RUN_ID))
    assert parents == [None, first, second]  # each continues the run whose history it got
    given = [Message.model_validate(m) for m in report["given"]]
    evidence = [Message.model_validate(m) for m in report["evidence"]]
    assert report["stage"] == "tool"
    assert len(given) == 4 and evidence[: len(given)] == given  # the history it was given
    assert [m.role for m in evidence[len(given) :]] == ["user", "assistant", "tool"]
    assert evidence[len(given)].content == "explode"
