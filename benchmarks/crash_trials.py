"""Randomized SIGKILL trials: does a dead worker ever lose a result, repeat an at-most-once
call, or tell the model a call never started when it had?

Each trial serves a 4-turn run (three parallel batches of an idempotent ``lookup`` and an
at-most-once ``charge``, then an answer) from a worker subprocess, kills it with SIGKILL
at a random moment, lets a fresh worker take over, and resumes the run if it failed.
Every tool execution is logged (start/end, per call id) and checked against the final
conversation and the workflow histories.

Run: .venv/bin/python benchmarks/crash_trials.py [TRIALS] [SEED]   (not part of the tests)
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.worker import Worker

from golem import INTERRUPTED_RESULT, OUTCOME_UNKNOWN_RESULT, Agent, Message, ToolCall
from golem.client import DurableAgent
from golem.models import FunctionModel
from golem.results import RunError
from golem.testing import dev_server
from golem.tools import RunContext
from golem.wire.converter import golem_data_converter
from golem.worker import GolemPlugin

TURNS = 4
CONCURRENT_TRIALS = 3
TRIAL_BOUND = timedelta(seconds=120)
HEARTBEAT = timedelta(seconds=2)


def _log(ctx: RunContext[Any], event: str) -> None:
    path = Path(os.environ["GOLEM_TRIAL_DIR"]) / f"{ctx.conversation_id}.log"
    with path.open("a") as log:
        log.write(f"{event} {ctx.tool_call_id} {os.getpid()}\n")


async def _answer(messages: list[Message], tools: Any) -> Message:
    await asyncio.sleep(random.uniform(0, 0.1))
    batch = sum(1 for m in messages if m.role == "assistant" and m.tool_calls) + 1
    if batch >= TURNS:
        return Message.assistant("done")
    calls = [
        ToolCall(id=f"t{batch}-lookup", name="lookup", args="{}"),
        ToolCall(id=f"t{batch}-charge", name="charge", args="{}"),
    ]
    return Message.assistant("", calls)


agent: Agent[Any, str] = Agent(FunctionModel(_answer, model_name="trial-model"), name="trial")


async def _work(ctx: RunContext[Any], what: str) -> str:
    _log(ctx, "start")
    await asyncio.sleep(random.uniform(0.05, 0.4))
    _log(ctx, "end")
    return f"{what} {ctx.tool_call_id}"


@agent.tool
async def lookup(ctx: RunContext[Any]) -> str:
    """Look something up (safe to repeat)."""
    return await _work(ctx, "looked up")


@agent.tool(at_most_once=True)
async def charge(ctx: RunContext[Any]) -> str:
    """Charge the card (never twice)."""
    return await _work(ctx, "charged")


def plugin() -> GolemPlugin:
    return GolemPlugin(agent, heartbeat_timeout=HEARTBEAT)


async def serve_until_killed(address: str, task_queue: str) -> None:
    client = await Client.connect(address, data_converter=golem_data_converter)
    async with Worker(client, task_queue=task_queue, plugins=[plugin()]):
        print("ready", flush=True)
        await asyncio.Event().wait()


@dataclass
class Trial:
    kind: str = ""  # completed | resumed | failed | timed out
    killed_mid_run: bool = False
    seconds: float = 0.0
    lost: list[str] = field(default_factory=list)
    repeated: list[str] = field(default_factory=list)
    never_started_lie: list[str] = field(default_factory=list)
    unanswered: list[str] = field(default_factory=list)
    cut_charges: int = 0
    closures: Counter[str] = field(default_factory=Counter)
    error: str = ""


async def completed_tool_calls(handle: WorkflowHandle[Any, Any]) -> set[str]:
    """Call ids whose tool activity completed, read from the workflow's history."""
    scheduled: dict[int, str] = {}
    done: set[str] = set()
    async for event in handle.fetch_history_events():
        attrs = event.activity_task_scheduled_event_attributes
        if event.HasField("activity_task_scheduled_event_attributes"):
            if attrs.activity_type.name == "golem.tool":
                scheduled[event.event_id] = json.loads(attrs.input.payloads[0].data)["call"]["id"]
        elif event.HasField("activity_task_completed_event_attributes"):
            call = scheduled.get(event.activity_task_completed_event_attributes.scheduled_event_id)
            if call:
                done.add(call)
    return done


async def trial(client: Client, log_dir: Path, rng: random.Random, index: int) -> Trial:
    outcome = Trial()
    task_queue = f"trial-{index}-{uuid.uuid4().hex[:8]}"
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--worker",
        client.service_client.config.target_host,
        task_queue,
        env={**os.environ, "GOLEM_TRIAL_DIR": str(log_dir)},
        stdout=asyncio.subprocess.PIPE,
    )
    durable: DurableAgent[str] = DurableAgent(client, agent, task_queue=task_queue)
    try:
        assert process.stdout is not None
        assert (await process.stdout.readline()).strip() == b"ready"
        run = await durable.start("go")
        # The fault: a SIGKILL at a random moment of the run.
        await asyncio.sleep(rng.uniform(0.1, 1.6))
        status = (await run.handle.describe()).status
        outcome.killed_mid_run = status is not None and status.name == "RUNNING"
        process.send_signal(signal.SIGKILL)
        await process.wait()
        async with Worker(client, task_queue=task_queue, plugins=[plugin()]):
            handles = [run.handle]
            try:
                result = await run.result()
                outcome.kind = "completed"
            except RunError as error:
                resumed = await durable.start(
                    "continue",
                    history=error.partial.messages if error.partial else [],
                    conversation_id=run.conversation_id,
                    parent_run_id=run.run_id,
                )
                handles.append(resumed.handle)
                result = await resumed.result()
                outcome.kind = "resumed"
            finished = set()
            for handle in handles:
                finished |= await completed_tool_calls(handle)
        check(outcome, result.messages, finished, log_dir / f"{run.conversation_id}.log")
        if result.output != "done":
            outcome.kind, outcome.error = "failed", f"output {result.output!r}"
    except Exception as exc:  # a trial that breaks is reported, not hidden
        outcome.kind, outcome.error = "failed", f"{type(exc).__name__}: {exc}"
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    outcome.seconds = time.perf_counter() - started
    return outcome


