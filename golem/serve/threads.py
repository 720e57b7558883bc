"""What every protocol of ``golem serve`` does to a conversation, through ``golem.client``.

A thread (AG-UI), a chat (the Vercel AI SDK) and a REST conversation are one golem
conversation: its id is the ``ConversationWorkflow``'s. Nothing is kept here between
requests: the transcript, what waits and the stream offsets are read from Temporal.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field, replace
from typing import Any

from starlette.requests import Request
from temporalio.client import Client, WorkflowQueryFailedError
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from golem.client import DurableAgent, DurableConversation
from golem.client.conversations import started_by_first_turn
from golem.client.decisions import checked_decisions, checked_results
from golem.client.lookups import (
    RunInfo,
    as_conversation,
    awaiting_approval,
    conversation_messages,
    existing_run,
    has_worker,
)
from golem.errors import ConversationClosedError
from golem.events import RunEvent
from golem.external import ExternalTool
from golem.messages import Message, ToolCall
from golem.results import Result, RunError
from golem.serve.auth import Auth
from golem.serve.decisions import Decision, to_approvals
from golem.serve.errors import NoWorker, Problem
from golem.serve.requests import MAX_BODY_BYTES, read_json
from golem.streaming import (
    CHILD_START,
    DurableRun,
    DurableRunStream,
    below_refusal,
    workflow_started,
)
from golem.wire import Completed, ConversationInput, names
from golem.wire.run_history import decode_outcome

#: How long a turn's send waits to be taken before asking whether any worker polls.
NO_WORKER_AFTER = 5.0
FIRST = asyncio.FIRST_COMPLETED


def no_worker_check(
    agent: DurableAgent[Any], run_id: str
) -> Callable[[], Awaitable[NoWorker | None]]:
    """What says, when turn ``run_id`` has not begun, whether no worker polls for it."""
    client, queue, name = agent.client, agent.task_queue, agent.agent_name

    async def check() -> NoWorker | None:
        if await has_worker(client, queue):
            return None
        return NoWorker(
            f"no worker polls task queue {queue!r} for agent {name!r}: the turn is queued "
            f"and runs once one starts (golem worker --agent ... --task-queue {queue}); "
            f"its run id is {run_id}"
        )

    return check


@dataclass(frozen=True)
class TurnEnd:
    """How a streamed turn ended: ``result`` (final or waiting), or ``error``."""

    run_id: str
    result: Result[Any] | None = None
    error: Exception | None = None

    @property
    def waiting(self) -> list[ToolCall]:
        """The calls the turn waits for a person's decision on (empty when it ended)."""
        return list(self.result.pending_approvals) if self.result is not None else []

    @property
    def calls(self) -> list[ToolCall]:
        """The client-run tools' calls the turn waits for the application's results on."""
        return list(self.result.pending_calls) if self.result is not None else []


@dataclass(frozen=True)
class Waiting:
    """The turn in flight, and the calls it waits on: for a person, or for the application."""

    run_id: str
    calls: list[ToolCall]
    """Every call that waits, in the run's order."""
    external: frozenset[str] = frozenset()
    """The ids of those that are client-run tools' calls (answered with a result)."""

    @property
    def approvals(self) -> list[ToolCall]:
        """The calls that wait for a person's decision."""
        return [c for c in self.calls if c.id not in self.external]

    @property
    def client_calls(self) -> list[ToolCall]:
        """The calls that wait for the application's result."""
        return [c for c in self.calls if c.id in self.external]


