"""No payload a client can send leaves a golem workflow stuck.

Any client may call golem's updates, signals and queries (another SDK, ``temporal workflow
update execute`` with hand-written JSON), skipping golem's client-side checks. Hypothesis
sends raw JSON payloads (arbitrary values; valid payloads with one field removed, retyped,
huge, deep, out of range, null, unicode or an unknown field added; no argument or two) for
every name a conversation (both shapes) and a run waiting for approval register. After
each: the call answered (accepted or refused, within a bound), the workflow's history has
no workflow task failure (Temporal would retry it for ever) and the workflow still runs; at
the end a valid turn, or approval, still works.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from json_places import REMOVE, changed, places
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError, FailureError
from temporalio.service import RPCError, RPCStatusCode
from test_conversation import echo_agent, serve
from test_durable_approvals import asks_two

from golem.approvals import MAX_REASON_CHARS
from golem.client import DurableAgent
from golem.wire import names

# GOLEM_FUZZ_EXAMPLES=2000 hunts: that many examples, new ones on every run.
HUNT = os.environ.get("GOLEM_FUZZ_EXAMPLES")
FUZZ = settings(
    max_examples=int(HUNT or 100),  # the three runs take about 15 s here
    deadline=None,
    derandomize=not HUNT,  # the same payloads on every run: it runs in CI
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
BOUND = 20.0
"""Seconds a call may take to answer (they take milliseconds; a turn about one)."""

RUN = "@run"  # replaced, when sent, by a fresh run id
CALL = "@call"  # replaced by a call id the run waits for
#: No workflow has it: refused once the workflow has read what came before.
BARRIER = "golem.fuzz.barrier"
# Benign: a signal arrived as the task completed the workflow; Temporal retries it at once.
BENIGN = {WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND}


@dataclass(frozen=True)
class Handler:
    kind: str  # update, signal or query
    valid: tuple[Any, ...] | None
    """A valid argument list; ``None``: only a wrong one is sent (a valid ``close`` ends the
    conversation)."""


CONVERSATION = {
    names.SEND: Handler("update", ({"runId": RUN, "prompt": "hi"},)),
    names.APPROVE: Handler("update", ({"c1": {"approved": True, "by": "ann"}},)),
    names.SET_APPROVAL_POLICY: Handler("update", ([{"tool": "echo", "decide": "ask"}],)),
    names.REVOKE: Handler("update", ("echo",)),
    names.CLOSE: Handler("update", None),
    names.UPGRADE: Handler("signal", ()),
    names.PAUSED: Handler(
        "signal",
        ({"kind": "paused", "runId": RUN, "pendingApprovals": [{"id": "c1", "name": "echo"}]},),
    ),
    names.CONVERSATION: Handler("query", ({"since": 0, "upto": 5},)),
    names.MESSAGES: Handler("query", ({"since": 0},)),
    names.PENDING: Handler("query", ()),
    names.CURRENT_AGENT: Handler("query", ()),
    names.TURN_STREAM_HELD: Handler("query", (RUN,)),
    names.TURN_IN_FLIGHT: Handler("query", (RUN,)),
    names.TURN_PROMPT: Handler("query", (RUN,)),
    names.RUNS: Handler("query", ()),
    names.APPROVALS_POLICY: Handler("query", ()),
}
RUN_WAITING = {
    names.OUTCOME: Handler("update", ()),
    names.APPROVE: Handler("update", ({CALL: {"approved": False, "reason": "no"}},)),
    names.DECIDE: Handler("signal", ({CALL: True},)),
    names.PAUSED: Handler(
        "signal",
        ({"kind": "paused", "runId": RUN, "pendingApprovals": [{"id": "x1", "name": "transfer"}]},),
    ),
    names.PENDING: Handler("query", ()),
    names.MESSAGES: Handler("query", ({"since": 0},)),
    names.CONVERSATION: Handler("query", ({"upto": 3},)),
    names.TOOLS: Handler("query", ()),
}


# -- payloads --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Deep:
    """A list nested ``depth`` deep (written as text: json.dumps would recurse)."""

    depth: int


def encode(value: Any) -> str:
    if isinstance(value, Deep):
        return "[" * value.depth + "]" * value.depth
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {encode(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(encode(v) for v in value) + "]"
    return json.dumps(value)  # NaN and Infinity come out as JS spells them: not JSON


scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=8)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
odd = st.sampled_from(
    [
        None,
        -1,
        0,
        -(2**63),
        2**64,
        1e308,
        -0.5,
        "",
        "x" * 300_000,
        "\u0000",
        "\ud800",
        "🌧 ١٢٣ \u202e",
        Deep(40),
        Deep(300),
        Deep(3000),
        [],
        {},
        True,
    ]
)
raw_texts = st.sampled_from(["{", "NaN", "\u00ff", "", "[1,", '{"a":1}{"b":2}'])


@st.composite
def mutated(draw: st.DrawFn, valid: Any) -> Any:
    """``valid`` with one place removed, retyped, replaced by an odd value, or given an
    unknown field."""
    path = draw(st.sampled_from(places(valid)))
    how = draw(st.sampled_from(["drop", "retype", "odd", "extra"]))
    if how == "drop" and path:
        return changed(valid, path, lambda _: REMOVE)
    if how == "extra":
        extra = draw(st.text(min_size=1, max_size=6))
        added = draw(values | odd)

        def widen(item: Any) -> Any:
            return {**item, extra: added} if isinstance(item, dict) else [item, added]

        return changed(valid, path, widen)
    new = draw(odd) if how == "odd" else draw(values)
    return changed(valid, path, lambda _: new)


@dataclass(frozen=True)
class Call:
    name: str
    kind: str
    args: tuple[str, ...]  # each one payload's raw text
    how: str

    def __str__(self) -> str:
        shown = ", ".join(a if len(a) < 120 else f"{a[:60]}...({len(a)} chars)" for a in self.args)
        return f"{self.kind} {self.name}({shown}) [{self.how}]"


@st.composite
def calls(draw: st.DrawFn, table: dict[str, Handler]) -> Call:
    name = draw(st.sampled_from(sorted(table)))
    handler = table[name]
    valid = list(handler.valid) if handler.valid is not None else None
    hows = (
        ["arbitrary", "mutated", "arity", "not json"]
        if valid
        else ["arbitrary", "arity", "not json"]
    )
    how = draw(st.sampled_from(hows))
    args: list[Any]
    if how == "arbitrary":
        args = [draw(values | odd)]
    elif how == "mutated":
        assert valid is not None
        index = draw(st.integers(0, len(valid) - 1))
        args = [*valid[:index], draw(mutated(valid[index])), *valid[index + 1 :]]
    elif how == "arity":
        # A close of no argument is valid: it would end the conversation.
        counts = [n for n in (0, 1, 2) if n != len(valid if valid is not None else ())]
        count = draw(st.sampled_from(counts))
        base = valid or []
        args = [base[i] if i < len(base) else draw(values) for i in range(count)]
    else:
        return Call(name, handler.kind, (draw(raw_texts),), how)
    return Call(name, handler.kind, tuple(encode(a) for a in args), how)


# -- the workflows under fire ----------------------------------------------------------------


def payload(text: str, replacements: dict[str, str]) -> RawValue:
    for mark, value in replacements.items():
        text = text.replace(json.dumps(mark), json.dumps(value))
    data = text.encode("utf-8", "surrogatepass")
    return RawValue(Payload(metadata={"encoding": b"json/plain"}, data=data))


@dataclass
class Target:
    """A shared workflow examples fire at; made again when one finishes or gets stuck."""

    client: Client
    make: Callable[[], Awaitable[WorkflowHandle[Any, Any]]]
    handle: WorkflowHandle[Any, Any] | None = None
    calls: list[str] = field(default_factory=list)  # the ids a run waits for

    async def current(self) -> WorkflowHandle[Any, Any]:
        if self.handle is None or not await self._usable(self.handle):
            self.handle = await self.make()
        return self.handle

    async def _usable(self, handle: WorkflowHandle[Any, Any]) -> bool:
        if (await handle.describe()).status != WorkflowExecutionStatus.RUNNING:
            return False
        if names.OUTCOME not in await registered(handle, "update"):
            return True
        pending = await handle.query(names.PENDING, result_type=list[dict[str, Any]])
        self.calls = [c.get("id", "") for c in pending]
        return bool(pending)


async def registered(handle: WorkflowHandle[Any, Any], kind: str) -> set[str]:
    """The names of ``kind`` the running workflow has (dynamic queries included)."""
    meta = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    defn = meta.definition
    found = {
        "update": defn.update_definitions,
        "signal": defn.signal_definitions,
        "query": defn.query_definitions,
    }[kind]
    return {d.name for d in found if not d.name.startswith("__")}


async def send(handle: WorkflowHandle[Any, Any], call: Call, calls: list[str]) -> str:
    """Fire ``call``: what it did (``accepted``, ``refused: ...``)."""
    replacements = {RUN: str(uuid.uuid4()), CALL: calls[0] if calls else "none"}
    args = [payload(a, replacements) for a in call.args]
    try:
        if call.kind == "update":
            await handle.execute_update(call.name, args=args, result_type=RawValue)
        elif call.kind == "signal":
            await handle.signal(call.name, args=args)
        else:
            await handle.query(call.name, args=args, result_type=RawValue)
    except (WorkflowUpdateFailedError, WorkflowQueryFailedError) as exc:
        cause = exc.cause if isinstance(exc, WorkflowUpdateFailedError) else exc
        kind = cause.type if isinstance(cause, ApplicationError) else type(cause).__name__
        text = cause.message if isinstance(cause, FailureError) else str(cause)
        return f"refused: {kind}: {text[:200]}"
    except RPCError as exc:
        if exc.status == RPCStatusCode.DEADLINE_EXCEEDED:
            raise
        return f"refused by the server: {exc.message[:200]}"
    return "accepted"


async def task_failures(handle: WorkflowHandle[Any, Any]) -> list[str]:
    """Why each workflow task failed in ``handle``'s history (benign causes left out)."""
    failed = []
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
            attributes = event.workflow_task_failed_event_attributes
            if attributes.cause not in BENIGN:
                failed.append(attributes.failure.message[:500])
    return failed


