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
- update ``golem.approve`` (``{call_id: approved}``): records decisions, then answers what
  they did: the paused output with the calls still undecided (a partial approval, or once
  the run pauses again), or the run's ``Completed`` outcome once it ends, each with the
  decisions recorded (``decided``); ``None`` once it failed or was cancelled (read the
  workflow's result), as every answer was before patch ``golem.readable-approvals``
  (docs/adr/0039-what-an-approval-answers.md). Its validator refuses, before
  anything is recorded, decisions when nothing is pending, an empty or already-decided
  set, calls that are not pending, and any that arrive once the approval timeout ran out.
- signal ``golem.decide``: the same decisions, for a parent workflow (a conversation),
  which cannot send updates; ``None`` marks a call no decision arrived for in time.
- query ``golem.pending``: the calls waiting now.

A run that delegates waits for what waits below it too: each child run (``caller`` in its
input) signals ``golem.paused`` to its caller whenever the calls waiting in it (its own and
those below it) change, so the top-level run's ``golem.outcome``, ``golem.pending`` and
``Result.pending_runs`` name every call and the run that waits for it, and its
``golem.approve`` sends each decision on to that run (``golem.decide``). A conversation's
turn tells the conversation the same way, so a delegate's approval surfaces there too.

An agent's ``approval_timeout`` answers what is still undecided when it runs out with
``NO_DECISION_RESULT``. The deadline is the workflow's clock when the run began to wait
plus the timeout: an approval recorded before it wins, one that arrives later (even one
that was sent while no worker ran) is refused, naming the timeout. A conversation's turn
leaves its timeouts to the conversation (``Paused.approval_timeout`` and, for client-run
calls, ``Paused.external_timeout``), whose history decides.

Since patch ``golem.external-timeout`` a client-run tool's call waits by the agent's
``external_timeout`` instead (none: as long as the application takes); when it runs out the
call is recorded as decided by "the external timeout", its failed result
``NO_EXTERNAL_RESULT``, and a later ``complete`` is refused naming that timeout. Each call
of a batch mixing both kinds keeps its own kind's deadline (docs/adr/0030-decisions.md).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from datetime import timedelta
from math import inf
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from golem.approvals import check_edits, check_reason
    from golem.messages import Decision, ToolCall
    from golem.wire import Completed, Paused, lineage, names
    from golem.wire.inbox import ARGS_LISTED, Waiting, WaitingCall
    from golem.workflows.children import listed_waiting
    from golem.workflows.patches import (
        EXTERNAL_TIMEOUT,
        PENDING_INBOX,
        READABLE_APPROVALS,
        REPORTS_FROM_CHILDREN,
        VISIBLE_APPROVALS,
        patched,
    )
    from golem.workflows.turns import Pause, Verdict, no_answers, timed_out

#: How long a waiting run's labelled timer runs when no approval timeout bounds the wait
#: (then it starts again): only there to carry the label into the UI's timeline.
LABEL_PERIOD = timedelta(days=1)


def recorded(verdict: Verdict | None) -> Decision | None:
    """A decision as the run records it: a bare ``bool`` (0.2.0's form) stamped with now."""
    if verdict is None or isinstance(verdict, Decision):
        return verdict
    return Decision(approved=verdict, at=workflow.now().isoformat(timespec="seconds"))


def refuse_invalid_edits(
    where: str,
    validators: Mapping[str, Callable[[str], object]],
    calls: list[ToolCall],
    decisions: Mapping[str, Verdict],
) -> None:
    """A validator's refusal (``INVALID_DECISION``) of edited arguments a tool would not
    take, or of a denial's reason over the limit: the client's own checks, again where the
    tools are known (a client not golem's skips them)."""
    edits = {k: v for k, v in decisions.items() if isinstance(v, Decision)}
    try:
        for call_id, decision in edits.items():
            check_reason(call_id, decision.reason)
        check_edits(validators, calls, edits)
    except ValueError as exc:
        raise ApplicationError(
            f"{where}: {exc}", type=names.INVALID_DECISION, non_retryable=True
        ) from None


def _not_paused(message: str) -> ApplicationError:
    return ApplicationError(message, type=names.NOT_PAUSED, non_retryable=True)


class ApprovalGate:
    """The approval state of one durable run (and of the runs below it), and the handlers
    that reach it."""

    def __init__(
        self,
        paused: Callable[[list[ToolCall]], Paused],
        timeout: timedelta | None,
        notify_parent: bool = False,
        on_change: Callable[[], None] = lambda: None,
        caller: str = "",
        validators: Callable[[], Mapping[str, Callable[[str], object]]] = dict,
        external: Callable[[list[ToolCall]], set[str]] = lambda calls: set(),
        external_timeout: timedelta | None = None,
        tell: Callable[[Paused], Awaitable[None]] | None = None,
        tools_running: Callable[[], bool] = lambda: False,
    ) -> None:
        self._paused = paused
        # A tool's activity that calls ctx.delegate starts runs this workflow does not
        # start itself: their reports count while one of its tool calls runs.
        self._tools_running = tools_running
        # A conversation's turn run inline (ADR 0050): the conversation hears this run's
        # pauses from it directly, as a turn's own run would signal them.
        self._tell_inline = tell
        self._external = external
        self._listed: Waiting | None = None  # what the pending inbox lists now, if anything
        self._validators = validators
        self._timeout = timeout.total_seconds() if timeout is not None else None
        self._external_timeout = (
            external_timeout.total_seconds() if external_timeout is not None else None
        )
        self._deadlines: dict[str, float] = {}
        """Each call's own deadline, while a wait bounds calls by their kind's timeout."""
        self._external_late: set[str] = set()
        """Calls the external timeout answered (``late`` names their timeout too)."""
        self._notify_parent = notify_parent
        self._on_change = on_change
        self._caller = caller
        self.calls: list[ToolCall] = []
        self.pause: Pause | None = None
        self.late: dict[str, float | None] = {}
        """Calls the approval timeout answered, so a late approval is told so."""
        self.finished = False
        self.completed: Completed | None = None
        """The run's outcome once it completed (set before it is ``finished``)."""
        self._pauses = 0  # counts pauses, so an approval can wait for the next one
        self.below: dict[str, Paused] = {}
        """What waits in each run below this one (its latest report), by that run's id."""
        self._children: dict[str, bool] = {}
        """The runs this one started (delegations, handoffs), by id: whether each still runs.
        Only their reports count (docs/adr/0052-reports-from-children.md)."""
        self.evaluations: dict[str, asyncio.Task[None]] = {}
        """This run's calls whose evaluation runs now, each with its task: a person may
        answer them (which cancels the task at once), but the run is not paused for them
        until the evaluator leaves them to a person."""
        self._by_evaluator: dict[str, Decision] = {}
        """What the evaluator decided of this run's calls, which its reports name."""
        self._told_evaluating = False  # the conversation last heard of evaluations running

    @property
    def paused(self) -> bool:
        """The run (or one below it) has waited for a person at least once."""
        return self._pauses > 0

    @property
    def pending(self) -> list[ToolCall]:
        """This run's own calls still waiting for a decision."""
        remaining = set(self.pause.remaining) if self.pause else set()
        return [c for c in self.calls if c.id in remaining]

    @property
    def waiting(self) -> list[ToolCall]:
        """Every call waiting: this run's own, then those of the runs below it."""
        return [*self.pending, *(c for r in self.below.values() for c in r.pending_approvals)]

    @property
    def asked(self) -> list[ToolCall]:
        """The calls waiting for a person, once no evaluation runs here or below (until then
        none: the run's paused outcome names every call the evaluator left to a person at
        once)."""
        return [] if self.still_evaluated else self.waiting

    @property
    def still_evaluated(self) -> list[str]:
        """The waiting calls an evaluator still decides: this run's, then those below."""
        own = [c.id for c in self.pending if c.id in self.evaluations]
        return [*own, *(c for r in self.below.values() for c in r.evaluating)]

    def evaluated(self, call_id: str, decision: Decision | None) -> None:
        """The evaluation of ``call_id`` ended with ``decision`` (``None``: a person decides):
        recorded unless a person answered first; left to a person, the call now pauses the
        run."""
        self.evaluations.pop(call_id, None)
        if self.pause is None or call_id not in self.pause.remaining:
            return  # a person (or the timeout) answered first
        if decision is not None:
            self.pause.decide({call_id: decision})
            self._by_evaluator[call_id] = decision
            if self._listed is not None and self.pause.remaining:
                self._list(self.pending)
        else:
            self._pauses += 1  # a new pause for whoever waits for one (approve, outcome)
        self._on_change()

    def runs(self) -> dict[str, str]:
        """Call id -> the run that waits for it, for the calls of the runs below."""
        return {
            c.id: report.pending_runs.get(c.id, report.run_id)
            for report in self.below.values()
            for c in report.pending_approvals
        }

    def report(self, calls: list[ToolCall]) -> Paused:
        """This run's paused outcome with ``calls`` pending, each named with its run."""
        runs = self.runs()
        below = {c.id: runs[c.id] for c in calls if c.id in runs}
        return self._paused(calls).model_copy(update={"pending_runs": below})

    async def wait(self, pending: list[ToolCall]) -> dict[str, Decision | None]:
        """Wait until every pending call is decided (or the timeout answers the rest)."""
        parent = workflow.info().parent if self._notify_parent else None
        # A conversation's turn: the conversation keeps the timeout, its history decides.
        turn = parent is not None or self._tell_inline is not None
        timeout = None if turn else self._timeout
        now = workflow.now().timestamp()
        pause = Pause(
            tuple(c.id for c in pending), timeout, None if timeout is None else now + timeout
        )
        self.calls, self.pause = list(pending), pause
        self._pauses += 1
        self._on_change()
        await self._tell()
        # The inbox lists the run while it waits, however the wait ends (a cancel too).
        inbox = listed_waiting() and patched(PENDING_INBOX)
        try:
            if inbox:
                self._list(self.pending)
            external = set() if turn else self._external(pending)
            if patched(VISIBLE_APPROVALS):
                if external and patched(EXTERNAL_TIMEOUT):
                    bounds = {
                        c.id: self._external_timeout if c.id in external else timeout
                        for c in pending
                    }
                    # Deadlines live per call: the pause itself refuses nothing as late.
                    pause.timeout = pause.deadline = None
                    self._deadlines = {c: now + t for c, t in bounds.items() if t is not None}
                    await self._shown_waiting(pause, timeout, bounds, external)
                else:
                    await self._shown_waiting(pause, timeout)
            else:
                try:
                    await workflow.wait_condition(lambda: not pause.remaining, timeout=timeout)
                except TimeoutError:
                    self.late = dict.fromkeys(pause.expire(), timeout)
        finally:
            if inbox:
                self._list([])
        self.calls, self.pause, self._deadlines = [], None, {}
        self._on_change()
        if self._caller:
            await self._tell()  # the caller learns that this run no longer waits
        return {k: recorded(v) for k, v in pause.decided.items()}

    async def _shown_waiting(
        self,
        pause: Pause,
        timeout: float | None,
        bounds: Mapping[str, float | None] | None = None,
        external: AbstractSet[str] = frozenset(),
    ) -> None:
        """The wait, shown where a user looks first: a timer in the run's timeline whose
        summary names the calls and the command that answers them, and the same words in
        the workflow list's GolemSummary while it waits. ``bounds``: each call's own
        timeout (``external``: the client-run calls among them)."""
        label = self.waiting_label()
        listed = workflow.info().typed_search_attributes.get(lineage.SUMMARY)
        if listed is not None:
            workflow.upsert_search_attributes([lineage.SUMMARY.value_set(f"{label} · {listed}")])
        if bounds is not None:
            await self._bounded_waiting(pause, bounds, external, label)
        else:
            await self._waiting_for_all(pause, timeout, label)
        if listed is not None:
            workflow.upsert_search_attributes([lineage.SUMMARY.value_set(listed)])

    async def _waiting_for_all(self, pause: Pause, timeout: float | None, label: str) -> None:
        """Until every call is decided or the one timeout answers the rest."""
        period = timedelta(seconds=timeout) if timeout is not None else LABEL_PERIOD
        while True:
            try:
                await workflow.wait_condition(
                    lambda: not pause.remaining, timeout=period, timeout_summary=label
                )
                break
            except TimeoutError:
                if timeout is not None:
                    self.late = dict.fromkeys(pause.expire(), timeout)
                    break

    async def _bounded_waiting(
        self,
        pause: Pause,
        bounds: Mapping[str, float | None],
        external: AbstractSet[str],
        label: str,
    ) -> None:
        """Until every call is decided, each undecided one answered at its own deadline:
        approvals with no decision, client-run calls with ``NO_EXTERNAL_RESULT``."""
        while pause.remaining:
            due = min((self._deadlines.get(c, inf) for c in pause.remaining), default=inf)
            left = due - workflow.now().timestamp()
            if due == inf:
                period = LABEL_PERIOD
            elif left > 0:
                period = timedelta(seconds=left)
            else:
                period = None  # already due (a worker came back late): no timer needed
            if period is not None:
                try:
                    await workflow.wait_condition(
                        lambda: not pause.remaining, timeout=period, timeout_summary=label
                    )
                    break
                except TimeoutError:
                    if due == inf:
                        continue
            ended = [c for c in pause.remaining if self._deadlines.get(c, inf) <= due]
            pause.decide(no_answers(ended, external, workflow.now().isoformat(timespec="seconds")))
            self._stop_evaluations(ended)
            self.late.update({c: bounds[c] for c in ended})
            self._external_late.update(c for c in ended if c in external)
            if self._listed is not None and pause.remaining:
                self._list(self.pending)  # the inbox lists what still waits

    def waiting_label(self) -> str:
        """``waiting for approval: refund (c1) · answer: golem approve RUN c1``, naming the
        workflow whose ``golem approve`` reaches the calls (a turn's conversation)."""
        calls = ", ".join(f"{c.name} ({c.id})" for c in self.calls)
        ids = " ".join(c.id for c in self.calls)
        return f"waiting for approval: {calls} · answer: golem approve {self._answers()} {ids}"

    def _answers(self) -> str:
        """The workflow an answer to this run's calls is addressed to."""
        info = workflow.info()
        answers = info.parent.workflow_id if self._notify_parent and info.parent else None
        return answers or self._caller or info.workflow_id

    def _list(self, pending: list[ToolCall]) -> None:
        """Show the pending inbox what this run waits for now: ``GolemWaiting`` counts the
        calls, the memo names them (both cleared once none waits)."""
        if not pending:
            if self._listed is not None:
                self._listed = None
                workflow.upsert_search_attributes([lineage.WAITING.value_set(0)])
                workflow.upsert_memo({names.WAITING_MEMO: None})
            return
        if self._listed is not None and [c.call_id for c in self._listed.calls] == [
            c.id for c in pending
        ]:
            return
        external = self._external(pending)
        since = self._listed.since if self._listed else workflow.now().isoformat()
        self._listed = Waiting(
            since=since,
            answers=self._answers(),
            calls=[
                WaitingCall(
                    call_id=c.id,
                    tool=c.name,
                    args=c.args[:ARGS_LISTED],
                    args_cut=len(c.args) > ARGS_LISTED,
                    kind="external" if c.id in external else "approval",
                )
                for c in pending
            ],
        )
        workflow.upsert_search_attributes([lineage.WAITING.value_set(len(pending))])
        workflow.upsert_memo({names.WAITING_MEMO: self._listed})

    async def _tell(self) -> None:
        """Tell whoever answers for this run what waits in it now: its caller (a run that
        delegated to it: every change) or its conversation (each time something waits)."""
        waiting, evaluations = self.waiting, self.still_evaluated
        if self._caller:
            info = workflow.info()
            report = Paused(  # only what routing needs: the caller holds no messages of ours
                run_id=info.workflow_id,
                conversation_id="",
                pending_approvals=waiting,
                pending_runs=self.runs(),
                approval_timeout=self._timeout,
                evaluating=evaluations,
            )
            target = self._caller
        elif (
            (self._notify_parent or self._tell_inline is not None)
            and (waiting or self._told_evaluating)
            and (self._tell_inline is not None or workflow.info().parent)
        ):
            # Told while evaluations run, the conversation hears when they end, waiting or not.
            self._told_evaluating = bool(evaluations)
            more: dict[str, Any] = {
                "approval_timeout": self._timeout,
                "external_timeout": self._external_timeout,
                "evaluating": evaluations,
            }
            if self._by_evaluator:
                more["decided"] = self._by_evaluator
            report = self.report(waiting).model_copy(update=more)
            if self._tell_inline is not None:
                await self._tell_inline(report)
                return
            parent = workflow.info().parent
            assert parent is not None
            target = parent.workflow_id
        else:
            return
        await workflow.get_external_workflow_handle(target).signal(names.PAUSED, report)

    async def evaluation_ended(self, call_id: str, decision: Decision | None) -> None:
        """``evaluated``, then whoever answers for this run told what waits now."""
        self.evaluated(call_id, decision)
        await self._tell()

    def _stop_evaluations(self, calls: Iterable[str]) -> None:
        """Cancel the evaluations of ``calls``, decided now by someone else."""
        for call in calls:
            if (task := self.evaluations.pop(call, None)) is not None:
                task.cancel()

    async def evaluations_ended(self) -> None:
        """No evaluation runs any more (the wait ended): a conversation told of them hears
        so, even of evaluations cancelled, before anything else this run tells it."""
        self.evaluations = {}
        if self._told_evaluating:
            await self._tell()

    @contextmanager
    def child(self, run_id: str) -> Iterator[None]:
        """While the run ``run_id`` this one starts runs: its reports count from before its
        start (it may report before the start's answer) to its end."""
        self._children[run_id] = True
        try:
            yield
        finally:
            self._children[run_id] = False

    def _from_child(self, report: Paused) -> bool:
        """``report`` names a run this one started that still runs, or one that ended and
        says nothing waits in it any more (its last word may arrive after its end)."""
        running = self._children.get(report.run_id)
        if running is None and (self._tools_running() or report.run_id in self.below):
            return True  # a tool's delegation (ids derived from its activity's), or its end
        return running is True or (running is False and not report.pending_approvals)

    async def reported(self, report: Paused) -> None:
        """A run below this one waits for ``report.pending_approvals`` now (none: no more).
        Any client may send the signal: one naming no child of this run is dropped."""
        if not self._from_child(report) and patched(REPORTS_FROM_CHILDREN):
            workflow.logger.warning(
                "golem.paused dropped: %r is not a run this one started that still runs",
                report.run_id,
            )
            return
        if report.pending_approvals:
            self.below[report.run_id] = report
            self._pauses += 1
        else:
            self.below.pop(report.run_id, None)
        self._on_change()
        await self._tell()

    def finish(self, completed: Completed | None = None) -> None:
        """The run ended (``completed``: its outcome, ``None``: it failed): waiting handlers
        answer. Called before the run's stream ends, which waits for every handler, so
        whatever an answer carries must be known here."""
        self.completed = completed
        self.finished = True

    # -- handlers ------------------------------------------------------------------------

    async def outcome(self) -> Paused | None:
        await workflow.wait_condition(lambda: self.finished or bool(self.asked))
        return None if self.finished else self.report(self.asked)

    def check(self, decisions: dict[str, Verdict]) -> None:
        run = workflow.info().workflow_id
        below = self.runs()
        own = {k: v for k, v in decisions.items() if k not in below}
        if not own and decisions:
            return  # every call waits in a run below: that run takes them
        late = sorted(set(own) & set(self.late))
        if late and not set(late) & {c.id for c in self.pending}:
            refusal = self._timed_out(late, self.late, self._external_late)
            raise _not_paused(f"run {run}: {refusal}")
        now = workflow.now().timestamp()
        due = sorted(c for c in own if self._deadlines.get(c, inf) <= now)
        if due:  # past its deadline, though the timer has not answered it yet
            external = self._external(self.pending)
            bounds = {c: self._external_timeout if c in external else self._timeout for c in due}
            raise _not_paused(f"run {run}: " + self._timed_out(due, bounds, external))
        if self.pause is None or not self.pause.remaining:
            if below:
                pending = [c.id for c in self.waiting]
                raise _not_paused(
                    f"run {run}: approvals name calls that are not pending: {sorted(own)}; "
                    f"pending: {pending}"
                )
            raise _not_paused(f"run {run} is not waiting for approvals")
        problem = self.pause.refusal(own, now)
        if problem is not None:
            raise _not_paused(f"run {run}: {problem}")
        refuse_invalid_edits(f"run {run}", self._validators(), self.pending, own)

    @staticmethod
    def _timed_out(late: list[str], bounds: Mapping[str, float | None], external: set[str]) -> str:
        """The refusal of answers that came too late, naming each kind's timeout."""
        clientside = [c for c in late if c in external]
        approvals = [c for c in late if c not in external]
        parts = [timed_out(bounds[clientside[0]], clientside, external=True)] if clientside else []
        if approvals:
            parts.append(timed_out(bounds[approvals[0]], approvals))
        return "; ".join(parts)

    async def approve(self, decisions: dict[str, Verdict]) -> Paused | Completed | None:
        readable = patched(READABLE_APPROVALS)
        decided = {c: d for c, v in decisions.items() if (d := recorded(v)) is not None}
        pauses = self._pauses
        await self.decide(decisions)
        if not self.asked:
            await workflow.wait_condition(
                lambda: self.finished or (self._pauses > pauses and bool(self.asked))
            )
        if not readable:
            return None if self.finished else self.report(self.asked)
        answer = self.completed if self.finished else self.report(self.asked)
        return None if answer is None else answer.model_copy(update={"decided": decided})

    async def decide(self, decisions: Mapping[str, Verdict | None]) -> None:
        """Record decisions on calls still undecided (a parent's ``None``: none in time);
        those of a run below go on to it."""
        below = self.runs()
        routed: dict[str, dict[str, Verdict | None]] = defaultdict(dict)
        for call, decision in decisions.items():
            if call in below:
                routed[below[call]][call] = decision
        for run, given in routed.items():
            try:
                await workflow.get_external_workflow_handle(run).signal(names.DECIDE, given)
            except Exception:  # it ended meanwhile: its end settles its calls anyway
                workflow.logger.info("run %s ended before its decisions", run)
        for child, report in list(self.below.items()):  # until it reports again
            left = [c for c in report.pending_approvals if c.id not in decisions]
            self.below[child] = report.model_copy(update={"pending_approvals": left})
        if self.pause is None:
            return
        remaining = set(self.pause.remaining)
        self.pause.decide({k: v for k, v in decisions.items() if k in remaining})
        self._stop_evaluations(decisions)
        self.late.update({k: self._timeout for k, v in decisions.items() if v is None})
        if self._listed is not None and self.pause.remaining:
            self._list(self.pending)  # a partial decision: the inbox lists what still waits