@dataclass
class Thread:
    """One conversation as a request sees it: its handle, and whether it exists yet."""

    agent: DurableAgent[Any]
    conversation: DurableConversation[Any]
    info: RunInfo | None
    """Temporal's description; ``None`` for a conversation this request starts."""
    owner: str = ""
    """Who a conversation this request starts belongs to."""
    inline_turns: bool = False
    """A conversation this request starts runs its turns inline (docs/adr/0050)."""

    def __post_init__(self) -> None:
        self._relayed()

    def _relayed(self) -> None:
        # A turn's end is relayed by how it ended, never by its messages: none are read.
        self.conversation.with_messages = False

    @property
    def id(self) -> str:
        return self.conversation.id

    @property
    def client(self) -> Client:
        return self.agent.client

    async def messages(self) -> list[Message]:
        """The transcript: asked of the running workflow, else read from its history."""
        if self.info is None:
            return []
        if self.info.status == "running":
            try:  # a worker answers at once; none answers the query at all (it times out)
                async with asyncio.timeout(NO_WORKER_AFTER):
                    return await self.conversation.messages()
            except (RPCError, WorkflowQueryFailedError, TimeoutError):
                pass  # its history says the same, without a worker
        return await conversation_messages(self.client, self.id)

    async def prompt(self, run_id: str) -> str | None:
        """The prompt of the turn in flight ``run_id`` (the transcript holds it once the turn
        ends); ``None`` when its worker does not say (one older than this golem, or none)."""
        try:
            async with asyncio.timeout(NO_WORKER_AFTER):
                text = await self.conversation.handle.query(names.TURN_PROMPT, run_id)
        except (RPCError, WorkflowQueryFailedError, TimeoutError):
            return None
        return text if isinstance(text, str) else None

    async def waiting(self) -> Waiting | None:
        """The turn in flight and the calls it waits for (``None``: no turn in flight)."""
        if self.info is None or self.info.status != "running":
            return None
        # The request's own description: a second describe would say the same.
        approvals = await awaiting_approval(self.client, self.id, info=self.info)
        if approvals.run_id == self.id:
            return None
        calls = approvals.calls
        return Waiting(approvals.run_id, calls, await self._external(approvals.run_id, calls))

    async def _external(self, run_id: str, calls: list[ToolCall]) -> frozenset[str]:
        """Which of ``calls`` are client-run tools': by the agent's tools when this app holds
        the agent, else as the run's own paused outcome says (one ``golem.outcome`` update)."""
        tools = self.agent.tools
        if not calls:
            return frozenset()
        if tools:
            return frozenset(c.id for c in calls if isinstance(tools.get(c.name), ExternalTool))
        paused = await (await self.conversation.turn(run_id)).result()
        return frozenset(c.id for c in paused.pending_calls)

    async def start(self) -> None:
        """Start the conversation workflow when this request is its first."""
        if self.info is None:
            try:
                self.conversation = await self.agent.conversation(
                    self.id, owner=self.owner, inline_turns=self.inline_turns
                )
            except ValueError as exc:  # an inline turn's run id, as a child turn's is a 404
                raise Problem(404, str(exc)) from None
            self._relayed()

    def send(self, prompt: str, run_id: str = "") -> DurableRunStream[Any]:
        """A new turn's events (the turn starts when iterated); 413 for a prompt over one
        Temporal payload (without payload storage), 400 for one JSON cannot carry."""
        try:
            # Minted there, not here: an id its caller chose an inline turn asks about.
            return self.conversation.send_stream(prompt, run_id=run_id or None)
        except RunError as exc:
            raise Problem(413, exc.detail, "too_large") from None
        except ValueError as exc:
            raise Problem(400, str(exc)) from None

    async def begin(self, prompt: str, keep: set[asyncio.Task[Any]]) -> str:
        """Send a turn and return its run id once the run exists; the turn goes on in
        Temporal whatever happens to this process (``keep`` holds the wait for its end)."""
        stream = self.send(prompt)  # streamed: deltas too
        run_id = stream.run_id

        async def drain() -> None:
            async for _ in stream:
                pass

        sent = asyncio.ensure_future(drain())
        keep.add(sent)
        sent.add_done_callback(keep.discard)
        begun = asyncio.ensure_future(stream.begun())
        try:  # its run exists (a child run), or the conversation took it (inline)
            await asyncio.wait([sent, begun], timeout=NO_WORKER_AFTER, return_when=FIRST)
            if not (sent.done() or begun.done()):
                await self._served_now(run_id)
                await asyncio.wait([sent, begun], return_when=FIRST)
        finally:
            begun.cancel()
        if sent.done() and not stream.started:
            try:
                await sent  # raises the refusal
            except ConversationClosedError as exc:
                raise Problem(409, str(exc), "closed") from None
        return run_id

    async def _served_now(self, run_id: str) -> None:
        """503 when no worker polls the agent's task queue: the turn was sent (durably) and
        runs once one starts; its request would wait for ever."""
        if (problem := await no_worker_check(self.agent, run_id)()) is not None:
            raise Problem(503, str(problem), "no_worker", runId=run_id)

    async def decide(
        self,
        run_id: str,
        decisions: Mapping[str, Decision],
        results: Mapping[str, object] | None = None,
    ) -> DurableRunStream[Any]:
        """Answer the waiting calls of turn ``run_id``: a person's ``decisions``, the
        application's ``results`` (client-run tools'), in one update; the stream yields what
        the same run does next (from where its stream stood), then the turn's next ``Result``."""
        approvals = to_approvals(decisions)
        tools = self.agent.tools

        async def calls() -> list[ToolCall]:
            waiting = await self.waiting()
            return waiting.calls if waiting is not None else []

        try:  # checked before anything is sent: a reason too long, arguments the tool refuses
            answers = await checked_decisions(approvals, self.owner, tools, calls)
        except ValueError as exc:
            raise Problem(422, str(exc), "invalid_decision") from None
        try:  # a result its tool's result schema refuses
            answers |= await checked_results(results or {}, self.owner, tools, calls)
        except ValueError as exc:
            raise Problem(422, str(exc), "invalid_result") from None
        run = await self.conversation.turn(run_id)
        start = await run.stream_end()
        answered = asyncio.ensure_future(self.conversation.approve(answers, by=self.owner))

        async def outcome() -> Result[Any]:
            return await answered

        async def paused() -> None:
            await _paused(answered)

        return DurableRunStream(run, start, outcome=outcome, paused=paused)

    async def follow(
        self,
        run_id: str,
        offset: int,
        agent: str = "",
        below: Mapping[str, tuple[str, int]] | None = None,
    ) -> DurableRunStream[Any]:
        """The events of run ``run_id`` of a turn from ``offset``, then those of the runs it
        hands over to: they end when the turn ends or waits; 400 for an offset past the end
        of its stream (it would wait for events never sent). ``agent``: the one the turn was
        handed to as that run (its deltas name it, not the conversation's); ``below``: the
        runs below it a reader left unread, each read on from where it stood (400 unless
        they are this conversation's, their offsets within their streams)."""
        run = await self.conversation.turn(run_id)
        run = replace(run, agent=agent) if agent else run
        if offset and offset > await run.stream_end():
            raise Problem(
                400, f"Last-Event-ID {run_id}:{offset} is past the end of run {run_id}'s stream"
            )
        if below:
            refusal = await below_refusal(self.client, self.id, below)
            if refusal is not None:
                raise Problem(400, f"Last-Event-ID: {refusal}")
            run.followed.update(below)
        # A turn that waits publishes nothing until a person answers: read as it stands.
        waiting = await self.waiting()
        waits = waiting is not None and bool(waiting.calls)
        outcome = asyncio.ensure_future(self._answer(run))

        async def result() -> Result[Any]:
            return await outcome

        async def paused() -> None:
            await _paused(outcome)

        return DurableRunStream(run, offset, outcome=result, paused=paused, waiting=waits)

    async def _answer(self, run: DurableRun[Any]) -> Result[Any]:
        """How the turn ``run`` is a run of ended, or what it waits for: inline, the turn's
        answer (whichever of its runs asks); else that of the last run it was handed to."""
        if await self.conversation.runs_inline():
            return await run.result()
        while True:
            result = await run.result()
            if result.paused:
                return result
            ended = decode_outcome(await run.handle.result())
            if not isinstance(ended, Completed) or ended.handoff is None:
                return result
            run = await self._started(ended.handoff.run_id)

    async def _started(self, run_id: str) -> DurableRun[Any]:
        """Child run ``run_id`` once its conversation has started it (a handoff's target
        starts once the run that handed over has ended)."""
        if not await workflow_started(self.client.get_workflow_handle(run_id)):
            raise TimeoutError(f"run {run_id} did not start within {CHILD_START}")
        return await self.conversation.turn(run_id)

    async def handed_to(self, run_id: str) -> bool:
        """Whether run ``run_id``, whose stream a turn's run named, is one the turn was
        handed over to (the conversation started it), not a delegate. Inline, the runs of
        a turn are read from the conversation's stream, never as a run it names."""
        if await self.conversation.runs_inline():
            return False
        return (await self.client.get_workflow_handle(run_id).describe()).parent_id == self.id