async def answered(handle: WorkflowHandle[Any, Any], work: Awaitable[str]) -> str:
    """``work``'s outcome, or why it never came: a workflow task failed meanwhile (the call
    would wait for its retries for ever), or ``BOUND`` passed."""
    task = asyncio.ensure_future(work)
    try:
        async with asyncio.timeout(BOUND):
            while not (await asyncio.wait({task}, timeout=0.5))[0]:
                if await task_failures(handle):
                    return "no answer: a workflow task failed"
            return task.result()
    except TimeoutError:
        return f"no answer in {BOUND} s"
    except Exception as exc:  # neither an answer nor a refusal
        return f"no answer: {type(exc).__name__}: {exc}"
    finally:
        task.cancel()


async def fire(target: Target, call: Call) -> str:
    """Send ``call``; fail naming it if it hung, failed a workflow task or ended the
    workflow. A workflow left stuck is replaced, so the next example starts clean."""
    handle = await target.current()
    done = await answered(handle, send(handle, call, target.calls))
    if not done.startswith("no answer"):  # the workflow has read the call once this answers
        barrier = await answered(handle, send(handle, Call(BARRIER, "update", (), ""), []))
        done = barrier if barrier.startswith("no answer") else done
    failures = await task_failures(handle)
    status = (await handle.describe()).status
    broken = status in (WorkflowExecutionStatus.FAILED, WorkflowExecutionStatus.TERMINATED)
    if failures or broken or done.startswith("no answer"):
        target.handle = None
        if status == WorkflowExecutionStatus.RUNNING:
            await handle.terminate("stuck by the fuzzer")
        raise AssertionError(f"{call}: {done}; status {status.name}; task failures {failures}")
    return done


