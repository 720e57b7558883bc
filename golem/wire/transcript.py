"""A conversation's transcript as one ``ConversationWorkflow`` run holds it, and as a reader
rebuilds it from that run's history events: the same steps, in one place, so the two
cannot drift apart.

A workflow run holds its own messages (``own``) after the ones earlier runs hold
(``earlier``: segments, read from their histories); only the part of the transcript no
earlier run holds crosses continue-as-new by value, so a conversation has no turn limit.
Every change is one of these steps, each deterministic:

- ``begin``: a turn starts (its run id joins the run list); a turn that takes the history
  by reference first gets a repaired transcript (``repaired``, what its run's loop would
  do), so it never needs the history by value;
- ``ended``: the turn's run completed; what it added (and, by value, what it repaired)
  joins the transcript;
- ``failed``: the run failed; its partial evidence joins the transcript, unrepaired;
- ``never_started``: the run could not start (its run id is taken): it is no turn.

See docs/adr/0012-transcript-by-reference.md.
"""

from __future__ import annotations

from collections import OrderedDict, defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.update.v1 import Outcome
from temporalio.converter import DataConverter
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from golem.messages import Message
from golem.phases.prepare import repaired
from golem.wire import (
    AgentRunInput,
    Carried,
    Completed,
    ConversationInput,
    Failed,
    InTranscript,
    MessagesPage,
    MessagesQuery,
    ModelCall,
    Pager,
    Segment,
    ShippingError,
    Stamps,
    ToolCallInput,
    TurnEnded,
    TurnInput,
    TurnOutput,
    chain,
    chain_all,
    expand,
    message_size,
    names,
)
from golem.wire.failures import UNREADABLE, run_failure
from golem.wire.run_history import RunHistory

#: A transcript up to this size crosses continue-as-new by value; a longer one by
#: reference to the workflow runs that hold it (their histories must outlive retention).
CARRY_BYTES = 256_000
#: Run ids of the latest turns carried across continue-as-new (a retried send is one turn).
RECENT_RUNS = 64


