"""A conversation's turns as one pure state machine: no Temporal, no clock.

    turns = Turns(turns_per_run=500)
    turns.check_send("run-1", fingerprint)          # a validator: None, or the Refusal
    turns.send(1, "run-1", fingerprint, turn)       # [StartChild("run-1")]
    turns.take_input("run-1")                       # turn: what the run is started with
    turns.paused("run-1", ("c-1", "c-2"), now=0.0, timeout=60.0)
    # [Answer(1, Paused("run-1", ("c-1", "c-2"))), ArmTimer("run-1", 1, 60.0)]
    turns.approve(2, {"c-1": True}, now=1.0)
    # [Decide("run-1", {"c-1": True}), Answer(2, Paused("run-1", ("c-2",)))]

Everything a conversation knows about its turns lives here: the phase, the accepted turns
queued behind the one in flight (with their inputs), the turn in flight, its run (where its
messages begin, its latest pause as the run reported it) and its pause (the calls, what is
decided, the approval deadline), who serves the next turn and the runs a turn handed over
(``Handoffs``). ``ConversationWorkflow`` (golem.workflows.conversation) translates every
update (send, approve, close), signal (a turn's run paused), child result and timer into
one call here and performs the effects it returns: start a child run, signal decisions to
it, arm a timer, answer an update (an ended run's ``Ended`` carries the answer). Each
update gets a ticket, answered by exactly one ``Answer``. golem.workflows.turn_runs builds
a turn's run input from the transcript and takes its outcome back; the workflow run around
the turns (idle timeout, what continue-as-new carries, the summary) is
golem.workflows.conversation_run.

States (``Turns.phase``) and the transitions between them:

    idle       --send-------------------------> running      (a queued send starts at once)
    running    --send-------------------------> running      (queued behind the turn in flight)
    running    --paused (the run waits)-------> waiting      (its send answered Paused; queued
                                                              sends refused: a person decides first)
    waiting    --approve (calls remain)-------> waiting      (answered at once: what still waits)
    waiting    --approve (last call) / expire-> settling     (answered by the run's next outcome)
    settling   --paused-----------------------> waiting
    running,
    settling   --ended------------------------> idle, or running (the next queued send)
    running    --handed_off-------------------> running      (the same turn, as the target's run)
    running    --start_failed-----------------> idle, or running (the send refused: id taken)
    idle       --close------------------------> closed
    running,
    waiting,
    settling   --close------------------------> closed once the turn ends (queued sends
                                                              refused, waiting calls denied)
    idle       --suggest (or turns_per_run)---> continuing   (else once the turn in flight
                                                              ends; sends refused meanwhile)
    idle       --rest (idle timeout)----------> resting      (its next send reopens it)

``closed``, ``continuing`` and ``resting`` end the workflow run (``Turns.over``); a
conversation that continues as new or rests starts its next run ``idle`` with the turns it
knows (``known``: a retried send is recognized, docs/adr/0025). The same ``Pause`` rules
decide approvals for a standalone run (golem.workflows.approvals). See
docs/adr/0014-turns-state-machine.md and docs/adr/0021-conversations-rest-when-idle.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, TypeVar

from golem.approvals import decider
from golem.messages import Decision
from golem.phases.batch import NO_EXTERNAL_RESULT
from golem.wire import Completed, InTranscript, TurnInput, TurnOutput
from golem.wire import Paused as PausedReport

E = TypeVar("E", bound=Exception)

#: A decision on a call as an update carries it (a bare ``bool``: as 0.2.0 sent it).
Verdict = bool | Decision

Phase = Literal["idle", "running", "waiting", "settling", "closed", "continuing", "resting"]
#: Why an update is refused; the workflow maps each to an ``ApplicationError.type``.
RefusalKind = Literal[
    "closed", "waiting", "continuing", "recorded", "differs", "approvals", "taken", "failed"
]


@dataclass(frozen=True)
class Refusal:
    """An update refused (before anything was recorded, or a queued turn that never ran)."""

    kind: RefusalKind
    message: str


@dataclass(frozen=True)
class Paused:
    """The turn's run waits for decisions on ``pending``."""

    run_id: str
    pending: tuple[str, ...]


