"""The commands that run agents: ``golem run``, ``resume`` and ``chat``.

    golem run --agent support "Where is my order?"
    golem resume <run-id> ["try again"]         # continue a failed run in its conversation
    golem chat --agent support                  # a conversation workflow: each turn a child run

Each prints the answer as it streams, then the run and conversation ids.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import re
import sys
from collections.abc import Awaitable
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client

from golem.cli.approvals import ask_approvals, print_waiting, read_line
from golem.cli.connect import (
    UNSERVED,
    CliError,
    Unserved,
    agent_name,
    connect_args,
    payload_settings,
    stored_problem,
    watching,
)
from golem.cli.output import echo, print_failure, print_result, print_run_id, readable_output
from golem.cli.queues import describe_queue
from golem.cli.show import resolve_run_id
from golem.client import (
    DurableAgent,
    DurableConversation,
    DurableRun,
    UnknownAgentError,
    conversation_runs,
    fetch_run,
)
from golem.client.lookups import RunInfo, is_conversation, newest_run, run_info
from golem.ids import new_id
from golem.messages import HistoryError, Message, load_messages
from golem.results import Result, RunError
from golem.streaming import DurableRunStream, write_text
from golem.wire import names
from golem.wire.converter import codec_problem


async def conversation_history(client: Client, conversation_id: str) -> list[Message] | None:
    """The conversation as its newest run left it, or None when it has no runs."""
    newest = await newest_run(client, conversation_id)
    if newest is None:
        return None
    if newest.status == "running":
        raise CliError(
            f"conversation {conversation_id}'s newest run {newest.run_id} is still running: "
            f"wait for it (`golem show {newest.run_id}`), then continue"
        )
    return newest.messages


async def open_conversation(
    client: Client, durable: DurableAgent[Any], args: argparse.Namespace
) -> DurableConversation[Any]:
    """``--conversation-id``'s conversation workflow (started when absent), else a new one;
    a new one is seeded from ``--history`` or from the runs chained under that id."""
    if args.conversation_id and await is_conversation(client, args.conversation_id):
        if args.history:
            print(
                f"golem: conversation {args.conversation_id} exists: --history is ignored",
                file=sys.stderr,
            )
        return await durable.conversation(args.conversation_id)
    seed = await starting_history(client, args)
    idle = timedelta(seconds=args.idle_timeout) if args.idle_timeout > 0 else None
    inline = getattr(args, "inline_turns", False)
    return await durable.conversation(
        args.conversation_id, history=seed, idle_timeout=idle, inline_turns=inline
    )


async def starting_history(client: Client, args: argparse.Namespace) -> list[Message] | None:
    if args.history:
        try:
            return load_messages(Path(args.history).read_bytes())
        except OSError as exc:
            raise CliError(f"--history {args.history}: {exc.strerror}") from exc
        except HistoryError as exc:
            raise CliError(
                f"--history {args.history} is not a golem history ({exc}); "
                "write one with `golem show RUN_ID --json`"
            ) from exc
    if args.conversation_id:
        history = await conversation_history(client, args.conversation_id)
        if history is None:
            print(
                f"golem: conversation {args.conversation_id} has no runs yet: starting it",
                file=sys.stderr,
            )
        return history
    return None


def live_output(args: argparse.Namespace) -> bool:
    """Stream the answer only to a terminal: a stream costs history that nobody reads."""
    return not args.json and sys.stdout.isatty()


async def cmd_run(args: argparse.Namespace) -> int:
    name = agent_name(args.agent)
    client = await connect_args(args)
    say_payload_settings(client, "run")
    durable: DurableAgent[Any] = DurableAgent(client, name, task_queue=args.task_queue)
    if args.conversation_id and await is_conversation(client, args.conversation_id):
        return await run_turn(client, await durable.conversation(args.conversation_id), args)
    await check_agent(client, args.task_queue, name)
    history = await starting_history(client, args)
    live = live_output(args)
    started = await durable.start(
        args.prompt, history=history, conversation_id=args.conversation_id, stream=live
    )
    follow = Follow(started, live)
    try:
        async with watching(client, args.task_queue, started.run_id, args.worker_timeout):
            result = await follow.until(started.result())
            while result.pending_approvals and sys.stdin.isatty():  # a person can answer
                decisions = await decide(result)
                if decisions is None:
                    break
                result = await follow.until(started.approve(decisions, by=getpass.getuser()))
    except RunError as exc:
        return print_failure(client, exc, started.run_id, as_json=args.json)
    except Unserved as exc:
        return print_unserved(exc, started.run_id, "run", args.json)
    except asyncio.CancelledError:  # Ctrl-C: stop waiting, not the run
        stopped_waiting("run", started.run_id)
        raise
    except Exception as exc:
        raise after_start(exc, started.run_id, args.json) from exc
    if result.paused:
        return print_waiting(client, result, started.run_id, started.conversation_id, args.json)
    print_result(client, result, args.json, streamed=follow.streamed)
    return 0


async def decide(result: Result[Any], interactive: bool = True) -> dict[str, bool] | None:
    """The person's decisions on what ``result`` waits for; ``None`` at end of input: nobody
    decided, and the calls keep waiting."""
    try:
        return await ask_approvals(
            result.pending_approvals, interactive, sys.stderr if interactive else None
        )
    except EOFError:
        return None


def say_payload_settings(client: Client, command: str) -> None:
    """Say on stderr when this command encrypts or stores payloads."""
    for line in payload_settings(client):
        print(f"golem {command}: {line}", file=sys.stderr)


async def check_agent(client: Client, task_queue: str, agent: str) -> None:
    """Refuse an agent no worker of ``task_queue`` serves, when its workers say what they
    serve (``golem worker`` does): before a run exists that could only fail."""
    problem = (await describe_queue(client, task_queue)).lacks_agent(agent)
    if problem is not None:
        raise CliError(problem)


def after_start(exc: Exception, run_id: str, as_json: bool = False) -> Exception:
    """A problem met after ``run_id`` started: its id on stdout, and the problem named with
    the run (the error to raise)."""
    print_run_id(run_id, as_json)
    problem = stored_problem(exc, run_id)
    if problem is None and (codec := codec_problem(exc)) is not None:
        problem = undecryptable(codec, run_id)
    if problem is None and isinstance(exc, UnknownAgentError):
        problem = f"run {run_id} failed: {exc}; fix --agent, or start a worker that serves it"
    return CliError(problem) if problem is not None else exc


def undecryptable(problem: str, run_id: str) -> str:
    """A decryption failure as this command's own: it is the one without the key."""
    if "no key is set here" not in problem:
        return f"run {run_id}: {problem}"
    key = re.search(r"key id ('[^']*')", problem)
    return (
        f"cannot decrypt run {run_id}'s payloads: they are sealed with encryption key id "
        f"{key.group(1) if key else '(unknown)'} and this command has no key: set "
        "GOLEM_ENCRYPTION_KEY to the workers' key(s)"
    )