class Transcript:
    """One workflow run's view of the conversation: ``earlier`` segments, then ``own``."""

    def __init__(self, input: ConversationInput) -> None:
        self.earlier = list(input.earlier)
        self.offset = input.earlier[-1].end if input.earlier else 0
        """Where ``own`` begins in the transcript."""
        self.own: list[Message] = list(input.messages)
        self.chain = chain_all(self.own, input.earlier[-1].digest if input.earlier else "")
        """``chain[i]``: digest of the transcript's first ``offset + i`` messages."""
        self.runs = list(input.runs)
        self.turns_before = input.turns
        self.handed_before = input.handed
        self.handed: dict[str, tuple[str, str]] = {}
        """Own runs a run handed over to (each goes on its turn, not one of its own) -> the
        turn's first run (its id) and the agent it was handed to, in the order they were
        handed to; a transcript rebuilt from a history has them all."""
        self.recent = list(input.recent)
        self.parent_run_id = input.parent_run_id
        self.closed = False
        """Rebuilt from a history that has ended (it can be cached: it never changes)."""
        # Messages before `clean` are repaired and closed: a turn can take them by reference.
        self.clean = self.length if repaired(self.own) == self.own else self.offset
        self.start = self.length  # where the current turn's messages begin
        self.based = False  # the current turn got the transcript by reference

    @property
    def length(self) -> int:
        return self.offset + len(self.own)

    @property
    def digest(self) -> str:
        return self.chain[-1]

    @property
    def turns(self) -> int:
        """The conversation's runs so far (one per turn, and one per run handed over to)."""
        return self.turns_before + len(self.runs)

    @property
    def person_turns(self) -> int:
        """The person's turns so far: the runs less those handed over to."""
        return self.turns - self.handed_before - len(self.handed)

    @property
    def last_run(self) -> str:
        """The run the next turn continues (its parent)."""
        return (self.runs or self.recent or [self.parent_run_id])[-1]

    def knows(self, run_id: str) -> bool:
        return run_id in self.runs or run_id in self.recent

    # -- the steps -----------------------------------------------------------------

    def begin(self, run_id: str, by_reference: bool, handed: tuple[str, str] | None = None) -> None:
        """A turn starts (``handed``: it is a run a run of the turn handed over to, with the
        turn's first run and its agent); by reference, it continues a repaired transcript."""
        self.runs.append(run_id)
        if handed is not None:
            self.handed[run_id] = handed
        if by_reference and self.clean < self.length:
            cut = self.clean - self.offset
            self._set(repaired(self.own[cut:]), since=cut)
            self.clean = self.length
        self.start = self.length
        self.based = by_reference

    def never_started(self, run_id: str) -> None:
        """The turn's run could not start (its run id is taken): it is no turn."""
        self.runs.remove(run_id)
        self.handed.pop(run_id, None)

    def ended(self, output: Completed) -> bool:
        """The turn's run completed: its messages join (``False`` when it paged them)."""
        if not isinstance(output.messages, Carried):
            return False
        self._apply(output.messages, output.stamps)
        self.clean = self.length
        return True

    def took(self, messages: list[Message]) -> None:
        """An inline turn's messages (its history rebuilt them) join, after its base."""
        self._set(messages, since=self.start - self.offset)
        self.clean = self.length

    def failed(self, details: Failed | None) -> None:
        """The turn's run failed: its evidence (when carried inline) joins, unrepaired."""
        evidence = details.evidence if details is not None else None
        if evidence is None or not isinstance(evidence.messages, Carried):
            return
        self.clean = min(self.clean, self._apply(evidence.messages, evidence.stamps))

    def _apply(self, messages: Carried, stamps: Stamps) -> int:
        """The turn's run's messages join; returns the transcript index of the first change."""
        given = self.start - self.offset
        # A by-value turn was given the whole transcript: it appended if it kept all of it.
        if self.based or messages.keep == self.start == self.length:
            return self._set(expand(messages.added, stamps), since=given)  # it only appends
        if self.offset:
            # By construction only by-value turns rewrite, and they hold the whole transcript.
            raise ValueError("a turn rewrote history that earlier workflow runs hold")
        return self._set(messages.after(self.own[:given], stamps))

    def _set(self, messages: list[Message], since: int = 0) -> int:
        """Own messages from index ``since`` on become ``messages``; returns the transcript
        index of the first change (only what changed is hashed again)."""
        same = since
        for old, new in zip(self.own[since:], messages, strict=False):
            if old is not new and old != new:
                break
            same += 1
        tail = messages[same - since :]
        del self.chain[same + 1 :], self.own[same:]
        for message in tail:
            self.chain.append(chain(self.chain[-1], message))
        self.own.extend(tail)
        return self.offset + same

    # -- reading and carrying ------------------------------------------------------------

    def messages(self) -> list[Message]:
        """The transcript, when this workflow run holds all of it."""
        if self.offset:
            raise ValueError("earlier workflow runs hold the first messages")
        return list(self.own)

    def page(self, query: MessagesQuery) -> MessagesPage:
        """``[since, upto)``: one page of own messages, or the segments holding the start."""
        upto = min(query.upto or self.length, self.length)
        if query.since < self.offset:
            end = min(upto, self.offset)
            held = [s for s in self.earlier if s.start < end and s.end > query.since]
            return MessagesPage(messages=[], next=end, held=held)
        shifted = MessagesQuery(since=query.since - self.offset, upto=upto - self.offset)
        page = MessagesPage.of(self.own, shifted)
        return MessagesPage(messages=page.messages, next=page.next + self.offset)

    def carry(self, workflow_id: str, run_id: str, by_reference: bool) -> dict[str, Any]:
        """The ``ConversationInput`` fields that cross continue-as-new: everything by value
        while it is small (or when the agent needs the whole history), else what is clean by
        reference to this workflow run (``workflow_id``/``run_id``) and the rest by value;
        with the count of runs handed over to, when there were any."""
        handed = self.handed_before + len(self.handed)
        counted = {"handed": handed} if handed else {}
        if not self.earlier and (
            not by_reference or sum(map(message_size, self.own)) <= CARRY_BYTES
        ):
            return {"messages": self.own, "runs": self.runs, **counted}
        held = Segment(
            workflow_id=workflow_id,
            run_id=run_id,
            start=self.offset,
            end=self.clean,
            digest=self.chain[self.clean - self.offset],
            turns=True,
        )
        return {
            "messages": self.own[self.clean - self.offset :],
            "earlier": [*self.earlier, held],
            "turns": self.turns,
            "recent": [*self.recent, *self.runs][-RECENT_RUNS:],
            **counted,
        }

    def fork_point(
        self, workflow_id: str, run_id: str, end: int, messages: list[Message]
    ) -> tuple[list[Segment], int]:
        """For a fork that continues the first ``end`` messages (``messages`` is the whole
        transcript; this is workflow run ``run_id``): the segments holding the first ``cut``
        of them, and ``cut`` (what is clean; the rest goes by value)."""
        cut = min(end, self.clean)
        own = cut - self.offset  # the digest is at hand for what this run holds
        digest = self.chain[own] if own >= 0 else chain_all(messages[:cut])[-1]
        held: list[Segment] = []
        for segment in self.earlier:
            if segment.start >= cut:
                break
            update: dict[str, Any] = {"turns": False}  # the fork's turns are its own
            if segment.end > cut:
                update |= {"end": cut, "digest": digest}
            held.append(segment.model_copy(update=update))
        if cut > self.offset:
            held.append(
                Segment(
                    workflow_id=workflow_id,
                    run_id=run_id,
                    start=self.offset,
                    end=cut,
                    digest=digest,
                )
            )
        return held, cut


