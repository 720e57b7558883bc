# ruff: noqa: E501  (the catalogue is a table: one kind per line)
"""The bad-input catalogue: each kind of bad input golem meets, and how it must end.

A ``Kind`` is one bad input and the attempt that feeds it to golem (a run in process or
durably, a client call, the codec server, the CLI). tests/test_bad_inputs.py runs every
kind, asserts that it ends within a bound with the outcome and the culprit named here, and
prints the table kind -> outcome -> seconds.
"""

from __future__ import annotations

import base64
import json
import math
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import httpx
from agents import ask, call, scripted
from google.protobuf import json_format
from pydantic import BaseModel
from runners import DurableRunner
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.common import RawValue
from temporalio.worker import Worker

from golem.agent import Agent
from golem.approvals import Approve, Deny
from golem.client import DurableAgent
from golem.codec_server import codec_app
from golem.messages import Message, Part, ThinkingBlock, ToolCall, load_messages
from golem.models import AnthropicModel, GeminiModel, ModelHTTPError, OpenAIChatModel
from golem.models.function import FunctionModel
from golem.retry import Retry
from golem.serve import create_app
from golem.strict_json import loads_strict
from golem.tools import Canceled, ModelRetry
from golem.usage import UsageLimits
from golem.wire import names
from golem.worker import GolemPlugin
from golem.worker.codec import EncryptionCodec

DEEP = '{"a": ' + "[" * 5000 + "]" * 5000 + "}"
NO_RETRY = Retry(max_attempts=1)
FAST = Retry(max_attempts=2, initial_interval=0.001, max_interval=0.01)
KEY = bytes(range(32))


@dataclass
class Env:
    """What an attempt may use: a Temporal client (durable kinds) and a canned provider."""

    client_fn: Callable[[], Client]
    provider: CannedProvider

    @property
    def client(self) -> Client:
        return self.client_fn()


Attempt = Callable[[Env], Awaitable[Any]]


@dataclass(frozen=True)
class Kind:
    """One bad input: ``attempt`` must end with ``outcome``, its text naming ``culprit``."""

    name: str
    where: str
    attempt: Attempt
    outcome: str
    """``RunError(stage)``, an exception's class name, ``completed`` or ``HTTP <status>``."""
    culprit: str
    durable: bool = False
    known: str = ""
    """Not handled yet: the issue item that tracks it (the test expects it to fail)."""


@dataclass
class CannedProvider:
    """Answers POSTs under ``/<case>/...`` with that case's bodies, in order (the last repeats)."""

    base: str = ""
    answers: dict[str, list[tuple[int, Any]]] = field(default_factory=dict)

    def url(self, case: str, *answers: tuple[int, Any]) -> str:
        self.answers[case] = list(answers)
        return f"{self.base}/{case}"

    def answer(self, path: str) -> tuple[int, bytes]:
        case = path.strip("/").split("/")[0]
        queue = self.answers.get(case) or [(404, {"error": f"no case {case}"})]
        status, body = queue.pop(0) if len(queue) > 1 else queue[0]
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        return status, data


# -- attempts --------------------------------------------------------------------------------


def answers(*items: Message | BaseException, **options: Any) -> Agent[Any, Any]:
    """An agent answering from a script; model errors are not retried."""
    options.setdefault("model_retry", NO_RETRY)
    agent, _ = scripted(list(items), **options)
    return agent


def echoing(agent: Agent[Any, Any]) -> Agent[Any, Any]:
    @agent.tool
    def echo(text: str = "") -> str:
        """Echo."""
        return text

    return agent


def run(agent: Agent[Any, Any], prompt: str | None = "go", **kw: Any) -> Attempt:
    async def attempt(env: Env) -> str:
        result = await agent.run(prompt, **kw)
        return _summary(result.messages, result.output)

    return attempt


def durable(agent: Agent[Any, Any], prompt: str | None = "go", **kw: Any) -> Attempt:
    async def attempt(env: Env) -> str:
        result = await DurableRunner(env.client)(agent, prompt, **kw)
        return _summary(result.messages, result.output)

    return attempt


def start(agent: Agent[Any, Any], prompt: str | None = "go", **kw: Any) -> Attempt:
    """A durable start the client must refuse (no worker serves ``nobody``)."""

    async def attempt(env: Env) -> str:
        await DurableAgent(env.client, agent, task_queue="nobody").start(prompt, **kw)
        return "started"

    return attempt


def _summary(messages: Sequence[Message], output: Any) -> str:
    """The failed tool results (where a culprit is named when a run goes on) and the output."""
    failed = [m.content for m in messages if m.role == "tool" and m.failed]
    return " | ".join([*failed, str(output)])


def calling(*calls: ToolCall) -> Agent[Any, Any]:
    """Asks for ``calls`` once, then answers "done"."""
    return echoing(answers(ask(*calls), Message.assistant("done")))


def sync(fn: Callable[[], Any]) -> Attempt:
    async def attempt(env: Env) -> Any:
        return fn()

    return attempt


def history(*messages: Message) -> list[Message]:
    return [Message.user("earlier"), *messages]


def provider(kind: str, *bodies: tuple[int, Any], stream: bool = False) -> Attempt:
    """A run against a provider adapter pointed at canned answers on 127.0.0.1."""

    async def attempt(env: Env) -> str:
        case = f"case-{uuid.uuid4().hex[:8]}"
        base = env.provider.url(case, *bodies)
        model: Any
        if kind == "openai":
            model = OpenAIChatModel("gpt-4o", base_url=f"{base}/v1", api_key="k")
        elif kind == "anthropic":
            model = AnthropicModel("claude-sonnet-4-0", base_url=base, api_key="k")
        else:
            model = GeminiModel("gemini-2.5-flash", base_url=base, api_key="k")
        agent = echoing(Agent(model, model_retry=FAST, max_iterations=4))
        try:
            if stream:
                events = agent.run_stream("go")
                async for _ in events:
                    pass
                return _summary(events.result.messages, events.result.output)
            return await run(agent)(env)
        finally:
            await model.aclose()

    return attempt


