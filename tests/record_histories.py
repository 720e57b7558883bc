"""Record the workflow histories replayed by tests/test_replay.py.

Run: .venv/bin/python tests/record_histories.py [NAME ...] (about half a minute; it starts
its own dev server and, for the crash, a worker process it kills). With names, only those
histories are rewritten: the others keep what older code recorded, which is the point.
``--release VERSION`` instead copies the corpus, MCP histories included, to
tests/histories/release-VERSION/, which no later run may write again.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import os
import re
import signal
import sys
import tempfile
import uuid
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent / "providers"))  # the fake Responses API
sys.path.insert(0, str(Path(__file__).parent.parent))  # for examples/

import replay_agents
from provider_fakes import (
    Answer,
    FakeProvider,
    check_openai_responses,
    completed_response,
    openai_malformed,
)
from pytest_httpserver import HTTPServer
from replay_agents import (
    AGENTS,
    ENCRYPTION_KEY,
    EVALUATING,
    WIDE_CHARACTERS,
    Deps,
    approval_agent,
    booking_agent,
    cancel_agent,
    delegating_agent,
    escalating_agent,
    front_agent,
    inline_agent,
    paged_agent,
    raced_agent,
    raced_caller,
    responses_agent,
    responses_model,
    retry_agent,
    reviewed_agent,
    stop_agent,
    tools_agent,
    wide_agent,
)
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.worker import Worker
from test_conversation_boundaries import budgeted
from test_durable_approvals import timer_fired
from waiting import eventually

from examples.support_ticket import Ticket, TicketWorkflow
from golem.client import DurableAgent, DurableConversation, pending
from golem.messages import Message, ToolCall
from golem.results import RunError
from golem.testing import dev_server
from golem.wire import Paused, names
from golem.wire import transcript as transcript_module
from golem.wire.lineage import run_search_attributes
from golem.wire.transcript import CARRY_BYTES
from golem.worker import GolemPlugin
from golem.workflows.conversation import ConversationInput, ConversationWorkflow

OUT = Path(__file__).parent / "histories"
CRASH_WORKER = Path(__file__).parent / "crash_worker.py"


async def record_runs(client: Client, tq: str) -> dict[str, str]:
    runs = {}
    first = await DurableAgent(client, tools_agent, task_queue=tq).run(
        "weather?", deps=Deps(user="Ada")
    )
    runs["tools_batch_failed_unknown"] = first.run_id
    second = await DurableAgent(client, tools_agent, task_queue=tq).run(
        "again", history=first.messages, deps=Deps(user="Ada")
    )
    runs["continued_conversation"] = second.run_id
    try:
        await DurableAgent(client, stop_agent, task_queue=tq).run("stop")
    except RunError as exc:
        assert exc.partial is not None
        runs["tool_canceled"] = exc.partial.run_id

    approvals = DurableAgent(client, approval_agent, task_queue=tq)
    waiting = await approvals.start("pay 5")
    paused = await waiting.result()
    assert paused.paused
    runs["approval_paused"] = paused.run_id
    # A new run may continue a paused run's history once that run no longer waits.
    await waiting.cancel()
    try:
        await waiting.result(final=True)
    except RunError as exc:
        assert exc.stage == "canceled"
    approved = await approvals.run(history=paused.messages, approvals={"t1": True})
    assert approved.output == "transfer: sent 5", approved.output
    runs["approval_approved"] = approved.run_id

    # Listed in the pending inbox while it waits (GolemWaiting, memo), approved in place.
    listed = await approvals.start("pay 5")
    assert (await listed.result()).paused
    in_place = await listed.approve({"t1": True}, by="alice")
    assert in_place.output == "transfer: sent 5", in_place.output
    runs["inbox_approved_in_place"] = listed.run_id

    # Another Agent as the approval evaluator: it allows the call inside the evaluation's
    # activity, no person asked.
    reviewed = await DurableAgent(client, reviewed_agent, task_queue=tq).run("pay 5")
    assert reviewed.output == "transfer: sent 5", reviewed.output
    runs["agent_evaluator_allowed"] = reviewed.run_id

    # A person answers while the evaluator still thinks: the evaluation is cancelled.
    raced = await DurableAgent(client, raced_agent, task_queue=tq).start("pay 5")
    await asyncio.wait_for(EVALUATING.wait(), 30)
    answered = await raced.approve({"t1": True}, by="dana")
    assert answered.output == "transfer: sent 5", answered.output
    runs["evaluation_answered_first"] = raced.run_id

    # A mixed batch, each call bounded by its own kind's timeout (golem.external-timeout):
    # the client-run call times out, the approval waits on for a person.
    booking = await DurableAgent(client, booking_agent, task_queue=tq).start("book")
    assert (await booking.result()).paused
    await timer_fired(client, booking.run_id)
    booked = await booking.approve({"t1": True})
    assert booked.output.endswith("| sent 5"), booked.output
    runs["external_timed_out_mixed"] = booking.run_id

    started = await DurableAgent(client, cancel_agent, task_queue=tq).start("hang")
    await replay_agents.HANGING.wait()
    await started.cancel()
    try:
        await started.result()
    except RunError as exc:
        assert exc.stage == "canceled" and exc.partial is not None
    runs["client_cancel_memo"] = started.run_id

    # A prompt too long to ride a model call's input: the history cannot rebuild the run's
    # requests, so its result pages what it cannot carry.
    paged = await DurableAgent(client, paged_agent, task_queue=tq).run("y" * 1_100_000)
    assert paged.output == f"read {replay_agents.PAGED_BYTES} bytes"
    runs["paged_result"] = paged.run_id

    # Non-ASCII text under a page in characters, over it in UTF-8 bytes: the result pages it
    # (the patch golem.utf8-pages).
    wide = await DurableAgent(client, wide_agent, task_queue=tq).run("字" * WIDE_CHARACTERS)
    assert wide.output == f"read {WIDE_CHARACTERS} characters"
    runs["utf8_paged_result"] = wide.run_id

    retried = await DurableAgent(client, retry_agent, task_queue=tq).run("hi")
    assert retried.requests == 1
    runs["model_call_retried"] = retried.run_id

    # A golem.decide signal of no argument while the run waits: dropped (golem.signal-arity);
    # 0.2.0 failed the run on it (signal_arity_failed, recorded by that code).
    stray = await approvals.start("pay 5")
    assert (await stray.result()).paused
    await stray.handle.signal(names.DECIDE, args=[])
    kept = await stray.approve({"t1": True})
    assert kept.output == "transfer: sent 5", kept.output
    runs["signal_arity_dropped"] = stray.run_id

    # A golem.paused naming a run this one never started, while it waits: dropped
    # (golem.reports-from-children); 0.2.0 listed its call as waiting below
    # (paused_report_forged_taken, recorded by that code).
    forged = await approvals.start("pay 5")
    assert (await forged.result()).paused
    made_up = ToolCall(id="f1", name="transfer", args="{}")
    report = Paused(run_id="made-up-child", conversation_id="", pending_approvals=[made_up])
    await forged.handle.signal(names.PAUSED, report)
    await forged.approve({"t1": True})
    await forged.handle.result()
    runs["paused_report_forged_dropped"] = forged.run_id
    return runs


async def record_crash(client: Client) -> dict[str, str]:
    """A worker killed mid-call; another takes over, the run fails, and is resumed."""
    tq = f"replay-crash-{uuid.uuid4().hex[:8]}"
    crash_dir = Path(tempfile.mkdtemp())
    os.environ["GOLEM_CRASH_DIR"] = str(crash_dir)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(CRASH_WORKER),
        client.service_client.config.target_host,
        tq,
        env={**os.environ, "GOLEM_CRASH_HANG": "1"},
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    assert (await process.stdout.readline()).strip() == b"ready"
    durable: DurableAgent[str] = DurableAgent(client, "at_most_once", task_queue=tq)
    run = await durable.start("go")
    started = crash_dir / "started"
    await eventually(started.exists, what="the at-most-once call to start", timeout=30)
    process.send_signal(signal.SIGKILL)
    await process.wait()
    plugin = GolemPlugin(*AGENTS, heartbeat_timeout=timedelta(seconds=2))
    async with Worker(client, task_queue=tq, plugins=[plugin]):
        try:
            await run.result()
            raise AssertionError("an at-most-once call lost in a crash must fail the run")
        except RunError as exc:
            resumed = await durable.resume(exc, "try again")
    return {"crash_taken_over": run.run_id, "crash_resumed": resumed.run_id}


async def main(wanted: set[str]) -> None:
    async with dev_server() as env:
        tq = f"replay-{uuid.uuid4().hex[:8]}"
        plugin = GolemPlugin(*AGENTS)
        async with Worker(env.client, task_queue=tq, workflows=[TicketWorkflow], plugins=[plugin]):
            runs: dict[str, str | tuple[str, str]] = {**await record_runs(env.client, tq)}
            runs["streamed_run"] = await record_streamed(env.client, tq)
            runs |= await record_conversation(env.client, tq)
            runs |= await record_conversation_external(env.client, tq)
            runs |= await record_evaluation_races(env.client, tq)
            runs |= await record_segments(env.client, tq)
            runs |= await record_delegation(env.client, tq)
            runs |= await record_handoffs(env.client, tq)
            runs |= await record_rested(env.client, tq)
            runs |= await record_inline(env.client, tq)
            runs |= await record_inline_paused(env.client, tq)
            runs |= await record_inline_listed(env.client, tq)
            runs |= await record_inline_streamed(env.client, tq)
            runs["ticket_child_and_inline"] = await record_ticket(env.client, tq)
            runs["conversation_fork"] = await record_fork(env.client, tq)
            runs["responses_run"] = await record_responses(env.client, tq)
        runs["encrypted_run"] = await record_encrypted(env.client)
        if not wanted or wanted & {"crash_taken_over", "crash_resumed"}:
            runs |= await record_crash(env.client)
        for name, run in runs.items():
            if wanted and name not in wanted:
                continue  # keep the checked-in history (recorded by older code)
            workflow_id, run_id = run if isinstance(run, tuple) else (run, None)
            handle = env.client.get_workflow_handle(workflow_id, run_id=run_id)
            text = (await handle.fetch_history()).to_json()
            for stale in OUT.glob(f"{name}.json*"):
                stale.unlink()
            if len(text) > 256_000:
                (OUT / f"{name}.json.gz").write_bytes(gzip.compress(text.encode(), mtime=0))
            else:
                (OUT / f"{name}.json").write_text(text)
            print("recorded", name)


async def record_conversation(client: Client, tq: str) -> dict[str, str | tuple[str, str]]:
    """A ConversationWorkflow whose first run has a turn that waits for an approval, then
    continues as new (its budget: 2 turns); the next run takes a turn and is closed."""
    conv = await budgeted(client, approval_agent, tq, turns_per_run=2)
    handle = conv.handle
    paused = await conv.send("pay 5")
    assert paused.paused
    approved = await conv.approve({"t1": True})
    assert approved.output == "transfer: sent 5", approved.output
    await conv.send("thanks")  # the budget is spent: the conversation continues as new
    third = await conv.send("and now?")
    await conv.close()
    runs = await conv.runs()
    assert len(runs) == 3 and runs[0] == paused.run_id == approved.run_id, runs
    first_run, _ = await continued_from(client, handle.id)
    assert third.messages[-1].content.startswith("transfer:")
    return {
        "conversation_approval_continued": (handle.id, first_run),
        "conversation_after_continue": handle.id,
    }


async def record_conversation_external(client: Client, tq: str) -> dict[str, str]:
    """A conversation's turn with a mixed batch (golem.external-timeout in the conversation):
    the conversation's external timer answers the client-run call, a person the approval."""
    conv = await DurableAgent(client, booking_agent, task_queue=tq).conversation()
    paused = await conv.send("book")
    assert paused.paused
    await timer_fired(client, conv.id)
    booked = await conv.approve({"t1": True})
    assert booked.output.endswith("| sent 5"), booked.output
    await conv.close()
    return {"conversation_external_timed_out": conv.id, "conversation_external_turn": paused.run_id}


