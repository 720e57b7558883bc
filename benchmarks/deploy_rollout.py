"""A rollout under load, as an operator runs one (docs/adr/0020-versioned-deploys.md).

1. v1 workers (``golem worker --deployment D --build-id v1``, processes of their own) serve
   agent "support" (benchmarks/_deploy_agents.py: instructions "support v1", tools
   order_status and legacy_refund, which needs approval); v1 is made current;
2. N conversations take two turns each, a fifth of them a third that waits for approval of
   legacy_refund, and M long runs start and wait for approval of legacy_refund;
3. v2's workers (started beside v1's; instructions "support v2", legacy_refund removed,
   track_parcel added) are made current (``--ramp``: ramped to 50% first, the ramp rolled
   back so every conversation's next turn is on v1 again, then made current);
4. the waiting turns and runs are approved while half the conversations send their next
   turn (each moves to v2 at that turn); the other half, idle, are woken to move
   (``move_conversations``), then send theirs;
5. v1 drains, its workers stop (exit 0), and every conversation takes one more turn.

Checked: every long run finished on v1 (each workflow task completed by v1, each activity
run by a v1 worker process) with v1's tool; every conversation's first turn after the
switch ran on v2 with v2's instructions (during a ramp: on the version its conversation
went to); no workflow task failed; v1 drained and its workers stopped cleanly; each
transcript holds every turn once, in order, each answered under its version's instructions.

Printed: how long the idle conversations took to move and v1 to drain; and what a move
costs, one conversation at a time, golem's way (pinned, continuing as new at the turn)
beside the alternative (AUTO_UPGRADE, benchmarks/_auto_upgrade.py), after 2 turns and
after ``--history-turns``.

Run: .venv/bin/python benchmarks/deploy_rollout.py [--conversations 20] [--runs 20]
     [--switch | --ramp] [--workers 1] [--history-turns 30]
tests/test_deploy_rollout.py runs the rollout with smaller numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from golem.client import DurableAgent, DurableConversation
from golem.client.deployments import WorkerDeployment
from golem.results import Result

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _deploy_agents import v1 as support_v1  # noqa: E402

GOLEM = str(Path(sys.executable).parent / "golem")
T = TypeVar("T")


@dataclass
class WorkerProcess:
    version: str
    proc: asyncio.subprocess.Process
    stderr: list[str] = field(default_factory=list)

    @property
    def identity(self) -> str:
        """Temporal's default worker identity, as the process reports itself."""
        return f"{self.proc.pid}@{socket.gethostname()}"


class Fleet:
    """``golem worker`` processes of each deployment version, as an operator runs them."""

    def __init__(
        self, address: str, queue: str, deployment: str, *, auto_upgrade: bool = False
    ) -> None:
        self.address, self.queue, self.deployment = address, queue, deployment
        self.auto_upgrade = auto_upgrade
        self.workers: list[WorkerProcess] = []
        self._readers: list[asyncio.Task[None]] = []

    async def start(self, version: str, count: int = 1) -> None:
        await asyncio.gather(*(self._start(version) for _ in range(count)))

    async def _start(self, version: str) -> None:
        if self.auto_upgrade:
            entry = "import _auto_upgrade; _auto_upgrade.main()"
            command = [sys.executable, "-c", entry, self.address, self.queue, self.deployment]
            command.append(version)
        else:
            command = [GOLEM, "worker", "--agent", f"_deploy_agents:{version}"]
            command += ["--task-queue", self.queue, "--address", self.address]
            command += ["--deployment", self.deployment, "--build-id", version]
        proc = await asyncio.create_subprocess_exec(
            *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=HERE
        )
        assert proc.stdout is not None and proc.stderr is not None
        worker = WorkerProcess(version, proc)
        self.workers.append(worker)
        async with asyncio.timeout(60):
            line = (await proc.stdout.readline()).decode()
        if "serving" not in line:
            raise RuntimeError(f"{version} worker did not start: {line!r}")
        self._readers.append(asyncio.ensure_future(self._read(proc.stderr, worker.stderr)))

    @staticmethod
    async def _read(stream: asyncio.StreamReader, into: list[str]) -> None:
        while line := await stream.readline():
            into.append(line.decode())

    def identities(self, version: str) -> set[str]:
        return {w.identity for w in self.workers if w.version == version}

    async def stop(self, version: str) -> list[int]:
        """Ctrl-C each of ``version``'s workers; their exit codes."""
        stopping = [w for w in self.workers if w.version == version and w.proc.returncode is None]
        for worker in stopping:
            worker.proc.send_signal(signal.SIGINT)
        async with asyncio.timeout(60):
            return [await w.proc.wait() for w in stopping]

    async def close(self) -> None:
        for worker in self.workers:
            if worker.proc.returncode is None:
                worker.proc.kill()
                await worker.proc.wait()