def codec_call(body: bytes, *, token: str | None = None, **headers: str) -> Attempt:
    async def attempt(env: Env) -> str:
        app = codec_app(EncryptionCodec({"ui": KEY}), token=token, max_body_bytes=1_000_000)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            answer = await http.post("/decode", content=body, headers=headers)
        if answer.status_code != 200:
            raise HTTPStatus(answer.status_code, answer.json()["error"])
        return answer.text

    return attempt


def serve_call(path: str, body: bytes, *, conversation: str = "", by_name: bool = False) -> Attempt:
    """A POST to golem serve's app (ASGI, no socket), with a worker for its agent (its one
    call, ``c0``, waits for approval); ``{id}`` in ``path`` is a conversation of it that is
    ``closed`` or whose turn is ``waiting`` (``conversation``). ``by_name``: the app knows the
    agent by name only."""

    async def attempt(env: Env) -> str:
        agent = tool_agent(returns("done"), calls=1, requires_approval=True)
        task_queue = f"serve-{uuid.uuid4().hex[:8]}"
        app = create_app(env.client, [agent.name] if by_name else [agent], task_queue=task_queue)
        transport = httpx.ASGITransport(app=app)
        async with (
            Worker(env.client, task_queue=task_queue, plugins=[GolemPlugin(agent)]),
            httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http,
        ):
            url = path
            if conversation:
                made = (await http.post("/conversations", json={"agent": agent.name})).json()
                url = path.format(id=made["id"])
                if conversation == "closed":
                    await http.post(f"/conversations/{made['id']}/close")
                else:  # its events end once the turn waits
                    await http.post(f"/conversations/{made['id']}/messages", json={"text": "go"})
                    await http.get(f"/conversations/{made['id']}/events")
            answer = await http.post(url, content=body)
            if conversation == "waiting":  # denied: the worker leaves nothing waiting
                denial = {"decisions": {"c0": False}}
                await http.post(f"/conversations/{made['id']}/decisions", json=denial)
        if answer.status_code >= 300:
            raise HTTPStatus(answer.status_code, answer.json()["error"])
        return answer.text

    return attempt


class HTTPStatus(Exception):
    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status


def sealed(key_id: str) -> bytes:
    payload = EncryptionCodec({key_id: bytes(range(1, 33))}).encrypt(Payload(data=b"x"))
    return json_format.MessageToJson(Payloads(payloads=[payload])).encode()


# -- tools that misbehave ------------------------------------------------------------------


def tool_agent(body: Callable[..., Any], calls: int = 4, **options: Any) -> Agent[Any, Any]:
    """Asks for ``act`` ``calls`` times (one per turn), then answers "done"."""
    agent = answers(*[ask(call(f"c{i}", "act")) for i in range(calls)], Message.assistant("done"))
    agent.tool(name="act", **options)(body)
    return agent


def raises(exc: BaseException) -> Callable[[], Any]:
    def act() -> Any:
        """Misbehaves."""
        raise exc

    return act


def raising(exc: BaseException) -> Callable[[Any], Any]:
    """A user function of one argument (a context, a history) that raises ``exc``."""

    def misbehave(arg: Any) -> Any:
        raise exc

    return misbehave


def returns(value: Any) -> Callable[[], Any]:
    def act() -> Any:
        """Returns something odd."""
        return value

    return act


async def _never() -> str:
    """Never answers."""
    import asyncio

    await asyncio.Event().wait()
    return "unreachable"


# -- processors and instructions -------------------------------------------------------------


def processed(processor: Callable[..., Any]) -> Agent[Any, Any]:
    return answers(Message.assistant("never"), history_processor=processor)


def instructed(fn: Callable[..., Any]) -> Agent[Any, Any]:
    return answers(Message.assistant("never"), instructions_fn=fn)


class Order(BaseModel):
    id: int


def _malformed_prompt_part() -> list[Part]:
    return [Part(kind="hologram", url="https://example.test/x")]


def _deep_value(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


def _nan_deps() -> dict[str, float]:
    return {"x": math.nan}


def _openai_call(args: str) -> dict[str, Any]:
    tool_call = {"id": "c1", "type": "function", "function": {"name": "echo", "arguments": args}}
    message = {"role": "assistant", "content": None, "tool_calls": [tool_call]}
    return {
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1},
    }


OPENAI_DONE = {
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "done"}}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1},
}


def _deep_raw(depth: int) -> str:
    return '{"a": ' + "[" * depth + "]" * depth + "}"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _at_once(tool_calls: int) -> Agent[Any, Any]:
    return calling(*(call(f"c{i}", "echo", text=str(i)) for i in range(tool_calls)))


def _conversation(seed: list[Message]) -> Attempt:
    async def attempt(env: Env) -> str:
        agent = answers(Message.assistant("never"))
        await DurableAgent(env.client, agent, task_queue="nobody").conversation(history=seed)
        return "started"

    return attempt


def _oversized_turn() -> Attempt:
    """A turn over one payload, no storage: refused before it is sent (it once left the
    conversation failing its workflow tasks for ever)."""

    async def attempt(env: Env) -> str:
        agent = answers(Message.assistant("never"))
        conversation = await DurableAgent(env.client, agent, task_queue="nobody").conversation()
        await conversation.send("x" * 3_000_000)
        return "sent"

    return attempt


