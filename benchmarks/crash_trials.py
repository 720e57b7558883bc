"""Randomized SIGKILL trials: does a dead worker ever lose a result, repeat an at-most-once
call, or tell the model a call never started when it had?

Each trial serves a 4-turn run (three parallel batches of an idempotent ``lookup`` and an
at-most-once ``charge``, then an answer) from a worker subprocess, kills it with SIGKILL
at a random moment, lets a fresh worker take over, and resumes the run if it failed.
Every tool execution is logged (start/end, per call id) and checked against the final
conversation and the workflow histories.

``--shape conversation`` (turns as child runs) and ``--shape inline`` (turns inline in the
conversation's workflow, ADR 0050) make each trial a conversation of several such turns,
(with ``--handoff``, each turn is handed over to the other of two twin agents, which runs
its batches: the kill can land in either run of the turn),
some streamed (``send_stream``), some not; the kill lands in a model call, a tool call,
golem's workflow code, between turns or after the last. Each turn's ``Result`` or
``RunError`` is checked against the final transcript, a failed turn's next send must go
on from its repaired evidence, a streamed reader must yield each item once, in order, and
end, and ``conv.messages()`` must equal the history reader's rebuild.

Run: .venv/bin/python benchmarks/crash_trials.py [TRIALS] [SEED] [--shape run|conversation|inline]
[--handoff]
(not part of the tests)
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import signal
import statistics
import sys
import tempfile
import time
import traceback
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError
from temporalio.worker import Worker

from golem import INTERRUPTED_RESULT, OUTCOME_UNKNOWN_RESULT, Agent, Message, ToolCall
from golem.client import DurableAgent, DurableConversation
from golem.client.records import history_reader
from golem.events import RunEvent
from golem.ids import new_id
from golem.models import FunctionModel
from golem.models.base import ModelResponse, StreamDelta
from golem.results import Result, RunError
from golem.testing import dev_server
from golem.tools import RunContext
from golem.wire.converter import golem_data_converter
from golem.worker import GolemPlugin

TURNS = 4  # model calls of a run, or of a conversation's turn
CONVERSATION_TURNS = 4  # turns of a conversation (one more when its last failed)
CONCURRENT_TRIALS = 3
TRIAL_BOUND = {"run": timedelta(seconds=120), "conversation": timedelta(seconds=300)}
# A send or a streamed reader still going after this hangs (the trial says so).
TURN_BOUND = timedelta(seconds=120)
HEARTBEAT = timedelta(seconds=2)
# When the kill lands, in seconds from the start: a run takes about 1.3 s, a conversation
# about 8 (some kills land after its last turn, where they must change nothing).
KILL_WINDOW = {"run": (0.1, 1.6), "conversation": (0.2, 8.5)}
SHAPES = {"run": "standalone runs", "conversation": "child runs", "inline": "inline turns"}


def _log(conversation_id: str, event: str, key: str) -> None:
    path = Path(os.environ["GOLEM_TRIAL_DIR"]) / f"{conversation_id}.log"
    with path.open("a") as log:
        log.write(f"{event} {key} {os.getpid()}\n")


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
    _log(ctx.conversation_id, "start", ctx.tool_call_id)
    await asyncio.sleep(random.uniform(0.05, 0.4))
    _log(ctx.conversation_id, "end", ctx.tool_call_id)
    return f"{what} {ctx.tool_call_id}"


@agent.tool
async def lookup(ctx: RunContext[Any]) -> str:
    """Look something up (safe to repeat)."""
    return await _work(ctx, "looked up")


@agent.tool(at_most_once=True)
async def charge(ctx: RunContext[Any]) -> str:
    """Charge the card (never twice)."""
    return await _work(ctx, "charged")


def _handing(message: Message) -> bool:
    return any(c.name.startswith("transfer_to_") for c in message.tool_calls)


def _turn_answer(messages: list[Message], tools: Any = ()) -> tuple[str, str, Message]:
    """A conversation turn's next answer (TURNS - 1 batches after its prompt, then "done"),
    the conversation's id and the answer's key in its log; call ids name the turn by its
    prompt's number, so they are unique in the conversation. An agent that can hand off
    (``--handoff``) hands the turn's prompt over first."""
    prompts = [i for i, m in enumerate(messages) if m.role == "user"]
    conversation = next((m.conversation_id for m in messages if m.conversation_id), "unknown")
    transfer = next((t.name for t in tools if t.name.startswith("transfer_to_")), "")
    if transfer and messages[-1].role == "user":
        key = f"u{len(prompts)}-hand"
        return key, conversation, Message.assistant("", [ToolCall(id=key, name=transfer)])
    own = messages[prompts[-1] :]
    batch = sum(1 for m in own if m.role == "assistant" and m.tool_calls and not _handing(m))
    key = f"u{len(prompts)}-b{batch + 1}"
    if batch + 1 >= TURNS:
        return key, conversation, Message.assistant("done")
    calls = [
        ToolCall(id=f"{key}-lookup", name="lookup", args="{}"),
        ToolCall(id=f"{key}-charge", name="charge", args="{}"),
    ]
    return key, conversation, Message.assistant(f"batch {batch + 1}", calls)


