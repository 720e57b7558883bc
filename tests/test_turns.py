"""The conversation's turns and approvals as a pure state machine (golem.workflows.turns),
driven without Temporal: each transition's effects, and random sequences of events in
which every update is answered exactly once and the conversation never wedges."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from golem.messages import Decision
from golem.wire import Paused as PausedReport
from golem.wire import TurnInput
from golem.workflows.turns import (
    Answer,
    ArmTimer,
    Closed,
    Decide,
    Effect,
    Ended,
    Pause,
    Paused,
    Refusal,
    StartChild,
    Turns,
)


def answers(effects: list[Effect]) -> dict[int, object]:
    return {e.ticket: e.outcome for e in effects if isinstance(e, Answer)}


def waiting_turn(timeout: float | None = None) -> Turns:
    """A conversation whose turn ``r1`` (ticket 1) waits for ``c1`` and ``c2``."""
    turns = Turns()
    assert turns.send(1, "r1", "fp") == [StartChild("r1")]
    effects = turns.paused("r1", ("c1", "c2"), now=100.0, timeout=timeout)
    assert answers(effects) == {1: Paused("r1", ("c1", "c2"))}
    return turns


def running() -> Turns:
    """A conversation whose turn ``r1`` (ticket 1) runs."""
    turns = Turns()
    assert turns.send(1, "r1", "fp") == [StartChild("r1")]
    return turns


def test_a_send_starts_its_run_and_a_second_one_waits_for_the_first_to_end() -> None:
    turns = Turns()
    assert turns.send(1, "r1", "a") == [StartChild("r1")]
    assert turns.send(2, "r2", "b") == []
    assert turns.phase == "running"
    assert turns.ended("r1") == [Answer(1, Ended("r1")), StartChild("r2")]
    assert turns.ended("r2") == [Answer(2, Ended("r2"))]
    assert turns.phase == "idle"


def test_a_handoff_goes_on_as_the_targets_run_and_its_end_answers_the_send() -> None:
    turns = Turns()
    assert turns.send(1, "r1", "a") == [StartChild("r1")]
    assert turns.send(2, "r2", "b") == []  # queued behind the whole turn, handoffs included
    assert turns.handed_off("r1", "t1") == [StartChild("t1")]
    assert turns.ended("r1") == []  # the turn is the target's now
    assert turns.ended("t1") == [Answer(1, Ended("t1")), StartChild("r2")]
    assert turns.check_send("t1", "") == Refusal(
        "recorded", "run t1 is already a turn of this conversation"
    )
    assert turns.handed_off("t1", "t2") == []  # not the turn in flight


def test_a_turns_input_is_kept_until_its_run_starts_and_dropped_when_it_is_refused() -> None:
    turns = Turns()
    first, second, third = (TurnInput(run_id=r, prompt=r) for r in ("r1", "r2", "r3"))
    assert turns.send(1, "r1", "a", first) == [StartChild("r1")]
    assert turns.take_input("r1") == first
    turns.send(2, "r2", "b", second)
    assert turns.inputs == {"r2": second}  # queued: its run has not started
    target = TurnInput(run_id="t1", deps={"k": 1})
    assert turns.handed_off("r1", "t1", target) == [StartChild("t1")]
    assert turns.take_input("t1") == target
    turns.paused("t1", ("c1",), now=1.0, timeout=None)  # the queued send is refused
    assert turns.inputs == {} and turns.queue == []
    turns.approve(3, {"c1": True}, now=2.0)
    turns.ended("t1")
    turns.send(4, "r3", "c", third)
    assert turns.close(5) == []  # the turn r3 is in flight; closing refuses nothing queued
    assert turns.take_input("r3") == third and turns.inputs == {}


def test_the_run_in_flight_keeps_its_start_and_latest_report_and_its_end_carries_the_answer() -> (
    None
):
    turns = Turns(agent="triage")
    assert turns.handoffs.current == "triage"
    turns.send(1, "r1", "a")
    turns.run_begins(4)
    report = PausedReport(run_id="r1", conversation_id="c", pending_approvals=[])
    turns.paused("other", ("c1",), now=1.0, timeout=None, report=report)
    assert turns.report is None  # not the turn in flight's run
    turns.paused("r1", ("c1",), now=1.0, timeout=None, report=report)
    assert (turns.run_start, turns.report) == (4, report)
    turns.approve(2, {"c1": True}, now=2.0)
    answer = ValueError("the turn's error")
    assert turns.ended("r1", answer) == [Answer(2, Ended("r1", answer))]
    assert turns.report == report  # read until the next run begins
    turns.send(3, "r2", "b")
    turns.run_begins(9)
    assert (turns.run_start, turns.report) == (9, None)


def test_the_run_a_turn_was_handed_to_waits_for_approvals_as_the_turn() -> None:
    turns = Turns()
    turns.send(1, "r1", "a")
    turns.handed_off("r1", "t1")
    assert answers(turns.paused("t1", ("c1",), now=1.0, timeout=None)) == {1: Paused("t1", ("c1",))}
    assert turns.approve(2, {"c1": True}, now=2.0) == [Decide("t1", {"c1": True})]
    assert turns.ended("t1") == [Answer(2, Ended("t1"))]


def test_a_partial_approval_answers_at_once_with_the_calls_still_pending() -> None:
    turns = waiting_turn()
    effects = turns.approve(2, {"c1": True}, now=101.0)
    assert effects == [Decide("r1", {"c1": True}), Answer(2, Paused("r1", ("c2",)))]
    assert turns.phase == "waiting" and turns.waiting == ("c2",)
    assert turns.approve(3, {"c2": False}, now=102.0) == [Decide("r1", {"c2": False})]
    assert turns.phase == "settling"
    assert turns.ended("r1") == [Answer(3, Ended("r1"))]  # the last approval gets the end


def test_an_empty_unknown_or_repeated_approval_is_refused_and_changes_nothing() -> None:
    turns = waiting_turn()
    turns.approve(2, {"c1": Decision(approved=True, by="alice")}, now=101.0)
    for decisions, reason in [
        ({}, "approvals name no call; pending: ['c2']"),
        ({"nope": True}, "approvals name calls that are not pending: ['nope']; pending: ['c2']"),
        ({"c1": False}, "calls ['c1'] are decided already (c1 by alice); pending: ['c2']"),
    ]:
        assert turns.check_approve(decisions, now=102.0) == Refusal("approvals", reason)
        assert turns.approve(9, decisions, now=102.0) == [Answer(9, Refusal("approvals", reason))]
    assert turns.phase == "waiting" and turns.waiting == ("c2",)


def test_the_timeout_answers_what_is_undecided_and_a_late_approval_is_told_so() -> None:
    turns = Turns()
    turns.send(1, "r1", "fp")
    effects = turns.paused("r1", ("c1", "c2"), now=100.0, timeout=30.0)
    assert ArmTimer("r1", 1, 30.0) in effects
    turns.approve(2, {"c1": True}, now=110.0)
    late = turns.check_approve({"c2": True}, now=130.0)  # at the deadline: too late
    assert late is not None and late.kind == "approvals"
    assert "approval timeout (30 s) ran out" in late.message and "['c2']" in late.message
    assert turns.expire("r1", 1) == [Decide("r1", {"c2": None})]
    assert turns.phase == "settling"
    after = turns.check_approve({"c2": True}, now=131.0)
    assert after is not None and "approval timeout (30 s) ran out" in after.message
    assert turns.expire("r1", 1) == []  # a timer fires once


def test_per_call_bounds_answer_each_call_at_its_own_deadline() -> None:
    """A client-run call bounded by the external timeout (5 s) beside an approval bounded by
    the approval timeout (30 s): a timer each; the first answers the client-run call alone,
    with the external timeout's failed result, and the approval still waits."""
    turns = Turns()
    turns.send(1, "r1", "fp")
    bounds = {"d1": 5.0, "t1": 30.0}
    effects = turns.paused("r1", ("d1", "t1"), 100.0, 30.0, None, bounds, {"d1"})
    assert [e for e in effects if isinstance(e, ArmTimer)] == [
        ArmTimer("r1", 1, 5.0),
        ArmTimer("r1", 1, 30.0),
    ]
    early = turns.check_approve({"d1": True}, now=104.0)
    assert early is None
    (decide,) = turns.expire("r1", 1, now=105.0)
    assert isinstance(decide, Decide) and list(decide.decisions) == ["d1"]
    timed_out = decide.decisions["d1"]
    assert isinstance(timed_out, Decision) and timed_out.by == "the external timeout"
    assert not timed_out.approved
    assert turns.phase == "waiting" and turns.waiting == ("t1",)
    late = turns.check_approve({"d1": True}, now=106.0)
    assert late is not None and "external timeout (5 s) ran out" in late.message
    assert turns.check_approve({"t1": True}, now=106.0) is None
    assert turns.expire("r1", 1, now=130.0) == [Decide("r1", {"t1": None})]
    assert turns.phase == "settling"
    again = turns.check_approve({"t1": True}, now=131.0)
    assert again is not None and "approval timeout (30 s) ran out" in again.message