async def read_transcript(
    events: AsyncIterator[HistoryEvent], converter: DataConverter, upto_unreadable: bool = False
) -> Transcript | None:
    """A ``ConversationWorkflow`` run's transcript rebuilt from its history events (a
    closed run's, or a running one's so far), decoded with ``converter`` (so encrypted
    payloads work); ``None`` if the history is not a conversation's. ``upto_unreadable``:
    the turns before the first payload that cannot be read (a damaged blob, a key not
    held) instead of that payload's error."""
    transcript: Transcript | None = None
    inline: _InlineTurns | None = None
    try:
        async for event in events:
            if event.HasField("workflow_execution_started_event_attributes"):
                payloads = event.workflow_execution_started_event_attributes.input.payloads
                [input] = await converter.decode(list(payloads), [ConversationInput])
                transcript = Transcript(input)
                inline = _InlineTurns(transcript, converter) if input.inline_turns else None
            elif transcript is None:
                return None
            elif inline is not None:
                # Its turns are its updates; a child workflow is a turn's delegation.
                await inline.take(event)
            elif event.HasField("start_child_workflow_execution_initiated_event_attributes"):
                initiated = event.start_child_workflow_execution_initiated_event_attributes
                [run] = await converter.decode(list(initiated.input.payloads), [AgentRunInput])
                transcript.begin(initiated.workflow_id, run.base is not None)
            elif event.HasField("start_child_workflow_execution_failed_event_attributes"):
                transcript.never_started(
                    event.start_child_workflow_execution_failed_event_attributes.workflow_id
                )
            elif event.HasField("child_workflow_execution_completed_event_attributes"):
                completed = event.child_workflow_execution_completed_event_attributes
                [output] = await converter.decode(list(completed.result.payloads), [Completed])
                transcript.ended(output)
                if output.handoff is not None:  # the turn goes on as the target's run
                    caller = completed.workflow_execution.workflow_id
                    turn = transcript.handed.get(caller, (caller, ""))[0]
                    transcript.handed[output.handoff.run_id] = (turn, output.handoff.agent)
            elif event.HasField("child_workflow_execution_failed_event_attributes"):
                failure = event.child_workflow_execution_failed_event_attributes.failure
                transcript.failed(run_failure(await converter.decode_failure(failure)))
            if transcript is not None and event.event_type in _CLOSED:
                transcript.closed = True
    except ApplicationError as exc:
        if not upto_unreadable or exc.type not in UNREADABLE:
            raise
    if inline is not None and transcript is not None:
        inline.in_flight()
        transcript.handed = {r: (t, inline.agents[r]) for r, t in inline.turn_of.items()}
    return transcript