async def record_evaluation_races(client: Client, tq: str) -> dict[str, str | tuple[str, str]]:
    """A person answers while the evaluator still thinks (golem.evaluation-race), in a
    conversation's turn and in a delegated run: the evaluation is cancelled either way."""
    replay_agents.EVALUATING.clear()
    conv = await DurableAgent(client, raced_agent, task_queue=tq).conversation()
    sent = asyncio.ensure_future(conv.send("pay 5"))
    await asyncio.wait_for(replay_agents.EVALUATING.wait(), 30)
    await conv.approve({"t1": True}, by="dana")
    turn = await sent
    assert turn.output == "transfer: sent 5", turn.output
    await conv.close()
    replay_agents.EVALUATING.clear()
    top = await DurableAgent(client, raced_caller, task_queue=tq).start("go")
    await asyncio.wait_for(replay_agents.EVALUATING.wait(), 30)
    [call] = await eventually(
        lambda: pending(client, agent="replay_raced"), what="the delegate's call listed"
    )
    answered = await top.approve({call.call_id: True}, by="dana")
    assert answered.output == "transfer: sent 5", answered.output
    return {
        "conversation_evaluation_answered_first": conv.id,
        "conversation_evaluation_turn": turn.run_id,
        "delegate_evaluation_answered_first": top.run_id,
        "delegate_evaluation_child": call.run_id,
    }


