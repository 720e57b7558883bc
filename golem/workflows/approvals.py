"""Approvals by update: a durable run waits in its workflow for a person's decisions.

    result = await durable.run("Refund order 42")       # returns with pending_approvals
    final = await run.approve({call.id: True})          # the same run goes on

When the loop meets calls that need approval it asks the executor, which waits here.
``AgentRunWorkflow`` declares the handlers (so an update sent right after the start is
never refused for want of one) and hands them to the gate:

- update ``golem.outcome``: returns once the run pauses (its ``Paused`` outcome) or
  ends (``None``: read the workflow's result). ``DurableRun.result`` uses it. Its
  validator refuses it (``CANNOT_PAUSE``, nothing recorded) when the agent has no tool
  that needs approval, so a client that knows the agent only by name learns it.
- update ``golem.approve`` (``{call_id: approved}``): records decisions, then returns like
  ``golem.outcome`` once the run pauses again or ends. Its validator refuses decisions
  when nothing is pending or for calls that are not, before anything is recorded.
- signal ``golem.decide``: the same decisions, for a parent workflow (a conversation),
  which cannot send updates.
- query ``golem.pending``: the calls waiting now.

An agent's ``approval_timeout`` denies what is still pending when it runs out.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from golem.messages import ToolCall
    from golem.wire import Paused

__all__ = ["CANNOT_PAUSE", "PAUSED_SIGNAL", "ApprovalGate"]

#: Signal a run sends its parent (a conversation) when it starts waiting for approvals.
PAUSED_SIGNAL = "golem.paused"
#: ``ApplicationError.type`` of a ``golem.outcome`` update refused (nothing recorded)
#: because the run's agent has no tool that needs approval: read the result instead.
CANNOT_PAUSE = "GolemCannotPause"


class ApprovalGate:
    """The approval state of one durable run, and the handlers that reach it."""

    def __init__(
        self,
        paused: Callable[[list[ToolCall]], Paused],
        timeout: timedelta | None,
        notify_parent: bool = False,
        on_change: Callable[[], None] = lambda: None,
    ) -> None:
        self._paused = paused
        self._timeout = timeout
        self._notify_parent = notify_parent
        self._on_change = on_change
        self.pending: list[ToolCall] = []
        self.decisions: dict[str, bool] = {}
        self.finished = False
        self._pauses = 0  # counts pauses, so an approval can wait for the next one

    async def wait(self, pending: list[ToolCall]) -> dict[str, bool]:
        """Wait until every pending call is decided (or the timeout denies the rest)."""
        self.pending = list(pending)
        self._pauses += 1
        self._on_change()
        if self._notify_parent and (parent := workflow.info().parent) is not None:
            handle = workflow.get_external_workflow_handle(parent.workflow_id)
            await handle.signal(PAUSED_SIGNAL, self._paused(self.pending))
        with contextlib.suppress(TimeoutError):  # what is still undecided is denied below
            await workflow.wait_condition(self._all_decided, timeout=self._timeout)
        decided = {c.id: self.decisions.get(c.id, False) for c in self.pending}
        self.pending = []
        self.decisions = {}
        self._on_change()
        return decided

    def finish(self) -> None:
        """The run ended: waiting handlers answer ``None``."""
        self.finished = True

    def _all_decided(self) -> bool:
        return all(c.id in self.decisions for c in self.pending)

    # -- handlers ------------------------------------------------------------------------

    async def outcome(self) -> Paused | None:
        await workflow.wait_condition(lambda: self.finished or bool(self.pending))
        return None if self.finished else self._paused(self.pending)

    def check(self, decisions: dict[str, bool]) -> None:
        if not self.pending:
            raise ApplicationError(
                f"run {workflow.info().workflow_id} is not waiting for approvals",
                type="GolemNotPaused",
                non_retryable=True,
            )
        unknown = sorted(set(decisions) - {c.id for c in self.pending})
        if unknown:
            raise ApplicationError(
                f"approvals name calls that are not pending: {unknown}; pending: "
                f"{[c.id for c in self.pending]}",
                type="GolemNotPaused",
                non_retryable=True,
            )

    async def approve(self, decisions: dict[str, bool]) -> Paused | None:
        pauses = self._pauses
        self.decide(decisions)
        if not self._all_decided():
            return self._paused([c for c in self.pending if c.id not in self.decisions])
        await workflow.wait_condition(
            lambda: self.finished or (self._pauses > pauses and bool(self.pending))
        )
        return None if self.finished else self._paused(self.pending)

    def decide(self, decisions: dict[str, bool]) -> None:
        pending = {c.id for c in self.pending}
        self.decisions.update({k: v for k, v in decisions.items() if k in pending})
