"""Live events of durable runs, read from the run's Temporal workflow stream.

    stream = durable.run_stream("Plan my trip")          # starts the run when iterated
    async for event in stream:                           # the RunEvents of agent.run_stream
        print(event.delta.text if event.kind == "text_delta" and event.delta else "", end="")
    stream.result                                        # the Result run() gives (or RunError)

    async for event in run.stream(from_offset=saved):    # attach late, or resume after a crash
        saved = run_stream.offset                        # what to pass next time

The client half of ``golem.client``: it takes a ``DurableRun`` (its workflow handle) and
reads the stream ``temporalio.contrib.workflow_streams`` hosts (its poll sent here);
``golem.client``
re-exports it. A run's stream names each run it delegates or hands off to as it starts
(a ``child`` item): the reader follows that run's own stream too, from its start, and
merges its events in as they arrive (``RunEvent.run_id`` and ``agent`` say whose they
are), each before what the run that named it did once it ended (its tool's result). ``offset``
counts the run's own items only. See docs/adr/0007-live-streams.md.
"""

from __future__ import annotations

import asyncio
import base64
import math
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Mapping,
)
from contextlib import aclosing, suppress
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, NamedTuple, Protocol, TypeVar

from pydantic import ValidationError
from temporalio.api.common.v1 import Payload
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
    WorkflowUpdateStage,
)
from temporalio.common import RawValue
from temporalio.contrib.workflow_streams import PollInput, PollResult, WorkflowStreamClient
from temporalio.service import RPCError, RPCStatusCode

from golem.approvals import DecisionInput
from golem.events import RunEvent
from golem.results import Result, StreamResult
from golem.wire import StreamEvent, names, stream_wire
from golem.wire.converter import golem_data_converter
from golem.wire.lineage import CONVERSATION_ID

OutputT = TypeVar("OutputT")

#: The encoding of golem's JSON payloads: a stream item's, read without its converter.
JSON_PLAIN = b"json/plain"
#: Pause after each answered poll. Polls are long polls (each answered only when new
#: items exist), so this bounds the poll rate, not the latency of a waiting subscriber.
POLL_COOLDOWN = timedelta(milliseconds=10)
#: How long a reader waits for a named child run to exist (a conversation starts the run a
#: turn hands over to once the turn's run has ended).
CHILD_START = timedelta(seconds=60)


class DurableRun(Protocol[OutputT]):
    """The run a stream reads (``golem.client.DurableRun`` is it; the client makes streams,
    so this module does not import it)."""

    run_id: str
    conversation_id: str
    agent: str
    handle: WorkflowHandle[Any, Any]
    turn_runs: dict[str, str]
    """An inline turn's runs, each with its agent: its own, then those it was handed over
    to, as its streams read them."""
    followed: dict[str, tuple[str, int]]
    """The runs below it its streams followed and had not read to their end: agent, offset."""

    async def result(self, *, final: bool = False) -> Result[OutputT]: ...

    async def approve(
        self, decisions: Mapping[str, DecisionInput], *, by: str = ""
    ) -> Result[OutputT]: ...

    async def complete(self, results: Mapping[str, object], *, by: str = "") -> Result[OutputT]: ...

    async def cancel(self) -> None: ...

    async def stream_end(self) -> int: ...

    async def stream_held(self) -> bool: ...

    async def stuck(self, error: RPCError) -> Exception: ...

    def stream(self, from_offset: int = 0) -> DurableRunStream[OutputT]: ...