async def fuzz(table: dict[str, Handler], target: Target) -> None:
    """Hypothesis, in a thread, fires its examples at ``target`` through this event loop
    (the worker's): every name the workflow registers has its valid payload in ``table``."""
    handle = await target.current()
    for kind in ("update", "signal", "query"):
        names_ = await registered(handle, kind)
        mine = {n for n, h in table.items() if h.kind == kind}
        assert names_ <= mine, f"{kind}s without a payload to fuzz: {names_ - mine}"
    loop = asyncio.get_running_loop()

    @FUZZ
    @given(call=calls(table))
    def example(call: Call) -> None:
        asyncio.run_coroutine_threadsafe(fire(target, call), loop).result()

    await asyncio.to_thread(example)


async def test_no_payload_leaves_a_conversation_stuck(
    temporal_client: Client, conversation_shapes: str
) -> None:
    agent, _ = echo_agent()
    async with serve(temporal_client, agent) as task_queue:
        durable = DurableAgent(temporal_client, agent, task_queue=task_queue)
        conversations: list[Any] = []

        async def make() -> WorkflowHandle[Any, Any]:
            conversations.append(await durable.conversation())
            return conversations[-1].handle

        target = Target(temporal_client, make)
        await fuzz(CONVERSATION, target)
        await target.current()  # one that runs (a close with arguments ends one: a new one)
        result = await conversations[-1].send("still here")
    assert result.output.endswith(": still here"), result.output