@dataclass(frozen=True)
class Ended:
    """The turn's run ended (completed or failed): its outcome answers."""

    run_id: str
    answer: TurnOutput | Exception | None = None
    """What the turn answers: its output, or the error its send fails with."""


@dataclass(frozen=True)
class Closed:
    """The conversation is closed."""


Outcome = Paused | Ended | Closed | Refusal


@dataclass(frozen=True)
class StartChild:
    """Start the turn's run (the turn sent with this run id)."""

    run_id: str


@dataclass(frozen=True)
class Decide:
    """Signal decisions to the turn's run: ``None`` is "no decision arrived in time"."""

    run_id: str
    decisions: Mapping[str, Verdict | None]


@dataclass(frozen=True)
class ArmTimer:
    """Call ``Turns.expire(run_id, pause)`` after ``seconds`` (a stale one is ignored)."""

    run_id: str
    pause: int
    seconds: float


@dataclass(frozen=True)
class Answer:
    """Answer the update holding ``ticket``."""

    ticket: int
    outcome: Outcome


Effect = StartChild | Decide | ArmTimer | Answer


@dataclass
class Pause:
    """One wait for a person's decisions: the calls, what is decided, and the deadline (or,
    with ``bounds``, each call's own: client-run calls by the external timeout)."""

    calls: tuple[str, ...]
    timeout: float | None = None
    deadline: float | None = None
    """``now + timeout`` when the wait began: decisions recorded from then on are late."""
    decided: dict[str, Verdict | None] = field(default_factory=dict)
    bounds: dict[str, float | None] | None = None
    """Each call's own timeout (``None``: ``timeout`` bounds them all), from ``began``."""
    began: float = 0.0
    external: frozenset[str] = frozenset()
    """The client-run calls among ``calls``: the external timeout answers them."""

    @property
    def remaining(self) -> tuple[str, ...]:
        return tuple(c for c in self.calls if c not in self.decided)

    def deadline_of(self, call: str) -> float | None:
        if self.bounds is None:
            return self.deadline
        bound = self.bounds.get(call)
        return None if bound is None else self.began + bound

    def timed_out(self, calls: Iterable[str]) -> str:
        """The refusal of decisions on ``calls``, which came after their deadline."""
        calls = list(calls)
        if self.bounds is None:
            return timed_out(self.timeout, calls)
        first = calls[0]
        return timed_out(self.bounds.get(first), calls, first in self.external)

    def refusal(self, decisions: Mapping[str, Verdict], now: float) -> str | None:
        """Why ``decisions`` cannot be recorded now (``None``: they can)."""
        named = sorted(decisions) or list(self.remaining)
        due = [c for c in named if (d := self.deadline_of(c)) is not None and now >= d]
        if due:
            return self.timed_out(due if self.bounds is not None else named)
        if not decisions:
            return f"approvals name no call; pending: {list(self.remaining)}"
        unknown = sorted(set(decisions) - set(self.calls))
        if unknown:
            return f"approvals name calls that are not pending: {unknown}; pending: " + str(
                list(self.remaining)
            )
        again = sorted(set(decisions) & set(self.decided))
        if again:
            who = ", ".join(f"{c} by {decider(self.decided[c])}" for c in again)
            return f"calls {again} are decided already ({who}); pending: {list(self.remaining)}"
        return None

    def decide(self, decisions: Mapping[str, Verdict | None]) -> None:
        self.decided.update({k: v for k, v in decisions.items() if k in self.calls})

    def expire(self, now: float | None = None) -> dict[str, Verdict | None]:
        """A deadline passed: what is still undecided (with ``bounds``: whose deadline is
        ``now`` or before) gets no decision, a client-run call the external timeout's."""
        due = [
            c
            for c in self.remaining
            if self.bounds is None or ((d := self.deadline_of(c)) is not None and d <= (now or 0))
        ]
        at = datetime.fromtimestamp(now or 0, UTC).isoformat(timespec="seconds")
        late = no_answers(due, self.external, at)
        self.decided.update(late)
        return late


def no_answers(
    calls: Iterable[str], external: AbstractSet[str], at: str
) -> dict[str, Verdict | None]:
    """What a timeout records for ``calls`` at ``at``: an approval no decision, a client-run
    call (of ``external``) the external timeout's failed result."""
    closed = Decision(approved=False, reason=NO_EXTERNAL_RESULT, by="the external timeout", at=at)
    return {c: closed if c in external else None for c in calls}