class DurableRunStream(StreamResult[OutputT]):
    """The ``RunEvent``s of a durable run, from ``offset`` on, each once and in order;
    ``result`` once exhausted. Leaving the loop early leaves the run running."""

    def __init__(
        self,
        run: DurableRun[OutputT] | Callable[[], Awaitable[DurableRun[OutputT]]],
        from_offset: int = 0,
        *,
        outcome: Callable[[], Awaitable[Result[OutputT]]] | None = None,
        on_close: Callable[[], object] | None = None,
        paused: Callable[[], Awaitable[None]] | None = None,
        run_id: str = "",
        waiting: bool = False,
    ) -> None:
        if from_offset < 0:
            raise ValueError(f"from_offset must be 0 or more, not {from_offset}")
        self.run_id = run_id or (run.run_id if not callable(run) else "")
        """The run's id, known before iterating starts it (a turn's: chosen, or minted)."""
        self._run = run if not callable(run) else None
        self._start = run if callable(run) else None
        self._offset = from_offset
        self._read = from_offset  # where the run's own items not yet read begin
        self._end_at: int | None = None  # where the stream stood when the run paused
        # A conversation turn's Result is its update's, not its run's (run.result()).
        self._outcome = outcome
        self._on_close = on_close
        # Returns once the run waits for approvals (a turn's update says so); never otherwise.
        self._paused = paused
        self._begun = asyncio.Event()  # the run is known (a turn: its conversation took it)
        self._tree: _Tree | None = None
        self._read_from = ("", from_offset)
        # The run waits for a person: its streams (and those below it) are read as they
        # stand, by query. A long poll would stay in the workflow until someone answers
        # (a cancelled call does not end Temporal's update), and it takes 10 at most.
        self._waiting = waiting

    @property
    def run(self) -> DurableRun[OutputT]:
        """The run (its ids, ``cancel()``), once iteration has started it."""
        if self._run is None:
            raise RuntimeError("the run has not started: iterate the stream first")
        return self._run

    @property
    def offset(self) -> int:
        """Where the events not yet yielded begin: pass it to ``DurableRun.stream`` to resume."""
        return self._offset

    @property
    def read_from(self) -> tuple[str, int]:
        """The run whose stream the last event yielded was read from (this run's, or one it
        named) and the offset after that event there."""
        return self._read_from

    def resume_below(self, run_id: str) -> dict[str, tuple[str, int]]:
        """Where a reader that resumes from run ``run_id``'s position (this run's offset, or
        that of a run it named after its last event yielded) must read the runs below it
        on from, so it sees each of their events once: each run it named (and those they
        named) whose events may still come, with its agent and the offset after its last
        event yielded, unless a resume reads its naming again and none of its events was
        yielded. A resume passes them as ``DurableRun.followed``. Empty unless iterating."""
        if self._tree is None or self._run is None:
            return {}
        own = run_id == self._run.run_id
        return self._tree.to_resume(run_id, self._offset if own else self._tree.at.get(run_id, 0))

    async def __aiter__(self) -> AsyncIterator[RunEvent]:
        try:
            try:
                async with aclosing(self._events()) as events:
                    async for event in events:
                        yield event
            except WorkflowQueryFailedError:
                # A run its worker cannot read (an input it cannot decrypt) answers no
                # query; once it has ended, its outcome says why.
                if self._run is None or await _running(self._run):
                    raise
            except RPCError as exc:  # a poll the server gave up on: can the run go on?
                if self._run is None or (said := await self._run.stuck(exc)) is exc:
                    raise
                raise said from exc
            outcome = self._outcome or self.run.result
            self._result = await outcome()
        finally:
            if self._on_close is not None:
                self._on_close()

    @property
    def started(self) -> bool:
        """Iterating it has started the run (``begun`` has returned)."""
        return self._begun.is_set()

    def ready(self) -> bool:
        """An event has arrived that the next step of the iteration yields without waiting
        (a relay writes the events that arrived together at once)."""
        return self._tree is not None and self._tree.ready > 0

    async def begun(self) -> DurableRun[OutputT]:
        """The run, once iterating the stream has started it (a conversation's turn: once
        the conversation took it)."""
        await self._begun.wait()
        return self.run

    async def _events(self) -> AsyncGenerator[RunEvent, None]:
        if self._run is None:
            assert self._start is not None
            self._run = await self._start()
        self._begun.set()
        run = self._run
        self._end_at = None  # a pause seen by an earlier iteration bounds nothing now
        tree = self._tree = _Tree(run.handle, run.conversation_id, run.run_id, run.followed)
        tree.held = self._waiting
        own = tree.add(self._own(run, tree))
        if self._read:  # read on past the items naming them: go on where an earlier stopped
            for below, (agent, offset) in list(run.followed.items()):
                tree.follow(below, agent, offset, by=(run.run_id, -1))
        # One watch per stream, not a task per item: the run's own reader is stopped only
        # once the run waits for a person.
        watch = None
        if self._paused is not None:
            watch = asyncio.ensure_future(self._stop_when_paused(run, self._paused, tree, own))
        try:
            async with aclosing(tree.events()) as events:
                async for event, source, offset in events:
                    if source == run.run_id:  # one of the run's own: the offset after it
                        self._offset = offset
                    tree.yielded(source, offset, event.kind)
                    self._read_from = (source, offset)
                    yield event
        finally:
            self._tree = None
            if watch is not None:
                watch.cancel()
        self._offset = self._read

    async def _own(self, run: DurableRun[OutputT], tree: _Tree) -> AsyncGenerator[Positioned, None]:
        """The run's own events, from ``offset`` on, each with the offset after it; the
        runs it names are followed."""
        events = _Events(run.run_id, run.conversation_id, run.agent, tree)
        if self._read:  # runs an earlier stream left unread: read to their end before it goes on
            events.named.extend(run.followed)
        # A turn run inline streams on its conversation's stream, among its other turns'.
        if run.handle.id != run.run_id:
            events.held = run.stream_held
            # The runs it was handed over to, as a stream of it read them: one read on from
            # an offset past their ``handed`` items still takes their items as the turn's.
            events.agents = run.turn_runs
            events.agents.setdefault(run.run_id, run.agent)
        items = _subscribe(run.handle, self._read, held=self._waiting)
        async with aclosing(items):
            async for event in events.read(self._up_to_pause(items), self._read_up_to):
                yield event, run.run_id, self._read

    def _read_up_to(self, item: Polled) -> None:
        self._read = item.offset + 1

    async def _up_to_pause(
        self, items: AsyncGenerator[Polled, None]
    ) -> AsyncGenerator[Polled, None]:
        """``items``; once the run waits for a person (its stream does not end then), only
        those published before the pause (``_end_at``)."""
        async for item in items:
            yield item
            if self._end_at is not None and self._read >= self._end_at:
                return

    async def _stop_when_paused(
        self,
        run: DurableRun[OutputT],
        paused: Callable[[], Awaitable[None]],
        tree: _Tree,
        own: asyncio.Task[None],
    ) -> None:
        """Once ``paused`` says the run waits for a person, each stream is read up to what it
        held at the pause, then no more (a run that waits publishes nothing until a person
        answers): the run's own (at once, when it has read it all), then those of the runs
        below it (a handed-over turn's may wait after the run itself ended). What ``paused``
        raises (the decisions were refused: the run will not go on) ends the stream."""
        try:
            await paused()
        except Exception as exc:
            tree.queue.put_nowait(exc)
            return
        if not own.done():  # not a handed-over turn, whose run was read to its end
            try:
                self._end_at = await WorkflowStreamClient(run.handle).get_offset()
            except Exception as exc:  # the reader raises it, as its own poll's error
                tree.queue.put_nowait(exc)
                return
            if self._read >= self._end_at:
                own.cancel()  # waiting in a poll for items the pause will not publish
            # It may wait for a run below to be read (``settled``) before naming the next.
            await asyncio.wait([own])
        await tree.drain_others()