async def _paused(outcome: asyncio.Future[Result[Any]]) -> None:
    """Return once ``outcome`` says the run waits for a person; raise what refused the
    decisions (the run does not go on: its stream would wait for ever); never otherwise."""
    try:
        result = await asyncio.shield(outcome)
    except RunError:
        result = None  # the run failed: its stream ends by itself
    if result is None or not result.paused:
        await asyncio.Event().wait()


async def turn_events(
    stream: DurableRunStream[Any],
    unserved: Callable[[], Awaitable[NoWorker | None]] | None = None,
) -> AsyncGenerator[RunEvent | TurnEnd, None]:
    """The turn's events, then how it ended (its errors are items too, never raised).
    ``unserved``: asked when no event came within ``NO_WORKER_AFTER``; what it says (no
    worker polls) ends the turn's events, the turn left queued."""
    run_id = ""
    events = aiter(stream)
    try:
        if unserved is not None:
            head = asyncio.ensure_future(anext(events))
            came = (await asyncio.wait([head], timeout=NO_WORKER_AFTER))[0]
            if not came and (problem := await unserved()) is not None:
                head.cancel()  # the stream closes; the turn stays queued in Temporal
                yield TurnEnd(stream.run_id, error=problem)
                return
            with suppress(StopAsyncIteration):
                event = await head
                run_id = event.run_id
                yield event
        async for event in events:
            run_id = run_id or event.run_id
            yield event
    except RunError as exc:
        yield TurnEnd(exc.partial.run_id if exc.partial else run_id, error=exc)
        return
    except Exception as exc:  # a refusal (closed, waiting): said to the client, not raised
        yield TurnEnd(run_id, error=exc)
        return
    result = stream.result
    yield TurnEnd(result.run_id, result=result)


