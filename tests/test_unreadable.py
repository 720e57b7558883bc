"""A worker without a run's key taking it over ends it, named, within seconds (issue 29
item 1; the damaged-blob half of the same fault is tests/test_unreadable_blobs.py).

Real worker processes on the real dev server: a keyed worker is SIGKILLed once the tool's
result is recorded; then a worker with another key, or none, takes the run over. It must
not retry its workflow task for ever: the run ends as a ``RunError`` at stage ``codec``
naming the key id and ``GOLEM_ENCRYPTION_KEY``, never "nondeterminism", its evidence
readable by a keyed client, and a keyed worker resumes it with nothing repeated.
"""

from __future__ import annotations

import base64
import signal
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker
from test_crash import worker_process
from unreadable_worker import DOCUMENT, fetcher
from waiting import eventually, within

from golem.client import DurableAgent, DurableRun
from golem.results import RunError
from golem.worker import GolemPlugin

WORKER = Path(__file__).parent / "unreadable_worker.py"
K1 = "k1:" + base64.b64encode(bytes(range(32))).decode()
K2 = "k2:" + base64.b64encode(bytes(range(1, 33))).decode()
#: How long a run its worker cannot read may take to end (the issue's bound).
ENDS_WITHIN = 30
ENDED = "the run to end on a worker that cannot read it (not retry its task for ever)"


@pytest.fixture
def crash_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GOLEM_CRASH_DIR", str(tmp_path))
    monkeypatch.delenv("GOLEM_CRASH_HANG", raising=False)
    return tmp_path


async def killed_after_the_tool(
    env: WorkflowEnvironment, durable: DurableAgent[str], crash_dir: Path, keyed: dict[str, str]
) -> DurableRun[str]:
    """A run started on a worker that is SIGKILLed once the tool's result is recorded (in
    the model call after it)."""
    settings: dict[str, str | None] = {**keyed, "GOLEM_CRASH_HANG": "1"}
    async with worker_process(env, durable.task_queue, settings, WORKER) as process:
        run = await durable.start("fetch the document")
        answering = crash_dir / "answering"
        await eventually(answering.exists, what="the model call after the tool", timeout=30)
        process.send_signal(signal.SIGKILL)
        await process.wait()
    return run


async def ended_on(
    env: WorkflowEnvironment, run: DurableRun[str], task_queue: str, settings: dict[str, str | None]
) -> RunError:
    """The ``RunError`` ``run`` ends with once a worker with ``settings`` takes it over."""
    async with worker_process(env, task_queue, settings, WORKER):
        with pytest.raises(RunError) as failure:
            await within(run.result(), what=ENDED, timeout=ENDS_WITHIN)
    return failure.value


async def task_failures(handle: WorkflowHandle[object, object]) -> list[str]:
    """What the run's workflow task failures say, as the server stores them (a task the
    server closed itself, e.g. for the termination, says nothing)."""
    return [
        event.workflow_task_failed_event_attributes.failure.message
        async for event in handle.fetch_history_events()
        if event.workflow_task_failed_event_attributes.HasField("failure")
    ]


def executions(crash_dir: Path) -> list[str]:
    return (crash_dir / "executions").read_text().split()


async def keyed_client(env: WorkflowEnvironment, **plugin: object) -> Client:
    config = env.client.config()
    config["plugins"] = [GolemPlugin(fetcher, **plugin)]  # type: ignore[arg-type]
    return Client(**config)


@pytest.mark.parametrize("other_key", [K2, None], ids=["another-key", "no-key"])
async def test_a_worker_without_the_runs_key_taking_over_ends_it_at_stage_codec_and_it_resumes(
    temporal_env: WorkflowEnvironment, crash_dir: Path, other_key: str | None
) -> None:
    client = await keyed_client(temporal_env, encryption_key=K1)
    task_queue = f"nokey-{uuid.uuid4().hex[:10]}"
    durable: DurableAgent[str] = DurableAgent(client, fetcher, task_queue=task_queue)
    keyed = {"GOLEM_ENCRYPTION_KEY": K1}
    run = await killed_after_the_tool(temporal_env, durable, crash_dir, keyed)
    error = await ended_on(temporal_env, run, task_queue, {"GOLEM_ENCRYPTION_KEY": other_key})

    assert error.stage == "codec"
    assert "key id 'k1'" in error.detail and "GOLEM_ENCRYPTION_KEY" in error.detail
    handle = temporal_env.client.get_workflow_handle(run.run_id)
    said = [str(error), *await task_failures(handle)]
    assert [s for s in said if "nondeterminism" in s.lower()] == []
    assert all("key id 'k1'" in s for s in said), said
    # The evidence, read by this keyed client from the run's history: the tool's result.
    partial = error.partial
    assert partial is not None and partial.run_id == run.run_id
    assert [m.role for m in partial.messages] == ["user", "assistant", "tool"]
    assert partial.messages[2].content == DOCUMENT
    async with Worker(client, task_queue=task_queue):
        resumed = await within(durable.resume(error), what="the resumed run on a keyed worker")
    assert resumed.output == f"read {len(DOCUMENT)} characters"
    assert executions(crash_dir) == ["fetch", "answer"]  # the tool never ran again