class _InlineTurns:
    """An inline conversation's turns (docs/adr/0050-turns-inline.md) as its history records
    them: each accepted send's run, and each turn's model and tool activities, kept by the
    run they belong to (a queued turn's first activity can precede the update that ends the
    turn before it). A turn ends with its send's answer; one that paused, with the answer of
    the ``approve`` that ended it, or the memo recording an end no update answered. Without
    a ``transcript``, only what each turn answered is kept (``records``)."""

    def __init__(self, transcript: Transcript | None, converter: DataConverter) -> None:
        self.transcript = transcript
        self.converter = converter
        self.sends: dict[str, str] = {}  # update id -> run id, until answered
        self.approves: set[str] = set()  # update ids of approvals, until answered
        self.open = ""  # the turn that paused, until it ends
        self.activities: dict[str, list[HistoryEvent]] = defaultdict(list)
        self.scheduled: dict[int, str] = {}  # scheduled event id -> run id
        self.records: dict[str, InlineTurn] = {}
        # A turn whose run handed over goes on as the target's run (ADR 0050's handoffs).
        self.turn_of: dict[str, str] = {}  # a handed-to run -> its turn (the send's run)
        self.agents: dict[str, str] = {}  # a handed-to run -> its agent
        self.current: dict[str, str] = {}  # a turn -> the run it goes on as
        self.taken: set[str] = set()  # runs whose messages a memo recorded

    async def take(self, event: HistoryEvent) -> None:
        if event.HasField("activity_task_scheduled_event_attributes"):
            attrs = event.activity_task_scheduled_event_attributes
            kind = _RUN_OF.get(attrs.activity_type.name)
            if kind is not None and self.transcript is not None:
                [given] = await self.converter.decode(list(attrs.input.payloads), [kind])
                run_id = _run_of(given)
                self.scheduled[event.event_id] = run_id
                self.activities[run_id].append(event)
        elif event.HasField("activity_task_completed_event_attributes"):
            scheduled = event.activity_task_completed_event_attributes.scheduled_event_id
            if scheduled in self.scheduled:
                self.activities[self.scheduled[scheduled]].append(event)
        elif event.HasField("workflow_execution_update_accepted_event_attributes"):
            request = event.workflow_execution_update_accepted_event_attributes.accepted_request
            update_id = request.meta.update_id
            if request.input.name == names.SEND:
                args = list(request.input.args.payloads)
                [turn] = await self.converter.decode(args, [TurnInput])
                self.sends[update_id] = turn.run_id
                started = event.event_time.ToDatetime()
                self.records.setdefault(turn.run_id, InlineTurn(turn.run_id, started, None))
            elif request.input.name == names.APPROVE:
                self.approves.add(update_id)
        elif event.HasField("workflow_execution_update_completed_event_attributes"):
            completed = event.workflow_execution_update_completed_event_attributes
            update_id, outcome = completed.meta.update_id, completed.outcome
            if update_id in self.sends:
                await self._answered(self.sends.pop(update_id), outcome, ended=False)
            elif update_id in self.approves and self.open:
                self.approves.discard(update_id)
                await self._answered(self.open, outcome, ended=True)
        elif event.HasField("workflow_properties_modified_event_attributes"):
            fields = event.workflow_properties_modified_event_attributes.upserted_memo.fields
            if names.HANDED_RUN_MEMO in fields:
                payload = fields[names.HANDED_RUN_MEMO]
                [record] = await self.converter.decode([payload], [TurnEnded])
                assert record.output is not None
                self._handed(record.run_id, record.output, event.event_time.ToDatetime())
            if names.TURN_ENDED_MEMO in fields:
                payload = fields[names.TURN_ENDED_MEMO]
                [record] = await self.converter.decode([payload], [TurnEnded])
                if record.output is not None:
                    await self._took(record.run_id, record.output)
                else:
                    details = [record.failure] if record.failure is not None else []
                    error = ApplicationError(record.message, *details, type=names.RUN_ERROR)
                    self._failed(record.run_id, error)

    def in_flight(self) -> None:
        """The turns accepted and not ended yet are the transcript's latest runs."""
        assert self.transcript is not None
        waiting = [*self.sends.values(), *([self.open] if self.open else [])]
        waiting = [r for turn in waiting for r in (turn, self.current.get(turn, turn))]
        self.transcript.runs.extend(
            dict.fromkeys(r for r in waiting if r not in self.transcript.runs)
        )

    async def _answered(self, run_id: str, outcome: Outcome, ended: bool) -> None:
        """An update answered turn ``run_id``: it ended, or (its send's answer) it paused."""
        if outcome.HasField("success"):
            [out] = await self.converter.decode(list(outcome.success.payloads), [TurnOutput])
            if isinstance(out.run, Completed):
                await self._took(run_id, out)
            else:  # it waits for a person (again, after a partial approval)
                self.open = run_id
                self._record(run_id, out)
                if run_id in self.current:  # the run it was handed to waits, as the turn
                    self._record(self.current[run_id], out)
            return
        error = await self.converter.decode_failure(outcome.failure)
        if ran(error):
            self._failed(run_id, error)
        elif not ended:
            self._record(run_id, error)  # a refused send: no turn

    async def _took(self, run_id: str, out: TurnOutput) -> None:
        """Turn ``run_id`` completed: its messages join (rebuilt from its activities when
        the answer leaves them to the transcript). Inline turns take the transcript by
        reference (an agent that needs it by value is refused them). A turn that handed
        over ends with its last run, whose messages follow those of the runs before it."""
        turn, run = self._run_of_turn(run_id)
        self._ended(turn, out)
        self._record(run, out)
        activities = self.activities.pop(run, [])
        transcript = self.transcript
        if transcript is None or run in self.taken:
            return
        transcript.begin(run, True)
        held = out.run.messages
        if isinstance(held, InTranscript):
            read = await RunHistory.read(_replayed(activities), self.converter)
            transcript.took(read.so_far)
            if transcript.length - out.start != held.count:
                raise ShippingError(
                    f"turn {turn}: its activities hold {transcript.length - out.start} "
                    f"messages, not the {held.count} it added to the conversation"
                )
        elif isinstance(out.run, Completed):
            transcript.ended(out.run)

    def _handed(self, run_id: str, out: TurnOutput, when: datetime) -> None:
        """Run ``run_id`` of an inline turn handed over (or, handed to, it ended keeping its
        messages): they join; a turn that handed over goes on as the target's run."""
        self.activities.pop(run_id, None)
        if self.transcript is not None and isinstance(out.run, Completed):
            self.transcript.begin(run_id, True)
            self.transcript.ended(out.run)
        handoff = out.run.handoff if isinstance(out.run, Completed) else None
        if handoff is None:
            self.taken.add(run_id)
            return
        turn = self.turn_of.get(run_id, run_id)
        self.turn_of[handoff.run_id] = turn
        self.agents[handoff.run_id] = handoff.agent
        self.current[turn] = handoff.run_id
        self.records[handoff.run_id] = InlineTurn(handoff.run_id, when, None)

    def _run_of_turn(self, run_id: str) -> tuple[str, str]:
        """The turn ``run_id`` belongs to, and the run it ended as."""
        turn = self.turn_of.get(run_id, run_id)
        return turn, self.current.pop(turn, run_id)

    def _failed(self, run_id: str, error: BaseException) -> None:
        """Turn ``run_id`` failed: its evidence joins (its last run's, after a handoff)."""
        turn, run = self._run_of_turn(run_id)
        self._ended(turn, error)
        self._record(run, error)
        self.activities.pop(run, None)
        if self.transcript is not None:
            self.transcript.begin(run, True)
            self.transcript.failed(run_failure(error))

    def _ended(self, run_id: str, outcome: TurnOutput | BaseException) -> None:
        if self.open == run_id:
            self.open = ""
        self._record(run_id, outcome)

    def _record(self, run_id: str, outcome: TurnOutput | BaseException) -> None:
        known = self.records.get(run_id)
        if known is not None:
            self.records[run_id] = InlineTurn(run_id, known.started, outcome)


