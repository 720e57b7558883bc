"""Agents for the crash tests, served both by a worker subprocess that gets killed and by
the test's own worker that takes over. ``GOLEM_CRASH_HANG=1`` makes the first execution
of a tool or model call announce itself (a file in ``GOLEM_CRASH_DIR``) and hang."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from golem import ApprovalPolicy, Approve, Message, ToolCall, Verdict
from golem.agent import Agent
from golem.models import FallbackModel, FunctionModel, ModelHTTPError, ModelResponse, StreamDelta
from golem.retry import Retry
from golem.tools import RunContext


def _dir() -> Path:
    return Path(os.environ["GOLEM_CRASH_DIR"])


async def _record_and_maybe_hang(what: str) -> None:
    with (_dir() / "executions").open("a") as log:
        log.write(f"{what}\n")
    if os.environ.get("GOLEM_CRASH_HANG") == "1":
        (_dir() / "started").write_text(what)
        await asyncio.Event().wait()


def _tool_then_answer(tool: str) -> FunctionModel:
    def answer(messages: list[Message], tools: Any) -> Message:
        results = [m for m in messages if m.role == "tool"]
        if not results:
            return Message.assistant("", [ToolCall(id="call-1", name=tool, args="{}")])
        return Message.assistant(f"finished: {results[-1].content}")

    return FunctionModel(answer, model_name="crash-model")


idempotent = Agent(_tool_then_answer("lookup"), name="idempotent")


@idempotent.tool
async def lookup() -> str:
    """Look something up (safe to repeat)."""
    await _record_and_maybe_hang("lookup")
    return "looked up"


at_most_once = Agent(_tool_then_answer("charge_card"), name="at_most_once")


@at_most_once.tool(at_most_once=True)
async def charge_card() -> str:
    """Charge the card (never twice)."""
    await _record_and_maybe_hang("charge_card")
    return "charged"


def _slow(what: str, text: str) -> FunctionModel:
    """A model that records ``what`` (hanging in a worker that will be killed), then says
    ``text``."""

    async def answer(messages: list[Message], tools: Any) -> Message:
        await _record_and_maybe_hang(what)
        return Message.assistant(text)

    return FunctionModel(answer, model_name="crash-model")


model_crash = Agent(
    _slow("model", "the model answered"),
    name="model_crash",
    model_retry=Retry(initial_interval=0.1),
)


def _batch_then_answer(*tools: str) -> FunctionModel:
    def answer(messages: list[Message], _: Any) -> Message:
        results = [m for m in messages if m.role == "tool"]
        if not results:
            calls = [ToolCall(id=f"call-{i}", name=t, args="{}") for i, t in enumerate(tools, 1)]
            return Message.assistant("", calls)
        return Message.assistant("finished: " + " | ".join(m.content for m in results))

    return FunctionModel(answer, model_name="crash-model")


# One batch, run in call order: the first call's worker dies, the second never starts.
sequential = Agent(_batch_then_answer("charge_card", "send_receipt"), name="sequential")
sequential.tool(at_most_once=True, sequential=True)(charge_card)


@sequential.tool(at_most_once=True, sequential=True)
async def send_receipt() -> str:
    """Send the receipt (never twice)."""
    await _record_and_maybe_hang("send_receipt")
    return "sent"


# One parallel batch: the at-most-once call's worker dies, its sibling finishes.
parallel = Agent(_batch_then_answer("charge_card", "quote"), name="parallel")
parallel.tool(at_most_once=True)(charge_card)


@parallel.tool
async def quote() -> str:
    """Quote a price (safe to repeat; never hangs)."""
    with (_dir() / "executions").open("a") as log:
        log.write("quote\n")
    return "quoted 42"


async def _slow_instructions(ctx: RunContext[Any]) -> str:
    await _record_and_maybe_hang("instructions")
    return "be brief"


def _answer_with_instructions(messages: list[Message], tools: Any) -> Message:
    return Message.assistant(f"instructions: {messages[0].content}")


instructions_crash = Agent(
    FunctionModel(_answer_with_instructions, model_name="crash-model"),
    name="instructions_crash",
    instructions_fn=_slow_instructions,
)


async def _slow_processor(history: list[Message]) -> list[Message]:
    await _record_and_maybe_hang("processor")
    return history


processor_crash = Agent(
    FunctionModel(_answer_with_instructions, model_name="crash-model"),
    name="processor_crash",
    instructions="static",
    history_processor=_slow_processor,
)


async def _stream_then_hang(messages: list[Message], tools: Any) -> Any:
    if os.environ.get("GOLEM_CRASH_HANG") == "1":
        yield StreamDelta(kind="text", text="a partial ")  # then the worker dies
    await _record_and_maybe_hang("stream")
    for piece in ("the retried ", "answer"):
        yield StreamDelta(kind="text", text=piece)
    yield ModelResponse(message=Message.assistant("the retried answer"))


stream_crash = Agent(
    FunctionModel(lambda m, t: Message.assistant("unused"), _stream_then_hang),
    name="stream_crash",
    model_retry=Retry(initial_interval=0.1),
)


def _hand_to_stream_crash(messages: list[Message], tools: Any) -> Message:
    """Hands the turn over to ``stream_crash`` (whose answer the worker dies in)."""
    return Message.assistant(
        "", [ToolCall(id="hand-1", name="transfer_to_stream_crash", args="{}")]
    )


handing_crash = Agent(
    FunctionModel(_hand_to_stream_crash, model_name="crash-model"),
    name="handing_crash",
    handoffs=[stream_crash],
)


async def _primary_down(messages: list[Message], tools: Any) -> Message:
    with (_dir() / "executions").open("a") as log:
        log.write("primary\n")
    raise ModelHTTPError(503, "the primary is down")


async def _backup(messages: list[Message], tools: Any) -> Message:
    await _record_and_maybe_hang("backup")
    return Message.assistant("the backup answered")


fallback_crash = Agent(
    FallbackModel(
        FunctionModel(_primary_down, model_name="crash-primary"),
        FunctionModel(_backup, model_name="crash-backup"),
        retry=[Retry(max_attempts=1), Retry(initial_interval=0.1)],
    ),
    name="fallback_crash",
)

AGENTS = [
    fallback_crash,
    idempotent,
    at_most_once,
    model_crash,
    sequential,
    parallel,
    instructions_crash,
    processor_crash,
    stream_crash,
    handing_crash,
]


def _look_up_when_asked(messages: list[Message], tools: Any) -> Message:
    """A conversation's agent: a prompt asking to look something up calls ``lookup`` (one
    call id per turn); any other prompt, and the turn's tool result, get a plain answer."""
    users = [m for m in messages if m.role == "user"]
    last = messages[-1]
    if last.role == "user" and "look" in last.content:
        return Message.assistant("", [ToolCall(id=f"call-{len(users)}", name="lookup", args="{}")])
    if last.role == "tool":
        return Message.assistant(f"turn {len(users)} finished: {last.content}")
    return Message.assistant(f"turn {len(users)}: {last.content}")