def check(outcome: Trial, messages: list[Message], finished: set[str], log: Path) -> None:
    starts: Counter[str] = Counter()
    ends: Counter[str] = Counter()
    for line in log.read_text().splitlines() if log.exists() else []:
        event, call, _ = line.split()
        (starts if event == "start" else ends)[call] += 1
    calls = [c.id for m in messages for c in m.tool_calls]
    results: dict[str, list[str]] = {}
    for m in messages:
        if m.role == "tool":
            results.setdefault(m.tool_call_id, []).append(m.content)
    for call in calls:
        answers = results.get(call, [])
        if len(answers) != 1:
            outcome.unanswered.append(call)
            continue
        answer = answers[0]
        if answer == INTERRUPTED_RESULT:
            outcome.closures["interrupted"] += 1
            if starts[call]:
                outcome.never_started_lie.append(call)
        elif answer == OUTCOME_UNKNOWN_RESULT:
            outcome.closures["outcome unknown"] += 1
        if call in finished and answer in (INTERRUPTED_RESULT, OUTCOME_UNKNOWN_RESULT):
            outcome.lost.append(call)  # Temporal recorded its result; the evidence lost it
        if call.endswith("-charge"):
            if starts[call] > 1:
                outcome.repeated.append(call)
            if starts[call] > ends[call]:
                outcome.cut_charges += 1


async def main(trials: int, seed: int) -> None:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        log_dir = Path(tmp)
        os.environ["GOLEM_TRIAL_DIR"] = str(log_dir)  # the takeover worker logs here too
        async with dev_server() as env:
            gate = asyncio.Semaphore(CONCURRENT_TRIALS)

            async def bounded(index: int) -> Trial:
                async with gate:
                    try:
                        async with asyncio.timeout(TRIAL_BOUND.total_seconds()):
                            return await trial(env.client, log_dir, rng, index)
                    except TimeoutError:
                        return Trial(kind="timed out", seconds=TRIAL_BOUND.total_seconds())

            start = time.perf_counter()
            results = await asyncio.gather(*(bounded(i) for i in range(trials)))
            wall = time.perf_counter() - start
    report(results, seed, wall)


def report(results: list[Trial], seed: int, wall: float) -> None:
    kinds = Counter(r.kind for r in results)
    closures: Counter[str] = sum((r.closures for r in results), Counter())
    rows = [
        ("trials", len(results), ""),
        ("killed while the run was running", sum(r.killed_mid_run for r in results), ""),
        ("completed after takeover (no resume)", kinds["completed"], ""),
        ("failed, then resumed to completion", kinds["resumed"], ""),
        ("failed otherwise / timed out", kinds["failed"] + kinds["timed out"], "must be 0"),
        ("at-most-once calls cut mid-call by the kill", sum(r.cut_charges for r in results), ""),
        ("calls closed as outcome unknown", closures["outcome unknown"], ""),
        ("calls closed as never started", closures["interrupted"], ""),
        ("lost results", sum(len(r.lost) for r in results), "must be 0"),
        ("repeated at-most-once executions", sum(len(r.repeated) for r in results), "must be 0"),
        (
            'calls told "never started" that had started',
            sum(len(r.never_started_lie) for r in results),
            "must be 0",
        ),
        ("calls without exactly one result", sum(len(r.unanswered) for r in results), "must be 0"),
    ]
    print(f"crash trials: {TURNS}-turn run, SIGKILL at a random moment, seed {seed}")
    for label, value, goal in rows:
        print(f"{label:<48}{value:>6}  {goal}")
    seconds = [r.seconds for r in results]
    print(
        f"{'median / max seconds per trial':<48}{statistics.median(seconds):>6.1f} / {max(seconds):.1f}"
    )
    print(f"{'wall seconds (' + str(CONCURRENT_TRIALS) + ' trials at a time)':<48}{wall:>6.1f}")
    for r in results:
        if r.error or r.lost or r.repeated or r.never_started_lie or r.unanswered:
            print(
                f"  problem: {r.kind} {r.error} lost={r.lost} repeated={r.repeated} "
                f"lie={r.never_started_lie} unanswered={r.unanswered}"
            )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        asyncio.run(serve_until_killed(sys.argv[2], sys.argv[3]))
    else:
        count = int(sys.argv[1]) if len(sys.argv) > 1 else 50
        asyncio.run(main(count, int(sys.argv[2]) if len(sys.argv) > 2 else 1))