def stopped_waiting(command: str, run_id: str) -> None:
    """Ctrl-C stops the command's wait, not the run: say so."""
    print(
        f"golem {command}: stopped waiting; run {run_id} goes on (`golem show {run_id}`)",
        file=sys.stderr,
    )


def print_unserved(exc: Unserved, run_id: str, command: str, as_json: bool) -> int:
    """No worker takes ``run_id``: its id on stdout, why on stderr; ``UNSERVED``."""
    print_run_id(run_id, as_json, error=str(exc))
    print(f"golem {command}: {exc}", file=sys.stderr)
    return UNSERVED


class Follow:
    """A run's text as it streams (to a terminal), up to its next ``Result``: final, or
    paused for approvals (a run's stream does not end while it waits)."""

    def __init__(self, run: DurableRun[Any], live: bool) -> None:
        self.run = run
        self.live = live
        self.offset = 0
        self.streamed = False
        """The last stretch wrote text: the answer is out already."""

    async def until(self, waiting: Awaitable[Result[Any]]) -> Result[Any]:
        outcome = asyncio.ensure_future(waiting)
        if not self.live:
            return await outcome

        async def paused() -> None:
            try:
                result: Result[Any] | None = await asyncio.shield(outcome)
            except Exception:
                result = None  # the run failed: its stream ends by itself
            if result is None or not result.paused:
                await asyncio.Event().wait()

        stream = DurableRunStream(self.run, self.offset, outcome=lambda: outcome, paused=paused)
        try:
            self.streamed = await write_text(stream, echo)
        finally:
            self.offset = stream.offset
            outcome.cancel()  # done already, unless we stopped early (Ctrl-C)
        return stream.result