def _wide_turn(inline: bool) -> Attempt:
    """A turn adding 600,000 CJK characters (1.8 MB of UTF-8) and a 100,000-character
    prompt: under a page counted in characters, over it in bytes. Refused (it once rode the
    turn's result past Temporal's payload limit, its workflow task failing for ever)."""

    async def attempt(env: Env) -> str:
        agent = tool_agent(returns("字" * 600_000), calls=1)
        task_queue = f"wide-{uuid.uuid4().hex[:8]}"
        async with Worker(env.client, task_queue=task_queue, plugins=[GolemPlugin(agent)]):
            durable = DurableAgent(env.client, agent, task_queue=task_queue)
            conversation = await durable.conversation(inline_turns=inline)
            try:
                await conversation.send("字" * 100_000)
            finally:
                await conversation.close()
        return "sent"

    return attempt


def _inline_refused(stream: bool) -> Attempt:
    """A conversation whose turns run inline (ADR 0050) asked what they cannot do yet: an
    agent (known to the client by name only) that hands off to one with a history
    processor, in a turn streamed or not. Refused by the send's validator: nothing is
    recorded."""

    async def attempt(env: Env) -> str:
        target = answers(Message.assistant("hi"), name="inline_target")
        target.history_processor = list  # its loop needs the whole history
        plain = answers(Message.assistant("hi"), name="inline_plain")
        handing = answers(Message.assistant("hi"), name="inline_hands_off")
        handing.add_handoffs(target)
        task_queue = f"inline-{uuid.uuid4().hex[:8]}"
        plugin = GolemPlugin(plain, handing)
        async with Worker(env.client, task_queue=task_queue, plugins=[plugin]):
            durable = DurableAgent(env.client, "inline_hands_off", task_queue=task_queue)
            conversation = await durable.conversation(inline_turns=True)
            if stream:
                async for _ in conversation.send_stream("go"):
                    pass
            else:
                await conversation.send("go")
        return "sent"

    return attempt


def _unknown_agent() -> Attempt:
    async def attempt(env: Env) -> str:
        task_queue = f"known-{uuid.uuid4().hex[:8]}"
        plugin = GolemPlugin(answers(Message.assistant("hi"), name="known"))
        async with Worker(env.client, task_queue=task_queue, plugins=[plugin]):
            await DurableAgent(env.client, "no-such-agent", task_queue=task_queue).run("go")
        return "ran"

    return attempt


def _reused_run_id() -> Attempt:
    async def attempt(env: Env) -> str:
        agent = answers(Message.assistant("one"), Message.assistant("two"))
        run_id = f"reuse-{uuid.uuid4().hex[:8]}"
        runner = DurableRunner(env.client)
        await runner(agent, "first", run_id=run_id)
        await runner(agent, "second", run_id=run_id)
        return "ran twice"

    return attempt


def _turn_under_its_conversations_id() -> Attempt:
    """An inline conversation's streamed turn given the conversation's own id as its run id:
    refused by the send's validator (its stream's items would name no turn), nothing recorded."""

    async def attempt(env: Env) -> str:
        agent = answers(Message.assistant("hi"), name="inline_own_id")
        task_queue = f"inline-{uuid.uuid4().hex[:8]}"
        async with Worker(env.client, task_queue=task_queue, plugins=[GolemPlugin(agent)]):
            durable = DurableAgent(env.client, agent, task_queue=task_queue)
            conversation = await durable.conversation(inline_turns=True)
            async for _ in conversation.send_stream("go", run_id=conversation.id):
                pass
        return "sent"

    return attempt


def _turn_under_a_runs_id() -> Attempt:
    """An inline conversation's turn given a standalone run's id as its run id: a run id
    names one run, ever; the send refuses it before anything is sent."""

    async def attempt(env: Env) -> str:
        agent = answers(Message.assistant("hi"), Message.assistant("hi"), name="inline_taken_id")
        task_queue = f"inline-{uuid.uuid4().hex[:8]}"
        async with Worker(env.client, task_queue=task_queue, plugins=[GolemPlugin(agent)]):
            durable = DurableAgent(env.client, agent, task_queue=task_queue)
            alone = await durable.run("alone")
            conversation = await durable.conversation(inline_turns=True)
            await conversation.send("go", run_id=alone.run_id)
        return "sent"

    return attempt


def _codec_for(spec: str) -> Attempt:
    return sync(lambda: EncryptionCodec.parse(spec))


def _plugin_twins() -> Attempt:
    return sync(lambda: GolemPlugin(answers(), answers()))


def _two_tools_one_name() -> Attempt:
    def build() -> Any:
        agent = answers()

        @agent.tool
        def same() -> str:
            """One."""
            return ""

        agent.tool(name="same")(lambda: "")
        return agent

    return sync(build)


def _varargs_tool() -> Attempt:
    def build() -> Any:
        agent = answers()

        def spread(*items: str) -> str:
            """Spread."""
            return ""

        agent.tool(spread)
        return agent

    return sync(build)


def _refunds(*script: Message) -> Agent[Any, Any]:
    """An agent whose refund(order: int) waits for a person; it answers ``script`` (or
    "done")."""
    agent = answers(*(script or [Message.assistant("done")]))

    @agent.tool(requires_approval=True)
    def refund(order: int) -> str:
        """Refund an order."""
        return f"refunded {order}"

    return agent


#: A history whose last turn asks refund(7), which waits for a decision.
WAITING_REFUND = [Message.user("refund 7"), ask(call("refund-7", "refund", order=7))]