def test_an_unbounded_client_run_call_waits_past_the_approval_timeout() -> None:
    turns = Turns()
    turns.send(1, "r1", "fp")
    effects = turns.paused("r1", ("d1", "t1"), 0.0, 30.0, None, {"d1": None, "t1": 30.0}, {"d1"})
    assert [e for e in effects if isinstance(e, ArmTimer)] == [ArmTimer("r1", 1, 30.0)]
    assert turns.expire("r1", 1, now=30.0) == [Decide("r1", {"t1": None})]
    assert turns.phase == "waiting" and turns.waiting == ("d1",)
    assert turns.check_approve({"d1": True}, now=10_000.0) is None


def test_without_per_call_bounds_a_client_run_call_times_out_as_before_the_patch() -> None:
    """A conversation recorded before golem.external-timeout replays with one timeout for
    both kinds: its client-run calls get no decision, as they did then."""
    turns = Turns()
    turns.send(1, "r1", "fp")
    turns.paused("r1", ("d1", "t1"), 0.0, 5.0, None, None, {"d1"})
    assert turns.expire("r1", 1, now=5.0) == [Decide("r1", {"d1": None, "t1": None})]


def test_a_pause_told_while_evaluations_run_answers_its_send_once_they_end() -> None:
    turns = running()
    by_evaluator = Decision(approved=True, by="evaluator:reviewer")
    first = turns.paused("r1", ("c1", "c2"), 0.0, 30.0, None, None, (), ("c1", "c2"))
    partial = turns.approve(2, {"c2": False}, now=1.0)  # a person may answer meanwhile
    again = turns.paused("r1", ("c1",), 2.0, 30.0, None, None, (), ("c1",))  # c2 went on
    last = turns.paused("r1", (), 3.0, 30.0, None, None, (), (), {"c1": by_evaluator})
    assert first == [ArmTimer("r1", 1, 30.0)]  # the send waits; the deadline runs from now
    assert answers(partial) == {2: Paused("r1", ("c1",))}
    assert again == [] and last == [] and turns.phase == "settling"
    assert turns.pause is not None and turns.pause.decided["c1"] == by_evaluator
    assert answers(turns.ended("r1", None)) == {1: Ended("r1", None)}


