"""A conversation's turns and approvals as a pure state machine: no Temporal, no clock.

    turns = Turns(turns_per_run=500)
    turns.check_send("run-1", fingerprint)          # a validator: None, or the Refusal
    turns.send(1, "run-1", fingerprint)             # [StartChild("run-1")]
    turns.paused("run-1", ("c-1", "c-2"), now=0.0, timeout=60.0)
    # [Answer(1, Paused("run-1", ("c-1", "c-2"))), ArmTimer("run-1", 1, 60.0)]
    turns.approve(2, {"c-1": True}, now=1.0)
    # [Decide("run-1", {"c-1": True}), Answer(2, Paused("run-1", ("c-2",)))]

``ConversationWorkflow`` translates every update (send, approve, close), signal (a turn's
run paused), child result and timer into one call here and performs the effects it
returns: start a child run, signal decisions to it, arm a timer, answer an update. Each
update gets a ticket; it is answered by exactly one ``Answer``.

The phases: ``idle`` (no turn) → ``running`` (a turn's run is starting or runs) →
``waiting`` (it waits for decisions) → ``settling`` (every call is decided, or the
approval timeout or close decided the rest; the run goes on) → ``running``'s end:
``idle`` again, or the next queued turn (a run that hands the conversation over starts
the same turn's next run instead: ``handed_off``). ``close`` leads to ``closed`` once no
turn is in flight; continue-as-new (``continuing``) happens from ``idle`` once it is due,
and so does ``resting``: the conversation's idle timeout ran out, it closes until its next
send reopens it (docs/adr/0021-conversations-rest-when-idle.md). The same ``Pause`` rules
decide approvals for a standalone run (golem.workflows.approvals).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from golem.approvals import decider
from golem.messages import Decision

__all__ = [
    "Answer",
    "ArmTimer",
    "Closed",
    "Decide",
    "Effect",
    "Ended",
    "Outcome",
    "Pause",
    "Paused",
    "Phase",
    "Refusal",
    "StartChild",
    "Turns",
    "Verdict",
]

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
    """One wait for a person's decisions: the calls, what is decided, and the deadline."""

    calls: tuple[str, ...]
    timeout: float | None = None
    deadline: float | None = None
    """``now + timeout`` when the wait began: decisions recorded from then on are late."""
    decided: dict[str, Verdict | None] = field(default_factory=dict)

    @property
    def remaining(self) -> tuple[str, ...]:
        return tuple(c for c in self.calls if c not in self.decided)

    def refusal(self, decisions: Mapping[str, Verdict], now: float) -> str | None:
        """Why ``decisions`` cannot be recorded now (``None``: they can)."""
        if self.deadline is not None and now >= self.deadline:
            return timed_out(self.timeout, sorted(decisions) or list(self.remaining))
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

    def expire(self) -> dict[str, Verdict | None]:
        """The deadline passed: what is still undecided gets no decision."""
        late: dict[str, Verdict | None] = dict.fromkeys(self.remaining)
        self.decided.update(late)
        return late


def timed_out(timeout: float | None, calls: Iterable[str]) -> str:
    """The refusal of an approval that arrived after the approval timeout."""
    return (
        f"the approval timeout ({timeout:g} s) ran out before these decisions arrived: "
        f"calls {list(calls)} got no decision and were not executed"
    )


@dataclass
class _Turn:
    run_id: str
    tickets: list[int] = field(default_factory=list)
    """Updates answered by the turn's next outcome (its send, an approve that decided
    the last call)."""


