"""Representative agents whose recorded workflow histories live in tests/histories/.

Regenerate with ``python tests/record_histories.py`` after an intentional change to the
workflow; the replay test then guards every later change against nondeterminism.
"""

from __future__ import annotations

import asyncio
import base64
import json
from datetime import timedelta
from typing import Any

import crash_agents
from pydantic import BaseModel

from examples.support_ticket import reply_agent, triage_agent
from golem import ApprovalPolicy, Ask, Message, ToolCall, Verdict
from golem.agent import Agent
from golem.history.processors import trim_history
from golem.models import FunctionModel, ModelHTTPError, OpenAIResponsesModel
from golem.retry import Retry
from golem.tools import Canceled, RunContext, ToolFailed


def _script(messages: list[Message], tools: Any) -> Message:
    results = [m for m in messages if m.role == "tool"]
    if len(results) == 0:
        return Message.assistant(
            "",
            [
                ToolCall(id="w1", name="weather", args='{"city": "Paris"}'),
                ToolCall(id="w2", name="weather", args='{"city": "Oslo"}'),
            ],
        )
    if len(results) == 2:
        return Message.assistant("", [ToolCall(id="b1", name="flaky", args="{}")])
    if len(results) == 3:
        return Message.assistant("", [ToolCall(id="x1", name="nope", args="{}")])
    return Message.assistant("Paris is sunny, Oslo is cold.")


class Deps(BaseModel):
    user: str


def _instructions(ctx: RunContext[Deps]) -> str:
    return f"The user is {ctx.deps.user}."


tools_agent = Agent(
    FunctionModel(_script, model_name="replay-model"),
    name="replay_tools",
    instructions="Answer briefly.",
    instructions_fn=_instructions,
    deps_type=Deps,
    history_processor=trim_history(20),
)


@tools_agent.tool
def weather(city: str) -> str:
    """Weather for a city."""
    return "sunny" if city == "Paris" else "cold"


@tools_agent.tool
def flaky() -> str:
    """Always fails definitively."""
    raise ToolFailed("service unavailable")


def _stopper(messages: list[Message], tools: Any) -> Message:
    return Message.assistant("", [ToolCall(id="s1", name="stop", args="{}")])


stop_agent = Agent(FunctionModel(_stopper, model_name="replay-model"), name="replay_stop")


@stop_agent.tool
def stop() -> str:
    """Stop the run."""
    raise Canceled("the user hung up")


def _approve(messages: list[Message], tools: Any) -> Message:
    if not any(m.role == "tool" for m in messages):
        return Message.assistant("", [ToolCall(id="t1", name="transfer", args='{"amount": 5}')])
    return Message.assistant(f"transfer: {messages[-1].content}")


approval_agent = Agent(FunctionModel(_approve, model_name="replay-model"), name="replay_approval")


@approval_agent.tool(requires_approval=True)
def transfer(amount: int) -> str:
    """Move money (a person approves first)."""
    return f"sent {amount}"


def _review(messages: list[Message], tools: Any) -> Message:
    return Message.assistant('{"decide": "allow", "reason": "a small transfer"}')


#: Another golem Agent as the approval evaluator: it allows the transfer, no person asked.
replay_reviewer = Agent(
    FunctionModel(_review, model_name="replay-model"), name="replay_reviewer", output_type=Verdict
)
reviewed_agent = Agent(
    FunctionModel(_approve, model_name="replay-model"),
    name="replay_reviewed",
    approval_policy=ApprovalPolicy(evaluator=replay_reviewer),
)
reviewed_agent.tool(requires_approval=True)(transfer)


#: Set once the slow evaluator below is asked, so the recorder can answer before it does.
EVALUATING = asyncio.Event()


async def _slow_review(ctx: RunContext[Any], call: ToolCall) -> Ask:
    EVALUATING.set()
    await asyncio.Event().wait()  # never answers: a person answers first
    return Ask()


#: A person answers while the evaluator still thinks (golem.evaluation-race): the
#: evaluation is cancelled.
raced_agent = Agent(
    FunctionModel(_approve, model_name="replay-model"),
    name="replay_raced",
    approval_policy=ApprovalPolicy(evaluator=_slow_review),
)
raced_agent.tool(requires_approval=True)(transfer)