def _run_of(given: Any) -> str:
    """The run an inline turn's model or tool activity belongs to."""
    if isinstance(given, ModelCall):
        return given.stamps.run_id if given.stamps is not None else ""
    return str(given.run_id)


#: The activities whose inputs name their run, and their input types.
_RUN_OF: dict[str, type[Any]] = {names.MODEL_REQUEST: ModelCall, names.TOOL: ToolCallInput}


@dataclass(frozen=True)
class InlineTurn:
    """An inline turn as its conversation run's history records it (docs/adr/0050)."""

    run_id: str
    started: datetime
    outcome: TurnOutput | BaseException | None
    """What it answered in the end (paused: while it waits), the error it failed with (a
    refused send's too), ``None``: in flight."""


async def inline_turns(events: list[HistoryEvent], converter: DataConverter) -> list[InlineTurn]:
    """The inline turns this conversation run's history records, in the order sent: what
    each answered in the end (a paused one's latest answer while it waits)."""
    turns = _InlineTurns(None, converter)
    for event in events:
        await turns.take(event)
    return list(turns.records.values())


async def _replayed(events: list[HistoryEvent]) -> AsyncIterator[HistoryEvent]:
    for event in events:
        yield event


def ran(outcome: TurnOutput | BaseException | None) -> bool:
    """Whether an inline turn's recorded answer says it ran (not refused, not in flight)."""
    if isinstance(outcome, ApplicationError):
        return outcome.type not in REFUSALS
    return outcome is not None


