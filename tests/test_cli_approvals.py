"""Approvals from the command line: ``golem run`` asks at a terminal, says what waits
otherwise, and ``golem approve`` / ``golem show`` answer and list them (real CLI, dev server)."""

from __future__ import annotations

import asyncio
import getpass
import json
import os
import pty
import select
import subprocess
import time
from typing import Any

from test_cli import GOLEM, TESTS, address, golem, golem_worker, ids, one_line, queue
from waiting import eventually

__all__ = ["address"]  # the fixture, shared with tests/test_cli.py

TRANSFER = 'transfer({"amount": 5})'
DENIED = "transfer: the user denied this tool call; it was not executed"


def at_terminal(argv: list[str], answer: str, timeout: float = 60.0) -> tuple[int, str]:
    """Run ``golem`` at a terminal (a pty for stdin, stdout and stderr), answering the first
    ``[y/N]`` question with ``answer``; its exit code and everything the terminal showed."""
    main, child = pty.openpty()
    proc = subprocess.Popen([GOLEM, *argv], stdin=child, stdout=child, stderr=child, cwd=TESTS)
    os.close(child)
    shown, answered = b"", False
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            readable, _, _ = select.select([main], [], [], 0.2)
            if not readable:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(main, 4096)
            except OSError:  # the terminal closed: the command ended
                break
            shown += chunk
            if not answered and b"[y/N] " in shown:
                os.write(main, answer.encode() + b"\n")
                answered = True
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(main)
    return code, shown.decode().replace("\r\n", "\n")


async def test_run_at_a_terminal_asks_for_each_approval_as_chat_does(address: str) -> None:
    tq = queue()
    argv = ["run", "--agent", "bank", "--task-queue", tq, "pay"]
    async with golem_worker(tq, "bank"):
        code, shown = await asyncio.to_thread(at_terminal, argv, "n")
    assert code == 0, shown
    assert f"approve {TRANSFER}? [y/N] n\n" in shown
    assert f"{DENIED}\n" in shown  # the answer streamed on after the decision
    assert "run id:" in shown and "waiting for approval" not in shown


async def test_run_without_a_terminal_says_what_waits_and_golem_approve_finishes_it(
    address: str,
) -> None:
    tq = queue()
    async with golem_worker(tq, "bank"):
        waiting = await golem("run", "--agent", "bank", "--task-queue", tq, "pay")
        run_id = ids(waiting.out)["run id"]
        shown = await golem("show", run_id)
        wrong = await golem("approve", run_id, "t-9")
        done = await golem("approve", run_id)
        again = await golem("approve", run_id)
    assert waiting.code == 3 and list(ids(waiting.out)) == ["run id", "conversation id", "UI"]
    assert waiting.err.splitlines()[:2] == [
        f"waiting for approval of {TRANSFER} #t-1",
        f"approve with:    golem approve {run_id} t-1  (or --deny)",
    ]
    assert shown.code == 0, shown.err
    lines = shown.out.splitlines()
    assert lines[0] == f"run {run_id}: running, waiting for approval"
    assert lines[3:5] == [
        f"waiting for approval of {TRANSFER} #t-1",
        f"approve with: golem approve {run_id} t-1  (or --deny)",
    ]
    assert one_line(wrong) == (
        f"golem approve: run {run_id} is not waiting for t-9: it waits for {TRANSFER} #t-1"
    )
    assert done.code == 0 and done.out.splitlines()[0] == "transfer: moved 5", done.err
    assert done.err == f"golem: approved {TRANSFER} #t-1 (by {getpass.getuser()})\n"
    assert ids(done.out)["run id"] == run_id  # the same run went on
    assert one_line(again) == (
        f"golem approve: run {run_id} is not waiting for approval: it is completed "
        f"(`golem show {run_id}`)"
    )


async def test_a_conversations_waiting_turn_is_shown_and_answered_by_the_conversation_id(
    address: str,
) -> None:
    tq = queue()
    async with golem_worker(tq, "bank"):
        chat = await golem("chat", "--agent", "bank", "--task-queue", tq, stdin="pay\ny\n")
        conversation = chat.out.splitlines()[-1].split()[-1]
        waiting = await golem("run", "--agent", "bank", "--conversation-id", conversation, "more")
        turn = ids(waiting.out)["run id"]
        shown = await golem("show", conversation)
        resumed = await golem("resume", conversation)
        denied = await golem("approve", conversation, "--deny")
        idle = await golem("approve", conversation)
    assert waiting.code == 3, waiting
    assert shown.code == 0, shown.err
    lines = shown.out.splitlines()
    assert lines[0] == f"conversation {conversation} (ConversationWorkflow, running)"
    assert [line.split()[1] for line in lines[1:5]] == ["user", "assistant", "tool", "assistant"]
    assert lines[4].endswith("transfer: moved 5")
    assert lines[5:8] == [
        f"waiting for approval of {TRANSFER} #t-5 (its turn {turn})",
        f"approve with: golem approve {turn} t-5  (or --deny)",
        f"its runs: golem conversation {conversation}",
    ]
    assert one_line(resumed).startswith(
        f"golem resume: {conversation} is a conversation, not a run: its next turn goes on from "
        f"a failed one; send it with `golem run --agent bank --conversation-id {conversation} "
    )
    assert denied.code == 0 and denied.out.splitlines()[0] == DENIED, denied.err
    assert ids(denied.out) == {**ids(denied.out), "run id": turn, "conversation id": conversation}
    assert one_line(idle) == (
        f"golem approve: conversation {conversation} is not waiting for approval: "
        "no turn is in flight"
    )


