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
from collections.abc import Awaitable
from datetime import timedelta
from typing import TypeVar

from temporalio import workflow
from temporalio.contrib.workflow_streams import WorkflowStream

from golem.events import RunEvent
from golem.wire import StreamEvent, names

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