def test_what_an_evaluator_leaves_to_a_person_answers_the_send_with_its_deadline_kept() -> None:
    turns = running()
    by_evaluator = Decision(approved=False, reason="no", by="evaluator:reviewer")
    turns.paused("r1", ("c1", "c2"), 0.0, 30.0, None, None, (), ("c1", "c2"))
    told = turns.paused("r1", ("c2",), 5.0, 30.0, None, None, (), (), {"c1": by_evaluator})
    refused = turns.check_approve({"c1": True}, now=6.0)
    assert answers(told) == {1: Paused("r1", ("c2",))}
    assert turns.pauses == 1 and turns.pause is not None and turns.pause.deadline == 30.0
    assert refused is not None and "c1 by evaluator:reviewer" in refused.message
    assert turns.expire("r1", 1, 30.0) == [Decide("r1", {"c2": None})]


def test_reports_of_a_pause_a_person_settled_while_it_was_evaluated_start_no_new_pause() -> None:
    turns = running()
    by_evaluator = Decision(approved=True, by="evaluator:reviewer")
    turns.paused("r1", ("c1", "c2"), 0.0, None, None, None, (), ("c1", "c2"))
    turns.paused("r1", ("c2",), 1.0, None, None, None, (), ("c2",), {"c1": by_evaluator})
    decided = turns.approve(2, {"c2": False}, now=2.0)  # the last call: the run goes on
    stale = turns.paused("r1", ("c2",), 3.0, None, None, None, (), ("c2",))  # sent before
    final = turns.paused("r1", (), 4.0, None, None, None, (), ())  # its evaluation cancelled
    assert decided == [Decide("r1", {"c2": False})]
    assert stale == [] and final == [] and turns.phase == "settling" and turns.pauses == 1
    assert answers(turns.ended("r1")) == {1: Ended("r1"), 2: Ended("r1")}