async def continued_from(client: Client, workflow_id: str) -> tuple[str, bytes]:
    """The workflow run the newest run of ``workflow_id`` continued as new from, and the
    input it was given."""
    async for event in client.get_workflow_handle(workflow_id).fetch_history_events():
        attrs = event.workflow_execution_started_event_attributes
        assert attrs.continued_execution_run_id, f"{workflow_id} did not continue as new"
        return attrs.continued_execution_run_id, attrs.input.payloads[0].data
    raise AssertionError(f"{workflow_id} has no history")


async def record_segments(client: Client, tq: str) -> dict[str, str | tuple[str, str]]:
    """A conversation seeded with an open call (the conversation repairs it before its first
    turn) that continues as new by reference (every transcript counts as long here); the
    next run's turn reads its history from the first run's."""
    transcript_module.CARRY_BYTES = 0
    seed = [
        Message.user("pay 1"),
        Message.assistant("", [ToolCall(id="open", name="transfer", args='{"amount": 1}')]),
    ]
    handle = await client.start_workflow(
        ConversationWorkflow.run,
        ConversationInput(agent=approval_agent.name, messages=seed, turns_per_run=2),
        id=f"replay-segments-{uuid.uuid4().hex[:8]}",
        task_queue=tq,
    )
    conv = DurableConversation(DurableAgent(client, approval_agent, task_queue=tq), handle)
    for prompt in ("thanks", "and now?", "bye"):
        await conv.send(prompt)
    await conv.close()
    transcript_module.CARRY_BYTES = CARRY_BYTES
    first_run, given = await continued_from(client, handle.id)
    assert b'"earlier"' in given
    return {"segments_repaired_continued": (handle.id, first_run), "segments_after": handle.id}