def _asks(delegate: str, call_id: str, prompt: str, answer: str = "{}") -> Any:
    """A model asking ``delegate`` ``prompt`` once, then answering ``answer`` with its
    result."""

    def model(messages: list[Message], tools: Any) -> Message:
        if any(m.role == "tool" for m in messages):
            return Message.assistant(answer.format(messages[-1].content))
        args = json.dumps({"prompt": prompt})
        return Message.assistant("", [ToolCall(id=call_id, name=delegate, args=args)])

    return model


#: Delegates to ``raced_agent``: the person answers the child's call at this run while the
#: child's evaluator still thinks.
raced_caller = Agent(
    FunctionModel(_asks("replay_raced", "r1", "pay 5"), model_name="replay-model"),
    name="replay_raced_caller",
    delegates=[raced_agent],
)


def _book(messages: list[Message], tools: Any) -> Message:
    results = [m for m in messages if m.role == "tool"]
    if not results:
        calls = [
            ToolCall(id="d1", name="pick_date", args="{}"),
            ToolCall(id="t1", name="transfer", args='{"amount": 5}'),
        ]
        return Message.assistant("", calls)
    return Message.assistant(" | ".join(m.content for m in results))


#: A batch mixing a client-run call (bounded by a short ``external_timeout``) and an approval
#: (unbounded): the recorder lets the first time out, then approves the second.
booking_agent = Agent(
    FunctionModel(_book, model_name="replay-model"),
    name="replay_booking",
    external_timeout=timedelta(milliseconds=300),
)
booking_agent.external_tool("pick_date", "Ask the user for a date", {"type": "object"})
booking_agent.tool(requires_approval=True)(transfer)


#: Set once the ``hang`` tool runs, so the recorder can cancel the run mid-call.
HANGING = asyncio.Event()


def _hanger(messages: list[Message], tools: Any) -> Message:
    return Message.assistant("", [ToolCall(id="h1", name="hang", args="{}")])


cancel_agent = Agent(FunctionModel(_hanger, model_name="replay-model"), name="replay_cancel")


@cancel_agent.tool
async def hang() -> str:
    """Waits until the run is cancelled."""
    HANGING.set()
    await asyncio.Event().wait()
    return "unreachable"


#: Bigger than one result or failure payload carries (golem.wire.PAGE_BYTES).
PAGED_BYTES = 1_100_000


def _pager(messages: list[Message], tools: Any) -> Message:
    if not any(m.role == "tool" for m in messages):
        return Message.assistant("", [ToolCall(id="p1", name="dump", args="{}")])
    return Message.assistant(f"read {len(messages[-1].content)} bytes")


paged_agent = Agent(FunctionModel(_pager, model_name="replay-model"), name="replay_paged")


@paged_agent.tool
def dump() -> str:
    """A result too big for the run's result payload."""
    return "z" * PAGED_BYTES


#: Non-ASCII characters under a page (1 MB) counted as characters, over it as UTF-8 bytes.
WIDE_CHARACTERS = 400_000


def _count(messages: list[Message], tools: Any) -> Message:
    return Message.assistant(f"read {len(messages[-1].content)} characters")


wide_agent = Agent(FunctionModel(_count, model_name="replay-model"), name="replay_wide")


_busy = [ModelHTTPError(429, "rate limited", provider="openai", retry_after=0.01)]


def _busy_once(messages: list[Message], tools: Any) -> Message:
    if _busy:
        raise _busy.pop()
    return Message.assistant("answered on the second attempt")


retry_agent = Agent(
    FunctionModel(_busy_once, model_name="replay-model"),
    name="replay_retry",
    model_retry=Retry(initial_interval=0.01),
)


def _answer_prompt(messages: list[Message], tools: Any) -> Message:
    prompt = next(m.content for m in messages if m.role == "user")
    return Message.assistant(f"answered: {prompt}")


