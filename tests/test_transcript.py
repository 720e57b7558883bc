"""The conversation transcript's steps (golem.wire.transcript), without a server: what a
``ConversationWorkflow`` run does, what crosses continue-as-new, what a reader rebuilds."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_history_properties import PROPERTIES, messages

from golem import Message, ToolCall
from golem.messages import Usage
from golem.phases.prepare import repaired
from golem.results import Result
from golem.wire import Completed, Failed, MessagesQuery, Segment, chain_all
from golem.wire import transcript as transcript_module
from golem.wire.transcript import ConversationInput, Transcript
from golem.workflows.report import Reporter


def report(result: Result[Any], given: list[Message]) -> Completed:
    """What a turn's run returns its parent (a conversation): everything carried."""
    return Reporter(given, readable=False).completed(result, result.output)


@PROPERTIES
@given(st.lists(messages(), max_size=8), st.lists(messages(), max_size=8))
def test_repairing_after_a_clean_prefix_is_repairing_the_tail(
    before: list[Message], tail: list[Message]
) -> None:
    """Why a by-reference turn may take a repaired transcript: repairing the whole is the
    clean prefix (what earlier workflow runs hold) followed by the repaired tail."""
    prefix = repaired(before)
    assert repaired(prefix) == prefix
    assert repaired([*prefix, *tail]) == [*prefix, *repaired(tail)]


def turn(run_id: str, n: int, answer: str = "ok") -> list[Message]:
    return [
        Message.user(f"turn {n}").stamped(run_id, "conv"),
        Message.assistant(answer).stamped(run_id, "conv"),
    ]


def completed(transcript: Transcript, run_id: str, added: list[Message]) -> None:
    """What the workflow does when a by-reference turn's run completes."""
    result: Result[Any] = Result(
        output="ok", messages=added, run_id=run_id, conversation_id="conv", usage=Usage()
    )
    assert transcript.ended(report(result, []))


def two_turns() -> Transcript:
    """A new conversation's workflow run after two by-reference turns, r1 and r2."""
    transcript = Transcript(ConversationInput(agent="a"))
    for n, run in enumerate(("r1", "r2")):
        transcript.begin(run, by_reference=True)
        completed(transcript, run, turn(run, n))
    return transcript


def test_a_long_transcript_crosses_continue_as_new_by_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(transcript_module, "CARRY_BYTES", 0)
    first = two_turns()
    carried = first.carry("conv", "exec-1", by_reference=True)
    assert carried["messages"] == [] and carried["turns"] == 2 and carried["recent"] == ["r1", "r2"]
    second = Transcript(ConversationInput(agent="a", **carried))
    assert (second.offset, second.length, second.turns, second.last_run) == (4, 4, 2, "r2")
    assert second.digest == first.digest and second.knows("r1")
    second.begin("r3", by_reference=True)
    completed(second, "r3", turn("r3", 2))
    page = second.page(MessagesQuery(since=1, upto=6))
    assert page.messages == [] and page.next == 4
    assert page.held == [
        Segment(
            workflow_id="conv", run_id="exec-1", start=0, end=4, digest=first.digest, turns=True
        )
    ]
    rest = second.page(MessagesQuery(since=4, upto=6))
    assert rest.messages == turn("r3", 2) and rest.next == 6
    assert second.chain[-1] == chain_all([*first.own, *turn("r3", 2)])[-1]


def test_a_small_transcript_crosses_by_value() -> None:
    first = Transcript(ConversationInput(agent="a"))
    first.begin("r1", by_reference=True)
    completed(first, "r1", turn("r1", 0))
    carried = first.carry("conv", "exec-1", by_reference=True)
    assert carried == {"messages": first.own, "runs": ["r1"]}