#: The error types of a send refused after its update was accepted: no turn ran.
REFUSALS = frozenset(
    {
        names.CONVERSATION_CLOSED,
        names.CONVERSATION_CONTINUING,
        names.APPROVALS_WAITING,
        names.TURN_RECORDED,
        names.TURN_DIFFERS,
        names.RUN_ID_IN_USE,
    }
)

_CLOSED = frozenset(
    {
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW,
    }
)


#: A workflow run's history events, by workflow id and run id (``""``: the latest run).
Events = Callable[[str, str], AsyncIterator[HistoryEvent]]


class HistoryReader:
    """Reads conversations from their workflow runs' histories, no worker needed: what a
    segment holds, a whole transcript, every turn's run id. Rebuilt transcripts are cached
    (what a segment names never changes)."""

    def __init__(self, events: Events, converter: DataConverter, max_runs: int = 16) -> None:
        self._events = events
        self._converter = converter
        self._max_runs = max_runs
        self._cache: OrderedDict[tuple[str, str], Transcript] = OrderedDict()

    async def transcript(
        self, workflow_id: str, run_id: str = "", upto_unreadable: bool = False
    ) -> Transcript:
        """Workflow run ``run_id`` of conversation ``workflow_id`` (``""``: its latest),
        rebuilt from its history events (a closed one is cached); ``upto_unreadable``: as
        far as its payloads can be read (not cached)."""
        key = (workflow_id, run_id)
        cached = self._cache.get(key)
        if cached is not None and not upto_unreadable:
            self._cache.move_to_end(key)
            return cached
        try:
            events = self._events(workflow_id, run_id)
            transcript = await read_transcript(events, self._converter, upto_unreadable)
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
            raise ShippingError(
                f"workflow run {run_id or '(latest)'} of conversation {workflow_id} is gone "
                "(past the namespace's retention?): the messages it held cannot be read"
            ) from None
        if transcript is None:
            raise ShippingError(f"workflow {workflow_id} is not a conversation")
        if run_id and transcript.closed and not upto_unreadable:  # a running one still changes
            self._cache[key] = transcript
            while len(self._cache) > self._max_runs:
                self._cache.popitem(last=False)
        return transcript

    async def segment(self, segment: Segment) -> list[Message]:
        """The messages ``[start, end)`` ``segment`` names, checked against its digest."""
        transcript = await self.transcript(segment.workflow_id, segment.run_id)
        own = segment.end - transcript.offset
        if not 0 <= own <= len(transcript.own) or transcript.chain[own] != segment.digest:
            raise ShippingError(
                f"workflow run {segment.run_id} of {segment.workflow_id} does not hold messages "
                f"{segment.start}-{segment.end} of the conversation as they were recorded"
            )
        return await self.messages(transcript, segment.start, segment.end)

    async def messages(
        self, transcript: Transcript, start: int = 0, end: int = -1
    ) -> list[Message]:
        """``[start, end)`` of ``transcript``'s conversation (``end`` -1: all of it)."""
        end = transcript.length if end < 0 else end
        out: list[Message] = []
        for segment in transcript.earlier:
            low, high = max(start, segment.start), min(end, segment.end)
            if low < high:
                held = await self.segment(segment)
                out.extend(held[low - segment.start : high - segment.start])
        low, high = max(start, transcript.offset), max(end, transcript.offset)
        out.extend(transcript.own[low - transcript.offset : high - transcript.offset])
        return out

    async def runs(self, transcript: Transcript) -> list[str]:
        """The run id of every turn of ``transcript``'s conversation, in order."""
        out: list[str] = []
        for segment in transcript.earlier:
            if segment.turns:  # that workflow run's own turns (its earlier ones are listed too)
                held = await self.transcript(segment.workflow_id, segment.run_id)
                out.extend(held.runs)
        return [*out, *transcript.runs]


#: Reads the messages ``[start, end)`` a segment names, from its workflow run's history.
SegmentReader = Callable[[Segment], Awaitable[list[Message]]]


def with_segments(pager: Pager, read: SegmentReader) -> Pager:
    """``pager`` whose pages held by earlier workflow runs are read from their histories."""

    async def page(query: MessagesQuery) -> MessagesPage:
        served = await pager(query)
        if not served.held:
            return served
        messages: list[Message] = []
        for segment in served.held:
            held = await read(segment)
            low = max(query.since, segment.start)
            high = min(segment.end, query.upto) if query.upto else segment.end
            messages.extend(held[low - segment.start : high - segment.start])
        return MessagesPage(messages=messages, next=query.since + len(messages))

    return page