async def _converse(messages: list[Message], tools: Any) -> Message:
    key, conversation, answer = _turn_answer(messages, tools)
    _log(conversation, "mstart", key)
    await asyncio.sleep(random.uniform(0.05, 0.3))  # as long as a tool call, about
    _log(conversation, "mend", key)
    return answer


async def _converse_streamed(
    messages: list[Message], tools: Any
) -> AsyncIterator[StreamDelta | ModelResponse]:
    """The same answer, its text in two deltas with a pause before each (a kill can land
    between them: the retried call restarts the turn's text)."""
    key, conversation, answer = _turn_answer(messages, tools)
    _log(conversation, "mstart", key)
    text = answer.content
    for piece in (text[:3], text[3:]):
        await asyncio.sleep(random.uniform(0.02, 0.15))
        yield StreamDelta(kind="text", text=piece)
    _log(conversation, "mend", key)
    reason = "tool_calls" if answer.tool_calls else "stop"
    yield ModelResponse(message=answer, finish_reason=reason, model_name="trial-model")


talker: Agent[Any, str] = Agent(
    FunctionModel(_converse, _converse_streamed, model_name="trial-model"),
    name="trial-conversation",
)
talker.tool(lookup)
talker.tool(at_most_once=True)(charge)

# --handoff: twins that hand each turn's prompt over to the other, which runs its batches.
twins = [
    Agent(FunctionModel(_converse, _converse_streamed, model_name="trial-model"), name=name)
    for name in ("trial-front", "trial-desk")
]
for twin, other in zip(twins, reversed(twins), strict=True):
    twin.tool(lookup)
    twin.tool(at_most_once=True)(charge)
    twin.add_handoffs(other)


def plugin() -> GolemPlugin:
    return GolemPlugin(agent, talker, *twins, heartbeat_timeout=HEARTBEAT)


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
    # A conversation's trial only:
    moment: str = ""  # where the kill landed
    streamed_kill: bool = False  # inside a streamed turn: its reader was polling
    turns: Counter[str] = field(default_factory=Counter)  # how each turn ended
    streams: Counter[str] = field(default_factory=Counter)  # how each streamed reader ended
    mismatched: list[str] = field(default_factory=list)  # a turn's outcome vs the transcript
    stream_faults: list[str] = field(default_factory=list)
    restarts: int = 0  # streamed model calls a reader saw restart (retried after the kill)
    late_model_calls: int = 0  # model calls that needed more than the one retry
    other_failures: list[str] = field(default_factory=list)  # turns failed but by a cut charge
    rebuild_differs: bool = False
    runs_differ: bool = False

    @property
    def faulty(self) -> bool:
        return bool(
            self.error or self.lost or self.repeated or self.never_started_lie
            or self.unanswered or self.mismatched or self.stream_faults
            or self.rebuild_differs or self.runs_differ or self.late_model_calls
            or self.other_failures
        )  # fmt: skip