def test_a_run_handed_over_to_is_no_turn_of_the_persons_across_continue_as_new(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A turn whose run hands over goes on as the target's run: one more run of the
    conversation, not one more turn of the person's, by value and by reference."""
    first = Transcript(ConversationInput(agent="a"))
    first.begin("r1", by_reference=True)
    completed(first, "r1", turn("r1", 0))
    first.begin("t1", by_reference=True, handed=("r1", "billing"))
    completed(first, "t1", [Message.assistant("billing here").stamped("t1", "conv")])
    assert (first.turns, first.person_turns) == (2, 1)
    by_value = first.carry("conv", "exec-1", by_reference=True)
    monkeypatch.setattr(transcript_module, "CARRY_BYTES", 0)
    by_reference = first.carry("conv", "exec-1", by_reference=True)
    assert by_value["handed"] == by_reference["handed"] == 1
    for carried in (by_value, by_reference):
        second = Transcript(ConversationInput(agent="a", **carried))
        second.begin("r2", by_reference=True)
        assert (second.turns, second.person_turns) == (3, 2)
        second.begin("t2", by_reference=True, handed=("r2", "billing"))
        second.never_started("t2")  # its run id was taken: it is no run either
        assert (second.turns, second.person_turns) == (3, 2)


def test_a_failed_turns_evidence_stays_by_value_until_the_next_turn_repairs_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(transcript_module, "CARRY_BYTES", 0)
    transcript = Transcript(ConversationInput(agent="a"))
    transcript.begin("r1", by_reference=True)
    completed(transcript, "r1", turn("r1", 0))
    transcript.begin("r2", by_reference=True)
    evidence = [
        Message.user("break").stamped("r2", "conv"),
        Message.assistant("", [ToolCall(id="c1", name="t", args="{}")]).stamped("r2", "conv"),
    ]
    partial = Result(
        output=None, messages=evidence, run_id="r2", conversation_id="conv", usage=Usage()
    )
    evidence_report = report(partial, [])
    transcript.failed(Failed(stage="tool", message="boom", evidence=evidence_report))
    assert transcript.length == 4 and transcript.clean == 2  # the evidence is unrepaired
    carried = transcript.carry("conv", "exec-1", by_reference=True)
    assert carried["messages"] == evidence  # by value: the next turn repairs it
    nxt = Transcript(ConversationInput(agent="a", **carried))
    assert (nxt.offset, nxt.clean) == (2, 2)
    nxt.begin("r3", by_reference=True)
    assert nxt.own == repaired(evidence) and len(nxt.own) == 3  # the call got its result
    assert nxt.clean == nxt.length == 5 and nxt.start == 5


def test_a_turn_that_rewrites_history_held_elsewhere_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(transcript_module, "CARRY_BYTES", 0)
    transcript = Transcript(ConversationInput(agent="a"))
    transcript.begin("r1", by_reference=True)
    completed(transcript, "r1", turn("r1", 0))
    nxt = Transcript(ConversationInput(agent="a", **transcript.carry("c", "e", True)))
    nxt.begin("r2", by_reference=False)
    rewritten = Result(
        output="ok",
        messages=turn("x", 0) + turn("r2", 1),
        run_id="r2",
        conversation_id="conv",
        usage=Usage(),
    )
    with pytest.raises(ValueError, match="earlier workflow runs hold"):
        nxt.ended(report(rewritten, turn("r1", 0)))


def test_a_fork_point_cuts_what_earlier_runs_hold_and_sends_the_rest_by_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(transcript_module, "CARRY_BYTES", 0)
    first = two_turns()
    second = Transcript(ConversationInput(agent="a", **first.carry("conv", "exec-1", True)))
    second.begin("r3", by_reference=True)
    completed(second, "r3", turn("r3", 2))
    whole = [*first.own, *turn("r3", 2)]
    digests = chain_all(whole)
    held, cut = second.fork_point("conv", "exec-2", 2, whole)
    assert cut == 2
    assert [(s.run_id, s.start, s.end, s.digest, s.turns) for s in held] == [
        ("exec-1", 0, 2, digests[2], False)
    ]
    held, cut = second.fork_point("conv", "exec-2", 6, whole)
    assert cut == 6
    assert [(s.run_id, s.start, s.end, s.digest) for s in held] == [
        ("exec-1", 0, 4, digests[4]),
        ("exec-2", 4, 6, digests[6]),
    ]