async def _running(run: DurableRun[OutputT]) -> bool:
    return (await run.handle.describe()).status == WorkflowExecutionStatus.RUNNING


async def write_text(
    stream: AsyncIterable[RunEvent],
    write: Callable[[str], object],
    speaker: Callable[[str], str] | None = None,
) -> bool:
    """Write a run's text as it streams, a line per model turn; a retried turn is marked.
    ``speaker(agent)`` begins the first text, and the line of any agent's text after
    another's (a run handed over to, a delegate). ``False`` when there was no text at all."""
    wrote = anything = False
    speaking: str | None = None
    async for event in stream:
        if event.kind == "model_start" and wrote:
            write("\n")
            wrote = False
        elif event.kind == "turn_restarted" and event.attempt == 1:
            write(f"\n[{event.model} takes over from a model that failed: its answer restarts]\n")
        elif event.kind == "turn_restarted":
            write(
                f"\n[the model call was retried (attempt {event.attempt}): its answer restarts]\n"
            )
            wrote = False
        elif event.kind == "text_delta" and event.delta is not None and event.delta.text:
            if speaker is not None and event.agent != speaking:
                write(("\n" if wrote else "") + speaker(event.agent))
                speaking = event.agent
            write(event.delta.text)
            wrote = anything = True
    if wrote:
        write("\n")
    return anything