def test_a_stale_timer_is_ignored() -> None:
    turns = Turns()
    turns.send(1, "r1", "fp")
    turns.paused("r1", ("c1",), now=0.0, timeout=5.0)
    turns.approve(2, {"c1": True}, now=1.0)
    turns.paused("r1", ("c2",), now=2.0, timeout=5.0)  # the run asks again
    assert turns.expire("r1", 1) == []
    assert turns.waiting == ("c2",)


def test_sends_are_refused_while_a_turn_waits_and_queued_ones_when_it_starts_waiting() -> None:
    turns = Turns()
    turns.send(1, "r1", "a")
    turns.send(2, "r2", "b")  # queued behind r1
    effects = turns.paused("r1", ("c1",), now=0.0, timeout=None)
    refused = answers(effects)[2]
    assert isinstance(refused, Refusal) and refused.kind == "waiting"
    assert "turn r1 waits for approvals of ['c1']" in refused.message
    assert turns.check_send("r3", "c") == refused
    assert turns.check_send("r2", "b") == refused  # r2 never ran: it may be sent again


def test_close_while_a_turn_waits_denies_its_calls_and_answers_when_it_ends() -> None:
    turns = waiting_turn()
    turns.approve(2, {"c1": True}, now=101.0)
    assert turns.close(3) == [Decide("r1", {"c2": False})]
    closed = turns.check_approve({"c2": True}, now=102.0)
    assert closed is not None and closed.kind == "closed"
    assert turns.paused("r1", ("c3",), now=103.0, timeout=None) == [
        Decide("r1", {"c3": False})  # asked again: nobody can answer, denied too
    ]
    assert turns.ended("r1") == [Answer(3, Closed())]
    assert turns.phase == "closed" and turns.over


def test_a_close_that_stops_the_waiting_turn_itself_decides_nothing() -> None:
    """A cancelled conversation stops its inline turn (``settle=False``): no call is denied
    on its behalf, and the close is answered once the stopped turn ends."""
    turns = waiting_turn()
    assert turns.close(3, settle=False) == []
    assert turns.check_approve({"c1": True}, now=101.0) is not None  # closed to answers
    assert turns.ended("r1") == [Answer(3, Closed())]
    assert turns.phase == "closed"


