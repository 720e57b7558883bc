"""A conversation held by its own workflow: each turn a child run, in arrival order.

    conv = await durable.conversation()                 # started when absent
    reply = await conv.send("Hello")                    # Result: the whole conversation
    later = await conv.fork(at_run_id=reply.run_id)     # a new conversation from that turn

Use it from any process with a client; a turn that waits for approvals is answered with
``conv.approve``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from pydantic import TypeAdapter
from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
    WorkflowUpdateStage,
)
from temporalio.common import TypedSearchAttributes, WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import ApplicationError, FailureError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from golem.approvals import DecisionInput
from golem.client.decisions import checked_decisions, checked_results
from golem.client.inputs import check_size, checked
from golem.client.listing import Listing, start_listed
from golem.client.lookups import awaiting_approval, existing_run, not_a_conversation
from golem.client.records import history_reader, inline_turns_of
from golem.client.recovery import (
    RECOVERY_TIMEOUT,
    TurnRecovery,
    take_turn,
    turn_runs,
    turn_started,
)
from golem.client.runs import DurableRun, InlineTurnRun
from golem.client.stuck import let_go, unless_stuck
from golem.delegation import handed_over
from golem.errors import ConversationClosedError, RunIdInUseError, run_id_taken
from golem.ids import MAX_ID_CHARS, new_id
from golem.messages import Decision, Message, Part, ToolCall
from golem.policies import ApprovalPolicy, stored_rules
from golem.results import Result, RunError
from golem.streaming import DurableRunStream
from golem.tools import Tool
from golem.wire import (
    ConversationInput,
    ConversationSummary,
    InTranscript,
    Pager,
    RunReport,
    Sources,
    TurnInput,
    TurnOutput,
    message_size,
    names,
    read_pages,
)
from golem.wire.failures import TurnRecorded
from golem.wire.lineage import TURN_RUNS, run_search_attributes
from golem.wire.run_history import decode_result, rebuilt_error, run_pager
from golem.wire.transcript import CARRY_BYTES, ran, with_segments
from golem.workflows.conversation import ConversationWorkflow

OutputT = TypeVar("OutputT")


class ServedAgent(Protocol[OutputT]):
    """What a conversation needs of the ``DurableAgent`` that made it (named here, not
    imported, so the agent and its conversations form no import circle)."""

    client: Client
    agent_name: str
    task_queue: str
    output_adapter: TypeAdapter[Any] | None
    tools: dict[str, Tool]
    may_pause: bool

    async def attach(self, run_id: str) -> DurableRun[OutputT]: ...


async def start_conversation(
    agent: ServedAgent[OutputT],
    conversation_id: str,
    input: ConversationInput,
    owner: str = "",
    recovery_timeout: timedelta = RECOVERY_TIMEOUT,
) -> DurableConversation[OutputT]:
    """Start conversation workflow ``conversation_id`` (attach when it runs already);
    ``owner`` is recorded on it (``GolemOwner``)."""
    title = f"{agent.agent_name}: conversation"
    # A new conversation costs one RPC: only a workflow already there is described (a
    # running one or a closed one, readable only unless it rests: its next send reopens it).
    inline: bool | None = input.inline_turns
    try:
        await start_listed(
            agent.client,
            lambda listing: agent.client.start_workflow(
                ConversationWorkflow.run,
                input,
                **_new_options(agent, conversation_id, input, owner, listing),
            ),
            title,
            turn_runs=input.inline_turns,
        )
    except WorkflowAlreadyStartedError:
        inline = None  # attached: its own start said, read once a stream needs it
        existing = await existing_run(agent.client, conversation_id)
        if existing is not None and existing.workflow_type != ConversationWorkflow.__name__:
            raise ValueError(not_a_conversation(existing)) from None
    # Bound to no run chain, so it follows the conversation across a rest and a reopen.
    handle = agent.client.get_workflow_handle(conversation_id)
    conversation = DurableConversation(agent, handle, recovery_timeout)
    conversation.inline = inline
    return conversation


def started_by_first_turn(
    agent: ServedAgent[OutputT], conversation_id: str, input: ConversationInput, owner: str
) -> DurableConversation[OutputT]:
    """Conversation ``conversation_id``, not started yet: its first send starts it and sends
    the turn in one call (update-with-start), as ``start_conversation`` would have started
    it. That send raises ``WorkflowAlreadyStartedError`` when a workflow by that id exists
    (then nothing was started or sent), or the call's ``RPCError``, without a retry."""

    def start(listing: Listing) -> WithStartWorkflowOperation[Any, Any]:
        options = _new_options(agent, conversation_id, input, owner, listing)
        return WithStartWorkflowOperation(ConversationWorkflow.run, input, **options)

    title = f"{agent.agent_name}: conversation"
    handle = agent.client.get_workflow_handle(conversation_id)
    starting = FirstStart(start, title, input.inline_turns)
    conversation = DurableConversation(agent, handle, starting=starting)
    conversation.inline = input.inline_turns
    return conversation


