"""The one way the client gets a conversation's turn taken, whatever happens on the way, and
the deadline that bounds it.

    conv = await durable.conversation(recovery_timeout=timedelta(seconds=30))
    await conv.send("Hello")     # TurnNotTaken (a TimeoutError) if not taken within 30 s

Taking a turn may need more than one try: the conversation refuses it while it drains its
turns to continue as new (sent again, it lands on the next workflow run), a rested
conversation is reopened first, no worker may be up to accept the update, and a send retried
after the conversation moved on is answered from the turn's runs (``TurnRecorded``). All of
that is bounded by one deadline from the first try; the turn's own run, once the
conversation took it, is not (Temporal keeps it going across workers). An expired deadline
names the conversation and the turn: the turn may still run, and the same send (the same
run id) is the same turn, so it is safe to send again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Any, TypeVar

from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowHandle,
    WorkflowUpdateFailedError,
    WorkflowUpdateHandle,
    WorkflowUpdateRPCTimeoutOrCancelledError,
    WorkflowUpdateStage,
)
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from golem.client.stuck import failing_below
from golem.errors import TurnNotTaken, WorkflowTaskFailing
from golem.messages import Message
from golem.wire import TurnInput, TurnOutput, names
from golem.wire.failures import TurnContinuing
from golem.wire.run_history import rebuilt_error

T = TypeVar("T")

#: How long ``DurableConversation`` tries to get a turn taken unless told otherwise.
RECOVERY_TIMEOUT = timedelta(minutes=5)


class TurnRecovery:
    """One turn's tries, against one deadline set when the first try starts."""

    def __init__(
        self,
        conversation_id: str,
        run_id: str,
        timeout: timedelta,
        client: Client | None = None,
    ) -> None:
        self.conversation_id = conversation_id
        self.client = client
        """Asks the conversation why, when the deadline expires."""
        self.run_id = run_id
        self.timeout = timeout
        self._loop = asyncio.get_running_loop()
        self._deadline = self._loop.time() + timeout.total_seconds()
        self._pause = 0.02
        self._hurried = False
        self.why = "no worker accepted it"
        """What held the turn up last (said when the deadline expires)."""
        self.cause: BaseException | None = None
        """The error of the last try that failed (the expired deadline's cause)."""

    def expired(self) -> TurnNotTaken:
        return TurnNotTaken(self.conversation_id, self.run_id, self.timeout, self.why)

    async def _expired(self) -> TurnNotTaken:
        """``expired()``, saying so when the conversation's workflow task fails: a worker
        takes the turn's update only with a task that completes."""
        if self.client is not None:
            with contextlib.suppress(Exception):  # only a diagnosis: the deadline's error stands
                failing = failing_below(self.client, self.conversation_id)
                found = await asyncio.wait_for(failing, DIAGNOSIS_TIMEOUT)
                if found is not None:
                    self.why = str(WorkflowTaskFailing(*found))
        return self.expired()

    async def within(self, work: Awaitable[T]) -> T:
        """``work``'s outcome, if it comes before the deadline; else ``TurnNotTaken``."""
        remaining = self._deadline - self._loop.time()
        if remaining <= 0:
            if asyncio.iscoroutine(work):
                work.close()  # never awaited: no "never awaited" warning either
            raise await self._expired() from self.cause
        timeout = asyncio.timeout(remaining)
        try:
            async with timeout:
                return await work
        except (TimeoutError, WorkflowUpdateRPCTimeoutOrCancelledError):
            # The SDK turns the cancel of an update's call into its own error.
            if timeout.expired():
                raise await self._expired() from self.cause
            raise

    async def again(self, why: str, cause: BaseException, *, at_once: bool = False) -> None:
        """Wait a little (doubling up to a second) before the next try; ``why`` the last one
        failed, with ``cause``. ``at_once``: the failure was mended (a rested conversation
        reopened), so the next try goes without a pause, once per turn: never a busy loop."""
        self.why, self.cause = why, cause
        if at_once and not self._hurried:
            self._hurried = True
            return
        await self.within(asyncio.sleep(self._pause))
        self._pause = min(self._pause * 2, 1.0)


#: Failures of a call that pass by themselves: anything else from the start a turn carried
#: is the server refusing it (update-with-start may be switched off on it).
PASSING = frozenset(
    {RPCStatusCode.UNAVAILABLE, RPCStatusCode.RESOURCE_EXHAUSTED, RPCStatusCode.ABORTED}
)