def _decided(decision: Any) -> Attempt:
    return run(_refunds(), None, history=WAITING_REFUND, approvals={"refund-7": decision})


def _raw(*args: Any) -> list[RawValue]:
    """``args`` as raw JSON payloads, as another SDK or the CLI sends them: no golem check."""
    return [RawValue(Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(a).encode())) for a in args]  # fmt: skip


def _conversation_called(name: str, signal: bool, *args: Any) -> Attempt:
    """A conversation sent update or signal ``name`` with raw ``args``, then a turn: the
    update's refusal, or the turn's output."""

    async def attempt(env: Env) -> str:
        agent = answers(Message.assistant("still here"))
        task_queue = f"raw-{uuid.uuid4().hex[:8]}"
        async with Worker(env.client, task_queue=task_queue, plugins=[GolemPlugin(agent)]):
            conversation = await DurableAgent(env.client, agent, task_queue=task_queue).conversation()  # fmt: skip
            await _send_raw(conversation.handle, name, signal, *args)
            return str((await conversation.send("go")).output)

    return attempt


async def _send_raw(handle: Any, name: str, signal: bool, *args: Any) -> None:
    """Signal ``name`` or send it as an update (its refusal raised), with raw ``args``."""
    if signal:
        await handle.signal(name, args=_raw(*args))
        return
    try:
        await handle.execute_update(name, args=_raw(*args))
    except WorkflowUpdateFailedError as exc:
        raise exc.cause from None


def _waiting_run_called(name: str, signal: bool, *args: Any) -> Attempt:
    """A run waiting for a decision on refund(7) sent update or signal ``name`` with raw
    ``args``, then approved: the update's refusal, or what the run did."""

    async def attempt(env: Env) -> str:
        agent = _refunds(WAITING_REFUND[-1], Message.assistant("done"))
        task_queue = f"raw-{uuid.uuid4().hex[:8]}"
        async with Worker(env.client, task_queue=task_queue, plugins=[GolemPlugin(agent)]):
            run = await DurableAgent(env.client, agent, task_queue=task_queue).start("refund 7")
            assert (await run.result()).paused
            await _send_raw(run.handle, name, signal, *args)
            result = await run.approve({"refund-7": True})
        tool = [m.content for m in result.messages if m.role == "tool"]
        return " | ".join([*tool, str(result.output)])

    return attempt


def _deep_output() -> Agent[Any, Any]:
    deep = json.dumps({"id": 1, "x": _deep_value(400)})
    return answers(*[Message.assistant(deep)] * 4, output_type=Order, output_retries=1)


def _history_processor_returning(value: Any) -> Agent[Any, Any]:
    return processed(lambda messages: value)


def _failing_model() -> Agent[Any, Any]:
    def broken(messages: list[Message], tools: Any) -> Message:
        raise ValueError("the model function has a bug")

    return Agent(FunctionModel(broken), model_retry=NO_RETRY)


def _exiting_model() -> Agent[Any, Any]:
    def leaving(messages: list[Message], tools: Any) -> Message:
        raise SystemExit("the model function exits")

    return Agent(FunctionModel(leaving), model_retry=NO_RETRY)


MESSAGE_LOAD = [
    ("history JSON is not JSON", "{", "not a JSON list of messages"),
    ("history JSON is an object", '{"role": "user"}', "not a JSON list of messages"),
    ("history message with an unknown role", '[{"role": "robot"}]', "role"),
    ("history message without a role", '[{"content": "hi"}]', "role"),
    ("history part data not base64", '[{"role":"user","parts":[{"kind":"image","data":"*"}]}]', "data"),
    ("history tool call args nested 5,000 deep", json.dumps([{"role": "assistant", "toolCalls": [{"id": "d", "name": "x", "args": DEEP}]}]), "limit of 256"),
    ("history content is a number", '[{"role":"user","content":5}]', "content"),
    ("history message is a string", '["hello"]', "message"),
    ("history tool call without a name", '[{"role":"assistant","toolCalls":[{"id":"x"}]}]', "toolCalls.0.name"),
    ("history bytes that are not UTF-8", b'[{"role":"user","content":"\xff"}]', "invalid unicode"),
    ("history thinking that is a string", '[{"role":"assistant","thinking":"hmm"}]', "thinking"),
]  # fmt: skip

STRUCTURE = [
    ("parts on an assistant message", Message(role="assistant", parts=[Part(kind="image", url="https://x.test/a.png")]), "parts are only allowed on user and tool"),
    ("thinking on a user message", Message(role="user", content="x", thinking=[ThinkingBlock(text="t")]), "thinking is only allowed on assistant"),
    ("tool calls on a user message", Message(role="user", tool_calls=[ToolCall(id="c", name="x", args="{}")]), "tool calls are only allowed on assistant"),
    ("a part of an unknown kind", Message.user("x", [Part(kind="hologram", url="https://x.test")]), "unknown kind 'hologram'"),
    ("a part with both url and data", Message.user("x", [Part(kind="image", url="https://x.test", data=b"x", media_type="image/png")]), "needs exactly one of url or data"),
    ("a part with neither url nor data", Message.user("x", [Part(kind="image")]), "needs exactly one of url or data"),
    ("inline data without a media type", Message.user("x", [Part(kind="image", data=b"x")]), "inline data needs a media type"),
    ("thinking with neither text nor redacted", Message(role="assistant", thinking=[ThinkingBlock()]), "needs exactly one of text or redacted"),
    ("a thinking signature without text", Message(role="assistant", thinking=[ThinkingBlock(redacted="r", signature="s")]), "a signature is only allowed beside text"),
    ("call arguments nested 5,000 deep", Message.assistant("", [ToolCall(id="d", name="echo", args=DEEP)]), "limit of 256"),
]  # fmt: skip