async def run_turn(
    client: Client,
    conversation: DurableConversation[Any],
    args: argparse.Namespace,
    run_id: str | None = None,
) -> int:
    """``golem run`` into a conversation workflow: the prompt is its next turn (``golem
    resume`` of its failed last turn too)."""
    run_id = run_id or new_id()
    streamed = False
    try:
        watched = await watched_for(conversation, run_id)
        async with watching(client, await queue_of(conversation), watched, args.worker_timeout):
            if not live_output(args):
                result = await conversation.send(args.prompt, run_id=run_id)
            else:
                stream = conversation.send_stream(args.prompt, run_id=run_id)
                streamed = await write_text(stream, echo)
                result = stream.result
            while result.pending_approvals and sys.stdin.isatty():
                decisions = await decide(result)
                if decisions is None:
                    break
                result, streamed = (
                    await conversation.approve(decisions, by=getpass.getuser()),
                    False,
                )
    except RunError as exc:
        return print_failure(client, exc, run_id, conversation.id, args.json)
    except Unserved as exc:
        return print_unserved(exc, run_id, args.command, args.json)
    except Exception as exc:
        raise after_start(exc, run_id, args.json) from exc
    if result.paused:
        return print_waiting(client, result, run_id, conversation.id, args.json)
    print_result(client, result, args.json, streamed=streamed)
    return 0


async def watched_for(conversation: DurableConversation[Any], run_id: str) -> str:
    """The workflow whose start says a worker took turn ``run_id``: its own run's, or its
    conversation's when its turns run inline (a worker took the send, or it is refused)."""
    return conversation.id if await conversation.runs_inline() else run_id


async def queue_of(conversation: DurableConversation[Any]) -> str:
    """The task queue a conversation's turns run on (its workflow's, not ``--task-queue``)."""
    return (await run_info(conversation.agent.client, conversation.id)).task_queue


async def cmd_resume(args: argparse.Namespace) -> int:
    client = await connect_args(args)
    run_id = await resolve_run_id(client, args.run_id)
    info = await run_info(client, run_id)
    if not info.agent:
        raise CliError(f"{run_id} is not a golem run (it has no GolemAgent search attribute)")
    if info.workflow_type == names.CONVERSATION_WORKFLOW:
        raise CliError(
            f"{run_id} is a conversation, not a run: its next turn goes on from a failed one; "
            f"send it with `golem run --agent {info.agent} --conversation-id {run_id} PROMPT` "
            f"(its runs: `golem conversation {run_id}`)"
        )
    task_queue = args.task_queue or info.task_queue
    durable: DurableAgent[Any] = DurableAgent(client, info.agent, task_queue=task_queue)
    if info.parent_workflow_id and await is_conversation(client, info.parent_workflow_id):
        return await resume_turn(client, durable, info, args)
    record = await fetch_run(client, run_id)
    if not isinstance(record.error, RunError):
        raise CliError(
            f"run {run_id} is {record.status}, not failed: continue its conversation with "
            f"`golem run --agent {info.agent} --conversation-id {info.conversation_id or 'ID'} "
            "PROMPT`"
        )
    if record.error.partial is None:
        raise CliError(f"run {run_id} failed before it did anything: start anew with `golem run`")
    resumed = new_id()
    try:
        async with watching(client, task_queue, resumed, args.worker_timeout):
            result = await durable.resume(record.error, args.prompt, run_id=resumed)
    except RunError as exc:
        return print_failure(client, exc, resumed, as_json=args.json)
    except Unserved as exc:
        return print_unserved(exc, resumed, "resume", args.json)
    except asyncio.CancelledError:
        stopped_waiting("resume", resumed)
        raise
    except Exception as exc:
        raise after_start(exc, resumed, args.json) from exc
    print(f"resumed {run_id} as run {result.run_id}", file=sys.stderr)
    print_result(client, result, args.json)
    return 0