def timed_out(timeout: float | None, calls: Iterable[str], external: bool = False) -> str:
    """The refusal of an approval that arrived after the approval timeout (``external``: of
    a client-run tool's result after the external timeout)."""
    if external:
        return (
            f"the external timeout ({timeout:g} s) ran out before these results arrived: "
            f"calls {list(calls)} got no result and were not executed"
        )
    return (
        f"the approval timeout ({timeout:g} s) ran out before these decisions arrived: "
        f"calls {list(calls)} got no decision and were not executed"
    )


class Handoffs:
    """Who serves a conversation's turns, and the runs of the turn in flight that handed
    the conversation over (the turn answers once its last run ends)."""

    def __init__(self, current: str) -> None:
        self.current = current
        """The agent serving the next run."""
        self.turn: TurnInput | None = None
        self.start = 0
        """Where the turn in flight began in the transcript."""
        self.handed: Completed | None = None
        """Its runs that handed over so far, composed."""

    def begin(self, turn: TurnInput, start: int) -> None:
        """A run of the conversation starts: a new turn's, or the next one of this turn."""
        if self.handed is None:
            self.turn, self.start = turn, start

    def hand_off(self, run: Completed) -> TurnInput:
        """``run`` handed over: the next run of the turn (the turn's deps, its stream)."""
        assert run.handoff is not None and self.turn is not None
        self.current = run.handoff.agent
        self.handed = run if self.handed is None else self.handed.handed_over(run)
        return TurnInput(run_id=run.handoff.run_id, deps=self.turn.deps, stream=self.turn.stream)

    def ended(self, outcome: TurnOutput | E, length: int) -> TurnOutput | E:
        """The turn's answer once its last run ended (``length``: the transcript's now):
        that run's output with the turn's ids, messages from where the turn began."""
        handed, self.handed = self.handed, None
        if handed is None or not isinstance(outcome, TurnOutput):
            return outcome
        assert isinstance(outcome.run, Completed)
        run = handed.handed_over(outcome.run)
        held = InTranscript(start=self.start, count=length - self.start)
        return TurnOutput(
            run=run.model_copy(update={"messages": held}), start=self.start, based=True
        )


@dataclass
class _Turn:
    run_id: str
    tickets: list[int] = field(default_factory=list)
    """Updates answered by the turn's next outcome (its send, an approve that decided
    the last call)."""