ledger_agent = Agent(FunctionModel(_answer_prompt, model_name="replay-model"), name="replay_ledger")
reader_agent = Agent(FunctionModel(_answer_prompt, model_name="replay-model"), name="replay_reader")


def _delegate(messages: list[Message], tools: Any) -> Message:
    results = [m for m in messages if m.role == "tool"]
    if results:
        return Message.assistant(" | ".join(m.content for m in results))
    calls = [
        ToolCall(id="d1", name="replay_ledger", args='{"prompt": "book a"}'),
        ToolCall(id="d2", name="replay_ledger", args='{"prompt": "book b"}'),
        ToolCall(id="d3", name="research", args='{"topic": "golems"}'),
    ]
    return Message.assistant("", calls)


#: Two delegates= children in parallel and a tool that delegates twice with ctx.delegate.
delegating_agent = Agent(
    FunctionModel(_delegate, model_name="replay-model"),
    name="replay_delegator",
    delegates=[ledger_agent],
)


@delegating_agent.tool
async def research(ctx: RunContext[Any], topic: str) -> str:
    """Research a topic with two readers."""
    parts = await asyncio.gather(*(ctx.delegate("replay_reader", f"{topic} {s}") for s in "xy"))
    return "; ".join(str(p.output) for p in parts)


#: A delegate (replay_approval) that waits for an approval, answered from the top.
escalating_agent = Agent(
    FunctionModel(
        _asks("replay_approval", "e1", "pay", "escalated: {}"), model_name="replay-model"
    ),
    name="replay_escalator",
    delegates=[approval_agent],
)


def _front(messages: list[Message], tools: Any) -> Message:
    last = messages[-1]
    if last.role == "user" and "desk" in last.content:
        return Message.assistant("", [ToolCall(id="h1", name="transfer_to_replay_desk", args="{}")])
    return Message.assistant(f"front: {last.content}")


desk_agent = Agent(
    FunctionModel(lambda m, t: Message.assistant(f"desk: {len(m)}"), model_name="replay-model"),
    name="replay_desk",
    instructions="You are the desk.",
)
#: Hands the conversation to replay_desk when a prompt asks for the desk.
front_agent = Agent(
    FunctionModel(_front, model_name="replay-model"), name="replay_front", handoffs=[desk_agent]
)


#: A real adapter: tests/record_histories.py points it at the checking fake of the Responses
#: API (tests/providers/provider_fakes.py) while it records; a replay never calls it.
responses_model = OpenAIResponsesModel(
    "gpt-5", base_url="http://127.0.0.1:9/v1", api_key="sk-test-0123456789abcdef"
)  # provider_fakes.API_KEY, the key the fake accepts
responses_agent = Agent(responses_model, name="replay_responses")


@responses_agent.tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return "sunny, 22°C" if city == "Paris" else "unknown"


def _forecast(messages: list[Message], tools: Any) -> Message:
    if messages[-1].role == "user":
        city = messages[-1].content
        return Message.assistant(
            "", [ToolCall(id=f"f{len(messages)}", name="forecast", args=f'{{"city": "{city}"}}')]
        )
    return Message.assistant(f"{messages[-1].content} there")


#: A conversation whose turns run inline (docs/adr/0050-turns-inline.md).
inline_agent = Agent(FunctionModel(_forecast, model_name="replay-model"), name="replay_inline")


@inline_agent.tool
def forecast(city: str) -> str:
    """A city's forecast."""
    return "sunny" if city == "Paris" else "cold"


AGENTS = [
    inline_agent,
    responses_agent,
    delegating_agent,
    reader_agent,
    escalating_agent,
    front_agent,
    tools_agent,
    stop_agent,
    approval_agent,
    reviewed_agent,
    raced_agent,
    raced_caller,
    booking_agent,
    cancel_agent,
    paged_agent,
    wide_agent,
    retry_agent,
    *crash_agents.AGENTS,
    triage_agent,  # examples/support_ticket.py's TicketWorkflow
    reply_agent,
]


#: The key tests/histories/encrypted_run.json was sealed with (a test key, not a secret).
ENCRYPTION_KEY = "replay:" + base64.b64encode(bytes(range(32))).decode()