async def take_turn(
    client: Client,
    handle: WorkflowHandle[Any, Any],
    turn: TurnInput,
    recovery: TurnRecovery,
    reopen: Callable[[bool], Awaitable[WithStartWorkflowOperation[Any, Any] | bool]],
    accepted: asyncio.Event | None = None,
    starting: WithStartWorkflowOperation[Any, Any] | None = None,
) -> TurnOutput:
    """Send ``turn`` until the conversation takes it, within ``recovery``'s deadline, then
    await its answer (unbounded: the turn's own run). A refusal while the conversation
    continues as new sends it again; a conversation that rests is reopened with the turn
    (``reopen(True)``: the start the turn carries, ``True`` when it runs again already,
    ``False`` when it does not rest, and the call's error stands; it raises ``TurnRecorded``,
    to the caller, when the rested run knows the turn). A server that refuses the carried
    start gets a start of its own (``reopen(False)``), whose error stands.
    ``accepted`` is set once the conversation has taken it. ``starting`` is a new
    conversation's start, carried by the first try: its error stands, as ``start_workflow``'s
    would (``WorkflowAlreadyStartedError`` for an id in use)."""
    reopened = starting
    carry = True
    while True:
        carried, reopened = reopened, None  # a start is used once
        try:
            update = await recovery.within(_send(client, handle, turn, carried))
            if accepted is not None:
                accepted.set()
            out: TurnOutput = await update.result()
            return out
        except WorkflowUpdateFailedError as exc:
            if not isinstance(await rebuilt_error(exc.cause), TurnContinuing):
                raise
            # It finishes its turns in flight, then continues as new (or rests): the same
            # update, sent again, lands on the next workflow run.
            await recovery.again("it was continuing as new", exc)
        except RPCError as exc:
            if starting is not None and carried is starting:
                raise  # nothing started: the caller asks what the id is
            if carried is not None and exc.status not in PASSING:
                carry = False
            start = await recovery.within(reopen(carry))
            if start is False:
                raise
            reopened = None if start is True else start
            await recovery.again("it rested, and was being reopened", exc, at_once=True)


async def _send(
    client: Client,
    handle: WorkflowHandle[Any, Any],
    turn: TurnInput,
    reopened: WithStartWorkflowOperation[Any, Any] | None,
) -> WorkflowUpdateHandle[TurnOutput]:
    """The turn's update; with ``reopened``, carried by the start of the conversation's next
    run."""
    if reopened is None:
        return await handle.start_update(
            names.SEND,
            turn,
            id=turn.update_id(),
            wait_for_stage=WorkflowUpdateStage.ACCEPTED,
            result_type=TurnOutput,
        )
    try:
        return await client.start_update_with_start_workflow(
            names.SEND,
            turn,
            start_workflow_operation=reopened,
            id=turn.update_id(),
            wait_for_stage=WorkflowUpdateStage.ACCEPTED,
            result_type=TurnOutput,
        )
    except (RPCError, WorkflowUpdateRPCTimeoutOrCancelledError, WorkflowAlreadyStartedError):
        # The SDK settled the start with the same error (a cancel's as CancelledError): read
        # it there too, or asyncio logs it as never retrieved. A settled future never waits.
        with contextlib.suppress(BaseException):
            await reopened.workflow_handle()
        raise


#: How long an expired deadline's error waits to say why.
DIAGNOSIS_TIMEOUT = 5.0


def turn_runs(transcript: Sequence[Message], run_id: str) -> tuple[list[str], int]:
    """The runs of turn ``run_id`` in the order they answered (its own, then each it handed
    over to), and where the turn ends in ``transcript`` (0: not in it)."""
    runs: list[str] = []
    end = 0
    for index, message in enumerate(transcript):
        # A handoff's target adds no prompt: the next user message is the next turn's.
        if message.run_id == run_id or (runs and message.role != "user"):
            if message.run_id not in runs:
                runs.append(message.run_id)
            end = index + 1
        elif runs:
            break
    return runs or [run_id], end


async def turn_started(
    child: WorkflowHandle[Any, Any],
    sent: asyncio.Future[Any],
    conversation_id: str,
    accepted: asyncio.Event | None = None,
) -> bool:
    """Wait until the turn's child run exists (a turn may queue behind the one in flight):
    ``True`` then, ``False`` when the update ended first without a child (refused). With
    ``accepted`` (set once the conversation takes the turn), asked only from then on: the
    child is started as the turn is taken, so one describe finds it, not a poll of many."""
    if accepted is not None:
        taken = asyncio.ensure_future(accepted.wait())
        try:
            await asyncio.wait([sent, taken], return_when=asyncio.FIRST_COMPLETED)
        finally:
            taken.cancel()
    pause = 0.02
    while True:
        try:
            # A workflow by that id that is not this conversation's child is not the turn.
            if (await child.describe()).parent_id == conversation_id:
                return True
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
        if sent.done():
            return sent.cancelled() or sent.exception() is None  # a turn that ran has a child
        await asyncio.wait([sent], timeout=pause)
        pause = min(pause * 2, 0.5)