async def record_inline(client: Client, tq: str) -> dict[str, str | tuple[str, str]]:
    """A conversation whose turns run inline (docs/adr/0050-turns-inline.md), continued as
    new by reference after two turns; the next run's turn reads the first run's."""
    transcript_module.CARRY_BYTES = 0
    handle = await client.start_workflow(
        ConversationWorkflow.run,
        ConversationInput(agent=inline_agent.name, turns_per_run=2, inline_turns=True),
        id=f"replay-inline-{uuid.uuid4().hex[:8]}",
        task_queue=tq,
    )
    conv = DurableConversation(DurableAgent(client, inline_agent, task_queue=tq), handle)
    answers = [(await conv.send(city)).output for city in ("Paris", "Oslo", "Paris")]
    assert answers == ["sunny there", "cold there", "sunny there"], answers
    await conv.close()
    transcript_module.CARRY_BYTES = CARRY_BYTES
    first_run, given = await continued_from(client, handle.id)
    assert b'"earlier"' in given
    return {
        "conversation_inline_continued": (handle.id, first_run),
        "conversation_inline": handle.id,
    }


async def record_inline_listed(client: Client, tq: str) -> dict[str, str | tuple[str, str]]:
    """An inline conversation whose start carried ``GolemTurnRuns`` (as a client's does where
    the namespace has it): each turn's run id listed there as it starts, continued as new
    after two turns (the list stays on the first run), the next run listing its own."""
    conversation_id = f"replay-inline-listed-{uuid.uuid4().hex[:8]}"
    handle = await client.start_workflow(
        ConversationWorkflow.run,
        ConversationInput(agent=inline_agent.name, turns_per_run=2, inline_turns=True),
        id=conversation_id,
        task_queue=tq,
        search_attributes=run_search_attributes(conversation_id, inline_agent.name, turn_runs=True),
        memo={names.INLINE_MEMO: True, names.TURN_RUNS_MEMO: True},
    )
    conv = DurableConversation(DurableAgent(client, inline_agent, task_queue=tq), handle)
    answers = [(await conv.send(city)).output for city in ("Paris", "Oslo", "Paris")]
    assert answers == ["sunny there", "cold there", "sunny there"], answers
    await conv.close()
    first_run, _ = await continued_from(client, handle.id)
    return {
        "conversation_inline_listed_continued": (handle.id, first_run),
        "conversation_inline_listed": handle.id,
    }