async def test_golem_approve_edits_arguments_denies_with_a_reason_and_records_who(
    address: str,
) -> None:
    tq = queue()
    async with golem_worker(tq, "bank"):
        edited = await golem("run", "--agent", "bank", "--task-queue", tq, "pay")
        edited_id = ids(edited.out)["run id"]
        bad = await golem("approve", edited_id, "t-1", "--args", '{"amount": "lots"}')
        done = await golem("approve", edited_id, "t-1", "--args", '{"amount": 3}', "--by", "alice")
        shown = await golem("show", edited_id)
        denied = await golem("run", "--agent", "bank", "--task-queue", tq, "pay")
        denied_id = ids(denied.out)["run id"]
        both = await golem("approve", denied_id, "--deny", "--args", "{}")
        refused = await golem("approve", denied_id, "--deny", "--reason", "over the limit")
    assert one_line(bad) == (
        f"golem approve: run {edited_id}: the edited arguments are invalid: call 't-1' "
        "(transfer): invalid arguments: amount: Input should be a valid integer, unable to "
        "parse string as an integer"
    )
    assert done.code == 0, done.err
    assert done.out.splitlines()[:2] == [  # the model was told, before the result
        "transfer: [a person (alice) changed this call's arguments before it ran; it ran with "
        '{"amount":3}]',
        "moved 3",
    ]
    assert done.err == (f'golem: approved {TRANSFER} #t-1 to run with {{"amount": 3}} (by alice)\n')
    tool = next(line for line in shown.out.splitlines() if "tool transfer #t-1" in line)
    assert "moved 3  [approved by alice at " in tool
    assert tool.endswith(', ran with {"amount":3}]')
    assert one_line(both) == (
        "golem approve: --args edits a call that runs; it cannot go with --deny"
    )
    assert refused.code == 0 and refused.out.splitlines()[0] == "transfer: over the limit"
    assert refused.err == (
        f"golem: denied {TRANSFER} #t-1: over the limit (by {getpass.getuser()})\n"
    )


async def test_golem_complete_answers_a_client_run_tools_call(address: str) -> None:
    tq = queue()
    async with golem_worker(tq, "scheduler"):
        waiting = await golem("run", "--agent", "scheduler", "--task-queue", tq, "book")
        run_id = ids(waiting.out)["run id"]
        neither = await golem("complete", run_id, "d-1")
        done = await golem("complete", run_id, "d-1", "--result", '"2026-12-24"', "--by", "app")
    assert waiting.code == 3, waiting
    assert waiting.err.splitlines()[:2] == [
        "waiting for the application's result of pick_date({}) #d-1",
        f"complete with:   golem complete {run_id} d-1 --result JSON  (or --error TEXT)",
    ]
    assert one_line(neither) == (
        "golem complete: give the call's --result JSON, or --error TEXT when it failed"
    )
    assert done.code == 0 and done.out.splitlines()[0] == "booked: 2026-12-24", done.err
    assert done.err == "golem: completed #d-1 (by app)\n"


async def test_pending_lists_what_waits_with_the_command_that_answers_it(address: str) -> None:
    tq = queue()
    async with golem_worker(tq, "bank"):
        waiting = await golem("run", "--agent", "bank", "--task-queue", tq, "pay")
        run_id, conversation = ids(waiting.out)["run id"], ids(waiting.out)["conversation id"]

        async def listed() -> Any:
            shown = await golem("pending", "--conversation", conversation, "--json")
            return shown if shown.code == 0 and json.loads(shown.out) else None

        as_json = await eventually(listed, what="the waiting run in `golem pending`", timeout=30)
        as_text = await golem("pending", "--conversation", conversation)
        by_agent = await golem("pending", "--agent", "bank", "--json")
        await golem("approve", run_id)

        async def emptied() -> Any:
            shown = await golem("pending", "--conversation", conversation)
            return shown if shown.err == "golem: nothing waits\n" else None

        empty = await eventually(emptied, what="`golem pending` emptied", timeout=30)
    [call] = json.loads(as_json.out)
    assert {k: call[k] for k in ("runId", "conversationId", "agent", "callId", "tool")} == {
        "runId": run_id,
        "conversationId": conversation,
        "agent": "bank",
        "callId": "t-1",
        "tool": "transfer",
    }
    assert (call["args"], call["kind"], call["who"]) == ('{"amount": 5}', "approval", "a person")
    assert call["command"] == f"golem approve {run_id} t-1"
    assert as_text.code == 0 and as_text.out.splitlines()[0] == f"bank: {TRANSFER} [#t-1]"
    assert as_text.out.splitlines()[-1] == f"  answer: golem approve {run_id} t-1"
    assert run_id in {c["runId"] for c in json.loads(by_agent.out)}
    assert (empty.code, empty.out) == (0, "")


async def test_approve_always_stops_asking_for_that_tool_in_the_conversation(
    address: str,
) -> None:
    tq = queue()
    async with golem_worker(tq, "bank"):
        waiting = await golem("run", "--agent", "bank", "--task-queue", tq, "pay")
        run_id, conversation = ids(waiting.out)["run id"], ids(waiting.out)["conversation id"]
        denied = await golem("approve", run_id, "--always", "--deny")
        always = await golem("approve", run_id, "--always", "--by", "alice")
        again = await golem(
            "run", "--agent", "bank", "--task-queue", tq, "--conversation-id", conversation, "more"
        )
    assert denied.code == 1 and denied.err == (
        "golem approve: --always approves: it cannot go with --deny\n"
    )
    assert always.code == 0, always.err
    assert always.err.splitlines()[0] == (
        f"golem: approved {TRANSFER} #t-1 and every later transfer call in this "
        "conversation (by alice)"
    )
    assert again.code == 0, again.err  # asked nobody: the standing approval held
    assert "waiting for approval" not in again.err and "moved 5" in again.out