MODEL_CALLS = [
    ("a call of an unknown tool", ToolCall(id="c1", name="teleport", args="{}"), "unknown tool 'teleport'"),
    ("arguments cut off mid-stream", ToolCall(id="c1", name="echo", args='{"text": "hel'), "may have been cut off"),
    ("arguments holding NaN", ToolCall(id="c1", name="echo", args='{"text": NaN}'), "NaN is not JSON"),
    ("arguments that are a list", ToolCall(id="c1", name="echo", args="[1, 2]"), "must be a JSON object, got list"),
    ("arguments of the wrong type", ToolCall(id="c1", name="echo", args='{"text": {"a": 1}}'), "invalid arguments"),
    ("an argument the tool lacks", ToolCall(id="c1", name="echo", args='{"colour": "red"}'), "colour"),
    ("arguments nested 5,000 deep", ToolCall(id="c1", name="echo", args=DEEP), "past golem's limit of 256"),
    ("arguments nested 257 deep", ToolCall(id="c1", name="echo", args=_deep_raw(256)), "past golem's limit of 256"),
    ("arguments holding an escaped lone surrogate (valid JSON: runs)", ToolCall(id="c1", name="echo", args='{"text": "\\ud800"}'), "done"),
]  # fmt: skip


def kinds() -> list[Kind]:
    table: list[Kind] = []
    for name, text, culprit in MESSAGE_LOAD:
        table.append(Kind(name, "client", sync(lambda t=text: load_messages(t)), "HistoryError", culprit))  # fmt: skip
    for name, message, culprit in STRUCTURE:
        table.append(Kind(f"history: {name}", "in process", run(answers(Message.assistant("never")), history=history(message)), "RunError(history)", culprit))  # fmt: skip
        table.append(Kind(f"durable history: {name}", "client", start(answers(), history=history(message)), "RunError(history)", culprit, durable=True))  # fmt: skip
    for name, tool_call, culprit in MODEL_CALLS:
        table.append(Kind(f"model: {name}", "in process", run(calling(tool_call)), "completed", culprit))  # fmt: skip
    for name, tool_call, culprit in MODEL_CALLS[:4] + MODEL_CALLS[6:7]:
        table.append(Kind(f"durable model: {name}", "durable", durable(calling(tool_call)), "completed", culprit, durable=True))  # fmt: skip
    table += [
        Kind("a conversation seeded with call arguments 5,000 deep", "client", _conversation(history(STRUCTURE[-1][1])), "RunError(history)", "limit of 256", durable=True),
        Kind("a prompt part of an unknown kind", "in process", run(answers(Message.assistant("x")), parts=_malformed_prompt_part()), "RunError(history)", "unknown kind 'hologram'"),
        Kind("durable: a prompt part of an unknown kind", "durable", durable(answers(Message.assistant("x")), parts=_malformed_prompt_part()), "RunError(history)", "unknown kind 'hologram'", durable=True),
        Kind("approvals naming calls that are not pending", "in process", run(answers(Message.assistant("x")), approvals={"ghost": True}), "RunError(history)", "not pending: ['ghost']"),
        Kind("durable: approvals naming calls that are not pending", "durable", durable(answers(Message.assistant("x")), approvals={"ghost": True}), "RunError(history)", "not pending: ['ghost']", durable=True),
        Kind("deps holding NaN", "client", start(answers(), deps=_nan_deps()), "ValueError", "deps cannot be sent to Temporal", durable=True),
        Kind("deps that are not JSON (an object)", "client", start(answers(), deps=object()), "ValueError", "deps cannot be sent to Temporal", durable=True),
        Kind("deps nested 400 deep", "client", start(answers(), deps=_deep_value(400)), "ValueError", "deps cannot be sent to Temporal", durable=True),
        Kind("a prompt with a lone surrogate", "client", start(answers(), prompt="\ud800"), "ValueError", "prompt cannot be sent to Temporal", durable=True),
        Kind("an agent no worker serves", "durable", _unknown_agent(), "UnknownAgentError", "no-such-agent", durable=True),
        Kind("a streamed turn of an inline conversation of an agent handing off to one with a history processor, known by name", "client", _inline_refused(stream=True), "ValueError", "cannot serve agent 'inline_target', which needs the whole history", durable=True),
        Kind("an inline conversation of an agent handing off to one with a history processor, known by name", "client", _inline_refused(stream=False), "ValueError", "cannot serve agent 'inline_target', which needs the whole history", durable=True),
        Kind("an inline turn under its conversation's own id", "client", _turn_under_its_conversations_id(), "RunIdInUseError", "this conversation's own id", durable=True),
        Kind("an inline turn under a standalone run's id", "client", _turn_under_a_runs_id(), "RunIdInUseError", "is taken: a workflow by that id exists", durable=True),
        Kind("a run id already used", "durable", _reused_run_id(), "RunIdInUseError", "reuse-", durable=True),
        Kind("2,100 tool calls in one turn (in process)", "in process", run(_at_once(2100)), "completed", "done"),
        Kind("the model answers with output nested 400 deep", "in process", run(_deep_output()), "RunError(decode)", "recursion limit exceeded"),
        Kind("the model answers output of the wrong shape", "in process", run(answers(*[Message.assistant('{"id": "x"}')] * 4, output_type=Order, output_retries=1)), "RunError(decode)", "id: Input should be a valid integer"),
        Kind("the model keeps calling tools past max_iterations", "in process", run(echoing(answers(*[ask(call(f"c{i}", "echo")) for i in range(5)], max_iterations=2))), "RunError(loop)", "max_iterations=2"),
        Kind("a request over request_limit", "in process", run(echoing(answers(*[ask(call(f"c{i}", "echo")) for i in range(5)], usage_limits=UsageLimits(request_limit=2)))), "RunError(usage)", "request_limit"),
        Kind("a batch over tool_calls_limit", "in process", run(echoing(answers(ask(*(call(f"c{i}", "echo") for i in range(3))), usage_limits=UsageLimits(tool_calls_limit=2)))), "RunError(usage)", "tool_calls_limit"),
        Kind("a provider 400 (the model's own error)", "in process", run(answers(ModelHTTPError(400, "model_not_found: gpt-9", provider="openai"))), "RunError(model)", "model_not_found: gpt-9"),
        Kind("durable: a provider 400", "durable", durable(answers(ModelHTTPError(400, "model_not_found: gpt-9", provider="openai"))), "RunError(model)", "model_not_found: gpt-9", durable=True),
        Kind("a provider 429 asking for a longer wait than allowed", "in process", run(answers(ModelHTTPError(429, "slow down", provider="openai", retry_after=3600), model_retry=Retry(max_attempts=3, max_interval=1))), "RunError(model)", "slow down"),
        Kind("a model function with a bug", "in process", run(_failing_model()), "RunError(model)", "the model function has a bug"),
        Kind("durable: a model function with a bug", "durable", durable(_failing_model()), "RunError(model)", "the model function has a bug", durable=True),
        Kind("a model function that raises SystemExit", "in process", run(_exiting_model()), "RunError(model)", "SystemExit"),
        Kind("a tool that raises", "in process", run(tool_agent(raises(KeyError("no such order")))), "RunError(tool)", "no such order"),
        Kind("durable: a tool that raises", "durable", durable(tool_agent(raises(KeyError("no such order")), retry_attempts=1)), "RunError(tool)", "no such order", durable=True),
        Kind("a tool that raises SystemExit", "in process", run(tool_agent(raises(SystemExit(3)))), "RunError(tool)", "SystemExit"),
        Kind("durable: a tool that raises SystemExit", "durable", durable(tool_agent(raises(SystemExit(3)))), "RunError(tool)", "SystemExit", durable=True),
        Kind("a tool asking for retries past its limit", "in process", run(tool_agent(raises(ModelRetry("try harder")), max_retries=1)), "RunError(tool)", "try harder"),
        Kind("a tool that cancels the run", "in process", run(tool_agent(raises(Canceled("the user left")))), "RunError(canceled)", "the user left"),
        Kind("a tool past its timeout", "in process", run(tool_agent(_never, timeout=timedelta(milliseconds=50))), "RunError(tool)", "timed out"),
        Kind("durable: a tool returning NaN (sent as its text)", "durable", durable(tool_agent(returns(float("nan")), calls=1)), "completed", "done", durable=True),
        Kind("durable: a tool returning 3 MB", "durable", durable(tool_agent(returns("x" * 3_000_000), calls=1, retry_attempts=1)), "RunError(tool)", "over Temporal's payload limit", durable=True),
        Kind("an instructions function that raises", "in process", run(instructed(raising(LookupError("no profile")))), "RunError(instructions)", "no profile"),
        Kind("an instructions function returning 42", "in process", run(instructed(lambda ctx: 42)), "RunError(instructions)", "returned int, not a string"),
        Kind("durable: an instructions function returning 42", "durable", durable(instructed(lambda ctx: 42)), "RunError(instructions)", "returned int, not a string", durable=True),
        Kind("a history processor that raises", "in process", run(processed(raising(ValueError("cannot trim")))), "RunError(history)", "cannot trim"),
        Kind("a history processor returning a string", "in process", run(_history_processor_returning("oops")), "RunError(history)", "returned str"),
        Kind("durable: a history processor returning a string", "durable", durable(_history_processor_returning("oops")), "RunError(history)", "not a list of Message", durable=True),
        Kind("a history processor returning malformed messages", "in process", run(_history_processor_returning([Message(role="user", tool_calls=[ToolCall(id="c", name="x")])])), "RunError(history)", "tool calls are only allowed on assistant"),
        Kind("openai: a 400 with the provider's message", "in process", provider("openai", (400, {"error": {"message": "Unsupported model", "type": "invalid_request_error"}})), "RunError(model)", "Unsupported model"),
        Kind("openai: a 500 after retries", "in process", provider("openai", (500, {"error": {"message": "overloaded"}})), "RunError(model)", "overloaded"),
        Kind("openai: a body that is not JSON", "in process", provider("openai", (200, "<html>oops</html>")), "RunError(model)", "not JSON"),
        Kind("openai: a body nested 5,000 deep", "in process", provider("openai", (200, '{"x": ' + "[" * 5000 + "]" * 5000 + "}")), "RunError(model)", "past golem's limit of 256"),
        Kind("openai: call arguments nested 5,000 deep", "in process", provider("openai", (200, _openai_call(DEEP)), (200, OPENAI_DONE)), "completed", "past golem's limit of 256"),
        Kind("openai: a stream event that is not JSON", "in process", provider("openai", (200, "data: {oops\n\n"), stream=True), "RunError(model)", "not JSON"),
        Kind("openai: a stream event nested 5,000 deep", "in process", provider("openai", (200, "data: " + DEEP + "\n\n"), stream=True), "RunError(model)", "past golem's limit of 256"),
        Kind("anthropic: tool input nested 5,000 deep", "in process", provider("anthropic", (200, '{"content": [{"type": "tool_use", "id": "t", "name": "echo", "input": ' + DEEP + "}]}")), "RunError(model)", "past golem's limit of 256"),
        Kind("anthropic: a 400 with the provider's message", "in process", provider("anthropic", (400, {"type": "error", "error": {"type": "invalid_request_error", "message": "tool_use ids must be unique"}})), "RunError(model)", "tool_use ids must be unique"),
        Kind("gemini: function args nested 5,000 deep", "in process", provider("gemini", (200, '{"candidates": [{"content": {"parts": [{"functionCall": {"name": "echo", "args": ' + DEEP + "}}]}}]}")), "RunError(model)", "past golem's limit of 256"),
        Kind("gemini: a 400 with the provider's message", "in process", provider("gemini", (400, {"error": {"code": 400, "message": "API key not valid", "status": "INVALID_ARGUMENT"}})), "RunError(model)", "API key not valid"),
        Kind("golem serve: a body nested 3,000 deep", "golem serve", serve_call("/conversations", DEEP.encode()), "HTTP 400", "past golem's limit of 256", durable=True),
        Kind("golem serve: NaN in a body", "golem serve", serve_call("/conversations", b'{"agent": NaN}'), "HTTP 400", "NaN is not JSON", durable=True),
        Kind("golem serve: an escaped lone surrogate in a body", "golem serve", serve_call("/conversations", b'{"agent": "x", "id": "\\ud800"}'), "HTTP 400", "lone surrogate (\\ud800)", durable=True),
        Kind("golem serve: a path no route serves", "golem serve", serve_call("/agents//chat", b"{}"), "HTTP 404", "no route for POST '/agents//chat'", durable=True),
        Kind("golem serve: a message to a closed conversation", "golem serve", serve_call("/conversations/{id}/messages", b'{"text": "more"}', conversation="closed"), "HTTP 409", "is completed", durable=True),
        Kind("golem serve: edited arguments of 3 MB, the agent known by name", "golem serve", serve_call("/conversations/{id}/decisions", json.dumps({"decisions": {"c0": {"approved": True, "args": {"x": "x" * 3_000_000}}}}).encode(), conversation="waiting", by_name=True), "HTTP 413", "at most 524288", durable=True),
        Kind("codec server: a body over its limit", "codec server", codec_call(b"x" * 1_000_001), "HTTP 413", "limit of 1000000 bytes"),
        Kind("codec server: a body that is not protobuf JSON", "codec server", codec_call(b"not json"), "HTTP 400", "protobuf JSON"),
        Kind("codec server: a payload sealed with a key it lacks", "codec server", codec_call(sealed("other")), "HTTP 400", "key id 'other'"),
        Kind("codec server: no bearer token", "codec server", codec_call(b"{}", token="t"), "HTTP 401", "missing or wrong bearer token"),
        Kind("codec server: a wrong bearer token", "codec server", codec_call(b"{}", token="t", Authorization="Bearer nope"), "HTTP 401", "missing or wrong bearer token"),
        Kind("an encryption key that is not base64", "client", _codec_for("k:not*base64"), "ValueError", "not valid base64"),
        Kind("an encryption key of 5 bytes", "client", _codec_for("k:" + _b64(b"short")), "ValueError", "is 5 bytes"),
        Kind("an empty encryption key list", "client", _codec_for(" , "), "ValueError", "no key given"),
        Kind("an encryption key id with a colon", "client", sync(lambda: EncryptionCodec({"a:b": KEY})), "ValueError", "without , or :"),
        Kind("two agents with one name on a plugin", "worker", _plugin_twins(), "ValueError", "share the name"),
        Kind("two tools with one name", "in process", _two_tools_one_name(), "ValueError", "already has a tool named 'same'"),
        Kind("a tool taking *args", "in process", _varargs_tool(), "TypeError", "*args/**kwargs cannot be described"),
        Kind("max_concurrent_tools of 0", "in process", sync(lambda: answers(max_concurrent_tools=0)), "ValueError", "max_concurrent_tools must be at least 1"),
        Kind("JSON holding Infinity", "in process", sync(lambda: loads_strict('{"a": Infinity}')), "ValueError", "Infinity is not JSON"),
        Kind("a tool returning an object JSON cannot hold", "in process", run(tool_agent(returns(object()), calls=1)), "RunError(tool)", "Unable to serialize unknown type"),
        Kind("durable: a tool returning an object JSON cannot hold", "durable", durable(tool_agent(returns(object()), calls=1, retry_attempts=1)), "RunError(tool)", "Unable to serialize unknown type", durable=True),
        Kind("durable: a model answer of 3 MB", "durable", durable(answers(Message.assistant("x" * 3_000_000))), "RunError(model)", "over Temporal's payload limit", durable=True),
        Kind("durable: an instructions function that raises", "durable", durable(instructed(raising(LookupError("no profile")))), "RunError(instructions)", "no profile", durable=True),
        Kind("durable: a history processor that raises", "durable", durable(processed(raising(ValueError("cannot trim")))), "RunError(history)", "cannot trim", durable=True),
        Kind("durable: the model keeps calling tools past max_iterations", "durable", durable(echoing(answers(*[ask(call(f"c{i}", "echo")) for i in range(5)], max_iterations=2))), "RunError(loop)", "max_iterations=2", durable=True),
        Kind("durable: a batch over tool_calls_limit", "durable", durable(echoing(answers(ask(*(call(f"c{i}", "echo") for i in range(3))), usage_limits=UsageLimits(tool_calls_limit=2)))), "RunError(usage)", "tool_calls_limit", durable=True),
        Kind("durable: output of the wrong shape", "durable", durable(answers(*[Message.assistant('{"id": "x"}')] * 4, output_type=Order, output_retries=1)), "RunError(decode)", "id: Input should be a valid integer", durable=True),
        Kind("durable: a tool that cancels the run", "durable", durable(tool_agent(raises(Canceled("the user left")))), "RunError(canceled)", "the user left", durable=True),
        Kind("a usage limit on output tokens", "in process", run(answers(*[Message.assistant("x")] * 2, usage_limits=UsageLimits(output_tokens_limit=0))), "completed", "x"),
        Kind("a plugin given a 5-byte encryption key", "worker", sync(lambda: GolemPlugin(answers(), encryption_key=b"short")), "ValueError", "is 5 bytes"),
        Kind("an encrypting key id not among the keys", "client", sync(lambda: EncryptionCodec({"a": KEY}, key_id="z")), "ValueError", "key_id 'z' is not among the keys"),
        Kind("an encryption codec without keys", "client", sync(lambda: EncryptionCodec({})), "ValueError", "needs at least one key"),
        Kind("max_concurrent_tools of -5", "in process", sync(lambda: answers(max_concurrent_tools=-5)), "ValueError", "got -5"),
        Kind("history given as dicts (in process, read as messages)", "in process", run(answers(Message.assistant("read as messages")), history=[{"role": "user", "content": "hi"}]), "completed", "read as messages"),
        Kind("history given as strings (in process)", "in process", run(answers(), history=["hello"]), "HistoryError", "not a golem Message"),
        Kind("a dict that is no message in history (in process)", "in process", run(answers(), history=[{"role": "wizard"}]), "HistoryError", "role: Input should be"),
        Kind("durable: history given as strings", "client", start(answers(), history=["hello"]), "ValueError", "not a golem Message", durable=True),
        Kind("an approval decision of the wrong type ('yes')", "in process", _decided("yes"), "ValueError", "the decision for call 'refund-7' is 'yes' (str)"),
        Kind("a denial reason over the length limit", "in process", _decided(Deny(reason="x" * 5000)), "ValueError", "refund-7"),
        Kind("edited arguments the tool does not take", "in process", _decided(Approve(args={"order": "seven"})), "ValueError", "invalid arguments: order"),
        Kind("durable: a conversation turn of 3 MB without payload storage", "client", _oversized_turn(), "RunError(history)", "byte limit of one Temporal payload", durable=True),
        Kind("durable: a turn of 1.8 MB of CJK text (under a page in characters), child runs", "durable", _wide_turn(False), "ValueError", "more than 1000000 bytes of messages", durable=True),
        Kind("durable: a turn of 1.8 MB of CJK text (under a page in characters), inline", "durable", _wide_turn(True), "ValueError", "more than 1000000 bytes of messages", durable=True),
        Kind("JSON nested 5,000 deep", "in process", sync(lambda: loads_strict("[" * 5000 + "]" * 5000)), "TooDeep", "limit of 256"),
        Kind("raw JSON: golem.set_approval_policy with no argument", "client", _conversation_called(names.SET_APPROVAL_POLICY, False), "ApplicationError", "golem.set_approval_policy takes 1 argument (rules), got 0", durable=True),
        Kind("raw JSON: golem.set_approval_policy with two arguments", "client", _conversation_called(names.SET_APPROVAL_POLICY, False, [], []), "ApplicationError", "golem.set_approval_policy takes 1 argument (rules), got 2", durable=True),
        Kind("raw JSON: golem.send with a run id over Temporal's id limit (1,001 characters)", "client", _conversation_called(names.SEND, False, {"runId": "r" * 1001, "prompt": "hi"}), "ApplicationError", "a run id of 1001 characters, over Temporal's limit of 1000", durable=True),
        Kind("raw JSON: golem.send with two arguments", "client", _conversation_called(names.SEND, False, {"runId": "r1", "prompt": "hi"}, {}), "ApplicationError", "golem.send takes 1 argument (turn), got 2", durable=True),
        Kind("raw JSON: golem.paused signalled to a conversation with no argument (dropped)", "durable", _conversation_called(names.PAUSED, True), "completed", "still here", durable=True),
        Kind("raw JSON: golem.decide signalled to a waiting run with two arguments (dropped)", "durable", _waiting_run_called(names.DECIDE, True, {"refund-7": False}, {}), "completed", "refunded 7", durable=True),
        Kind("raw JSON: a denial reason over the length limit, to a waiting run", "client", _waiting_run_called(names.APPROVE, False, {"refund-7": {"approved": False, "reason": "x" * 5000}}), "ApplicationError", "has a reason of 5000 characters, over the limit of 2000", durable=True),
        Kind("edited arguments over 512 KiB", "in process", _decided(Approve(args={"order": "x" * 600_000})), "ValueError", "over the limit of 524288 for its edited arguments"),
        Kind("raw JSON: edited arguments over 512 KiB, to a waiting run", "client", _waiting_run_called(names.APPROVE, False, {"refund-7": {"approved": True, "args": '{"order": "' + "x" * 600_000 + '"}'}}), "ApplicationError", "over the limit of 524288 for its edited arguments", durable=True),
        Kind("raw JSON: a call's result over 512 KiB, to a waiting run", "client", _waiting_run_called(names.APPROVE, False, {"refund-7": {"approved": True, "result": "x" * 600_000}}), "ApplicationError", "over the limit of 524288 for its result", durable=True),
        Kind("raw JSON: golem.paused signalled to a waiting run with no argument (dropped)", "durable", _waiting_run_called(names.PAUSED, True), "completed", "refunded 7", durable=True),
    ]  # fmt: skip
    return table