async def record_inline_paused(client: Client, tq: str) -> dict[str, str | tuple[str, str]]:
    """Conversations whose turns run inline and wait for an approval: one approved (its
    approve answers its end), one ended by the close (no update answers it: the
    conversation records its end in its memo)."""
    durable = DurableAgent(client, approval_agent, task_queue=tq)
    approved = await durable.conversation(inline_turns=True)
    assert (await approved.send("pay 5")).paused
    assert (await approved.approve({"t1": True})).output == "transfer: sent 5"
    await approved.close()
    closed = await durable.conversation(inline_turns=True)
    assert (await closed.send("pay 5")).paused
    await closed.close()  # denies the waiting call: the turn ends, no update answering it
    return {"conversation_inline_approved": approved.id, "conversation_inline_closed": closed.id}


async def record_inline_streamed(client: Client, tq: str) -> dict[str, str | tuple[str, str]]:
    """Streamed inline turns: the conversation hosts their stream and continues as new after
    two, carrying the latest turn's items; the next run streams the third. And an inline
    conversation cancelled while its turn waits: the turn ends at stage canceled."""
    handle = await client.start_workflow(
        ConversationWorkflow.run,
        ConversationInput(agent=inline_agent.name, turns_per_run=2, inline_turns=True),
        id=f"replay-inline-streamed-{uuid.uuid4().hex[:8]}",
        task_queue=tq,
        memo={names.INLINE_MEMO: True},
    )
    conv = DurableConversation(DurableAgent(client, inline_agent, task_queue=tq), handle)
    outputs = []
    for city in ("Paris", "Oslo", "Paris"):
        stream = conv.send_stream(city)
        kinds = [event.kind async for event in stream]
        assert "tool_end" in kinds, kinds
        outputs.append(stream.result.output)
    assert outputs == ["sunny there", "cold there", "sunny there"], outputs
    await conv.close()
    first_run, given = await continued_from(client, handle.id)
    assert b'"stream"' in given
    cancelled = await DurableAgent(client, approval_agent, task_queue=tq).conversation(
        inline_turns=True
    )
    assert (await cancelled.send("pay 5")).paused
    await cancelled.handle.cancel()
    with contextlib.suppress(WorkflowFailureError):
        await cancelled.handle.result()
    return {
        "conversation_inline_streamed_continued": (handle.id, first_run),
        "conversation_inline_streamed": handle.id,
        "conversation_inline_cancelled": cancelled.id,
    }