class Turns:
    """The turns and approvals of one conversation workflow run."""

    def __init__(self, turns_per_run: int = 500, known: Mapping[str, str] | None = None) -> None:
        self.phase: Phase = "idle"
        self.turns_per_run = turns_per_run
        self.started = 0
        """Turns started in this workflow run."""
        self.known: dict[str, str] = dict(known or {})
        """Run id -> fingerprint of every turn this run knows ("" when not recorded)."""
        self.current: _Turn | None = None
        self.queue: list[tuple[int, str]] = []
        """Accepted sends waiting for the turn in flight: (ticket, run id)."""
        self.pause: Pause | None = None
        self.pauses = 0
        self.late: dict[str, float | None] = {}
        """Calls the approval timeout answered (call id -> the timeout), so a late approval
        is told so."""
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

    def send(self, ticket: int, run_id: str, fingerprint: str) -> list[Effect]:
        refused = self.check_send(run_id, fingerprint)
        if refused is not None:
            return [Answer(ticket, refused)]
        self.known[run_id] = fingerprint
        self.queue.append((ticket, run_id))
        return self._next() if self.phase == "idle" else []

    def start_failed(self, run_id: str, refusal: Refusal) -> list[Effect]:
        """The turn's run could not start (its run id is taken): the send is refused."""
        if self.current is None or self.current.run_id != run_id:
            return []
        self.known.pop(run_id, None)
        return [Answer(t, refusal) for t in self.current.tickets] + self._finish_turn()

    # -- the turn's run ------------------------------------------------------------------

    def paused(
        self, run_id: str, calls: Iterable[str], now: float, timeout: float | None
    ) -> list[Effect]:
        """The turn's run waits for decisions on ``calls``."""
        turn = self.current
        if turn is None or turn.run_id != run_id:
            return []  # not this conversation's turn in flight: nothing waits here
        self.pauses += 1
        deadline = None if timeout is None else now + timeout
        self.pause = Pause(tuple(calls), timeout, deadline)
        if self.close_requested:  # nobody can answer once closed: deny, so the run ends
            self.phase = "settling"
            return [Decide(run_id, dict.fromkeys(self.pause.calls, False))]
        self.phase = "waiting"
        answered = Paused(run_id, self.pause.calls)
        effects: list[Effect] = [Answer(t, answered) for t in turn.tickets]
        turn.tickets = []
        # Queued turns would start while this one waits: refused, as new sends are.
        effects += [Answer(t, self._waiting_refusal(run_id)) for t, _ in self.queue]
        for _, queued in self.queue:
            self.known.pop(queued, None)
        self.queue = []
        if timeout is not None:
            effects.append(ArmTimer(run_id, self.pauses, timeout))
        return effects

    def ended(self, run_id: str) -> list[Effect]:
        """The turn's run ended (completed or failed)."""
        turn = self.current
        if turn is None or turn.run_id != run_id:
            return []
        return [Answer(t, Ended(run_id)) for t in turn.tickets] + self._finish_turn()

    def handed_off(self, run_id: str, target: str) -> list[Effect]:
        """The turn's run handed the conversation over: the turn goes on as run ``target``."""
        if self.current is None or self.current.run_id != run_id:
            return []
        self.current.run_id, self.known[target] = target, ""  # no client sends it again
        return [StartChild(target)]

    def expire(self, run_id: str, pause: int) -> list[Effect]:
        """The approval timeout of pause number ``pause`` ran out."""
        current = self.pause
        if self.phase != "waiting" or pause != self.pauses or current is None:
            return []  # answered, closed or ended meanwhile
        late = current.expire()
        self.late = dict.fromkeys(late, current.timeout)
        self.phase = "settling"
        return [Decide(run_id, late)]

    # -- approvals -----------------------------------------------------------------------

    def check_approve(self, decisions: Mapping[str, Verdict], now: float) -> Refusal | None:
        """Why ``decisions`` cannot be recorded now (``None``: they can)."""
        if self.phase == "closed" or self.close_requested:
            return Refusal("closed", "the conversation is closed; fork it to go on")
        late = sorted(set(decisions) & set(self.late))
        if late and not (self.phase == "waiting" and set(late) & set(self.waiting)):
            return Refusal("approvals", timed_out(self.late[late[0]], late))
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

    def close(self, ticket: int) -> list[Effect]:
        """Close: at once when no turn is in flight, else once it ends (a waiting turn's
        calls are denied, so it ends); turns not started yet are refused."""
        if self.phase in ("closed", "idle", "continuing", "resting"):
            self.phase = "closed"
            return [Answer(ticket, Closed())]
        self.close_requested = True
        self.closing.append(ticket)
        refused = Refusal("closed", "the conversation was closed before this turn started")
        effects: list[Effect] = [Answer(t, refused) for t, _ in self.queue]
        for _, queued in self.queue:
            self.known.pop(queued, None)
        self.queue = []
        if self.phase == "waiting" and self.pause is not None and self.current is not None:
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

    def _finish_turn(self) -> list[Effect]:
        self.current = None
        self.pause = None
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