@dataclass
class Served:
    """The agents an app serves, by name, and how to reach their conversations."""

    client: Client
    agents: dict[str, DurableAgent[Any]]
    ui_url: str = ""
    """The Temporal UI's address, for links from a turn to its workflow ("" for none)."""
    auth: Auth | None = None
    """Who may call; ``None``: anyone who reaches the server (loopback only)."""
    max_body_bytes: int = MAX_BODY_BYTES
    in_flight: set[asyncio.Task[Any]] = field(default_factory=set)
    """Waits on turns sent by REST (their turns live in Temporal, not here)."""
    inline_turns: bool = False
    """New conversations run their turns inline in their workflow (docs/adr/0050)."""

    async def body(self, request: Request) -> dict[str, Any]:
        """The request's JSON object, bounded by ``max_body_bytes``."""
        return await read_json(request, self.max_body_bytes)

    def owner(self, subject: str) -> str | None:
        """The owner a listing is filtered by: the subject, with auth; anyone without."""
        return subject if self.auth is not None else None

    async def subject(self, request: Request) -> str:
        """Who calls ("" without auth); 401 when the credentials do not hold."""
        if self.auth is None:
            return ""
        return await self.auth.subject(request)

    def agent(self, name: str) -> DurableAgent[Any]:
        try:
            return self.agents[name]
        except KeyError:
            served = ", ".join(sorted(self.agents)) or "none"
            raise Problem(404, f"no agent {name!r} is served here (served: {served})") from None

    def new_thread(self, conversation_id: str, subject: str, agent: str) -> Thread:
        """Conversation ``conversation_id`` of ``agent`` taken to be new, asking Temporal
        nothing: its first turn starts it, owned by ``subject`` (one call: update-with-start),
        or ends at once with ``found_existing`` when the id is in use, having started nothing
        (then ``thread`` says what it is). Its ``start`` is not called."""
        _check_id(conversation_id)
        durable = self.agent(agent)
        input = ConversationInput(agent=durable.agent_name, inline_turns=self.inline_turns)
        conversation = started_by_first_turn(durable, conversation_id, input, subject)
        return Thread(durable, conversation, None, subject, self.inline_turns)

    async def thread(self, conversation_id: str, subject: str, agent: str | None = None) -> Thread:
        """Conversation ``conversation_id`` as ``subject`` may see it; with ``agent``,
        started on first use (a new thread id, owned by ``subject``), else it must exist.
        404 for a workflow that is not a conversation, or (with auth) not the subject's."""
        _check_id(conversation_id)
        found = await existing_run(self.client, conversation_id)  # one describe, not two
        info = as_conversation(found)
        if info is None and found is not None:
            raise Problem(404, f"{conversation_id!r} is not a conversation (it is a run's id)")
        if info is not None and self.auth is not None and info.owner != subject:
            raise Problem(404, f"no conversation {conversation_id!r}")  # not said whose it is
        if info is None and agent is None:
            raise Problem(404, f"no conversation {conversation_id!r}")
        name = info.agent if info is not None else agent
        assert name is not None
        if agent is not None and name != agent:
            raise Problem(409, f"conversation {conversation_id!r} is {name!r}'s, not {agent!r}'s")
        durable = self.agent(name)
        handle = self.client.get_workflow_handle(conversation_id)
        conversation = DurableConversation(durable, handle)
        if info is not None:  # its description says already: no describe per streamed turn
            conversation.inline = bool(await info.description.memo_value(names.INLINE_MEMO, False))
        return Thread(durable, conversation, info, subject, self.inline_turns)

    def turn_link(self, run_id: str, conversation_id: str) -> str:
        """The Temporal UI's page of a turn: its own workflow's, or, for a turn run inline
        (this app's new conversations, with ``inline_turns``), its conversation's."""
        return self.link(conversation_id if self.inline_turns else run_id)

    def link(self, workflow_id: str) -> str:
        """The Temporal UI's page of workflow ``workflow_id`` ("" without a UI address)."""
        if not self.ui_url:
            return ""
        namespace = self.client.namespace
        return f"{self.ui_url.rstrip('/')}/namespaces/{namespace}/workflows/{workflow_id}"


def _check_id(conversation_id: str) -> None:
    if not conversation_id or len(conversation_id) > 200:
        raise Problem(400, "a conversation id is 1 to 200 characters")


def found_existing(first: RunEvent | TurnEnd) -> bool:
    """Whether a ``new_thread``'s turn, whose first item is ``first``, found its id in use
    (or its call failed) before anything was sent: the thread must be asked what it is. A
    turn that did start and then failed at once is asked too, and read as a reconnect."""
    return isinstance(first, TurnEnd) and isinstance(
        first.error, (WorkflowAlreadyStartedError, RPCError)
    )


def prompts_after(
    transcript: Sequence[Message], given: Sequence[tuple[str, str]], in_flight: bool = False
) -> str:
    """The turn's prompt: the user messages of ``given`` ((role, text) pairs, in order)
    past the ones the transcript holds (and the prompt of the turn ``in_flight``, which
    the transcript does not hold yet), joined; "" when there are none."""
    seen = sum(1 for m in transcript if m.role == "user") + int(in_flight)
    users = [text for role, text in given if role == "user"]
    return "\n\n".join(t for t in users[seen:] if t.strip())