class FirstStart(NamedTuple):
    """A new conversation's start, carried by its first send: made for the optional search
    attributes its namespace has, and made again without one it refuses."""

    make: Callable[[Listing], WithStartWorkflowOperation[Any, Any]]
    title: str
    turn_runs: bool


def _new_options(
    agent: ServedAgent[OutputT],
    conversation_id: str,
    input: ConversationInput,
    owner: str,
    listing: Listing,
) -> dict[str, Any]:
    """The start options of a new conversation workflow (never one by an id in use)."""
    attributes = run_search_attributes(
        conversation_id, agent.agent_name, input.parent_run_id, owner,
        summary=listing.summary, waiting=listing.waiting, turn_runs=listing.turn_runs,
    )  # fmt: skip
    return {
        "id": conversation_id,
        "task_queue": agent.task_queue,
        "search_attributes": attributes,
        "static_summary": f"{agent.agent_name}: conversation",
        "id_reuse_policy": WorkflowIDReusePolicy.REJECT_DUPLICATE,
        "id_conflict_policy": WorkflowIDConflictPolicy.FAIL,
        **_inline_memo(input, listing.turn_runs),
    }


def _inline_memo(input: ConversationInput, turn_runs: bool) -> dict[str, Any]:
    """A conversation whose turns run inline says so in its memo: a client attached to it
    later reads its turns' streams from it (continue-as-new keeps the memo); and, when its
    start carried ``GolemTurnRuns`` (so the namespace has it), that it lists its turns'
    run ids there (Temporal keeps no empty list: the workflow could not tell)."""
    if not input.inline_turns:
        return {}
    return {"memo": {names.INLINE_MEMO: True} | ({names.TURN_RUNS_MEMO: True} if turn_runs else {})}


async def reopen(client: Client, conversation_id: str, turn: TurnInput | None = None) -> bool:
    """Reopen a conversation that rests (closed itself after its idle timeout): its next
    workflow run starts from the input its last one left, as continue-as-new would.
    ``False`` when it does not rest (closed for good, failed, terminated); ``TurnRecorded``
    when ``turn`` is a turn it recorded (not reopened: its next run would refuse it)."""
    start = await _reopening(client, conversation_id, turn)
    if isinstance(start, bool):
        return start
    following, options = start
    await client.start_workflow(ConversationWorkflow.run, following, **options)
    return True


async def reopening(
    client: Client, conversation_id: str, turn: TurnInput
) -> WithStartWorkflowOperation[Any, Any] | bool:
    """``reopen`` for ``turn`` to carry: the start of the next workflow run, sent with the
    turn (update-with-start: the run's first task takes it, one call in all); ``True`` when
    it runs again already (another client reopened it), ``False`` when it does not rest;
    ``TurnRecorded`` when the turn is one it recorded."""
    start = await _reopening(client, conversation_id, turn)
    if isinstance(start, bool):
        return start
    following, options = start
    return WithStartWorkflowOperation(ConversationWorkflow.run, following, **options)


async def _reopening(
    client: Client, conversation_id: str, turn: TurnInput | None
) -> tuple[ConversationInput, dict[str, Any]] | bool:
    """A rested conversation's next input and start options; ``True``: it runs (another
    client reopened it), ``False``: it does not rest. ``TurnRecorded`` when its input
    knows ``turn`` by its run id and prompt: the next run's validator would refuse it as
    recorded (``Turns.check_send``), so it is answered from the record, with no run started
    for nothing (a turn recorded by a run before the one that rested, which answers no
    update of it)."""
    description = await client.get_workflow_handle(conversation_id).describe()
    if description.status == WorkflowExecutionStatus.RUNNING:
        return True
    following = await rested(client, conversation_id, description.status, description.run_id)
    if following is None:
        return False
    if turn is not None and _records(following, turn):
        raise TurnRecorded(f"run {turn.run_id} is already a turn of conversation {conversation_id}")
    # The rested run's turns stay listed on it alone: the next run lists its own.
    attributes = [p for p in description.typed_search_attributes if p.key.name != TURN_RUNS.name]
    turn_runs = bool(await description.memo_value(names.TURN_RUNS_MEMO, False))
    return following, {
        "id": conversation_id,
        "task_queue": description.task_queue,
        "search_attributes": TypedSearchAttributes(attributes),
        "static_summary": f"{following.agent}: conversation",
        # Only a rested run is followed so: a conversation closed for good stays closed.
        "id_reuse_policy": WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        "id_conflict_policy": WorkflowIDConflictPolicy.USE_EXISTING,
        **_inline_memo(following, turn_runs),
    }