conversation_lookup = Agent(
    FunctionModel(_look_up_when_asked, model_name="crash-model"), name="conversation_lookup"
)
conversation_lookup.tool(lookup)

AGENTS.append(conversation_lookup)


async def _answer_after_note(messages: list[Message], tools: Any) -> Message:
    """A conversation's agent whose turn notes something, then answers: the answer (the
    turn's second model call, its messages read anew by a worker that did not serve the
    first) records itself and hangs in a worker that will be killed."""
    last = messages[-1]
    if last.role == "user":
        return Message.assistant("", [ToolCall(id=f"note-{len(messages)}", name="note", args="{}")])
    await _record_and_maybe_hang("model")
    return Message.assistant(f"answered after {last.content}")


conversation_answer = Agent(
    FunctionModel(_answer_after_note, model_name="crash-model"),
    name="conversation_answer",
    model_retry=Retry(initial_interval=0.1),
)


@conversation_answer.tool
def note() -> str:
    """Note something (quick, never hangs)."""
    return "noted"


AGENTS.append(conversation_answer)


def _delegate_then_answer(tool: str, args: dict[str, str]) -> FunctionModel:
    """A caller that asks ``tool`` once (its model call logged) and answers with its result."""

    def answer(messages: list[Message], _: Any) -> Message:
        results = [m for m in messages if m.role == "tool"]
        if not results:
            with (_dir() / "executions").open("a") as log:
                log.write(f"model:{tool}\n")
            return Message.assistant("", [ToolCall(id="call-1", name=tool, args=json.dumps(args))])
        return Message.assistant(f"delegated: {results[-1].content}")

    return FunctionModel(answer, model_name="crash-model")