async def test_no_payload_leaves_a_run_waiting_for_approval_stuck(temporal_client: Client) -> None:
    agent = asks_two([])
    async with serve(temporal_client, agent) as task_queue:
        durable = DurableAgent(temporal_client, agent, task_queue=task_queue)
        runs: list[Any] = []

        async def make() -> WorkflowHandle[Any, Any]:
            runs.append(await durable.start("pay"))
            assert (await runs[-1].result()).paused
            return runs[-1].handle

        target = Target(temporal_client, make)
        await fuzz(RUN_WAITING, target)
        await target.current()  # a run that waits (the last one started)
        result = await runs[-1].approve(dict.fromkeys(target.calls, True))
    assert "moved" in result.output, result.output[:300]  # one call at least approved


# -- what the fuzzing found ------------------------------------------------------------------

RULES = encode([{"tool": "echo", "decide": "ask"}])
PAUSED = encode({"kind": "paused", "runId": "r1", "pendingApprovals": [{"id": "c1", "name": "x"}]})


async def test_a_policy_update_of_the_wrong_arity_is_refused_and_the_conversation_goes_on(
    temporal_client: Client, conversation_shapes: str
) -> None:
    """It used to fail the conversation's workflow task (no validator checked the call), for
    ever: the conversation stuck RUNNING, every later turn waiting."""
    agent, _ = echo_agent()
    async with serve(temporal_client, agent) as task_queue:
        conv = await DurableAgent(temporal_client, agent, task_queue=task_queue).conversation()
        refusals = [
            await answered(
                conv.handle,
                send(conv.handle, Call(names.SET_APPROVAL_POLICY, "update", args, ""), []),
            )
            for args in [(), (RULES, RULES)]
        ]
        after = await conv.send("after")
        failures = await task_failures(conv.handle)
    assert refusals == [
        f"refused: {names.BAD_PAYLOAD}: golem.set_approval_policy takes 1 argument (rules), got {n}"
        for n in (0, 2)
    ]
    assert after.output == "1: after" and failures == []