async def record_fork(client: Client, tq: str) -> str:
    """A conversation forked at its first turn; the fork takes a turn of its own."""
    conv = await DurableAgent(client, tools_agent, task_queue=tq).conversation()
    first = await conv.send("weather?", deps=Deps(user="Ada"))
    await conv.send("and tomorrow?", deps=Deps(user="Ada"))
    fork = await conv.fork(at_run_id=first.run_id)
    turned = await fork.send("and in Oslo?", deps=Deps(user="Bo"))
    assert turned.messages[: len(first.messages)] == first.messages
    await fork.close()
    await conv.close()
    return fork.id


async def record_encrypted(client: Client) -> str:
    """A run whose every payload is sealed with ``ENCRYPTION_KEY`` (its replay needs it)."""
    plugin = GolemPlugin(*AGENTS, encryption_key=ENCRYPTION_KEY)
    sealed = await Client.connect(client.service_client.config.target_host, plugins=[plugin])
    tq = f"replay-sealed-{uuid.uuid4().hex[:8]}"
    async with Worker(sealed, task_queue=tq):
        result = await DurableAgent(sealed, tools_agent, task_queue=tq).run(
            "weather?", deps=Deps(user="Ada")
        )
    return result.run_id


async def record_delegation(client: Client, tq: str) -> dict[str, str | tuple[str, str]]:
    """Delegation: two delegates= children in parallel and two ctx.delegate runs from a
    tool activity; a child's approval surfaced and answered at the top."""
    result = await DurableAgent(client, delegating_agent, task_queue=tq).run("go")
    assert len(result.sub_runs) == 4, result.sub_runs
    assert result.output.startswith("answered: book a | answered: book b | "), result.output
    run = await DurableAgent(client, escalating_agent, task_queue=tq).start("pay")
    paused = await run.result()
    [call] = paused.pending_approvals
    waiting = paused.pending_runs[call.id]
    done = await run.approve({call.id: True})
    assert done.output == "escalated: transfer: sent 5", done.output
    return {
        "delegation_parallel": result.run_id,
        "delegation_child": result.sub_runs[0],
        "delegation_approved_at_top": run.run_id,
        "delegation_child_approved": waiting,
    }


async def record_handoffs(client: Client, tq: str) -> dict[str, str | tuple[str, str]]:
    """Handoffs: a standalone run that hands over (its target a child run), and a
    conversation whose turn hands over, then continues as new with the target serving."""
    alone = await DurableAgent(client, front_agent, task_queue=tq).run("the desk, please")
    assert alone.agent == "replay_desk", alone
    conv = await budgeted(client, front_agent, tq, turns_per_run=2)
    handle = conv.handle
    await conv.send("hello")
    handed = await conv.send("the desk, please")
    assert handed.agent == "replay_desk", handed
    after = await conv.send("still there?")  # the desk serves, in the next workflow run
    assert after.agent == "replay_desk" and await conv.current_agent() == "replay_desk"
    await conv.close()
    first_run, _ = await continued_from(client, handle.id)
    # Inline (docs/adr/0050): the handed-over turn streamed, its target's run in the same
    # workflow, which continues as new with the target serving.
    inline = await budgeted(client, front_agent, tq, turns_per_run=2, inline_turns=True)
    await inline.send("hello")
    stream = inline.send_stream("the desk, please")
    agents = {event.agent async for event in stream}
    assert stream.result.agent == "replay_desk" and "replay_desk" in agents, agents
    after = await inline.send("still there?")
    assert after.agent == "replay_desk", after
    await inline.close()
    inline_first, _ = await continued_from(client, inline.id)
    return {
        "handoff_standalone": alone.run_id,
        "handoff_conversation": (handle.id, first_run),
        "handoff_conversation_after": handle.id,
        "conversation_inline_handed_continued": (inline.id, inline_first),
        "conversation_inline_handed": inline.id,
    }