async def completed_tool_calls(handle: WorkflowHandle[Any, Any], outcome: Trial) -> set[str]:
    """Call ids whose tool activity completed, read from the workflow's history; counted on
    ``outcome``: model calls that started past their first retry (one kill costs one)."""
    scheduled: dict[int, str] = {}
    models: set[int] = set()
    done: set[str] = set()
    async for event in handle.fetch_history_events():
        attrs = event.activity_task_scheduled_event_attributes
        if event.HasField("activity_task_scheduled_event_attributes"):
            if attrs.activity_type.name == "golem.tool":
                scheduled[event.event_id] = json.loads(attrs.input.payloads[0].data)["call"]["id"]
            elif attrs.activity_type.name == "golem.model_request":
                models.add(event.event_id)
        elif event.HasField("activity_task_started_event_attributes"):
            started = event.activity_task_started_event_attributes
            if started.scheduled_event_id in models and started.attempt > 2:
                outcome.late_model_calls += 1
        elif event.HasField("activity_task_completed_event_attributes"):
            call = scheduled.get(event.activity_task_completed_event_attributes.scheduled_event_id)
            if call:
                done.add(call)
    return done


async def doomed_worker(
    client: Client, task_queue: str, log_dir: Path
) -> asyncio.subprocess.Process:
    """A worker subprocess serving ``task_queue``, once it polls."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--worker",
        client.service_client.config.target_host,
        task_queue,
        env={**os.environ, "GOLEM_TRIAL_DIR": str(log_dir)},
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    if (await process.stdout.readline()).strip() != b"ready":
        process.kill()
        raise RuntimeError("the worker subprocess did not start")
    return process


async def kill(process: asyncio.subprocess.Process) -> None:
    process.send_signal(signal.SIGKILL)
    await process.wait()


async def trial(client: Client, log_dir: Path, rng: random.Random, index: int) -> Trial:
    outcome = Trial()
    task_queue = f"trial-{index}-{uuid.uuid4().hex[:8]}"
    started = time.perf_counter()
    process = await doomed_worker(client, task_queue, log_dir)
    durable: DurableAgent[str] = DurableAgent(client, agent, task_queue=task_queue)
    try:
        run = await durable.start("go")
        # The fault: a SIGKILL at a random moment of the run.
        await asyncio.sleep(rng.uniform(*KILL_WINDOW["run"]))
        status = (await run.handle.describe()).status
        outcome.killed_mid_run = status is not None and status.name == "RUNNING"
        await kill(process)
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
                finished |= await completed_tool_calls(handle, outcome)
        check(outcome, result.messages, finished, log_dir / f"{run.conversation_id}.log")
        if result.output != "done":
            outcome.kind, outcome.error = "failed", f"output {result.output!r}"
    except Exception as exc:  # a trial that breaks is reported, not hidden
        outcome.kind, outcome.error = "failed", f"{type(exc).__name__}: {exc}"
    finally:
        if process.returncode is None:
            await kill(process)
    outcome.seconds = time.perf_counter() - started
    return outcome


def read_log(log: Path) -> list[tuple[str, str]]:
    """(event, key) per line of a conversation's log: tool start/end, model mstart/mend."""
    lines = log.read_text().splitlines() if log.exists() else []
    return [(line.split()[0], line.split()[1]) for line in lines]


def check(outcome: Trial, messages: list[Message], finished: set[str], log: Path) -> None:
    logged = Counter(read_log(log))
    starts = Counter({key: n for (event, key), n in logged.items() if event == "start"})
    ends = Counter({key: n for (event, key), n in logged.items() if event == "end"})
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


@dataclass
class Turn:
    """One send of a conversation's trial, and how it ended."""

    run_id: str
    streamed: bool
    result: Result[str] | None = None
    error: RunError | None = None
    other: str = ""  # any other exception, or a hang
    events: list[tuple[RunEvent, int]] = field(default_factory=list)  # each, the offset after


@dataclass
class Talk:
    """A conversation's trial as its client drives it: where it stands when the kill lands."""

    conversation: DurableConversation[str] | None = None
    turns: list[Turn] = field(default_factory=list)
    between: bool = True  # not inside a send (before the first, between two)
    over: bool = False