def _records(following: ConversationInput, turn: TurnInput) -> bool:
    """``following`` (a workflow run's input) knows ``turn`` as one it recorded: its run id
    is among the turns the run knows (as ``ConversationWorkflow`` counts them) with no
    other fingerprint. Another prompt under that run id is left to the run to refuse."""
    recorded = following.fingerprints.get(turn.run_id, "")
    known = turn.run_id in following.recent or turn.run_id in following.runs
    return known and recorded in ("", turn.fingerprint())


async def rested(
    client: Client,
    conversation_id: str,
    status: WorkflowExecutionStatus | None,
    run_id: str | None = None,
) -> ConversationInput | None:
    """The input that reopens conversation ``conversation_id`` when its workflow run
    ``run_id`` (its latest when ``None``; of ``status``) rested, else ``None``. Read from its
    history: no worker needed. Never waits for a run another client reopened meanwhile."""
    if status != WorkflowExecutionStatus.COMPLETED:
        return None
    latest = client.get_workflow_handle(
        conversation_id, run_id=run_id, result_type=ConversationSummary
    )
    summary: ConversationSummary = await latest.result(follow_runs=False)
    return summary.reopen


async def conversation_status(
    client: Client,
    conversation_id: str,
    status: WorkflowExecutionStatus | None,
    run_id: str | None = None,
) -> str:
    """A conversation workflow's status as a user reads it: ``resting`` when its run
    ``run_id`` (of ``status``) closed itself after its idle timeout (its next turn reopens
    it), else Temporal's (lowercase)."""
    if await rested(client, conversation_id, status, run_id) is not None:
        return "resting"
    return status.name.lower() if status is not None else "unknown"