class Polled(NamedTuple):
    """An item of a run's stream: where it is, and its event."""

    offset: int
    event: StreamEvent


#: A run's state once it is closed (its items are read by query then).
_CLOSED = frozenset(
    {
        WorkflowExecutionStatus.COMPLETED,
        WorkflowExecutionStatus.FAILED,
        WorkflowExecutionStatus.CANCELED,
        WorkflowExecutionStatus.TERMINATED,
        WorkflowExecutionStatus.TIMED_OUT,
    }
)


async def _subscribe(
    handle: WorkflowHandle[Any, Any], offset: int, held: bool = False
) -> AsyncGenerator[Polled, None]:
    """The items of the stream of ``handle``'s workflow from ``offset`` on, as the
    contrib's subscriber reads them (its poll update, a long poll; a run that continued as
    new followed; a closed run's items read by its poll query), at less cost to this
    process: each poll's answer is read into ``StreamEvent``s in one pass (the contrib's
    makes a ``Payload`` of each item), and none is held while the next poll waits.
    ``held``: only what the stream holds now, read by its poll query (no long poll)."""
    polling, closed = handle, handle if held else None
    while True:
        ask = PollInput(topics=[names.TOPIC], from_offset=offset)
        if closed is not None:
            answer = await closed.query(names.STREAM_POLL, ask, result_type=RawValue)
        else:
            run_id = None
            try:
                # Accepted, then answered: a call that waited for the answer instead held
                # ~5 KB more of Temporal's native memory per open stream (serve.py).
                update = await polling.start_update(
                    names.STREAM_POLL,
                    ask,
                    wait_for_stage=WorkflowUpdateStage.ACCEPTED,
                    result_type=RawValue,
                )
                run_id = update.workflow_run_id
                answer = await update.result()
            except WorkflowUpdateFailedError as exc:
                kind = getattr(exc.cause, "type", None)
                if kind == names.STREAM_TRUNCATED:  # read on from the oldest it holds
                    offset = 0
                    continue
                if kind == names.STREAM_DRAINING:  # its next run takes the poll
                    await asyncio.sleep(POLL_COOLDOWN.total_seconds())
                    continue
                polling, closed = await _moved(polling, run_id, exc)
                continue
            except (WorkflowUpdateRPCTimeoutOrCancelledError, RPCError) as exc:
                if isinstance(exc.__cause__, asyncio.CancelledError):
                    raise exc.__cause__ from None  # the SDK's word for a cancelled wait
                polling, closed = await _moved(polling, run_id, exc)
                continue
        items, offset, more = _read_poll(answer.payload)
        del answer  # an open stream waits in its next poll holding none of what it read
        while items:
            yield items.pop(0)
        if not more:
            if closed is not None:
                return
            await asyncio.sleep(POLL_COOLDOWN.total_seconds())


async def _moved(
    handle: WorkflowHandle[Any, Any], run_id: str | None, error: Exception
) -> tuple[WorkflowHandle[Any, Any], WorkflowHandle[Any, Any] | None]:
    """Where a stream whose poll failed with ``error`` goes on (the workflow run it reached,
    ``run_id``, if known, else its latest): its next run, when it continued as new; its
    closed run, read by query; else ``error`` is raised."""
    client = handle._client  # the handle's own: Temporal's handle has no public one
    try:
        described = await client.get_workflow_handle(handle.id, run_id=run_id).describe()
    except RPCError:
        raise error from None
    if described.status == WorkflowExecutionStatus.CONTINUED_AS_NEW:
        return client.get_workflow_handle(handle.id), None
    if described.run_id and described.status in _CLOSED:
        return handle, client.get_workflow_handle(handle.id, run_id=described.run_id)
    raise error


