"""Run behaviours a planted bug once slipped past (issue 20, "Pin first"): a failing call
keeps a sibling that finishes later, and a failed durable run's evidence read back page by
page is the evidence, not every message the run held."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
from agents import FAST_RETRY, ask, call, scripted
from temporalio.client import Client
from temporalio.worker import Worker

from golem.client import DurableAgent
from golem.messages import Message
from golem.models import ModelHTTPError
from golem.results import RunError
from golem.worker import GolemPlugin

HANDSHAKE_TIMEOUT = 5.0  # a guard against a deadlock, never a wait for the outcome
LATER = 50  # event-loop turns: the batch sees the failure long before the sibling finishes


async def test_a_failing_call_keeps_a_running_sibling_that_finishes_after_the_failure() -> None:
    failed = asyncio.Event()
    agent, _ = scripted([ask(call("c1", "slow"), call("c2", "boom")), Message.assistant("never")])

    @agent.tool
    async def slow() -> str:
        """Finishes only after its sibling has failed, strictly later."""
        async with asyncio.timeout(HANDSHAKE_TIMEOUT):  # not wait_for: it can swallow a cancel
            await failed.wait()
        for _ in range(LATER):
            await asyncio.sleep(0)  # yield, so the batch handles the failure first
        return "slow done"

    @agent.tool(retry_attempts=1)  # its failure is final at once
    async def boom() -> str:
        """Fails while its sibling runs."""
        failed.set()
        raise RuntimeError("disk on fire")

    with pytest.raises(RunError) as caught:
        await agent.run("go")

    partial = caught.value.partial
    assert caught.value.stage == "tool" and partial is not None
    answers = [(m.tool_call_id, m.content, m.failed) for m in partial.messages if m.role == "tool"]
    assert answers == [
        ("c1", "slow done", False),
        ("c2", "the tool failed: RuntimeError: disk on fire", True),
    ]
    assert partial.tool_calls == 1  # the sibling ran to the end and counts


PAGED_BYTES = 1_100_000  # more than one failure payload carries (golem.workflows.pages)


async def test_a_failed_runs_conversation_query_serves_its_evidence_not_its_correction(
    temporal_client: Client,
) -> None:
    """Past one payload, a failed run's evidence is read back through its
    ``golem.conversation`` query: the query serves the evidence (through the last
    completed step), never the correction the run added after it, whoever asks and
    whatever range (here, as ``temporal workflow query`` would, to the end)."""
    agent, model = scripted(
        [
            ask(call("c1", "dump")),
            Message.assistant("not a number"),  # the loop asks for a correction
            ModelHTTPError(400, "context too long"),
        ],
        output_type=int,
        model_retry=FAST_RETRY,
        name="paged-failure",
    )

    @agent.tool
    def dump() -> str:
        """A result too big for the failure's payload."""
        return "z" * PAGED_BYTES

    task_queue = f"pin-{uuid.uuid4().hex[:12]}"
    plugin = GolemPlugin(agent, heartbeat_timeout=timedelta(seconds=5))
    async with Worker(temporal_client, task_queue=task_queue, plugins=[plugin]):
        with pytest.raises(RunError) as caught:
            await DurableAgent(temporal_client, agent, task_queue=task_queue).run("go")
        assert caught.value.partial is not None
        handle = temporal_client.get_workflow_handle(caught.value.partial.run_id)
        tail = await handle.query("golem.conversation", {"since": 3}, result_type=dict)

    error = caught.value
    assert error.stage == "model" and error.partial is not None
    sent = model.requests[-1].messages  # the failed request: the evidence and the correction
    assert [m.role for m in sent] == ["user", "assistant", "tool", "assistant", "user"]
    assert error.partial.messages == sent[:4]
    assert len(error.partial.messages[2].content) == PAGED_BYTES
    assert [m["content"] for m in tail["messages"]] == ["not a number"]