async def test_a_paused_signal_of_the_wrong_arity_is_dropped_and_the_conversation_goes_on(
    temporal_client: Client, conversation_shapes: str
) -> None:
    """A signal cannot be refused: one of the wrong arity is dropped (logged), as Temporal
    drops one whose payload does not decode. It used to fail the workflow task for ever."""
    agent, _ = echo_agent()
    async with serve(temporal_client, agent) as task_queue:
        conv = await DurableAgent(temporal_client, agent, task_queue=task_queue).conversation()
        for args in [(), (PAUSED, PAUSED)]:
            sent = await fire(
                Target(temporal_client, make=_never, handle=conv.handle),
                Call(names.PAUSED, "signal", args, ""),
            )
            assert sent == "accepted"
        after = await conv.send("after")
    assert after.output == "1: after"


async def test_a_decide_or_paused_signal_of_the_wrong_arity_leaves_a_waiting_run_waiting(
    temporal_client: Client,
) -> None:
    """They used to fail the run (a ``TypeError`` is one of the run's failure types): a
    stray signal lost a run that waited for a person."""
    agent = asks_two([])
    async with serve(temporal_client, agent) as task_queue:
        run = await DurableAgent(temporal_client, agent, task_queue=task_queue).start("pay")
        assert (await run.result()).paused
        target = Target(temporal_client, make=_never, handle=run.handle)
        decisions = encode({"t1": True})
        for name, args in [
            (names.DECIDE, ()),
            (names.DECIDE, (decisions, decisions)),
            (names.PAUSED, ()),
            (names.PAUSED, (PAUSED, PAUSED)),
        ]:
            assert await fire(target, Call(name, "signal", args, "")) == "accepted"
        pending = await run.handle.query(names.PENDING, result_type=list[dict[str, Any]])
        done = await run.approve({"t1": True, "t2": True})
    assert [c["id"] for c in pending] == ["t1", "t2"]
    assert done.output == "moved 1 | moved 2"


async def _never() -> WorkflowHandle[Any, Any]:
    raise AssertionError("the workflow under test ended")


async def test_a_denial_reason_over_the_limit_sent_raw_is_refused_and_the_run_waits_on(
    temporal_client: Client,
) -> None:
    """golem's client refuses a reason over ``MAX_REASON_CHARS``; sent raw it was recorded,
    and 1.5 MB of it failed the run (its model request's payload over Temporal's limit)."""
    agent = asks_two([])
    async with serve(temporal_client, agent) as task_queue:
        run = await DurableAgent(temporal_client, agent, task_queue=task_queue).start("pay")
        assert (await run.result()).paused
        target = Target(temporal_client, make=_never, handle=run.handle)
        denial = encode({"t1": {"approved": False, "reason": "x" * (MAX_REASON_CHARS + 1)}})
        refused = await fire(target, Call(names.APPROVE, "update", (denial,), ""))
        done = await run.approve({"t1": True, "t2": True})
    assert refused == (
        f"refused: {names.INVALID_DECISION}: run {run.run_id}: the denial of call 't1' has a "
        f"reason of {MAX_REASON_CHARS + 1} characters, over the limit of {MAX_REASON_CHARS}: "
        "shorten it"
    )
    assert done.output == "moved 1 | moved 2"


async def test_a_turn_whose_run_id_is_over_temporals_id_limit_is_refused(
    temporal_client: Client, conversation_shapes: str
) -> None:
    """A child turn's run id is its workflow id: one over the server's limit (1,000
    characters) failed the start command, the conversation's workflow task failing for
    ever. Refused by the send's validator now, in both shapes (a run id names a run)."""
    agent, _ = echo_agent()
    async with serve(temporal_client, agent) as task_queue:
        conv = await DurableAgent(temporal_client, agent, task_queue=task_queue).conversation()
        target = Target(temporal_client, make=_never, handle=conv.handle)
        turns = [encode({"runId": "r" * n, "prompt": "hi"}) for n in (1001, 1000)]
        answers = [await fire(target, Call(names.SEND, "update", (t,), "")) for t in turns]
    assert answers == [
        "refused: None: a run id of 1001 characters, over Temporal's limit of 1000 "
        "(a turn's run id is its workflow's id)",
        "accepted",
    ]