async def converse(
    durable: DurableAgent[str], inline: bool, rng: random.Random, talk: Talk
) -> None:
    """The conversation's turns, each streamed or not at random; a failed turn's next send
    goes on from its evidence (one more turn when the last one failed)."""
    talk.conversation = conversation = await durable.conversation(inline_turns=inline)
    prompt = "go"
    while len(talk.turns) < CONVERSATION_TURNS or (
        talk.turns[-1].error is not None and len(talk.turns) < CONVERSATION_TURNS + 2
    ):
        turn = Turn(new_id(), streamed=rng.random() < 0.5)
        talk.turns.append(turn)
        talk.between = False
        try:
            async with asyncio.timeout(TURN_BOUND.total_seconds()):
                if turn.streamed:
                    stream = conversation.send_stream(prompt, run_id=turn.run_id)
                    async for event in stream:
                        turn.events.append((event, stream.offset))
                    turn.result = stream.result
                else:
                    turn.result = await conversation.send(prompt, run_id=turn.run_id)
        except RunError as error:
            turn.error = error
        except TimeoutError:
            turn.other = f"hung past {TURN_BOUND.total_seconds():.0f} s"
            break
        except Exception as exc:
            turn.other = f"{type(exc).__name__}: {exc}"
            break
        finally:
            talk.between = True
        prompt = "continue" if turn.error is not None else "again"
        await asyncio.sleep(rng.uniform(0, 0.5))  # room for a kill between two turns
    talk.over = True


def kill_moment(talk: Talk, log: Path) -> str:
    """Where the kill landed, from the client's state and the doomed worker's log."""
    if talk.over:
        return "after the last turn"
    if talk.between:
        return "between turns"
    open_calls: Counter[tuple[str, str]] = Counter()
    for event, key in read_log(log):
        kind = "model" if event.startswith("m") else "tool"
        open_calls[(kind, key)] += 1 if event in ("start", "mstart") else -1
    if any(n > 0 for (kind, _), n in open_calls.items() if kind == "tool"):
        return "in a tool call"
    if any(n > 0 for (kind, _), n in open_calls.items() if kind == "model"):
        return "in a model call"
    return "in golem's code between calls"


async def conversation_trial(
    client: Client, log_dir: Path, rng: random.Random, index: int, inline: bool, handoff: bool
) -> Trial:
    outcome = Trial()
    task_queue = f"trial-{index}-{uuid.uuid4().hex[:8]}"
    started = time.perf_counter()
    process = await doomed_worker(client, task_queue, log_dir)
    served = twins[0] if handoff else talker
    durable: DurableAgent[str] = DurableAgent(client, served, task_queue=task_queue)
    talk = Talk()
    talking = asyncio.ensure_future(converse(durable, inline, rng, talk))
    try:
        await asyncio.wait([talking], timeout=rng.uniform(*KILL_WINDOW["conversation"]))
        await kill(process)
        conversation = talk.conversation
        if conversation is None:
            raise RuntimeError("the conversation did not start before the kill")
        log = log_dir / f"{conversation.id}.log"
        outcome.moment = kill_moment(talk, log)
        outcome.streamed_kill = not talk.between and talk.turns[-1].streamed
        async with Worker(client, task_queue=task_queue, plugins=[plugin()]):
            await talking
            transcript = await conversation.messages()
            reader = history_reader(client)
            rebuilt = await reader.messages(await reader.transcript(conversation.id))
            runs = await conversation.runs()
            finished = await finished_calls(client, conversation, runs, inline, outcome)
        check(outcome, transcript, finished, log)
        check_turns(outcome, talk.turns, transcript)
        outcome.rebuild_differs = rebuilt != transcript
        ended = [t.run_id for t in talk.turns if t.result is not None or t.error is not None]
        sent = [run for turn in ended for run in turn_runs(transcript, turn)]
        outcome.runs_differ = runs != sent
        outcome.kind = "failed" if any(t.other for t in talk.turns) else "completed"
        outcome.error = "; ".join(t.other for t in talk.turns if t.other)
    except Exception as exc:  # a trial that breaks is reported, not hidden, with its line
        ours = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == __file__]
        at = f" (at {ours[-1].name}: {ours[-1].line})" if ours else ""
        outcome.kind, outcome.error = "failed", f"{type(exc).__name__}: {exc}{at}"
    finally:
        talking.cancel()
        if process.returncode is None:
            await kill(process)
    outcome.seconds = time.perf_counter() - started
    return outcome