def _read_poll(payload: Payload) -> tuple[list[Polled], int, bool]:
    """A poll's answer: its items, the offset after them, and whether more are ready."""
    if payload.metadata.get("encoding") == JSON_PLAIN:
        # What golem's converter wrote: read at once (one it refuses goes the converter's
        # way below, which says what is wrong with it).
        with suppress(ValidationError):
            answer = stream_wire.polled(payload.data)
            items = [
                Polled(i.offset, i.event if i.event is not None else _decode(i.payload()))
                for i in answer.items
            ]
            return items, answer.next_offset, answer.more_ready
    result: PollResult = golem_data_converter.payload_converter.from_payload(payload, PollResult)
    items = [
        Polled(i.offset, _decode(Payload.FromString(base64.b64decode(i.data))))
        for i in result.items
    ]
    return items, result.next_offset, result.more_ready


def _decode(payload: Payload) -> StreamEvent:
    if payload.metadata.get("encoding") == JSON_PLAIN:
        # What the converter does with it, less its dispatch (most of a read's CPU); one it
        # refuses goes the converter's way, which says what is wrong with it.
        with suppress(ValidationError):
            return StreamEvent.model_validate_json(payload.data)
    payload_converter = golem_data_converter.payload_converter
    wire: StreamEvent = payload_converter.from_payload(payload, StreamEvent)
    return wire


#: Items a run publishes only once every run it named so far has ended (the loop emits a
#: batch's ``tool_end``s once all its calls are done; then the next model turn, or the
#: handoff): the runs' events are yielded before them.
_AFTER_BELOW = frozenset({"tool_end", "model_start", "handed"})


class _Events:
    """One run's stream items as ``RunEvent``s: late pieces of an abandoned model call
    dropped, children named followed in ``tree``."""

    def __init__(self, run_id: str, conversation_id: str, agent: str, tree: _Tree) -> None:
        self.run_id, self.conversation_id = run_id, conversation_id
        self.agents = {run_id: agent}
        """The runs whose items are this run's (an inline turn's run and those it handed
        over to: ``handed``), each with its agent."""
        self.tree = tree
        self.named: list[str] = []
        """The runs it named whose streams may not have been read to their end yet."""
        self.attempts: dict[tuple[str, int], tuple[int, int]] = {}  # turn -> newest attempt
        self.ended = False
        """The run's ``end`` was read."""
        self.held: Callable[[], Awaitable[bool]] | None = None
        """Set when the stream is a conversation's, whose items name their turn (``of_run``):
        whether it still holds this run's items (asked as another turn ends)."""
        self.at = 0
        """The offset of the item read last."""

    async def read(
        self,
        items: AsyncIterator[Polled],
        on_item: Callable[[Polled], None] = lambda item: None,
    ) -> AsyncGenerator[RunEvent, None]:
        """The events of ``items``, up to the run's ``end``."""
        async for item in items:
            wire = item.event
            self.at = item.offset
            mine = self.held is None or wire.of_run in self.agents
            if self.named and mine and wire.kind in _AFTER_BELOW:
                # Their events happened before this item: none is yielded after it.
                await self.tree.settled(self.named)
                self.named.clear()
            on_item(item)
            if self.held is not None and not mine:
                if wire.kind == "end" and not await self.held():
                    self.ended = True  # its items were dropped: none of them will come
                    return
                continue  # another turn's
            if wire.kind == "end":
                self.ended = True
                return
            if wire.kind == "handed":  # the turn goes on as that run, on this stream
                self.agents[wire.run_id] = wire.agent
                continue
            event = self.convert(wire)
            if event is not None:
                yield event

    def convert(self, wire: StreamEvent) -> RunEvent | None:
        if wire.kind == "child":
            self.tree.follow(wire.run_id, wire.agent, by=(self.run_id, self.at))
            self.named.append(wire.run_id)
            return None
        run_id = wire.of_run or self.run_id
        # Deltas leave the agent to the loop's events.
        agent = self.agents[run_id] = wire.agent or self.agents.get(run_id, "")
        turn = (run_id, wire.turn)
        if wire.kind == "turn_restarted":
            if wire.attempt_order <= self.attempts.get(turn, (0, 1)):
                return None  # an attempt given up on that went on: its restart comes late
            self.attempts[turn] = wire.attempt_order
        elif wire.delta is not None and wire.attempt_order < self.attempts.get(turn, (0, 1)):
            return None  # a late piece of an attempt that was already given up on
        return wire.to_event(run_id, self.conversation_id, agent)