async def record_rested(client: Client, tq: str) -> dict[str, str | tuple[str, str]]:
    """A conversation whose turn waits for an approval (no rest meanwhile), then rests after
    its idle timeout (1 s), is reopened by its next turn, and closed (docs/adr/0021)."""
    durable = DurableAgent(client, approval_agent, task_queue=tq)
    conv = await durable.conversation(idle_timeout=timedelta(seconds=1))
    assert (await conv.send("pay 5")).paused
    assert (await conv.approve({"t1": True})).output == "transfer: sent 5"
    handle = client.get_workflow_handle(conv.id)

    async def at_rest() -> bool:
        return (await handle.describe()).status != WorkflowExecutionStatus.RUNNING

    await eventually(at_rest, what="the conversation to rest after its idle timeout", timeout=30)
    rested = (await handle.describe()).run_id or ""
    await conv.send("and now?")  # reopens it
    await conv.close()
    return {
        "conversation_rested": (conv.id, rested),
        "conversation_reopened": conv.id,  # recorded when the reopen was a start of its own
        "conversation_reopened_with_turn": conv.id,  # since the turn carries the start
    }


async def record_ticket(client: Client, tq: str) -> str:
    """examples/support_ticket.py's TicketWorkflow: a child run, a signal, an inline run."""
    handle = await client.start_workflow(
        TicketWorkflow.run,
        Ticket("I was charged twice on my invoice."),
        id=f"replay-ticket-{uuid.uuid4().hex[:8]}",
        task_queue=tq,
    )
    await handle.signal(TicketWorkflow.review, "A refund is on its way.")
    outcome = await handle.result()
    assert outcome.queue == "billing", outcome
    return handle.id


async def record_streamed(client: Client, tq: str) -> str:
    """A streamed run (deltas as signals) read by a live subscriber (its polls as updates)."""
    stream = DurableAgent(client, tools_agent, task_queue=tq).run_stream(
        "weather?", deps=Deps(user="Ada")
    )
    async for _ in stream:
        pass
    return stream.run.run_id


async def record_responses(client: Client, tq: str) -> str:
    """A run through OpenAIResponsesModel against the checking fake of /v1/responses: a
    call after encrypted reasoning, its result, the reasoning replayed, the answer."""
    fake = FakeProvider(check_openai_responses, re.compile(r"/v1/responses"), openai_malformed)
    for name in (
        "openai-responses-04-stream-function-call",
        "openai-responses-05-stream-text-after-function-call-output",
    ):
        fake.answer(Answer.json(200, completed_response(name)))
    server = HTTPServer(host="127.0.0.1", port=0)
    server.expect_request(re.compile(".*"), method="POST").respond_with_handler(fake.handle)
    server.start()
    try:
        responses_model.base_url = server.url_for("/v1").rstrip("/")
        result = await DurableAgent(client, responses_agent, task_queue=tq).run(
            "What's the weather in Paris?"
        )
    finally:
        server.stop()
    assert result.output == "The weather in Paris is sunny, 22°C.", result.output
    assert [i["type"] for i in fake.bodies[1]["input"]][:2] == ["message", "reasoning"]
    return result.run_id


def freeze(version: str) -> None:
    """Copy the current corpus to ``histories/release-VERSION/``: the histories a release
    recorded, which every later release must replay (docs/adr/0015-wire-format.md). A
    release's folder is never written again."""
    target = OUT / f"release-{version}"
    if target.exists():
        raise SystemExit(f"{target} exists: a release's histories are never re-recorded")
    (target / "mcp").mkdir(parents=True)
    for path in [*OUT.glob("*.json*"), *(OUT / "mcp").glob("*.json")]:
        (target / path.relative_to(OUT)).write_bytes(path.read_bytes())
    print("froze", len(list(target.rglob("*.json*"))), "histories into", target)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--release"]:
        freeze(sys.argv[2])
        sys.exit(0)
    asyncio.run(main(set(sys.argv[1:])))
    sys.stdout.flush()
    os._exit(0)  # the Temporal core runtime can abort at interpreter teardown