async def finished_calls(
    client: Client,
    conversation: DurableConversation[str],
    runs: list[str],
    inline: bool,
    outcome: Trial,
) -> set[str]:
    """The calls whose tool activity completed: in the conversation's history (inline), or
    in each of its runs' (a turn's, and any it handed over to)."""
    if inline:
        return await completed_tool_calls(conversation.handle, outcome)
    finished: set[str] = set()
    for run_id in runs:
        try:
            run = client.get_workflow_handle(run_id)
            finished |= await completed_tool_calls(run, outcome)
        except RPCError:  # a send that never started its run
            continue
    return finished


def turn_runs(transcript: list[Message], run_id: str) -> list[str]:
    """Turn ``run_id``'s runs: its own, then those it was handed over to (the runs of the
    answers between its prompt and the next)."""
    prompts = [i for i, m in enumerate(transcript) if m.role == "user"]
    start = next((i for i in prompts if transcript[i].run_id == run_id), None)
    if start is None:
        return [run_id]
    end = next((i for i in prompts if i > start), len(transcript))
    answers = [m.run_id for m in transcript[start:end] if m.role == "assistant"]
    return list(dict.fromkeys([run_id, *answers]))


def check_turns(outcome: Trial, turns: list[Turn], transcript: list[Message]) -> None:
    """Each turn's outcome is what the transcript says; a failed turn's next send went on."""
    for number, turn in enumerate(turns):
        runs = turn_runs(transcript, turn.run_id)
        own = [i for i, m in enumerate(transcript) if m.run_id in runs]
        end = own[-1] + 1 if own else 0
        answered = bool(own) and transcript[end - 1].content == "done"
        if turn.other:
            outcome.turns["other error or hung"] += 1
        elif turn.result is not None:
            outcome.turns["completed"] += 1
            if turn.result.messages != transcript[:end] or not answered:
                outcome.mismatched.append(f"{turn.run_id}: its Result is not the transcript's")
        elif turn.error is not None:
            following = turns[number + 1] if number + 1 < len(turns) else None
            resumed = following is not None and following.result is not None
            outcome.turns["failed, then resumed" if resumed else "failed, not resumed"] += 1
            if turn.error.stage != "tool":  # a kill fails a turn only by a charge it cut
                outcome.other_failures.append(f"{turn.run_id}: {turn.error}")
            partial = turn.error.partial
            if partial is None or answered or not same_evidence(partial.messages, transcript[:end]):
                outcome.mismatched.append(
                    f"{turn.run_id}: its RunError ({turn.error.stage}) is not the transcript's"
                )
        if turn.streamed:
            check_stream(outcome, turn, [transcript[i] for i in own])


def same_evidence(partial: list[Message], transcript: list[Message]) -> bool:
    """A failed turn's evidence, as the transcript holds it once the next turn repaired it:
    the same messages, each open call closed by one more tool message."""
    repairs = [m for m in transcript if m not in partial]
    kept = [m for m in transcript if m in partial]
    answered = {m.tool_call_id for m in partial if m.role == "tool"}
    closes = all(m.role == "tool" and m.tool_call_id not in answered for m in repairs)
    return kept == partial and closes