#: An event, the run whose stream it was read from, and the offset after it there.
Positioned = tuple[RunEvent, str, int]


@dataclass
class _Child:
    """A run below the one read: its stream, and how far its reader has read it."""

    handle: WorkflowHandle[Any, Any]
    pump: asyncio.Task[None] = field(init=False)
    read: int = 0
    moved: asyncio.Event = field(default_factory=asyncio.Event)
    """Set as its reader reads an item."""
    named: list[str] = field(default_factory=list)
    """The runs its stream named that ``settled`` has not seen end yet."""

    def read_up_to(self, item: Polled) -> None:
        self.read = item.offset + 1
        self.moved.set()


class _Tree:
    """The events of a run and of every run below it, merged as they arrive."""

    def __init__(
        self,
        handle: WorkflowHandle[Any, Any],
        conversation_id: str,
        run_id: str,
        kept: dict[str, tuple[str, int]] | None = None,
    ) -> None:
        self.client = handle._client  # the handle's own: Temporal's handle has no public one
        self.conversation_id = conversation_id
        self.followed = {run_id}
        # The runs below not read to their end yet, with how far: the next stream of the
        # run follows them on from there (they may go on once a person answers).
        self.kept: dict[str, tuple[str, int]] = {} if kept is None else kept
        self.queue: asyncio.Queue[Positioned | Exception | None] = asyncio.Queue()
        self.pumps: list[asyncio.Task[None]] = []
        self.children: list[_Child] = []
        self.below: dict[str, _Child] = {}  # each child by its run id
        self.ready = 0
        """Events in ``queue``: ``events`` yields the next without waiting."""
        self.named_by: dict[str, tuple[str, int]] = {}
        """Each run below whose events may still come: the run whose stream named it and
        that item's offset (-1: one a resume follows on from where an earlier read)."""
        self.agents: dict[str, str] = {}
        self.at: dict[str, int] = {}
        """Each run below: the offset after its last event yielded (or where it is read from)."""
        self.seen: set[str] = set()
        """The runs below an event was yielded of."""
        self.held = False
        """Each stream is read as it stands (``DurableRunStream``'s ``waiting``)."""

    def add(self, events: AsyncGenerator[Positioned, None]) -> asyncio.Task[None]:
        pump = asyncio.ensure_future(self._pump(events))
        self.pumps.append(pump)
        return pump

    def follow(
        self, run_id: str, agent: str, offset: int = 0, by: tuple[str, int] = ("", -1)
    ) -> None:
        """Read the stream of run ``run_id`` too, from ``offset`` (once, however often it
        is named); ``by``: the run whose stream named it, and that item's offset."""
        if run_id not in self.followed:
            self.followed.add(run_id)
            self.named_by[run_id], self.agents[run_id], self.at[run_id] = by, agent, offset
            child = _Child(self.client.get_workflow_handle(run_id), read=offset)
            self.children.append(child)
            self.below[run_id] = child
            self.kept[run_id] = (agent, offset)
            child.pump = self.add(self._child(child, agent))

    def yielded(self, source: str, offset: int, kind: str) -> None:
        """An event read from run ``source``'s stream was yielded, ``offset`` after it. One
        published once the runs it named had ended (``_AFTER_BELOW``) comes after all their
        events: those runs (and the runs below them) are done."""
        self.at[source] = offset
        self.seen.add(source)
        if kind in _AFTER_BELOW:
            self._done(source, offset)

    def _done(self, source: str, before: float) -> None:
        """The runs ``source``'s stream named before offset ``before`` have ended."""
        for run_id, (by, at) in list(self.named_by.items()):
            if by == source and at < before:
                del self.named_by[run_id]
                self._done(run_id, math.inf)

    def to_resume(self, run_id: str, offset: int) -> dict[str, tuple[str, int]]:
        """The runs run ``run_id``'s stream named that are not done, each with its agent and
        offset, then those they named (see ``DurableRunStream.resume_below``): those named
        before ``offset``, which a read from it would miss, and those named after it whose
        events were yielded, which it would read again from their start."""
        found: dict[str, tuple[str, int]] = {}
        for below, (by, at) in list(self.named_by.items()):
            if by == run_id and (at < offset or below in self.seen):
                found[below] = (self.agents[below], self.at[below])
                found |= self.to_resume(below, self.at[below])
        return found

    async def settled(self, run_ids: list[str]) -> None:
        """Return once the streams of runs ``run_ids`` and of those they named have been
        read to their end (or their readers stopped): a wait only while one is being read."""
        for run_id in list(run_ids):
            child = self.below.get(run_id)
            if child is None:
                continue
            if not child.pump.done():
                await asyncio.wait([child.pump])
            await self.settled(child.named)
            child.named.clear()

    async def drain_others(self) -> None:
        """Stop reading the runs below the first once each has yielded what its stream held
        now (those named meanwhile too)."""
        for child in self.children:  # grows as the runs read name others
            if child.pump.done():
                continue
            try:
                end = await WorkflowStreamClient(child.handle).get_offset()
            except (RPCError, WorkflowQueryFailedError):  # not started: nothing published
                end = 0
            while child.read < end and not child.pump.done():
                child.moved.clear()
                moved = asyncio.ensure_future(child.moved.wait())
                await asyncio.wait([moved, child.pump], return_when=asyncio.FIRST_COMPLETED)
                moved.cancel()
            child.pump.cancel()

    async def _pump(self, events: AsyncGenerator[Positioned, None]) -> None:
        try:
            async with aclosing(events):
                async for event in events:
                    self.queue.put_nowait(event)
                    self.ready += 1
        except Exception as exc:
            self.queue.put_nowait(exc)
        finally:
            self.queue.put_nowait(None)

    async def _child(self, child: _Child, agent: str) -> AsyncGenerator[Positioned, None]:
        handle = child.handle
        if not await workflow_started(handle):
            return
        events = _Events(handle.id, self.conversation_id, agent, self)
        events.named = child.named
        async with aclosing(_subscribe(handle, child.read, held=self.held)) as items:
            async for event in events.read(items, child.read_up_to):
                self.kept[handle.id] = (agent, child.read)
                yield event, handle.id, child.read
        if events.ended:
            self.kept.pop(handle.id, None)

    async def events(self) -> AsyncGenerator[Positioned, None]:
        ended = 0
        try:
            while ended < len(self.pumps):
                item = await self.queue.get()
                if item is None:
                    ended += 1
                elif isinstance(item, Exception):
                    raise item
                else:
                    self.ready -= 1
                    yield item
        finally:
            for pump in self.pumps:
                pump.cancel()
            await asyncio.gather(*self.pumps, return_exceptions=True)