class DurableConversation(Generic[OutputT]):
    """A conversation held by its own workflow; ``id`` is the conversation id. Use it from
    any process with a client: turns are serialized in arrival order."""

    def __init__(
        self,
        agent: ServedAgent[OutputT],
        handle: WorkflowHandle[Any, Any],
        recovery_timeout: timedelta = RECOVERY_TIMEOUT,
        starting: FirstStart | None = None,
    ) -> None:
        self.agent = agent
        self._starting = starting  # the workflow's start, carried by the first send
        self.with_messages = True
        """``False``: a turn's ``Result`` leaves ``messages`` empty, the transcript not read
        for it (one query less a turn, for a reader that relays the turn's events)."""
        self.handle = handle
        self.id = handle.id
        self.recovery_timeout = recovery_timeout
        """How long a send may take to get its turn taken (``TurnNotTaken`` after it):
        through continue-as-new, a reopen, no worker up (golem.client.recovery)."""
        self._messages: list[Message] | None = None  # what this handle has seen of the transcript
        self._histories = history_reader(agent.client)
        self.inline: bool | None = None
        """Its turns run inline in its workflow (``None``: not known yet, read from its memo
        when a streamed turn needs it)."""

    async def send(
        self,
        prompt: str | None = None,
        *,
        parts: Sequence[Part] = (),
        deps: Any = None,
        run_id: str | None = None,
    ) -> Result[OutputT]:
        """Run one turn (a child run of the conversation) and return its ``Result``, whose
        ``messages`` are the whole conversation. ``run_id`` makes a retried send one turn."""
        given = checked(prompt, parts=parts, deps=deps)
        chosen, run_id = run_id, run_id or new_id()
        turn = TurnInput(run_id=run_id, prompt=prompt, parts=given.parts, deps=deps)
        check_size(turn, self.agent.client.data_converter)  # a task failing for ever, else
        await self._refuse_taken(chosen)
        recovery = self._recovery(run_id)
        return await self._finish(self._update(turn, recovery), recovery)

    def send_stream(
        self,
        prompt: str | None = None,
        *,
        parts: Sequence[Part] = (),
        deps: Any = None,
        run_id: str | None = None,
    ) -> DurableRunStream[OutputT]:
        """One turn, yielding its run's events as they happen (the turn starts when
        iterated); once exhausted, ``.result`` is what ``send`` returns, or it raises
        ``send``'s ``RunError``."""
        given = checked(prompt, parts=parts, deps=deps)
        chosen, run_id = run_id, run_id or new_id()  # minted here: the stream is the child's
        turn = TurnInput(run_id=run_id, prompt=prompt, parts=given.parts, deps=deps, stream=True)
        check_size(turn, self.agent.client.data_converter)
        sent: list[asyncio.Task[TurnOutput]] = []
        recoveries: list[TurnRecovery] = []  # made once iterated: its deadline starts then

        inline: list[bool] = []

        async def start() -> DurableRun[OutputT]:
            # Its turn may never be taken: a conversation no worker can run says so.
            return await unless_stuck(self.agent.client, self.id, begin())

        async def begin() -> DurableRun[OutputT]:
            await self._refuse_taken(chosen)
            recoveries.append(self._recovery(run_id))
            inline.append(await self.runs_inline())
            accepted = asyncio.Event()
            sent.append(asyncio.ensure_future(self._update(turn, recoveries[0], accepted)))
            agent = self.agent
            if inline[0]:
                return await self._inline_turn(run_id, sent[0], recoveries[0], accepted)
            child = self.agent.client.get_workflow_handle(run_id)
            if not await turn_started(child, sent[0], self.id, accepted):
                await self._finish(sent[0], recoveries[0])  # raises the refusal, as send would
            if sent[0].done() and await existing_run(self.agent.client, run_id) is None:
                # It ran with no child: inline, in a conversation started without its memo
                # (its stream still holds the turn's items, read once it has ended).
                self.inline = inline[0] = True
                return await self._inline_turn(run_id, sent[0], recoveries[0], accepted)

            async def answer() -> Result[OutputT]:
                return await self._latest(sent[0], recoveries[0], self._child_answered)

            return DurableRun(
                run_id,
                self.id,
                child,
                [],
                agent.output_adapter,
                agent.may_pause,
                based=True,
                answer=answer,
                client=agent.client,
            )

        async def outcome() -> Result[OutputT]:
            return await self._finish(sent[0], recoveries[0])

        async def paused() -> None:
            try:  # shielded: a stream that stops waiting must not cancel the turn's update
                out: TurnOutput = await asyncio.shield(sent[0])
            except Exception:
                # Failed or refused: its items so far are all it publishes, and a run it
                # named to hand over to never starts (a child turn's target is not waited for).
                return
            if out.run.kind != "paused":
                await asyncio.Event().wait()  # the run ended: its stream ends by itself

        return DurableRunStream(
            start,
            outcome=outcome,
            on_close=lambda: [*map(let_go, sent)],
            paused=paused,
            run_id=run_id,
        )

    async def _refuse_taken(self, chosen: str | None) -> None:
        """A run id names one run, ever: Temporal refuses a child turn's start an id a
        workflow holds, but an inline turn is no workflow, so a run id its caller chose is
        asked for here (another inline conversation's turn is no workflow either)."""
        if chosen is not None and len(chosen) > MAX_ID_CHARS:  # its update id, Temporal refuses
            raise ValueError(
                f"a run id of {len(chosen)} characters, over Temporal's limit of {MAX_ID_CHARS}"
            )
        if not chosen or chosen == self.id or not await self.runs_inline():
            return  # a minted id is new; the conversation's own id its worker refuses
        if await existing_run(self.agent.client, chosen) is not None:
            raise RunIdInUseError(run_id_taken(chosen))

    async def runs_inline(self) -> bool:
        """Whether this conversation's turns run inline in its workflow (docs/adr/0050):
        known to the client that started it, else read once from its memo."""
        if self.inline is None:
            try:
                memo = await (await self.handle.describe()).memo()
            except RPCError as exc:
                if exc.status != RPCStatusCode.NOT_FOUND:
                    raise
                memo = {}  # none yet: the send says what it is
            self.inline = bool(memo.get(names.INLINE_MEMO))
        return self.inline

    async def _inline_turn(
        self,
        run_id: str,
        sent: asyncio.Future[TurnOutput],
        recovery: TurnRecovery,
        accepted: asyncio.Event,
    ) -> DurableRun[OutputT]:
        """Inline turn ``run_id`` once its conversation took it (its events are on the
        conversation's stream); a send refused before that raises, as ``send`` would."""
        taken: asyncio.Future[Any] = asyncio.ensure_future(accepted.wait())
        try:
            await asyncio.wait([sent, taken], return_when=asyncio.FIRST_COMPLETED)
        finally:
            taken.cancel()
        if not accepted.is_set() and sent.done() and sent.exception() is not None:
            await self._finish(sent, recovery)  # raises the refusal
        run = await self.turn(run_id)
        assert isinstance(run, InlineTurnRun)

        async def answer() -> Result[OutputT]:
            return await self._latest(sent, recovery, self._answered)

        return replace(run, answer=answer, unanswered=lambda: not sent.done())

    async def _latest(
        self,
        sent: asyncio.Future[TurnOutput],
        recovery: TurnRecovery,
        recorded: Callable[[str], Awaitable[Result[OutputT]]],
    ) -> Result[OutputT]:
        """Turn ``recovery.run_id``'s latest answer: its send's, unless that was a pause (a
        decision since may have ended the turn, or paused it again) or never came (its
        stream was left before: the turn went on); then what its conversation recorded."""
        if _waited(sent):
            result = await self._finish(sent, recovery)
            if not result.paused:
                return result
        return await recorded(recovery.run_id)

    async def _child_answered(self, run_id: str) -> Result[OutputT]:
        """Child turn ``run_id``'s latest answer: its runs' results composed (its own, then
        each it was handed over to, as its conversation's history names them)."""
        first, *targets = await self.turn_of(run_id) or [run_id]
        return await self._handed_over(await (await self.agent.attach(first)).result(), targets)

    async def turn(self, run_id: str) -> DurableRun[OutputT]:
        """Turn ``run_id``'s run, to read its stream or wait for its result: its own
        workflow's (a child run), or, when the turns run inline, one on the conversation's
        stream whose ``result()`` is the turn's latest answer (its pause, or its end), read
        from the conversation's history once the turn has one."""
        if not await self.runs_inline():
            return await self.agent.attach(run_id)
        agent = self.agent

        async def answer() -> Result[OutputT]:
            return await self._answered(run_id)

        return InlineTurnRun(
            run_id,
            self.id,
            self.handle,
            [],
            agent.output_adapter,
            agent.may_pause,
            based=True,
            agent=agent.agent_name,
            answer=answer,
            client=agent.client,
        )

    async def _answered(self, run_id: str) -> Result[OutputT]:
        """Inline turn ``run_id``'s latest answer once its history records one (a reader
        that came back after its send: a pause, or its end), asked again until then."""
        pause = 0.05
        # While the turn runs, asking its conversation is cheap; its histories, read whole,
        # are not (a long turn's reader would read them about once a second).
        while await self._in_flight(run_id) or (out := await self._inline_outcome(run_id)) is None:
            await asyncio.sleep(pause)
            pause = min(pause * 2, 1.0)
        if isinstance(out, BaseException):
            raise await self._turn_failure(out, run_id) from None
        return await self._turn_result(out, run_id)

    def _update(
        self, turn: TurnInput, recovery: TurnRecovery, accepted: asyncio.Event | None = None
    ) -> Awaitable[TurnOutput]:
        client = self.agent.client

        def reopen_it(carry: bool) -> Awaitable[WithStartWorkflowOperation[Any, Any] | bool]:
            return reopening(client, self.id, turn) if carry else reopen(client, self.id, turn)

        starting, self._starting = self._starting, None  # a start is used once
        if starting is None:
            return take_turn(client, self.handle, turn, recovery, reopen_it, accepted)

        def carried(listing: Listing) -> Awaitable[TurnOutput]:
            start = starting.make(listing)
            return take_turn(client, self.handle, turn, recovery, reopen_it, accepted, start)

        # Refused for an attribute the namespace lacks, nothing started: again without it.
        return start_listed(client, carried, starting.title, starting.turn_runs)

    async def _finish(self, sent: Awaitable[TurnOutput], recovery: TurnRecovery) -> Result[OutputT]:
        """The turn's ``Result`` once its update returns, or its ``RunError``."""
        run_id = recovery.run_id
        try:
            out = await unless_stuck(self.agent.client, self.id, sent)
        except WorkflowUpdateFailedError as exc:
            error = await self._turn_error(exc, run_id)
            if not isinstance(error, TurnRecorded):
                raise error from exc
        except TurnRecorded:  # the rested run's input knows it: not reopened for nothing
            pass
        except RPCError as exc:
            raise await self._closed_or(exc) from exc
        else:
            return await self._turn_result(out, run_id)
        recovery.why = "its recorded runs could not be read"
        return await recovery.within(self._recorded(run_id))

    async def _recorded(self, run_id: str) -> Result[OutputT]:
        """A send retried after continue-as-new: the turn ran, so its runs answer (the
        caller's, then each it handed over to), with the conversation through that turn."""
        transcript = await read_pages(self._pager())
        runs, end = turn_runs(transcript, run_id)
        try:
            result = await (await self.agent.attach(run_id)).result()
        except RPCError as exc:
            missing = exc.status == RPCStatusCode.NOT_FOUND
            out = await self._inline_outcome(run_id) if missing else None
            if out is None:
                raise
            if isinstance(out, BaseException):  # it failed: the same error as its send's
                raise await self._turn_failure(out, run_id) from None
            return await self._turn_result(out, run_id)  # a turn run inline: no workflow
        result = await self._handed_over(result, runs[1:])
        return replace(result, messages=transcript[:end]) if end else result

    async def _handed_over(
        self, result: Result[OutputT], targets: Sequence[str]
    ) -> Result[OutputT]:
        """A turn's ``Result`` from its first run's (``result``) and the runs it was handed
        over to, in order: the last one's answer, the first's ids."""
        for target in targets:
            result = handed_over(result, await (await self.agent.attach(target)).result())
        return result

    async def _in_flight(self, run_id: str) -> bool:
        """Turn ``run_id`` is queued or runs (``False`` when its conversation cannot say:
        a worker before the query, or none; its histories are read then)."""
        try:
            return bool(await self.handle.query(names.TURN_IN_FLIGHT, run_id, result_type=bool))
        except (WorkflowQueryFailedError, RPCError):
            return False

    async def _inline_outcome(self, run_id: str) -> TurnOutput | BaseException | None:
        """What inline turn ``run_id``'s send answered (or failed with), from the newest
        conversation run whose history records it ran (a refusal is no answer)."""
        turns = await inline_turns_of(self.agent.client, self.id)
        outcomes = [t.outcome for t in turns if t.run_id == run_id and ran(t.outcome)]
        return outcomes[0] if outcomes else None

    def _recovery(self, run_id: str) -> TurnRecovery:
        return TurnRecovery(self.id, run_id, self.recovery_timeout, self.agent.client)

    async def approve(
        self, decisions: Mapping[str, DecisionInput], *, by: str = ""
    ) -> Result[OutputT]:
        """Answer the turn that waits for approvals, by call id, as ``DurableRun.approve``
        does (``True``, ``False``, ``Approve(...)``, ``Deny(...)``; ``by``: who decided);
        returns that turn's next ``Result``: final, or waiting again."""
        given = await checked_decisions(decisions, by, self.agent.tools, self._waiting)
        return await self._decide(given)

    async def _decide(self, given: Mapping[str, Decision]) -> Result[OutputT]:
        """Send decisions (or client-run tools' results) to the turn that waits. Its run
        lists the calls a little before the conversation hears of the pause: an answer sent
        in between goes again, while the run still waits for every call it names (within
        ``recovery_timeout``)."""
        loop = asyncio.get_running_loop()
        deadline, pause = loop.time() + self.recovery_timeout.total_seconds(), 0.02
        while True:
            try:
                deciding = self.handle.execute_update(
                    names.APPROVE, dict(given), result_type=TurnOutput
                )
                out: TurnOutput = await unless_stuck(self.agent.client, self.id, deciding)
            except WorkflowUpdateFailedError as exc:
                left = deadline - loop.time()
                if left > pause and await self._not_heard_yet(exc, given, left - pause):
                    await asyncio.sleep(pause)
                    pause = min(pause * 2, 1.0)
                    continue
                raise await self._turn_error(exc, "") from exc
            except RPCError as exc:
                raise await self._closed_or(exc) from exc
            return await self._turn_result(out, out.run.run_id)

    async def _not_heard_yet(
        self, exc: WorkflowUpdateFailedError, given: Mapping[str, Decision], within: float
    ) -> bool:
        """The conversation refused ``given`` (its validator: nothing was recorded) while its
        turn's run waits for every call named: it has not heard of the pause yet. A refusal
        of the decisions themselves (none named, unknown, decided, due) names calls the run
        no longer waits for, or none. The run is asked ``within`` seconds."""
        cause = exc.cause
        if not (isinstance(cause, ApplicationError) and cause.type == names.APPROVALS_WAITING):
            return False
        try:
            async with asyncio.timeout(within):
                waiting = {call.id for call in await self._waiting()}
        except Exception:  # the run cannot be asked (in time): the refusal stands, as given
            return False
        return bool(given) and set(given) <= waiting

    async def complete(self, results: Mapping[str, object], *, by: str = "") -> Result[OutputT]:
        """Answer the client-run tools' calls the turn waits for, as ``DurableRun.complete``
        does; returns that turn's next ``Result``: final, or waiting again."""
        given = await checked_results(results, by, self.agent.tools, self._waiting)
        return await self._decide(given)

    async def approvals_policy(self) -> dict[str, Decision]:
        """The tools approved ``always`` in this conversation (``Approve(always=True)``), by
        name: the decision that did it. Their calls run without asking, across turns and
        continue-as-new, until ``revoke``."""
        policy: dict[str, Decision] = await self.handle.query(ConversationWorkflow.approvals_policy)
        return policy

    async def set_approval_policy(self, policy: ApprovalPolicy) -> None:
        """Rules tried before the agent's own for this conversation's calls, from its next
        turn on, across continue-as-new. Rules by tool name or glob only (no ``when``, no
        evaluator: ``ValueError``, nothing sent); an empty policy takes them back."""
        await self.handle.execute_update(
            ConversationWorkflow.set_approval_policy, stored_rules(policy)
        )

    async def revoke(self, tool: str) -> dict[str, Decision]:
        """Take back ``tool``'s standing approval: from the next turn its calls ask again.
        Returns the standing approvals left; ``ValueError`` when ``tool`` has none."""
        try:
            left: dict[str, Decision] = await self.handle.execute_update(
                ConversationWorkflow.revoke, tool
            )
        except WorkflowUpdateFailedError as exc:
            raise await self._turn_error(exc, "") from exc
        return left

    async def _waiting(self) -> list[ToolCall]:
        return (await awaiting_approval(self.agent.client, self.id)).calls

    async def _turn_result(self, out: TurnOutput, run_id: str) -> Result[OutputT]:
        if not self.with_messages:
            return await decode_result(out.run, Sources(), self._validate, messages=False)
        history = await self._transcript(out.start)
        handle = self.agent.client.get_workflow_handle(run_id)
        based = out.based or isinstance(out.run.messages, InTranscript)
        given, lead = ([], history) if based else (history, [])
        sources = Sources(given=given, lead=lead, pages=run_pager(handle), transcript=self._pager())
        result: Result[OutputT] = await decode_result(out.run, sources, self._validate)
        if not result.paused:  # a paused turn is not in the transcript yet
            self._messages = result.messages
        return result

    @property
    def _validate(self) -> Callable[[Any], Any] | None:
        adapter = self.agent.output_adapter
        return adapter.validate_python if adapter is not None else None

    async def messages(self) -> list[Message]:
        """The whole conversation so far (a query: a worker must be up)."""
        self._messages = await read_pages(self._pager())
        return list(self._messages)

    async def current_agent(self) -> str:
        """The name of the agent serving the next turn: the conversation's, until a turn
        hands it over to another (a query: a worker must be up). ``agent`` is the handle's
        ``DurableAgent``, whatever agent serves."""
        name: str = await self.handle.query(ConversationWorkflow.current_agent)
        return name

    async def runs(self) -> list[str]:
        """The run id of every turn, in order, across continue-as-new (read from the
        conversation's history: no worker needed; earlier workflow runs are read once per
        handle)."""
        histories = self._histories
        return await histories.runs(await histories.transcript(self.id))

    async def turn_of(self, run_id: str | None = None) -> dict[str, str]:
        """The runs of the turn run ``run_id`` (default: the latest run) is one of, in
        order, each with the agent it was handed to: the turn's first (its id; agent
        ``""``), then each it was handed over to so far; empty when it is no turn's run.
        Read from the conversation's history, as ``runs``."""
        histories = self._histories
        transcript = await histories.transcript(self.id)
        runs = await histories.runs(transcript)
        run_id = runs[-1] if run_id is None and runs else run_id
        if run_id not in runs:
            return {}
        first = transcript.handed.get(run_id, (run_id, ""))[0]
        handed = {r: agent for r, (turn, agent) in transcript.handed.items() if turn == first}
        return {first: "", **handed}

    async def fork(self, at_run_id: str | None = None) -> DurableConversation[OutputT]:
        """A new conversation that continues this one from the end of run ``at_run_id``
        (default: the newest); its first run names that run as its parent. Read from the
        conversation's history (no worker needed); a long transcript is shared by reference
        to the workflow runs that hold it, not copied."""
        description = await self.handle.describe()
        histories = self._histories
        # As far as it can be read: a fork can go on before a turn whose blob is damaged.
        source = await histories.transcript(self.id, description.run_id or "", True)
        messages = await histories.messages(source)
        runs = await histories.runs(source)
        ends = {m.run_id: i + 1 for i, m in enumerate(messages) if m.run_id}
        if at_run_id is None:  # the newest turn in the transcript (not one in flight or waiting)
            at = next((run for run in reversed(runs) if run in ends), "")
        elif at_run_id not in runs:
            raise ValueError(f"run {at_run_id} is not a turn of conversation {self.id}")
        elif at_run_id not in ends:
            raise ValueError(
                f"run {at_run_id} added nothing to conversation {self.id} (it is in flight, "
                "waits for approvals, or ended before it recorded anything): fork at another run"
            )
        else:
            at = at_run_id
        end = ends[at] if at else len(messages)
        input = ConversationInput(
            agent=self.agent.agent_name, messages=messages[:end], parent_run_id=at
        )
        if sum(map(message_size, messages[:end])) > CARRY_BYTES:
            # By reference up to the forked turn (what its run added goes by value: the new
            # conversation repairs it if it failed), so no open call is shared unrepaired.
            begins = next(i for i, m in enumerate(messages) if m.run_id == at) if at else end
            earlier, cut = source.fork_point(self.id, description.run_id or "", begins, messages)
            input = input.model_copy(update={"messages": messages[cut:end], "earlier": earlier})
        return await start_conversation(
            self.agent, new_id(), input, recovery_timeout=self.recovery_timeout
        )

    def _pager(self) -> Pager:
        """Pages of the transcript; what earlier workflow runs hold is read from their histories."""
        return with_segments(run_pager(self.handle), self._histories.segment)

    async def close(self) -> None:
        """End the conversation for good once the turn in flight (if any) finishes (one
        that rests is reopened to be closed, so no later send reopens it). Getting the
        close taken is bounded by ``recovery_timeout`` as a send's turn is (a reopened run
        may rest again before the close reaches it): ``TurnNotTaken`` after it."""
        recovery = self._recovery("")
        while True:
            try:
                update = await recovery.within(
                    self.handle.start_update(
                        names.CLOSE,
                        wait_for_stage=WorkflowUpdateStage.ACCEPTED,
                        result_type=ConversationSummary,
                    )
                )
                await update.result()  # once the turn in flight ends: not bounded
                return
            except RPCError as exc:
                if not await recovery.within(reopen(self.agent.client, self.id)):
                    return await self._closed_already(exc)
                # It rested (reopened now, to close it) or runs: the close goes again.
                await recovery.again("it rested, and was being reopened", exc, at_once=True)
            except WorkflowUpdateFailedError as exc:
                return await self._closed_already(exc)

    async def _closed_already(self, exc: Exception) -> None:
        """A close that failed with ``exc``: done when the conversation is closed already."""
        error = await self._closed_or(exc)
        if not isinstance(error, ConversationClosedError):
            raise error from exc

    async def _transcript(self, upto: int) -> list[Message]:
        """The first ``upto`` messages: what this handle saw, else read by query."""
        if self._messages is not None and len(self._messages) == upto:
            return self._messages
        return await read_pages(self._pager(), 0, upto) if upto else []

    async def _turn_error(self, exc: WorkflowUpdateFailedError, run_id: str) -> Exception:
        """The error a turn's send failed with, as golem's own."""
        return await self._turn_failure(exc.cause, run_id, str(exc))

    async def _turn_failure(
        self, cause: BaseException | None, run_id: str, what: str = ""
    ) -> Exception:
        async def evidence(report: RunReport) -> list[Message]:
            # The conversation appended the evidence before it refused the turn.
            rid = report.run_id or run_id  # a handed-over turn's last run failed
            transcript = await read_pages(self._pager())
            self._messages = transcript
            ends = [i + 1 for i, m in enumerate(transcript) if m.run_id == rid]
            return transcript[: ends[-1] if ends else None]

        error = await rebuilt_error(cause, run_id, evidence)
        if isinstance(error, RunError) and error.partial is None:
            self._messages = None
        if error is not None:
            return error
        message = cause.message if isinstance(cause, FailureError) else what or str(cause)
        return ValueError(f"conversation {self.id} refused the turn: {message}")

    async def _closed_or(self, exc: Exception) -> Exception:
        description = await self.handle.describe()
        if description.status == WorkflowExecutionStatus.RUNNING:
            return exc
        client = self.agent.client
        if await rested(client, self.id, description.status, description.run_id) is not None:
            return ConversationClosedError(
                f"conversation {self.id} rests (idle): nothing waits in it; its next turn "
                "reopens it"
            )
        if (unread := await _unreadable_end(self.handle)) is not None:
            return unread
        status = description.status.name.lower() if description.status else "closed"
        why = await _failure_of(self.handle) if status == "failed" else ""
        said = f"failed: {why}" if why else f"is {status}"
        return ConversationClosedError(f"conversation {self.id} {said}; fork it to go on")