@dataclass
class Report:
    scenario: str
    deployment: str
    problems: list[str] = field(default_factory=list)
    figures: dict[str, float] = field(default_factory=dict)
    ramp_split: dict[str, int] = field(default_factory=dict)

    def check(self, what: str, failures: list[str]) -> None:
        """Record ``what`` as broken when ``failures`` names anything."""
        if failures:
            shown = "; ".join(failures[:5]) + (
                f" (+{len(failures) - 5})" if len(failures) > 5 else ""
            )
            self.problems.append(f"{what}: {shown}")


@dataclass
class Talk:
    """One conversation and what it was told: (prompt, the version that should answer)."""

    conv: DurableConversation[Any]
    sent: list[tuple[str, str]] = field(default_factory=list)
    turns: dict[str, str] = field(default_factory=dict)
    """Turn run id -> the version that should have run it."""

    async def send(self, prompt: str, version: str) -> tuple[Result[Any], float]:
        started = time.perf_counter()
        result = await self.conv.send(prompt)
        self.sent.append((prompt, version))
        self.turns[result.run_id] = version
        return result, time.perf_counter() - started


async def _all(works: list[Awaitable[T]]) -> list[T]:
    return list(await asyncio.gather(*works))


async def _versions(
    client: Client, workflow_id: str, run_id: str = ""
) -> tuple[set[str], set[str], int]:
    """The deployment versions that completed the workflow's tasks, the identities that ran
    its activities, and how many of its workflow tasks failed."""
    versions: set[str] = set()
    identities: set[str] = set()
    failed = 0
    async for event in client.get_workflow_handle(
        workflow_id, run_id=run_id or None
    ).fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            attrs = event.workflow_task_completed_event_attributes
            versions.add(attrs.deployment_version.build_id or "unversioned")
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            # `golem worker` polls as `pid@host golem[agents]`: the process is the first word.
            identities.add(event.activity_task_started_event_attributes.identity.split(" ")[0])
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
            failed += 1
    return versions, identities, failed


async def _pinned_to(client: Client, workflow_id: str) -> str:
    """The version the workflow's current run is on."""
    described = await client.get_workflow_handle(workflow_id).describe()
    info = described.raw_description.workflow_execution_info.versioning_info
    return info.deployment_version.build_id


