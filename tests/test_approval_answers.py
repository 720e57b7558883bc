"""What the ``golem.approve`` update answers (issue 30 item 19): the decisions as the run
recorded them and what they led to (the run paused again, or its outcome once it ended),
readable JSON in the Temporal UI and in ``temporal workflow update execute``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from temporalio.client import Client
from test_durable_approvals import asks_two
from test_durable_approvals import serve as serving

from golem.client import DurableAgent
from golem.testing import temporal_cli


@asynccontextmanager
async def serve(client: Client) -> AsyncIterator[DurableAgent[Any]]:
    """A worker for an agent that asks to approve two transfers at once (t1, t2)."""
    agent = asks_two([])
    async with serving(client, agent) as task_queue:
        yield DurableAgent(client, agent, task_queue=task_queue)


def decision(approved: bool, by: str) -> dict[str, Any]:
    return {"approved": approved, "by": by, "at": "2026-12-02T10:00:00+00:00"}


async def test_approve_answers_the_decisions_recorded_and_the_paused_or_completed_run(
    temporal_client: Client,
) -> None:
    async with serve(temporal_client) as durable:
        run = await durable.start("pay")
        assert (await run.result()).paused
        partial = await run.handle.execute_update("golem.approve", {"t1": decision(True, "alice")})
        done = await run.handle.execute_update("golem.approve", {"t2": decision(False, "bob")})
    assert partial["kind"] == "paused", partial
    assert [c["id"] for c in partial["pendingApprovals"]] == ["t2"]
    assert partial["decided"] == {"t1": decision(True, "alice")}
    assert done["kind"] == "completed", done
    assert done["output"].startswith("moved 1 | ")
    assert done["decided"] == {"t2": decision(False, "bob")}
    assert list(done)[:3] == ["kind", "output", "decided"]  # what a reader looks for first
    assert done["runId"] == run.run_id


async def test_a_streamed_run_answers_its_approval_with_its_outcome_and_ends_its_stream(
    temporal_client: Client,
) -> None:
    async with serve(temporal_client) as durable:
        run = await durable.start("pay", stream=True)
        assert (await run.result()).paused
        offset = await run.stream_end()
        answer = await asyncio.wait_for(
            run.handle.execute_update("golem.approve", {"t1": True, "t2": True}), timeout=30
        )
        kinds = [e.kind async for e in run.stream(offset)]
        result = await run.handle.result()
    assert answer["kind"] == "completed", answer
    assert answer["output"] == "moved 1 | moved 2" == result.output
    assert sorted(answer["decided"]) == ["t1", "t2"]
    assert all(d["approved"] is True and d["at"] for d in answer["decided"].values())
    # The stream goes on after the decision and ends (the iteration finishes) with the run.
    assert kinds[:4] == ["tool_start", "tool_start", "tool_end", "tool_end"], kinds
    assert kinds[-1] == "model_end", kinds


async def test_temporal_cli_shows_what_an_approval_did(temporal_client: Client) -> None:
    async with serve(temporal_client) as durable:
        run = await durable.start("pay")
        assert (await run.result()).paused
        address = temporal_client.service_client.config.target_host
        given = json.dumps({"t1": decision(True, "carol"), "t2": decision(True, "carol")})
        argv = [temporal_cli(), "workflow", "update", "execute", "--address", address]
        argv += ["--workflow-id", run.run_id, "--name", "golem.approve", "--input", given]
        argv += ["--output", "json"]
        process = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 0, stderr.decode()
    shown = json.loads(stdout)
    result = shown.get("result", shown)
    assert result["kind"] == "completed", shown
    assert result["output"] == "moved 1 | moved 2"
    assert result["decided"]["t1"]["by"] == "carol"