def check_stream(outcome: Trial, turn: Turn, own: list[Message]) -> None:
    """A streamed reader yields each item at most once, in order (its offsets rise), its
    loop events once each, in order, and each model turn's text as the transcript has it
    (the deltas after its last restart); it ends with the turn."""
    if turn.other:
        outcome.streams["raised another error or hung"] += 1
        return
    outcome.streams["read to its end" if turn.result is not None else "raised the RunError"] += 1
    faults: list[str] = []
    # The offset counts the run's own items: a followed child run's (a handoff's, with
    # child runs) leave it where it was, so only the turn's own events must raise it.
    offsets = [offset for _, offset in turn.events]
    own_offsets = [offset for event, offset in turn.events if event.run_id == turn.run_id]
    if any(later < earlier for earlier, later in itertools.pairwise(offsets)) or any(
        later <= earlier for earlier, later in itertools.pairwise(own_offsets)
    ):
        faults.append(f"offsets not rising: {offsets}")
    # Keyed by run: a handed-over turn's reader reads two runs, each counting from turn 1.
    seen: set[tuple[str, str, Any]] = set()
    texts: dict[tuple[str, int], str] = {}
    model_turns: dict[str, int] = {}
    for event, _ in turn.events:
        which: Any = event.call.id if event.call is not None else event.turn
        run = event.run_id
        if event.kind in ("model_start", "model_end", "tool_start", "tool_end"):
            if (event.kind, run, which) in seen:
                faults.append(f"{event.kind} {which} twice")
            seen.add((event.kind, run, which))
            opening = {"model_end": "model_start", "tool_end": "tool_start"}.get(event.kind)
            if (
                opening is not None
                and (opening, run, which) not in seen
                and not (event.call is not None and event.call.name.startswith("transfer_to_"))
            ):  # a handoff's result has no start
                faults.append(f"{event.kind} {which} before its start")
        if event.kind == "model_start":
            if event.turn < model_turns.get(run, 0):
                faults.append(f"model turn {event.turn} after {model_turns[run]} in {run}")
            model_turns[run] = event.turn
        elif event.kind == "turn_restarted":
            texts[(run, event.turn)] = ""
            outcome.restarts += 1
        elif event.kind == "text_delta" and event.delta is not None:
            texts[(run, event.turn)] = texts.get((run, event.turn), "") + event.delta.text
    answered = [m for m in own if m.role == "assistant"]
    answers = [m.content for m in answered]
    counted: Counter[str] = Counter()
    streamed = []
    for m in answered:
        counted[m.run_id] += 1
        streamed.append(texts.get((m.run_id, counted[m.run_id]), ""))
    if streamed != answers:
        faults.append(f"texts {streamed} where the transcript has {answers}")
    ended = {event.call.id for event, _ in turn.events if event.kind == "tool_end" and event.call}
    results = {m.tool_call_id for m in own if m.role == "tool"}
    if (turn.result is not None and ended != results) or not ended <= results:
        faults.append(f"tool_end for {sorted(ended)}, results for {sorted(results)}")
    outcome.stream_faults += [f"{turn.run_id}: {fault}" for fault in faults]


async def main(trials: int, seed: int, shape: str, handoff: bool = False) -> None:
    kind = "run" if shape == "run" else "conversation"
    with tempfile.TemporaryDirectory() as tmp:
        log_dir = Path(tmp)
        os.environ["GOLEM_TRIAL_DIR"] = str(log_dir)  # the takeover worker logs here too
        async with dev_server() as env:
            gate = asyncio.Semaphore(CONCURRENT_TRIALS)

            def one(index: int) -> Coroutine[Any, Any, Trial]:
                rng = random.Random(f"{seed}-{index}")  # each trial's own choices
                if shape == "run":
                    return trial(env.client, log_dir, rng, index)
                inline = shape == "inline"
                return conversation_trial(env.client, log_dir, rng, index, inline, handoff)

            async def bounded(index: int) -> Trial:
                async with gate:
                    bound = TRIAL_BOUND[kind].total_seconds()
                    try:
                        async with asyncio.timeout(bound):
                            return await one(index)
                    except TimeoutError:
                        return Trial(kind="timed out", seconds=bound, error="timed out")

            start = time.perf_counter()
            results = await asyncio.gather(*(bounded(i) for i in range(trials)))
            wall = time.perf_counter() - start
    if shape == "run":
        report(results, seed, wall, shape)
    else:
        conversation_report(results, seed, wall, shape, handoff)


Row = tuple[str, int, str]


def evidence_rows(results: list[Trial]) -> list[Row]:
    """What every shape checks of the tools' executions against the final messages."""
    closures: Counter[str] = sum((r.closures for r in results), Counter())
    return [
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
        (
            "model calls that took more than one retry",
            sum(r.late_model_calls for r in results),
            "must be 0",
        ),
    ]


def print_rows(title: str, rows: list[Row], results: list[Trial], wall: float) -> None:
    print(title)
    for label, value, goal in rows:
        print(f"{label:<48}{value:>6}  {goal}")
    seconds = [r.seconds for r in results]
    print(
        f"{'median / max seconds per trial':<48}{statistics.median(seconds):>6.1f} / {max(seconds):.1f}"
    )
    print(f"{'wall seconds (' + str(CONCURRENT_TRIALS) + ' trials at a time)':<48}{wall:>6.1f}")
    for r in results:
        if r.faulty:
            print(
                f"  problem: {r.kind} {r.error} lost={r.lost} repeated={r.repeated} "
                f"lie={r.never_started_lie} unanswered={r.unanswered} "
                f"late model calls={r.late_model_calls}"
            )
            for fault in r.mismatched + r.stream_faults + r.other_failures:
                print(f"    {fault}")
            if r.rebuild_differs or r.runs_differ:
                print(f"    rebuild differs={r.rebuild_differs} runs differ={r.runs_differ}")