async def below_refusal(
    client: Client, conversation_id: str, below: Mapping[str, tuple[str, int]]
) -> str | None:
    """Why a reader cannot resume the runs ``below`` from their offsets: one is not a run of
    conversation ``conversation_id`` (a stream of another's is not the reader's to read),
    or its offset is past the end of its stream; ``None`` when it can."""
    for run_id, (_, offset) in below.items():
        handle = client.get_workflow_handle(run_id)
        try:
            attributes = (await handle.describe()).typed_search_attributes
            end = await WorkflowStreamClient(handle).get_offset() if offset else 0
        except (RPCError, WorkflowQueryFailedError):
            attributes, end = None, 0
        if attributes is None or attributes.get(CONVERSATION_ID) != conversation_id:
            return f"run {run_id!r} is not a run of conversation {conversation_id}"
        if offset > end:
            return f"offset {offset} is past the end of run {run_id}'s stream"
    return None


async def workflow_started(handle: WorkflowHandle[Any, Any]) -> bool:
    """Wait until the workflow exists (``False`` after ``CHILD_START``)."""
    pause = 0.02
    try:
        async with asyncio.timeout(CHILD_START.total_seconds()):
            while True:
                try:
                    await handle.describe()
                    return True
                except RPCError as exc:
                    if exc.status != RPCStatusCode.NOT_FOUND:
                        raise
                await asyncio.sleep(pause)
                pause = min(pause * 2, 0.5)
    except TimeoutError:
        return False