async def rollout(
    client: Client,
    *,
    conversations: int = 20,
    runs: int = 20,
    ramp: bool = False,
    workers: int = 1,
    drain_timeout: float = 60.0,
) -> Report:
    """Run the rollout against ``client``'s server; what broke, and the figures."""
    tag = uuid.uuid4().hex[:8]
    queue, name = f"rollout-{tag}", f"rollout-{tag}"
    report = Report("ramp 50%, roll back, then current" if ramp else "switch", name)
    deployment = WorkerDeployment(client, name)
    durable = DurableAgent(client, support_v1, task_queue=queue)
    fleet = Fleet(client.service_client.config.target_host, queue, name)
    try:
        # v2's workers start beside v1's: a version takes no work until it is current or ramps.
        await asyncio.gather(fleet.start("v1", workers), fleet.start("v2", workers))
        await deployment.set_current("v1", wake=False)  # the deployment's first version
        talks = [
            Talk(c) for c in await _all([durable.conversation() for _ in range(conversations)])
        ]
        await _all([t.send(f"hello {i}", "v1") for i, t in enumerate(talks)])
        await _all([t.send("call order_status", "v1") for t in talks])
        waiting = talks[: max(1, conversations // 5)]
        paused_turns = await _all([t.send("call legacy_refund", "v1") for t in waiting])
        long_runs = await _all([durable.start(f"call legacy_refund {i}") for i in range(runs)])
        paused_runs = await _all([r.result() for r in long_runs])
        report.check(
            "every long run and waiting turn waits for approval on v1",
            [
                r.run_id
                for r, _ in [*paused_turns, *((p, 0.0) for p in paused_runs)]
                if not r.pending_approvals
            ],
        )

        switched = time.perf_counter()
        if ramp:
            await deployment.set_ramping("v2", 50, wake=False)
        else:
            await deployment.set_current("v2", wake=False)
        target = "?" if ramp else "v2"  # during the ramp: where each conversation went
        # Half the conversations move at their next turn while the waiting turns and the long
        # runs go on where they started; the other half are idle until woken to move.
        idle = talks[len(talks) // 2 :]
        busy = [t for t in talks if t not in idle and t not in waiting]
        approved_turns, finished_runs, _ = await asyncio.gather(
            _all(
                [
                    t.conv.approve({r.pending_approvals[0].id: True})
                    for t, (r, _) in zip(waiting, paused_turns, strict=True)
                ]
            ),
            _all(
                [
                    r.approve({p.pending_approvals[0].id: True})
                    for r, p in zip(long_runs, paused_runs, strict=True)
                ]
            ),
            _all([t.send(f"after the switch {talks.index(t)}", target) for t in busy]),
        )
        await _all([t.send(f"after the switch {talks.index(t)}", target) for t in waiting])
        woken_at = time.perf_counter()
        woken = set(await deployment.move_conversations())
        report.check(
            "every idle conversation is woken", [t.conv.id for t in idle if t.conv.id not in woken]
        )
        if not ramp:
            report.check(
                "every idle conversation moves to v2 once woken", await _moved(client, idle, "v2")
            )
            report.figures["idle conversations woken and moved, s"] = time.perf_counter() - woken_at
        await _all([t.send(f"after the switch {talks.index(t)}", target) for t in idle])
        if ramp:
            await _resolve_ramp(client, talks, report)
            # Rolled back: the conversations the ramp took come back at their next turn.
            took = {t.conv.id for t in talks if t.sent[-1][1] == "v2"}
            woken = set(await deployment.set_ramping(None))
            report.check("stopping the ramp wakes what it took", sorted(took - woken))
            await _all([t.send(f"after the rollback {i}", "v1") for i, t in enumerate(talks)])
            await deployment.set_current("v2")
            await _all([t.send(f"after current {i}", "v2") for i, t in enumerate(talks)])

        try:
            await deployment.wait_drained("v1", timeout=drain_timeout)
        except TimeoutError as exc:
            report.check("v1 drains", [str(exc)])
        else:
            report.figures["v1 drained, s after the switch"] = time.perf_counter() - switched
            codes = await fleet.stop("v1")
            report.check("v1 workers stop cleanly", [f"exit {c}" for c in codes if c != 0])
            await _all([t.send(f"with v1 gone {i}", "v2") for i, t in enumerate(talks)])

        await _check_runs(client, fleet, report, long_runs, finished_runs, approved_turns)
        await _check_talks(client, fleet, report, talks)
        await _check_tasks(client, fleet, report, queue)
    finally:
        await fleet.close()
    return report


async def _moved(client: Client, talks: list[Talk], version: str) -> list[str]:
    """The conversations not on ``version`` within 30 s."""

    async def on(talk: Talk) -> str:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(30):
                while await _pinned_to(client, talk.conv.id) != version:
                    await asyncio.sleep(0.05)
                return ""
        return talk.conv.id

    return [stuck for stuck in await _all([on(t) for t in talks]) if stuck]


async def move_cost(
    client: Client, samples: int = 8, *, turns: int = 2, auto_upgrade: bool = False
) -> dict[str, float]:
    """A conversation's move to the new version at its next turn (golem's way: the send
    refused, the workflow continuing as new onto v2, the send again; ``auto_upgrade``: the
    workflow replayed on v2 at that turn's task) against its next, steady turn, one
    conversation at a time after ``turns`` turns on v1: median ms of each, and their ratio."""
    tag = uuid.uuid4().hex[:8]
    queue, name = f"move-{tag}", f"move-{tag}"
    deployment = WorkerDeployment(client, name)
    address = client.service_client.config.target_host
    fleet = Fleet(address, queue, name, auto_upgrade=auto_upgrade)
    try:
        await fleet.start("v1")
        await deployment.set_current("v1")
        durable = DurableAgent(client, support_v1, task_queue=queue)
        talks = [Talk(await durable.conversation()) for _ in range(samples)]
        on_v1 = []
        for talk in talks:
            for turn in range(turns):
                on_v1.append((await talk.send(f"turn {turn}", "v1"))[1])
        await fleet.start("v2")
        await deployment.set_current("v2", wake=False)
        moves, steady = [], []
        for talk in talks:
            moves.append((await talk.send("moving", "v2"))[1])
            steady.append((await talk.send("steady", "v2"))[1])
    finally:
        await fleet.close()
    move, still = statistics.median(moves), statistics.median(steady)
    return {
        "steady turn on v1, ms (median)": 1000 * statistics.median(on_v1),
        "turn that moves the conversation, ms (median)": 1000 * move,
        "steady turn on v2, ms (median)": 1000 * still,
        "moving turn / steady turn": move / still,
    }


async def _resolve_ramp(client: Client, talks: list[Talk], report: Report) -> None:
    """During the ramp each conversation's turn ran where its conversation went: record it."""
    for talk in talks:
        version = await _pinned_to(client, talk.conv.id)
        prompt, _ = talk.sent[-1]
        talk.sent[-1] = (prompt, version)
        run_id = next(r for r, v in talk.turns.items() if v == "?")
        talk.turns[run_id] = version
        report.ramp_split[version] = report.ramp_split.get(version, 0) + 1


async def _check_runs(
    client: Client,
    fleet: Fleet,
    report: Report,
    long_runs: list[Any],
    finished: list[Result[Any]],
    approved: list[Result[Any]],
) -> None:
    v1_workers = fleet.identities("v1")
    wrong = []
    for run, result in zip(long_runs, finished, strict=True):
        versions, identities, _ = await _versions(client, run.run_id)
        if versions != {"v1"} or not identities <= v1_workers:
            wrong.append(
                f"{run.run_id} ran on {sorted(versions)} ({sorted(identities - v1_workers)})"
            )
        if "(legacy_refund: refunded by v1)" not in str(result.output):
            wrong.append(f"{run.run_id} answered {result.output!r}")
    for result in approved:
        if "(legacy_refund: refunded by v1)" not in str(result.output):
            wrong.append(f"waiting turn {result.run_id} answered {result.output!r}")
    report.check("every run started on v1 finished on v1, with v1's tool", wrong)


async def _check_talks(client: Client, fleet: Fleet, report: Report, talks: list[Talk]) -> None:
    """Each turn on its version, under its instructions; each transcript whole and in order."""
    wrong: list[str] = []
    for talk in talks:
        for run_id, version in talk.turns.items():
            versions, identities, _ = await _versions(client, run_id)
            if versions != {version} or not identities <= fleet.identities(version):
                wrong.append(
                    f"turn {run_id} of {talk.conv.id} ran on {sorted(versions)}, not {version}"
                )
        transcript = await talk.conv.messages()
        prompts = [m.content for m in transcript if m.role == "user"]
        if prompts != [p for p, _ in talk.sent]:
            wrong.append(
                f"{talk.conv.id} holds prompts {prompts}, sent {[p for p, _ in talk.sent]}"
            )
            continue
        answers = [m for m in transcript if m.role == "assistant" and not m.tool_calls]
        if len(answers) != len(prompts):
            wrong.append(f"{talk.conv.id}: {len(prompts)} turns, {len(answers)} answers")
            continue
        for (prompt, version), answer in zip(talk.sent, answers, strict=True):
            if not answer.content.startswith(f"support {version} | {prompt}"):
                wrong.append(
                    f"{talk.conv.id}: {prompt!r} answered {answer.content!r} (want {version})"
                )
        if [m.run_id for m in transcript if m.role == "user"] != await talk.conv.runs():
            wrong.append(f"{talk.conv.id}: its turns and its runs differ")
    report.check("every turn ran on its version, each transcript whole and in order", wrong)


async def _check_tasks(client: Client, fleet: Fleet, report: Report, queue: str) -> None:
    failed = []
    async for execution in client.list_workflows(f"TaskQueue = '{queue}'"):
        _, _, count = await _versions(client, execution.id, execution.run_id)
        if count:
            failed.append(f"{execution.workflow_type} {execution.id}: {count} failed tasks")
    logs = [line for w in fleet.workers for line in w.stderr if "ondetermin" in line]
    report.check("no workflow task failed (nondeterminism or other)", failed + logs[:3])


def print_report(report: Report) -> None:
    print(f"\n== {report.scenario}")
    for name, value in report.figures.items():
        print(f"   {name:<44} {value:9.1f}")
    if report.ramp_split:
        print(f"   conversations on each version during the ramp: {report.ramp_split}")
    print("   problems: " + ("none" if not report.problems else ""))
    for problem in report.problems:
        print(f"     - {problem}")


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=20)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--workers", type=int, default=1, help="worker processes per version")
    parser.add_argument("--ramp", action="store_true", help="only the ramp scenario")
    parser.add_argument("--switch", action="store_true", help="only the switch scenario")
    parser.add_argument(
        "--history-turns", type=int, default=30, help="turns before a measured move (and 2)"
    )
    args = parser.parse_args()
    from golem.testing import dev_server

    scenarios = [False, True] if args.ramp == args.switch else [args.ramp]
    failed = False
    async with dev_server() as env:
        for ramp in scenarios:
            report = await rollout(
                env.client,
                conversations=args.conversations,
                runs=args.runs,
                ramp=ramp,
                workers=args.workers,
            )
            print_report(report)
            failed = failed or bool(report.problems)
        print("\n== the cost of a move, one conversation at a time (median of 8)")
        print(f"   {'':<48} {'golem: pinned, continue-as-new':>32} {'auto-upgrade':>14}")
        for turns in (2, args.history_turns):  # interleaved: a busy moment hits both
            pinned = await move_cost(env.client, turns=turns)
            auto = await move_cost(env.client, turns=turns, auto_upgrade=True)
            print(f"   after {turns} turns on v1")
            for label, value in pinned.items():
                print(f"     {label:<46} {value:32.2f} {auto[label]:14.2f}")
    return 1 if failed else 0


if __name__ == "__main__":
    code = 130
    with contextlib.suppress(KeyboardInterrupt):
        code = asyncio.run(main())
    sys.stdout.flush()
    os._exit(code)  # the Temporal runtime's threads can abort a normal interpreter teardown