def report(results: list[Trial], seed: int, wall: float, shape: str = "run") -> None:
    kinds = Counter(r.kind for r in results)
    rows: list[Row] = [
        ("trials", len(results), ""),
        ("killed while the run was running", sum(r.killed_mid_run for r in results), ""),
        ("completed after takeover (no resume)", kinds["completed"], ""),
        ("failed, then resumed to completion", kinds["resumed"], ""),
        ("failed otherwise / timed out", kinds["failed"] + kinds["timed out"], "must be 0"),
        *evidence_rows(results),
    ]
    title = f"crash trials: {TURNS}-turn run, SIGKILL at a random moment, seed {seed}"
    print_rows(title, rows, results, wall)


def conversation_report(
    results: list[Trial], seed: int, wall: float, shape: str, handoff: bool = False
) -> None:
    moments = Counter(r.moment for r in results)
    turns: Counter[str] = sum((r.turns for r in results), Counter())
    streams: Counter[str] = sum((r.streams for r in results), Counter())
    kinds = Counter(r.kind for r in results)
    rows: list[Row] = [
        ("trials", len(results), ""),
        ("killed in a model call", moments["in a model call"], ""),
        ("killed in a tool call", moments["in a tool call"], ""),
        ("killed in golem's code between calls", moments["in golem's code between calls"], ""),
        ("killed between turns", moments["between turns"], ""),
        ("killed after the last turn", moments["after the last turn"], ""),
        (
            "  of those inside a turn, its reader streaming",
            sum(r.streamed_kill for r in results),
            "",
        ),
        ("turns sent", sum(turns.values()), ""),
        ("turns completed", turns["completed"], ""),
        ("turns failed, then resumed by the next send", turns["failed, then resumed"], ""),
        ("turns failed, not resumed", turns["failed, not resumed"], "must be 0"),
        (
            "turns failed by anything but a cut charge",
            sum(len(r.other_failures) for r in results),
            "must be 0",
        ),
        ("sends that raised another error or hung", turns["other error or hung"], "must be 0"),
        ("streamed turns read to their end", streams["read to its end"], ""),
        ("streamed turns that raised the turn's RunError", streams["raised the RunError"], ""),
        ("streamed model calls restarted (turn_restarted)", sum(r.restarts for r in results), ""),
        ("trials failed otherwise / timed out", kinds["failed"] + kinds["timed out"], "must be 0"),
        *evidence_rows(results),
        (
            "turn outcomes unlike the transcript",
            sum(len(r.mismatched) for r in results),
            "must be 0",
        ),
        (
            "stream faults (repeats, order, text, tools)",
            sum(len(r.stream_faults) for r in results),
            "must be 0",
        ),
        (
            "conv.messages() unlike the history's rebuild",
            sum(r.rebuild_differs for r in results),
            "must be 0",
        ),
        ("run lists unlike the turns sent", sum(r.runs_differ for r in results), "must be 0"),
    ]
    title = (
        f"crash trials: conversations of {CONVERSATION_TURNS} turns ({SHAPES[shape]}"
        f"{', each handed over' if handoff else ''}), each "
        f"{TURNS} model calls, SIGKILL at a random moment, seed {seed}"
    )
    print_rows(title, rows, results, wall)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        asyncio.run(serve_until_killed(sys.argv[2], sys.argv[3]))
    else:
        parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
        parser.add_argument("trials", nargs="?", type=int, default=50)
        parser.add_argument("seed", nargs="?", type=int, default=1)
        parser.add_argument("--shape", choices=sorted(SHAPES), default="run")
        parser.add_argument("--handoff", action="store_true", help="each turn handed over")
        args = parser.parse_args()
        if args.handoff and args.shape == "run":
            parser.error("--handoff needs --shape conversation or inline")
        asyncio.run(main(args.trials, args.seed, args.shape, args.handoff))