# A delegates= child whose tool's worker dies: the child, started by the caller's workflow
# itself, goes on elsewhere; nothing starts it again.
delegating = Agent(
    _delegate_then_answer("idempotent", {"prompt": "go"}), name="delegating", delegates=[idempotent]
)

# ctx.delegate from a tool activity whose worker dies too: the retried activity attaches to
# the same sub-run (its id is derived from the call).
delegating_in_tool = Agent(_delegate_then_answer("ask", {}), name="delegating_in_tool")


@delegating_in_tool.tool
async def ask(ctx: RunContext[Any]) -> str:
    """Ask the idempotent agent."""
    with (_dir() / "executions").open("a") as log:
        log.write("ask\n")
    return str((await ctx.delegate("idempotent", "go")).output)


AGENTS += [delegating, delegating_in_tool]


async def _slow_reviewer(ctx: RunContext[Any], call: ToolCall) -> Approve:
    """An approval evaluator whose first execution hangs (its worker is killed then)."""
    await _record_and_maybe_hang("evaluator")
    return Approve()


# An approval evaluator whose worker dies: its activity goes on elsewhere, decided once.
evaluator_crash = Agent(
    _tool_then_answer("refund"),
    name="evaluator_crash",
    approval_policy=ApprovalPolicy(evaluator=_slow_reviewer),
)


@evaluator_crash.tool(requires_approval=True)
async def refund() -> str:
    with (_dir() / "executions").open("a") as log:
        log.write("refund\n")
    return "refunded"


# The same with another golem Agent as the evaluator: it runs inside the evaluation's
# activity, so a worker that dies in its model call loses nothing either.
slow_reviewer = Agent(
    _slow("evaluator", '{"decide": "allow", "reason": "looks fine"}'),
    name="slow_reviewer",
    output_type=Verdict,
)
agent_evaluator_crash = Agent(
    _tool_then_answer("refund"),
    name="agent_evaluator_crash",
    approval_policy=ApprovalPolicy(evaluator=slow_reviewer),
)
agent_evaluator_crash.tool(requires_approval=True)(refund)

AGENTS += [evaluator_crash, agent_evaluator_crash]


def _ask_for_a_date(messages: list[Message], tools: Any) -> Message:
    """Asks the application for a date, then books it (each model answer logged)."""
    with (_dir() / "executions").open("a") as log:
        log.write("model\n")
    results = [m for m in messages if m.role == "tool"]
    if results:
        return Message.assistant(f"booked for {results[-1].content}")
    return Message.assistant("", [ToolCall(id="d1", name="pick_date", args="{}")])


# A run that waits for a client-run tool's result while its worker dies: it waits on.
external_wait = Agent(FunctionModel(_ask_for_a_date), name="external_wait")
external_wait.external_tool(
    "pick_date", "Ask the user for a date", {"type": "object"}, result_schema={"type": "string"}
)
AGENTS.append(external_wait)