class Turns:
    """The turns and approvals of one conversation workflow run."""

    def __init__(
        self, turns_per_run: int = 500, known: Mapping[str, str] | None = None, agent: str = ""
    ) -> None:
        self.phase: Phase = "idle"
        self.turns_per_run = turns_per_run
        self.started = 0
        """Turns started in this workflow run."""
        self.known: dict[str, str] = dict(known or {})
        """Run id -> fingerprint of every turn this run knows ("" when not recorded)."""
        self.current: _Turn | None = None
        self.queue: list[tuple[int, str]] = []
        """Accepted sends waiting for the turn in flight: (ticket, run id)."""
        self.inputs: dict[str, TurnInput] = {}
        """What the runs of accepted turns not started yet are started with, by run id."""
        self.handoffs = Handoffs(agent)
        """Who serves the next turn; the runs the turn in flight handed over."""
        self.run_start = 0
        """Where the messages of the turn's run in flight begin in the transcript."""
        self.report: PausedReport | None = None
        """That run's latest pause, as it reported it (kept once it ended, until the next
        run begins)."""
        self.pause: Pause | None = None
        self.pauses = 0
        self.evaluations_of = ""
        """The run whose pause in hand began while evaluations ran and has not yet told
        that none runs: each report of that run until then is that pause told again."""
        self.late: dict[str, float | None] = {}
        """Calls the approval timeout answered (call id -> the timeout), so a late approval
        is told so."""
        self.late_external: set[str] = set()
        """Those of ``late`` the external timeout answered (client-run calls)."""
        self.closing: list[int] = []
        self.close_requested = False
        self.due = False
        """Continue-as-new is due: new sends are refused until the next workflow run."""

    @property
    def over(self) -> bool:
        """This workflow run is done: closed, continuing as new, or resting."""
        return self.phase in ("closed", "continuing", "resting")

    @property
    def waiting(self) -> tuple[str, ...]:
        """The calls a person can still decide now."""
        return self.pause.remaining if self.phase == "waiting" and self.pause else ()

    # -- sends ---------------------------------------------------------------------------

    def check_send(self, run_id: str, fingerprint: str) -> Refusal | None:
        """Why a turn cannot be accepted now (``None``: it can)."""
        if self.phase == "closed" or self.close_requested:
            return Refusal("closed", "the conversation is closed; fork it to go on")
        if run_id in self.known:
            if self.known[run_id] and self.known[run_id] != fingerprint:
                return Refusal(
                    "differs",
                    f"run id {run_id!r} is a turn of this conversation already, with another "
                    "prompt, parts or deps: a retried send must be the same turn; pass a new "
                    "run id, or none to get one",
                )
            return Refusal("recorded", f"run {run_id} is already a turn of this conversation")
        if self.phase == "waiting" and self.current is not None:
            return self._waiting_refusal(self.current.run_id)
        if self.phase == "resting":
            return Refusal("continuing", "the conversation rests; send the turn again to reopen it")
        if self.due or self.phase == "continuing":
            return Refusal(
                "continuing", "the conversation is continuing as new; send the turn again"
            )
        return None

    def send(
        self, ticket: int, run_id: str, fingerprint: str, turn: TurnInput | None = None
    ) -> list[Effect]:
        """A turn sent (``turn``: its input, kept until its run starts)."""
        refused = self.check_send(run_id, fingerprint)
        if refused is not None:
            return [Answer(ticket, refused)]
        self.known[run_id] = fingerprint
        self.queue.append((ticket, run_id))
        if turn is not None:
            self.inputs[run_id] = turn
        return self._next() if self.phase == "idle" else []

    def take_input(self, run_id: str) -> TurnInput:
        """The input of the run a ``StartChild`` names (given to ``send`` or ``handed_off``)."""
        return self.inputs.pop(run_id)

    def start_failed(self, run_id: str, refusal: Refusal) -> list[Effect]:
        """The turn's run could not start (its run id is taken): the send is refused."""
        if self.current is None or self.current.run_id != run_id:
            return []
        self.known.pop(run_id, None)
        return [Answer(t, refusal) for t in self.current.tickets] + self._finish_turn()

    # -- the turn's run ------------------------------------------------------------------

    def run_begins(self, start: int) -> None:
        """The run a ``StartChild`` named begins, its messages from ``start`` on."""
        self.run_start, self.report = start, None

    def paused(
        self,
        run_id: str,
        calls: Iterable[str],
        now: float,
        timeout: float | None,
        report: PausedReport | None = None,
        bounds: Mapping[str, float | None] | None = None,
        external: Iterable[str] = (),
        evaluating: Iterable[str] = (),
        decided: Mapping[str, Decision] | None = None,
    ) -> list[Effect]:
        """The turn's run waits for decisions on ``calls`` (``report``: as it said so);
        ``bounds``: each call's own timeout instead of ``timeout`` (``external``: the
        client-run calls, which the external timeout answers). ``evaluating``: the calls an
        evaluator still decides (the send is answered once none is left); the run tells
        the same pause again as each evaluation ends, ``decided`` naming what the evaluator
        decided."""
        turn = self.current
        if turn is None or turn.run_id != run_id:
            return []  # not this conversation's turn in flight: nothing waits here
        if report is not None:
            self.report = report
        evaluated = set(evaluating)
        if self._told_again(run_id):
            return self._evaluations_went_on(run_id, calls, evaluated, decided or {})
        calls = tuple(calls)
        if not calls:
            return []  # a run telling that nothing waits: no pause begins
        self.pauses += 1
        deadline = None if timeout is None or bounds is not None else now + timeout
        own = None if bounds is None else dict(bounds)
        # Without bounds (a wait recorded before the patch) no call is the external timeout's.
        clientside = frozenset(external) if bounds is not None else frozenset()
        self.pause = Pause(tuple(calls), timeout, deadline, {}, own, now, clientside)
        # Told while evaluations run: its run tells it again until none does.
        self.evaluations_of = run_id if evaluated else ""
        if self.close_requested:  # nobody can answer once closed: deny, so the run ends
            self.phase = "settling"
            return [Decide(run_id, dict.fromkeys(self.pause.calls, False))]
        self.phase = "waiting"
        # The send is answered once no evaluation of the pause's calls runs.
        still = evaluated & set(self.pause.calls)
        effects: list[Effect] = [] if still else self._answer_paused(turn)
        # Queued turns would start while this one waits: refused, as new sends are.
        effects += [Answer(t, self._waiting_refusal(run_id)) for t, _ in self.queue]
        self._drop_queue()
        if bounds is not None:  # a timer per distinct bound: each ends its own calls
            seconds = sorted({b for b in bounds.values() if b is not None})
            effects += [ArmTimer(run_id, self.pauses, b) for b in seconds]
        elif timeout is not None:
            effects.append(ArmTimer(run_id, self.pauses, timeout))
        return effects

    def _told_again(self, run_id: str) -> bool:
        """Whether run ``run_id``'s report is the pause in hand told again as its
        evaluations went on (a run tells its conversation, in order, until it says none
        runs, however the wait ended: golem.workflows.executor)."""
        return self.evaluations_of == run_id and self.pause is not None and self.phase != "running"

    def _evaluations_went_on(
        self,
        run_id: str,
        calls: Iterable[str],
        evaluating: AbstractSet[str],
        decided: Mapping[str, Decision],
    ) -> list[Effect]:
        """The pause's evaluations went on: what the evaluator decided is decided here too
        (its deadlines stand); once none runs, the send answers paused with what is left,
        or, nothing left, the run goes on."""
        pause, turn = self.pause, self.current
        assert pause is not None and turn is not None
        left = set(calls)
        pause.decide({c: decided.get(c) for c in pause.remaining if c not in left})
        if not evaluating:
            self.evaluations_of = ""  # that was its last report of this pause
        if self.phase != "waiting":
            return []  # a person's decisions (or the timeout's) settle it already
        if evaluating & set(pause.remaining):
            return []
        if pause.remaining:  # what is left waits for a person now
            return self._answer_paused(turn)
        self.phase = "settling"  # the evaluator decided every call: the turn goes on
        return []

    def _answer_paused(self, turn: _Turn) -> list[Effect]:
        """The updates waiting for the turn's outcome answered: it waits for ``pause``."""
        assert self.pause is not None
        answered = Paused(turn.run_id, self.pause.remaining)
        effects: list[Effect] = [Answer(t, answered) for t in turn.tickets]
        turn.tickets = []
        return effects

    def ended(self, run_id: str, answer: TurnOutput | Exception | None = None) -> list[Effect]:
        """The turn's run ended (completed or failed); ``answer``: what its send answers."""
        turn = self.current
        if turn is None or turn.run_id != run_id:
            return []
        return [Answer(t, Ended(run_id, answer)) for t in turn.tickets] + self._finish_turn()

    def handed_off(self, run_id: str, target: str, turn: TurnInput | None = None) -> list[Effect]:
        """The turn's run handed the conversation over: the turn goes on as run ``target``
        (``turn``: its input)."""
        if self.current is None or self.current.run_id != run_id:
            return []
        self.current.run_id, self.known[target] = target, ""  # no client sends it again
        if turn is not None:
            self.inputs[target] = turn
        return [StartChild(target)]

    def expire(self, run_id: str, pause: int, now: float | None = None) -> list[Effect]:
        """A timeout of pause number ``pause`` ran out (at ``now``: with per-call bounds,
        only the calls due by then are answered; the rest still wait)."""
        current = self.pause
        if self.phase != "waiting" or pause != self.pauses or current is None:
            return []  # answered, closed or ended meanwhile
        late = current.expire(now)
        if current.bounds is None:
            self.late = dict.fromkeys(late, current.timeout)
        elif not late:
            return []
        else:
            self.late.update({c: current.bounds.get(c) for c in late})
            self.late_external.update(c for c in late if c in current.external)
            if current.remaining:
                return [Decide(run_id, late)]
        self.phase = "settling"
        return [Decide(run_id, late)]

    # -- approvals -----------------------------------------------------------------------

    def check_approve(self, decisions: Mapping[str, Verdict], now: float) -> Refusal | None:
        """Why ``decisions`` cannot be recorded now (``None``: they can)."""
        if self.phase == "closed" or self.close_requested:
            return Refusal("closed", "the conversation is closed; fork it to go on")
        late = sorted(set(decisions) & set(self.late))
        if late and not (self.phase == "waiting" and set(late) & set(self.waiting)):
            external = late[0] in self.late_external
            return Refusal("approvals", timed_out(self.late[late[0]], late, external))
        if self.phase != "waiting" or self.pause is None:
            return Refusal("waiting", "no turn of this conversation waits for approvals")
        problem = self.pause.refusal(decisions, now)
        return None if problem is None else Refusal("approvals", problem)

    def approve(self, ticket: int, decisions: Mapping[str, Verdict], now: float) -> list[Effect]:
        """Record decisions; answered at once while calls remain, else by the turn's next
        outcome (its end, or its next pause)."""
        refused = self.check_approve(decisions, now)
        if refused is not None:
            return [Answer(ticket, refused)]
        assert self.pause is not None and self.current is not None
        run_id = self.current.run_id
        self.pause.decide(decisions)
        effects: list[Effect] = [Decide(run_id, dict(decisions))]
        if self.pause.remaining:
            return [*effects, Answer(ticket, Paused(run_id, self.pause.remaining))]
        self.phase = "settling"
        self.current.tickets.append(ticket)
        return effects

    # -- close and continue-as-new -------------------------------------------------------

    def close(self, ticket: int, settle: bool = True) -> list[Effect]:
        """Close: at once when no turn is in flight, else once it ends (a waiting turn's
        calls are denied, so it ends; without ``settle`` its caller stops it instead);
        turns not started yet are refused."""
        if self.phase in ("closed", "idle", "continuing", "resting"):
            self.phase = "closed"
            return [Answer(ticket, Closed())]
        self.close_requested = True
        self.closing.append(ticket)
        refused = Refusal("closed", "the conversation was closed before this turn started")
        effects: list[Effect] = [Answer(t, refused) for t, _ in self.queue]
        self._drop_queue()
        waiting = self.phase == "waiting" and self.pause is not None
        if settle and waiting and self.pause is not None and self.current is not None:
            denied = dict.fromkeys(self.pause.remaining, False)
            self.pause.decide(denied)
            self.phase = "settling"
            effects.append(Decide(self.current.run_id, denied))
        return effects

    def rest(self) -> list[Effect]:
        """The idle timeout ran out: from ``idle`` the conversation rests (closes until its
        next send, refused meanwhile as while it continues as new, reopens it)."""
        if self.phase == "idle" and not self.queue:
            self.phase = "resting"
        return []

    def suggest(self) -> list[Effect]:
        """The server suggests continuing as new: once no turn is in flight."""
        self.due = True
        if self.phase == "idle":
            self.phase = "continuing"
        return []

    # -- helpers -------------------------------------------------------------------------

    def _waiting_refusal(self, run_id: str) -> Refusal:
        calls = list(self.pause.remaining) if self.pause else []
        return Refusal(
            "waiting", f"turn {run_id} waits for approvals of {calls}: approve or deny them first"
        )

    def _drop_queue(self) -> None:
        """The queued sends were refused: they were never turns."""
        for _, queued in self.queue:
            self.known.pop(queued, None)
            self.inputs.pop(queued, None)
        self.queue = []

    def _finish_turn(self) -> list[Effect]:
        self.current = None
        self.pause = None
        self.evaluations_of = ""
        self.phase = "idle"
        return self._next()

    def _next(self) -> list[Effect]:
        """From idle: close, start the next queued turn, or continue as new."""
        if self.close_requested:
            self.phase = "closed"
            closed = [Answer(t, Closed()) for t in self.closing]
            self.closing = []
            return list(closed)
        if self.queue:
            ticket, run_id = self.queue.pop(0)
            self.current = _Turn(run_id, [ticket])
            self.phase = "running"
            self.started += 1
            if self.started >= self.turns_per_run:
                self.due = True
            return [StartChild(run_id)]
        if self.due:
            self.phase = "continuing"
        return []