def test_close_refuses_turns_that_have_not_started() -> None:
    turns = Turns()
    turns.send(1, "r1", "a")
    turns.send(2, "r2", "b")
    effects = turns.close(3)
    refused = answers(effects)[2]
    assert isinstance(refused, Refusal) and refused.kind == "closed"
    assert turns.ended("r1") == [Answer(1, Ended("r1")), Answer(3, Closed())]


def test_continue_as_new_waits_for_the_turn_in_flight_and_for_approvals() -> None:
    turns = Turns(turns_per_run=1)
    turns.send(1, "r1", "a")
    assert turns.due and turns.check_send("r2", "b") == Refusal(
        "continuing", "the conversation is continuing as new; send the turn again"
    )
    turns.paused("r1", ("c1",), now=0.0, timeout=None)
    waiting = turns.check_send("r2", "b")
    assert waiting is not None and waiting.kind == "waiting"  # not a retry loop on the client
    assert not turns.over
    turns.approve(2, {"c1": True}, now=1.0)
    turns.ended("r1")
    assert turns.phase == "continuing" and turns.over


def test_the_servers_suggestion_applies_once_no_turn_is_in_flight() -> None:
    turns = Turns()
    turns.send(1, "r1", "a")
    turns.suggest()
    assert turns.phase == "running"
    turns.ended("r1")
    assert turns.phase == "continuing"


def test_a_run_id_already_a_turn_is_recorded_when_the_same_and_refused_when_not() -> None:
    turns = Turns(known={"old": "fp-old", "older": ""})
    assert turns.check_send("old", "fp-old") == Refusal(
        "recorded", "run old is already a turn of this conversation"
    )
    differs = turns.check_send("old", "fp-other")
    assert differs is not None and differs.kind == "differs"
    assert "another prompt, parts or deps" in differs.message
    recorded = turns.check_send("older", "anything")  # no fingerprint kept: a retry
    assert recorded is not None and recorded.kind == "recorded"


def test_a_run_that_cannot_start_refuses_its_send_and_the_next_turn_starts() -> None:
    turns = Turns()
    turns.send(1, "taken", "a")
    turns.send(2, "r2", "b")
    refusal = Refusal("taken", "run id 'taken' is taken")
    assert turns.start_failed("taken", refusal) == [Answer(1, refusal), StartChild("r2")]
    assert turns.check_send("taken", "a") is None  # not a turn of this conversation


@given(
    st.lists(st.sampled_from(["c1", "c2", "c3"]), min_size=1, max_size=3, unique=True),
    st.dictionaries(st.sampled_from(["c1", "c2", "c3", "x"]), st.booleans(), max_size=4),
    st.floats(0, 100),
)
def test_a_pause_refuses_exactly_what_it_cannot_record(
    calls: list[str], decisions: dict[str, bool], now: float
) -> None:
    pause = Pause(tuple(calls), 50.0, 50.0)
    problem = pause.refusal(decisions, now)
    valid = bool(decisions) and set(decisions) <= set(calls) and now < 50.0
    assert (problem is None) == valid
    if valid:
        pause.decide(decisions)
        assert set(pause.remaining) == set(calls) - set(decisions)


