"""A run's live stream, on ``temporalio.contrib.workflow_streams``: the workflow side.

    self._stream = RunStreamHost()                       # in AgentRunWorkflow.__init__
    self._stream.publish(event)                          # the loop's own events
    result = await self._stream.hosting(self._loop.run())  # ends the stream with the run

``AgentRunWorkflow`` hosts one ``WorkflowStream``; the loop's events (model and tool
start/end, canceled) are appended by the workflow itself, which records nothing in
history (replay rebuilds them); text and tool-call deltas are published, batched, by the
model activity (``golem.activities.streams``) as signals. Every item is a ``StreamEvent``
on the one topic ``TOPIC``, so an offset addresses exactly one event. See
docs/adr/0007-live-streams.md.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypeVar

from temporalio import workflow
from temporalio.contrib.workflow_streams import WorkflowStream, WorkflowStreamState

from golem.events import RunEvent
from golem.wire import StreamEvent, names
from golem.wire.transcript import CARRY_BYTES

T = TypeVar("T")

#: How long a streamed run that has ended waits for its live subscriber's next poll.
LINGER = timedelta(seconds=1)


class RunStreamHost:
    """The run's ``WorkflowStream``: create it in the workflow's ``__init__``."""

    def __init__(self) -> None:
        # WorkflowStream checks that its caller is an __init__ running in the workflow.
        self.stream = WorkflowStream()
        self._topic = self.stream.topic(names.TOPIC, type=StreamEvent)

    def publish(self, event: RunEvent) -> None:
        """Append a loop event (deltas never reach here: the model activity sends them)."""
        self._topic.publish(StreamEvent.of(event))

    def child(self, run_id: str, agent: str) -> None:
        """A run this one delegated or handed off to starts: a reader follows its stream."""
        self._topic.publish(StreamEvent(kind="child", run_id=run_id, agent=agent))

    async def hosting(self, work: Awaitable[T], streamed: bool = False) -> T:
        """Await the run, then end the stream: an ``end`` item, waiting polls answered.

        A ``streamed`` run that ends while its live subscriber is between two polls waits
        up to ``LINGER`` for the next one, which would otherwise find the run closed and
        read the end by query (a replay of the whole run on some worker)."""
        try:
            result = await work
        except GeneratorExit:
            raise  # the worker is closing an evicted run's coroutine: no ending to publish
        except BaseException as exc:
            # A cancelled (or evicted) run closes at once; any other failure is an ending.
            ended = isinstance(exc, Exception)
            await self._end(
                streamed, ended and not isinstance(exc.__cause__, asyncio.CancelledError)
            )
            raise
        await self._end(streamed, True)
        return result

    async def _end(self, streamed: bool, completed: bool) -> None:
        self._topic.publish(StreamEvent(kind="end"))
        if streamed and completed and workflow.all_handlers_finished():
            # The run has ended: a cancel (or eviction) now only cuts the wait short.
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await workflow.wait_condition(
                    lambda: not workflow.all_handlers_finished(),
                    timeout=LINGER,
                    timeout_summary="stream: waiting for the reader's last poll",
                )
        # Answer waiting polls now, so a subscriber gets `end` without a query replay.
        self.stream.detach_pollers()
        await workflow.wait_condition(workflow.all_handlers_finished)


class TurnStreams:
    """An inline conversation's one stream (docs/adr/0050-turns-inline.md): each streamed
    turn's events, each item naming its turn (``of_run``), its ``end`` last. Create it in the
    workflow's ``__init__``. The items of the turns before the previous streamed one are
    dropped as a turn begins (a reader of the turn just ended still finds its items); offsets go
    on from ``offset`` (carried across continue-as-new and a rest)."""

    def __init__(self, prior: WorkflowStreamState | None = None) -> None:
        self.stream = WorkflowStream(prior)
        self._topic = self.stream.topic(names.TOPIC, type=StreamEvent)
        # Where the latest streamed turn's items begin: a carried log holds only its.
        self._current = prior.base_offset if prior is not None else 0
        # The runs of the latest streamed turn (a handoff adds one), and of the one before.
        self._runs: list[str] = _latest_turn(self.stream)
        self._before: list[str] = []

    @property
    def held(self) -> list[str]:
        """The runs of the streamed turns whose items the log holds (its readers ask)."""
        return [*self._before, *self._runs]

    @property
    def offset(self) -> int:
        """Where the next item goes: the next workflow run's stream starts there."""
        # The contrib's own offset query, asked in-process (get_state would copy the log).
        return self.stream._on_offset()

    def begin(self, run_id: str, continues: bool = False) -> None:
        """Streamed turn ``run_id`` begins: of the turns before, only the latest's items are
        kept. ``continues``: it is the run the turn in flight handed over to."""
        if continues:
            self._runs.append(run_id)
            return
        self.stream.truncate(self._current)
        self._current = self.offset
        self._before, self._runs = self._runs, [run_id]

    def publisher(self, run_id: str) -> Callable[[RunEvent], None]:
        """Publishes turn ``run_id``'s loop events."""

        def publish(event: RunEvent) -> None:
            self._topic.publish(StreamEvent.of(event, run_id))

        return publish

    def children(self, of_run: str) -> Callable[[str, str], None]:
        """Names each run turn ``of_run`` delegates to as it starts: a reader follows it."""

        def child(run_id: str, agent: str) -> None:
            item = StreamEvent(kind="child", run_id=run_id, agent=agent, of_run=of_run)
            self._topic.publish(item)

        return child

    def handed(self, run_id: str, target: str, agent: str) -> None:
        """Turn ``run_id``'s run handed over to run ``target`` of ``agent``: its reader
        reads ``target``'s items as the turn's, up to their ``end``."""
        self._topic.publish(StreamEvent(kind="handed", run_id=target, agent=agent, of_run=run_id))

    def end(self, run_id: str) -> None:
        """Turn ``run_id`` has ended (it no longer waits for anyone)."""
        self._topic.publish(StreamEvent(kind="end", of_run=run_id))

    def detach(self) -> None:
        """The workflow run ends: polls are answered now (they go on in the next run)."""
        self.stream.detach_pollers()

    def carried(self) -> WorkflowStreamState:
        """What the next workflow run's stream starts from: the latest streamed turn's items
        (its reader may be between two polls), or, when they are too big to carry, the most
        recent that fit (its ``end`` at least): a live reader is near the end, and reads on
        without a loss; one further behind reads on from the first carried (ADR 0050)."""
        self.stream.truncate(self._current)
        self._before = []
        state = self.stream.get_state()
        size, start = 0, len(state.log)
        while start > 0 and size + len(state.log[start - 1].data) <= CARRY_BYTES:
            start -= 1
            size += len(state.log[start].data)
        if start == 0:
            return state
        kept = state.log[start:] or state.log[-1:]
        return WorkflowStreamState(
            log=kept, base_offset=self.offset - len(kept), publishers=state.publishers
        )


def _latest_turn(stream: WorkflowStream) -> list[str]:
    """The runs of the turn a carried log holds (only the latest streamed turn's items are
    carried): its first, and each it was handed over to."""
    log = stream._log  # the contrib's own log: its public state would copy it
    convert = workflow.payload_converter().from_payload
    runs = (convert(item.data, StreamEvent).of_run for item in log)
    return list(dict.fromkeys(run for run in runs if run))