async def resume_turn(
    client: Client, durable: DurableAgent[Any], info: RunInfo, args: argparse.Namespace
) -> int:
    """Resume a conversation's failed last turn: the conversation kept its evidence, so its
    next turn goes on from it, and stays in the conversation's transcript and order."""
    conversation_id = info.parent_workflow_id
    turns = await conversation_runs(client, conversation_id)
    if not turns or turns[-1] != info.run_id:
        raise CliError(
            f"run {info.run_id} was a turn of conversation {conversation_id}, which went on "
            f"after it: continue the conversation with `golem run --agent {info.agent} "
            f"--conversation-id {conversation_id} PROMPT`"
        )
    if info.status != "failed":
        raise CliError(
            f"run {info.run_id} is {info.status}, not failed: continue its conversation with "
            f"`golem run --agent {info.agent} --conversation-id {conversation_id} PROMPT`"
        )
    resumed = new_id()
    print(
        f"golem resume: resuming {info.run_id} as run {resumed}, the next turn of "
        f"conversation {conversation_id}",
        file=sys.stderr,
    )
    return await run_turn(client, await durable.conversation(conversation_id), args, resumed)


async def cmd_chat(args: argparse.Namespace) -> int:
    name = agent_name(args.agent)
    client = await connect_args(args)
    durable: DurableAgent[Any] = DurableAgent(client, name, task_queue=args.task_queue)
    conversation: DurableConversation[Any] | None = None  # opened by the first turn
    interactive = sys.stdin.isatty()
    if not (args.conversation_id and await is_conversation(client, args.conversation_id)):
        await check_agent(client, args.task_queue, name)
    print(f"chatting with {name!r}; an empty line or end of input stops.", flush=True)

    def said(agent: str) -> str:
        """An answer's prefix: the agent that gave it (after a handoff, not ``name``)."""
        return f"{agent or name}> "

    while True:
        try:
            prompt = (await asyncio.to_thread(read_line, "you> " if interactive else "")).strip()
        except EOFError:
            prompt = ""
        if not prompt:
            if conversation is not None:
                print(f"conversation id: {conversation.id}")
            return 0
        if conversation is None:
            conversation = await open_conversation(client, durable, args)
            task_queue = await queue_of(conversation)
        if not interactive:
            print(f"you> {prompt}")  # piped input: show the turn, on its own line
        stream = conversation.send_stream(prompt)  # its id minted there: new, none to check
        run_id = stream.run_id
        try:
            async with watching(client, task_queue, await watched_for(conversation, run_id)):
                if not await write_text(stream, echo, said):  # it ends the line it wrote
                    result = stream.result
                    answer = "(waits for your approval)" if result.paused else result.output
                    print(said(result.agent) + readable_output(answer))
                result = stream.result
                while result.pending_approvals:  # the run waits in its workflow for us
                    decisions = await decide(result, interactive)
                    if decisions is None:  # end of input: nobody decided
                        return print_waiting(client, result, run_id, conversation.id, False)
                    result = await conversation.approve(decisions, by=getpass.getuser())
                    print(said(result.agent) + readable_output(result.output or ""))
        except RunError as exc:
            print(f"run failed at stage {exc.stage}: {exc.detail}")
            # The conversation keeps the failed turn's evidence: the next turn resumes it.
            print(f"      run {run_id} (failed; the next turn resumes from it)", flush=True)
            continue
        print(f"      run {run_id}", flush=True)