class Conversation(RuleBasedStateMachine):
    """Random sends, pauses, approvals (partial, empty, unknown, twice), timeouts, closes,
    ends and continue-as-new suggestions; the environment plays the child runs."""

    @initialize(per_run=st.integers(1, 4))
    def start(self, per_run: int) -> None:
        self.turns = Turns(turns_per_run=per_run)
        self.now = 0.0
        self.tickets = 0
        self.asked: set[int] = set()
        self.answered: Counter[int] = Counter()
        self.running: str | None = None  # the child run in flight (started, not ended)
        self.undecided: set[str] = set()  # the calls the child run waits for
        self.timers: list[tuple[float, ArmTimer]] = []  # (when it fires, what it calls)
        self.sent = 0
        self.evaluating: set[str] = set()  # the calls the child's evaluator still decides
        self.open = False  # the child told evaluations and has not yet said none runs
        self.by_evaluator: dict[str, Decision] = {}
        self.told: tuple[tuple[str, ...], float | None, Any, set[str]] = ((), None, None, set())

    def apply(self, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, Answer):
                assert effect.ticket in self.asked
                self.answered[effect.ticket] += 1
            elif isinstance(effect, StartChild):
                assert self.running is None, "two turns in flight"
                self.running = effect.run_id
            elif isinstance(effect, Decide):
                assert effect.run_id == self.running, "decisions for a run not in flight"
                self.undecided -= set(effect.decisions)
            else:
                self.timers.append((self.now + effect.seconds, effect))

    def ticket(self) -> int:
        self.tickets += 1
        self.asked.add(self.tickets)
        return self.tickets

    @rule(again=st.booleans(), same=st.booleans())
    def send(self, again: bool, same: bool) -> None:
        if not again or not self.sent:
            self.sent += 1
        run_id = f"r{self.sent}"
        self.apply(self.turns.send(self.ticket(), run_id, "fp" if same else "other"))

    @precondition(lambda self: self.running is not None and not self.undecided and not self.open)
    @rule(
        calls=st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, unique=True),
        timeout=st.none() | st.floats(1, 10),
        external=st.none()
        | st.tuples(st.sets(st.sampled_from(["a", "b", "c"])), st.none() | st.floats(1, 10)),
        evaluated=st.sets(st.sampled_from(["a", "b", "c"])),
    )
    def child_pauses(
        self,
        calls: list[str],
        timeout: float | None,
        external: tuple[set[str], float | None] | None,
        evaluated: set[str],
    ) -> None:
        """A pause bounded by one timeout, or (``external``: the client-run calls and their
        timeout) each call by its own kind's; an evaluator still decides ``evaluated``."""
        assert self.running is not None
        self.undecided = set(calls)
        bounds, clientside = None, set[str]()
        if external is not None:
            clientside, their = external[0] & set(calls), external[1]
            bounds = {c: their if c in clientside else timeout for c in calls}
        self.evaluating, self.by_evaluator = (evaluated & set(calls)) - clientside, {}
        self.told = (tuple(calls), timeout, bounds, clientside)
        evaluating = tuple(c for c in calls if c in self.evaluating)
        self.open = bool(evaluating)
        effects = self.turns.paused(
            self.running, tuple(calls), self.now, timeout, None, bounds, clientside, evaluating
        )
        self.apply(effects)

    @precondition(lambda self: self.running is not None and self.evaluating and self.undecided)
    @rule(data=st.data())
    def evaluation_ends(self, data: st.DataObject) -> None:
        """An evaluation ends while the run waits, deciding its call (if a person did not
        first) or leaving it to a person; the run tells the same pause again."""
        call = data.draw(st.sampled_from(sorted(self.evaluating)))
        self.evaluating.discard(call)
        if data.draw(st.booleans()) and call in self.undecided:
            self.undecided.discard(call)
            self.by_evaluator[call] = Decision(approved=True, by="evaluator:e")
        self.tell()

    @precondition(lambda self: self.running is not None and self.open and not self.undecided)
    @rule()
    def child_wait_ends(self) -> None:
        """Every call is decided: the evaluations left are cancelled, and the run says so."""
        self.evaluating = set()
        self.tell()

    def tell(self) -> None:
        assert self.running is not None
        calls, timeout, bounds, clientside = self.told
        left = tuple(c for c in calls if c in self.undecided)
        still = tuple(c for c in left if c in self.evaluating)
        self.open = bool(still)
        decided = dict(self.by_evaluator)
        self.apply(
            self.turns.paused(
                self.running, left, self.now, timeout, None, bounds, clientside, still, decided
            )
        )

    @precondition(lambda self: self.running is not None and not self.undecided and not self.open)
    @rule()
    def child_ends(self) -> None:
        """A run ends once nothing it waits for is undecided."""
        run_id, self.running = self.running, None
        assert run_id is not None
        self.apply(self.turns.ended(run_id))

    @precondition(lambda self: self.running is not None and self.turns.phase == "running")
    @rule()
    def child_cannot_start(self) -> None:
        run_id, self.running = self.running, None
        assert run_id is not None
        self.apply(self.turns.start_failed(run_id, Refusal("taken", "taken")))

    @rule(data=st.data())
    def approve(self, data: st.DataObject) -> None:
        if self.turns.phase != "waiting" and data.draw(st.integers(0, 3)):
            return  # mostly while a turn waits: elsewhere every approval is refused alike
        pause = self.turns.pause
        calls = list(pause.calls) if pause is not None else []
        # Mostly calls of the pause (some, all, or decided already), else empty or unknown.
        chosen = data.draw(st.lists(st.sampled_from([*calls, "x"]), unique=True))
        decisions = {c: data.draw(st.booleans()) for c in chosen}
        self.apply(self.turns.approve(self.ticket(), decisions, self.now))

    @rule(seconds=st.floats(0, 5))
    def time_passes(self, seconds: float) -> None:
        self.now += seconds
        for fires, timer in [t for t in self.timers if t[0] <= self.now]:
            self.timers.remove((fires, timer))
            self.apply(self.turns.expire(timer.run_id, timer.pause, self.now))

    @rule(odds=st.integers(0, 4))
    def close(self, odds: int) -> None:
        if odds == 0:  # rarer than the rest: a closed conversation refuses everything
            self.apply(self.turns.close(self.ticket()))

    @rule(odds=st.integers(0, 4))
    def suggest(self, odds: int) -> None:
        if odds == 0:
            self.apply(self.turns.suggest())

    @precondition(lambda self: self.turns.phase == "continuing")
    @rule()
    def continue_as_new(self) -> None:
        """The next workflow run: every update of this one was answered."""
        assert set(self.answered) == self.asked
        assert self.running is None
        self.turns = Turns(self.turns.turns_per_run, self.turns.known)

    @invariant()
    def answered_at_most_once(self) -> None:
        assert all(count == 1 for count in self.answered.values())

    @invariant()
    def phase_matches_the_run_in_flight(self) -> None:
        turns = self.turns
        in_flight = turns.phase in ("running", "waiting", "settling")
        assert in_flight == (turns.current is not None)
        assert (turns.current is None) or (turns.current.run_id == self.running)
        if turns.phase == "waiting":
            assert turns.waiting, "waiting with nothing to decide"
        if turns.phase == "settling":  # every call was sent its decision (or its timeout's)
            assert not self.undecided, f"settling while {self.undecided} wait in the run"
        if turns.over:
            assert not turns.queue and turns.current is None

    def teardown(self) -> None:
        """Whatever happened, a person who answers and runs that end leave no update
        unanswered: the conversation never wedges."""
        turns = self.turns
        for _ in range(50):
            if turns.phase == "waiting":
                self.time_passes(0)  # a timer due fires first
            if turns.phase == "waiting":
                answer = dict.fromkeys(turns.waiting, True)
                self.apply(turns.approve(self.ticket(), answer, self.now))
            elif self.running is not None and not self.undecided and self.open:
                self.child_wait_ends()
            elif self.running is not None and not self.undecided:
                self.child_ends()
            else:
                break  # nothing more happens: the run waits for decisions nobody can give
        if not turns.over:
            self.apply(turns.close(self.ticket()))
        assert turns.over and turns.current is None
        assert set(self.answered) == self.asked, "an update was never answered"


Conversation.TestCase.settings = settings(max_examples=200, stateful_step_count=30)
test_random_sequences_answer_every_update_once_and_never_wedge = Conversation.TestCase