def _waited(sent: asyncio.Future[TurnOutput]) -> bool:
    """The send waits for its answer, or got it: its caller did not stop waiting (leaving
    its stream early cancels the wait, not the turn)."""
    if not sent.done():
        return True
    return not sent.cancelled() and not isinstance(
        sent.exception(), WorkflowUpdateRPCTimeoutOrCancelledError
    )


async def _failure_of(handle: WorkflowHandle[Any, Any]) -> str:
    """Why a conversation workflow failed: its innermost failure's message (e.g. an agent its
    worker does not serve, with the task queue); ``""`` when it cannot be read."""
    try:
        await handle.result(follow_runs=False)
    except WorkflowFailureError as exc:
        cause: BaseException | None = exc.cause
        while isinstance(cause, FailureError) and isinstance(cause.cause, FailureError):
            cause = cause.cause
        if isinstance(cause, FailureError) and cause.message:
            return cause.message
    except RPCError:  # the reason is a courtesy: the status alone is still true
        return ""
    return ""


async def _unreadable_end(handle: WorkflowHandle[Any, Any]) -> RunError | None:
    """The ``RunError`` (stage ``codec`` or ``storage``) of a conversation a worker ended
    because it could not read it (docs/adr/0022-unreadable-runs-end.md), else ``None``."""
    try:
        await handle.result(follow_runs=False)
    except WorkflowFailureError as exc:
        error = await rebuilt_error(exc.cause, handle.id)
        if isinstance(error, RunError) and error.stage in ("codec", "storage"):
            detail = error.detail.replace(f"run {handle.id}", f"conversation {handle.id}", 1)
            return RunError(error.stage, f"{detail}; fork it to go on", run_id=handle.id)
    except Exception:  # it ended some other way: the caller says how
        return None
    return None
