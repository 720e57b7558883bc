"""Recorded workflow histories replay without a nondeterminism error, and each one still
holds the situation it was recorded for (re-record with tests/record_histories.py).

Two corpora replay: the current one (tests/histories/*.json*, re-recorded whenever the
wire format changes) and every released one (tests/histories/release-*/, never re-recorded):
a release's in-flight runs must replay on every later release (docs/adr/0015). The agents
and workflows they were recorded with (tests/replay_agents.py, examples/support_ticket.py)
change only additively for that reason."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from replay_agents import AGENTS, ENCRYPTION_KEY
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from examples.support_ticket import TicketWorkflow
from golem.worker import GolemPlugin

ROOT = Path(__file__).parent / "histories"
HISTORIES = sorted(ROOT.glob("*.json*"))
RELEASED = sorted(ROOT.glob("release-*/*.json*"))


def name(path: Path) -> str:
    return path.name.split(".")[0]


def load(path: Path) -> WorkflowHistory:
    data = path.read_bytes()
    text = gzip.decompress(data).decode() if path.suffix == ".gz" else data.decode()
    return WorkflowHistory.from_json(name(path), text)


def history(stem: str) -> WorkflowHistory:
    return load(next(p for p in HISTORIES if name(p) == stem))


def events(stem: str, kind: EventType.ValueType) -> list[object]:
    return [e for e in history(stem).events if e.event_type == kind]


def taken(stem: str) -> str:
    """The ids of the patches history ``stem`` took, as its markers record them (JSON)."""
    markers = events(stem, EventType.EVENT_TYPE_MARKER_RECORDED)
    details = [m.marker_recorded_event_attributes.details for m in markers]  # type: ignore[attr-defined]
    return " ".join(d["patch-data"].payloads[0].data.decode() for d in details)


def test_histories_are_checked_in() -> None:
    assert {name(p) for p in HISTORIES} >= {
        "tools_batch_failed_unknown",
        "continued_conversation",
        "tool_canceled",
        "approval_paused",
        "approval_approved",
        "client_cancel_memo",
        "paged_result",
        "utf8_paged_result",
        "model_call_retried",
        "crash_taken_over",
        "crash_resumed",
        "streamed_run",
        "conversation_approval_continued",
        "conversation_after_continue",
        "ticket_child_and_inline",
        "segments_repaired_continued",
        "segments_after",
        "delegation_parallel",
        "delegation_child",
        "delegation_approved_at_top",
        "delegation_child_approved",
        "handoff_standalone",
        "handoff_conversation",
        "handoff_conversation_after",
        "conversation_fork",
        "encrypted_run",
        "responses_run",
        "inbox_approved_in_place",
        "external_timed_out_mixed",
        "conversation_external_timed_out",
        "conversation_external_turn",
        "agent_evaluator_allowed",
        "evaluation_answered_first",
        "conversation_evaluation_answered_first",
        "conversation_evaluation_turn",
        "delegate_evaluation_answered_first",
        "delegate_evaluation_child",
        "conversation_inline_continued",
        "conversation_inline",
        "conversation_inline_approved",
        "conversation_inline_closed",
        "conversation_inline_streamed_continued",
        "conversation_inline_streamed",
        "conversation_inline_cancelled",
        "conversation_inline_handed_continued",
        "conversation_inline_handed",
        "conversation_inline_listed_continued",
        "conversation_inline_listed",
        "signal_arity_dropped",
        "signal_arity_failed",
        "paused_report_forged_dropped",
        "paused_report_forged_taken",
    }


def test_the_mixed_batch_history_times_out_the_client_run_call_alone() -> None:
    """``external_timed_out_mixed`` took ``golem.external-timeout``: one timer fired (the
    external timeout) while the approval's wait went on until it was approved."""
    assert "golem.external-timeout" in taken("external_timed_out_mixed")
    assert len(events("external_timed_out_mixed", EventType.EVENT_TYPE_TIMER_FIRED)) == 1
    completed = events(
        "external_timed_out_mixed", EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
    )
    result = completed[0].workflow_execution_completed_event_attributes.result  # type: ignore[attr-defined]
    assert b"no result for this call arrived from the application" in result.payloads[0].data
    assert b"sent 5" in result.payloads[0].data


def test_the_conversation_history_times_out_its_turns_client_run_call_alone() -> None:
    """``conversation_external_timed_out`` took ``golem.external-timeout`` in the
    conversation: its one timer (the external timeout) fired, then a person approved."""
    stem = "conversation_external_timed_out"
    assert "golem.external-timeout" in taken(stem)
    assert len(events(stem, EventType.EVENT_TYPE_TIMER_FIRED)) == 1
    signals = events(stem, EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED)
    sent = [s.signal_external_workflow_execution_initiated_event_attributes for s in signals]  # type: ignore[attr-defined]
    assert any(b"the external timeout" in a.input.payloads[0].data for a in sent)


def test_the_agent_evaluator_history_decides_in_its_activity() -> None:
    """``agent_evaluator_allowed``: another Agent decided in ``golem.evaluate_approval`` (no
    child run, no wait), and the transcript names it."""
    stem = "agent_evaluator_allowed"
    scheduled = events(stem, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
    kinds = [e.activity_task_scheduled_event_attributes.activity_type.name for e in scheduled]  # type: ignore[attr-defined]
    assert kinds.count("golem.evaluate_approval") == 1
    assert not events(stem, EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED)
    assert not events(stem, EventType.EVENT_TYPE_TIMER_STARTED)  # nobody waited for a person
    done = events(stem, EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED)
    results = [e.activity_task_completed_event_attributes.result for e in done]  # type: ignore[attr-defined]
    assert any(b"evaluator:replay_reviewer" in r.payloads[0].data for r in results if r.payloads)


def test_the_raced_evaluation_history_cancels_the_evaluation() -> None:
    """``evaluation_answered_first`` took ``golem.evaluation-race``: a person approved while
    the evaluator still thought, and its activity was cancelled."""
    stem = "evaluation_answered_first"
    assert "golem.evaluation-race" in taken(stem)
    assert events(stem, EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED)
    assert events(stem, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED)


@pytest.mark.parametrize("stem", ["conversation_evaluation_turn", "delegate_evaluation_child"])
def test_a_turns_and_a_delegates_raced_evaluations_are_cancelled(stem: str) -> None:
    """A conversation's turn and a delegated run took ``golem.evaluation-race`` too: the
    person answered through the conversation or the top run, the evaluation was cancelled."""
    assert "golem.evaluation-race" in taken(stem)
    assert events(stem, EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED)


def test_the_conversation_heard_of_the_evaluation_and_of_its_end() -> None:
    """The turn told its conversation while the evaluation ran, and again once it ended."""
    signals = events(
        "conversation_evaluation_answered_first", EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
    )
    told = [s.workflow_execution_signaled_event_attributes for s in signals]  # type: ignore[attr-defined]
    reports = [t.input.payloads[0].data for t in told if t.signal_name == "golem.paused"]
    assert len(reports) == 2 and b'"evaluating":["t1"]' in reports[0]
    assert b'"evaluating":[]' in reports[1] or b"evaluating" not in reports[1]


def test_the_inbox_history_lists_the_wait_and_clears_it() -> None:
    """``inbox_approved_in_place`` took the ``golem.pending-inbox`` branch: the count set
    and cleared, the memo written and removed (its replay checks the commands)."""
    kind = EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES
    fields = [
        e.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
        for e in history("inbox_approved_in_place").events
        if e.event_type == kind
    ]
    assert [f["GolemWaiting"].data for f in fields if "GolemWaiting" in f] == [b"1", b"0"]
    memos = events("inbox_approved_in_place", EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED)
    assert len(memos) == 3  # listed, unlisted, the outcome


def test_non_ascii_text_past_a_page_in_bytes_is_paged_behind_its_patch() -> None:
    # Under a page in characters, over it in UTF-8 bytes: the patch was asked, and taken.
    assert '"golem.utf8-pages"' in taken("utf8_paged_result")
    completed = events("utf8_paged_result", EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED)
    result = completed[0].workflow_execution_completed_event_attributes.result  # type: ignore[attr-defined]
    assert b'"messages":{"kind":"paged"' in result.payloads[0].data


def test_a_decide_signal_of_no_argument_is_dropped_behind_its_patch() -> None:
    """``signal_arity_dropped`` took ``golem.signal-arity``: the run went on to its approval.
    ``signal_arity_failed`` (recorded by the code before the patch) failed on the signal's
    ``TypeError``, and replays so (the patch not taken: no marker)."""
    assert '"golem.signal-arity"' in taken("signal_arity_dropped")
    assert events("signal_arity_dropped", EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED)
    assert "golem.signal-arity" not in taken("signal_arity_failed")
    failed = events("signal_arity_failed", EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED)
    failure = failed[0].workflow_execution_failed_event_attributes.failure  # type: ignore[attr-defined]
    assert "decide() missing 1 required positional argument" in failure.message


def answered_after_the_last_activity(stem: str) -> bool:
    """Whether history ``stem``'s last update answered after its last activity began."""
    kinds = [e.event_type for e in history(stem).events]
    answer = max(
        i
        for i, k in enumerate(kinds)
        if k == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED
    )
    activity = max(
        i for i, k in enumerate(kinds) if k == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    )
    return answer > activity


def test_a_paused_report_from_no_child_is_dropped_behind_its_patch() -> None:
    """``paused_report_forged_dropped`` took ``golem.reports-from-children``: the approval
    of the run's own call answered with its end. ``paused_report_forged_taken`` (recorded by
    the code before the patch) listed the forged call as waiting below, so the approval
    answered at once, before the run ended; it replays so (no marker)."""
    dropped, taken_ = "paused_report_forged_dropped", "paused_report_forged_taken"
    assert '"golem.reports-from-children"' in taken(dropped)
    assert "golem.reports-from-children" not in taken(taken_)
    for stem in (dropped, taken_):
        [signal] = events(stem, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED)
        told = signal.workflow_execution_signaled_event_attributes  # type: ignore[attr-defined]
        assert b"made-up-child" in told.input.payloads[0].data
    assert answered_after_the_last_activity(dropped)  # the approval answered with the end
    assert not answered_after_the_last_activity(taken_)
    answers = events(taken_, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED)
    outcome = answers[-1].workflow_execution_update_completed_event_attributes.outcome  # type: ignore[attr-defined]
    assert b'"f1"' in outcome.success.payloads[0].data  # the forged call, answered as waiting


def test_the_first_release_has_its_histories() -> None:
    released = {name(p) for p in RELEASED if p.parent.name == "release-0.2.0"}
    assert released >= {"streamed_run", "conversation_fork", "encrypted_run", "paged_result"}
    assert len(list(ROOT.glob("release-0.2.0/mcp/*.json"))) == 2


def test_each_history_holds_what_it_was_recorded_for() -> None:
    memo = events("client_cancel_memo", EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED)
    assert len(memo) == 1
    assert events("client_cancel_memo", EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED)
    completed = events("paged_result", EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED)
    result = completed[0].workflow_execution_completed_event_attributes.result  # type: ignore[attr-defined]
    assert b'"messages":{"kind":"paged"' in result.payloads[0].data
    started = [
        e.activity_task_started_event_attributes.attempt  # type: ignore[attr-defined]
        for e in events("model_call_retried", EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED)
    ]
    assert 2 in started  # the retried attempt is recorded as its start event
    assert events("crash_taken_over", EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT)
    assert events("approval_paused", EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
    resumed = history("crash_resumed").events[0].workflow_execution_started_event_attributes
    assert b'"runId"' in resumed.input.payloads[0].data  # started from the failed run's history


def test_the_conversation_and_user_workflow_histories_hold_what_they_were_recorded_for() -> None:
    first = "conversation_approval_continued"
    signals = events(first, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED)
    names = [e.workflow_execution_signaled_event_attributes.signal_name for e in signals]  # type: ignore[attr-defined]
    assert names == ["golem.paused"]  # the turn waited for an approval
    updates = events(first, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED)
    kinds = [
        e.workflow_execution_update_accepted_event_attributes.accepted_request.input.name
        for e in updates
    ]  # type: ignore[attr-defined]
    assert kinds == ["golem.send", "golem.approve", "golem.send"]
    assert events(first, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW)
    after = history("conversation_after_continue").events[0]
    assert after.workflow_execution_started_event_attributes.continued_execution_run_id
    assert events("conversation_after_continue", EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED)
    repaired = history("segments_repaired_continued")
    assert not repaired.events[
        0
    ].workflow_execution_started_event_attributes.continued_execution_run_id
    # No patch markers: until the first release no history needs an old branch.
    assert not events("segments_repaired_continued", EventType.EVENT_TYPE_MARKER_RECORDED)
    after = history("segments_after").events[0].workflow_execution_started_event_attributes
    assert b'"earlier"' in after.input.payloads[0].data  # its transcript starts by reference
    ticket = "ticket_child_and_inline"
    assert len(events(ticket, EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED)) == 1
    scheduled = events(ticket, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
    assert [e.activity_task_scheduled_event_attributes.activity_type.name for e in scheduled] == [  # type: ignore[attr-defined]
        "golem.model_request"  # the inline run's model call, in the ticket's own history
    ]


def activity_names(stem: str) -> list[str]:
    scheduled = events(stem, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
    return [e.activity_task_scheduled_event_attributes.activity_type.name for e in scheduled]  # type: ignore[attr-defined]


def signal_names(stem: str) -> list[str]:
    signals = events(stem, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED)
    return [e.workflow_execution_signaled_event_attributes.signal_name for e in signals]  # type: ignore[attr-defined]


def test_the_inline_conversation_histories_hold_what_they_were_recorded_for() -> None:
    """``conversation_inline_continued`` ran two turns inline (docs/adr/0050), each a model
    call, a tool call and a model call in the conversation's own history, no child run, and
    continued as new by reference; ``conversation_inline`` ran the third turn so."""
    for stem, turns in (("conversation_inline_continued", 2), ("conversation_inline", 1)):
        assert (
            activity_names(stem)
            == ["golem.model_request", "golem.tool", "golem.model_request"] * turns
        )
        assert not events(stem, EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED)
    first = "conversation_inline_continued"
    assert events(first, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW)
    after = history("conversation_inline").events[0].workflow_execution_started_event_attributes
    assert b'"earlier"' in after.input.payloads[0].data  # its transcript starts by reference
    assert b'"inlineTurns":true' in after.input.payloads[0].data


def turn_runs_listed(stem: str) -> list[list[str]]:
    """Each ``GolemTurnRuns`` history ``stem`` upserted, in order."""
    kind = EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES
    fields = [
        e.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
        for e in history(stem).events
        if e.event_type == kind
    ]
    return [json.loads(f["GolemTurnRuns"].data) for f in fields if "GolemTurnRuns" in f]


def test_the_listed_inline_histories_list_each_turn_on_the_run_that_took_it() -> None:
    """``conversation_inline_listed_continued`` took ``golem.turn-runs-listed``: each inline
    turn's run id upserted into ``GolemTurnRuns`` in the workflow task that accepted its send,
    and continued as new without the list; ``conversation_inline_listed`` listed its own."""
    first, then = "conversation_inline_listed_continued", "conversation_inline_listed"
    assert "golem.turn-runs-listed" in taken(first)
    one, two = turn_runs_listed(first)
    assert len(one) == 1 and two[:1] == one and len(two) == 2
    [three] = turn_runs_listed(then)
    assert len(three) == 1 and three[0] not in two
    kinds = [e.event_type for e in history(first).events]
    accepted = kinds.index(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED)
    upserted = kinds.index(EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES, accepted)
    assert EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED not in kinds[accepted:upserted]
    [switch] = events(first, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW)
    carried = switch.workflow_execution_continued_as_new_event_attributes.search_attributes  # type: ignore[attr-defined]
    assert "GolemTurnRuns" not in carried.indexed_fields


def test_the_paused_inline_histories_hold_what_they_were_recorded_for() -> None:
    """``conversation_inline_approved``: a turn waited for t1 in the conversation itself
    (no child run), its approve answered its end; ``conversation_inline_closed``: the close
    denied the waiting call, and the conversation recorded the turn's end in its memo."""
    for stem in ("conversation_inline_approved", "conversation_inline_closed"):
        assert not events(stem, EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED)
        assert activity_names(stem)[:1] == ["golem.model_request"]
    memos = [
        e.workflow_properties_modified_event_attributes.upserted_memo.fields  # type: ignore[attr-defined]
        for e in events(
            "conversation_inline_closed", EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED
        )
    ]
    assert any("golemTurnEnded" in fields for fields in memos)
    assert activity_names("conversation_inline_approved").count("golem.tool") == 1
    assert "golem.tool" not in activity_names("conversation_inline_closed")  # denied


def test_the_streamed_and_cancelled_inline_histories_hold_what_they_were_recorded_for() -> None:
    """``conversation_inline_streamed_continued``: two streamed inline turns (their stream
    the conversation's: polls and deltas in its own history), then continue-as-new carrying
    the stream; ``conversation_inline_streamed`` streamed the third turn from there.
    ``conversation_inline_cancelled``: cancelled while its turn waited, the turn's end (stage
    canceled, with its evidence) recorded in the memo before the workflow closed."""
    for stem, turns in (
        ("conversation_inline_streamed_continued", 2),
        ("conversation_inline_streamed", 1),
    ):
        assert activity_names(stem).count("golem.model_request") == 2 * turns
        accepted = events(stem, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED)
        updates = [
            e.workflow_execution_update_accepted_event_attributes.accepted_request.input.name
            for e in accepted
        ]  # type: ignore[attr-defined]
        assert updates.count("golem.send") == turns and "__temporal_workflow_stream_poll" in updates
    after = (
        history("conversation_inline_streamed")
        .events[0]
        .workflow_execution_started_event_attributes
    )
    assert b'"stream":{' in after.input.payloads[0].data  # the stream's state, carried
    stem = "conversation_inline_cancelled"
    memos = [
        e.workflow_properties_modified_event_attributes.upserted_memo.fields  # type: ignore[attr-defined]
        for e in events(stem, EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED)
    ]
    [ended] = [fields["golemTurnEnded"] for fields in memos if "golemTurnEnded" in fields]
    assert b"canceled" in ended.data and b"pay 5" in ended.data  # the stage, the evidence
    assert events(stem, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED)


def test_the_delegation_and_handoff_histories_hold_what_they_were_recorded_for() -> None:
    children = EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED
    # Two delegates= children started by the workflow; the tool that delegates twice is
    # one activity (its runs are workflows of their own).
    assert len(events("delegation_parallel", children)) == 2
    assert activity_names("delegation_parallel").count("golem.tool") == 1
    child = history("delegation_child").events[0].workflow_execution_started_event_attributes
    assert child.parent_workflow_execution.workflow_id  # a child workflow
    assert b'"caller"' in child.input.payloads[0].data
    # The top run heard its child wait, and routed the approval to it.
    assert signal_names("delegation_approved_at_top") == ["golem.paused", "golem.paused"]
    assert signal_names("delegation_child_approved") == ["golem.decide"]
    assert len(events("handoff_standalone", children)) == 1
    # The conversation started the handed-to run itself, then continued as new.
    assert len(events("handoff_conversation", children)) == 3
    assert events("handoff_conversation", EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW)
    after = history("handoff_conversation_after").events[0]
    assert (
        b'"currentAgent":"replay_desk"'
        in after.workflow_execution_started_event_attributes.input.payloads[0].data
    )


def approve_answers(path: Path) -> list[bytes]:
    """What each ``golem.approve`` update of the history answered (its payload's data, or
    its encoding when it has none)."""
    updates = [
        e.workflow_execution_update_completed_event_attributes.outcome.success.payloads[0]
        for e in load(path).events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED
    ]
    return [p.data or p.metadata["encoding"] for p in updates]


def test_an_approval_answered_null_in_0_2_0_and_answers_what_it_did_since() -> None:
    """Patch golem.readable-approvals: the 0.2.0 history (its answer null) takes the old
    branch, the current one records the patch and answers the run's outcome."""
    stem = "delegation_approved_at_top.json"
    old = approve_answers(ROOT / "release-0.2.0" / stem)
    assert old[-1] == b"binary/null"  # the approval that let the run end
    new = approve_answers(ROOT / stem)
    assert new[-1].startswith(b'{"kind":"completed","output":"escalated: transfer: sent 5",')
    assert b'"decided":{"t1":{"approved":true,"at":"' in new[-1]
    assert "golem.readable-approvals" in taken(stem.split(".")[0])


def continued_as_new(path: Path) -> Any:
    """How a conversation's run continued as new (its event's attributes)."""
    [event] = [
        e.workflow_execution_continued_as_new_event_attributes
        for e in load(path).events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    ]
    return event


def continued_memo(path: Path) -> dict[str, bytes]:
    """The memo a conversation's run gave the run it continued as."""
    memo = continued_as_new(path).memo
    return {key: payload.data for key, payload in memo.fields.items()}


def test_a_continued_conversation_carries_its_summary_in_its_memo_since_0_2_0() -> None:
    """Patch golem.continued-summary: the 0.2.0 history continued with no memo (its old
    branch), the current one gives the next run its summary."""
    stem = "conversation_approval_continued.json"
    assert continued_memo(ROOT / "release-0.2.0" / stem) == {}
    summary = b'"replay_approval: conversation (continued as new)"'
    assert continued_memo(ROOT / stem) == {"golemSummary": summary}


def test_a_conversation_continued_after_a_handoff_counts_the_runs_handed_to() -> None:
    """Patch golem.handed-runs: the 0.2.0 history continued without the count (its old
    branch), the current one gives the next run the count of runs handed over to, so the
    UI counts the person's turns there."""
    stem = "handoff_conversation.json"
    old = continued_as_new(ROOT / "release-0.2.0" / stem).input.payloads[0].data
    assert b'"currentAgent":"replay_desk"' in old and b'"handed"' not in old
    new = continued_as_new(ROOT / stem).input.payloads[0].data
    assert b'"handed":1,' in new
    assert "golem.handed-runs" in taken(stem.split(".")[0])


def test_the_fork_and_the_encrypted_run_hold_what_they_were_recorded_for() -> None:
    started = history("conversation_fork").events[0].workflow_execution_started_event_attributes
    assert b'"parentRunId"' in started.input.payloads[0].data  # it continues another's turn
    sealed = history("encrypted_run").events[0].workflow_execution_started_event_attributes
    assert sealed.input.payloads[0].metadata["encoding"] == b"binary/encrypted"


def test_the_responses_run_holds_the_adapters_reasoning_items() -> None:
    """A run through OpenAIResponsesModel: its model results carry reasoning blocks with the
    item ids they are replayed by (docs/adr/0003-provider-adapters.md)."""
    assert activity_names("responses_run") == [
        "golem.model_request",
        "golem.tool",
        "golem.model_request",
    ]
    completed = events("responses_run", EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED)
    results = [
        e.activity_task_completed_event_attributes.result.payloads[0].data for e in completed
    ]  # type: ignore[attr-defined]
    assert b'"provider":"openai-responses","id":"rs_68af1d4a7b8c81a4a1b2c3d4e5f60004"' in results[0]
    assert b'"redacted":"gAAAAAB' in results[2]


@pytest.mark.parametrize("sandboxed", [True, False], ids=["sandboxed", "unsandboxed"])
@pytest.mark.parametrize("path", [*HISTORIES, *RELEASED], ids=lambda p: str(p.relative_to(ROOT)))
async def test_recorded_history_replays_deterministically(path: Path, sandboxed: bool) -> None:
    # A sealed history replays only with its key, as a worker would run it; and alike with
    # the sandbox off (GolemPlugin(sandboxed=False), docs/adr/0038-the-sandbox-off.md).
    key = ENCRYPTION_KEY if name(path).startswith("encrypted") else None
    plugin = GolemPlugin(*AGENTS, encryption_key=key, sandboxed=sandboxed)
    replayer = Replayer(workflows=[TicketWorkflow], plugins=[plugin])
    result = await replayer.replay_workflow(load(path), raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure


def test_workflow_code_names_only_registered_patches() -> None:
    """A patch ships with its record (golem/workflows/patches.py): no direct SDK call."""
    import golem

    root = Path(golem.__file__).parent
    direct = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if "workflow.patched(" in path.read_text() and path.name != "patches.py"
    ]
    assert direct == []


def test_every_registered_patch_names_its_decision_record() -> None:
    from golem.workflows.patches import PATCHES

    root = Path(__file__).resolve().parent.parent
    missing = {p.id: p.adr for p in PATCHES.values() if not (root / p.adr).is_file()}
    assert missing == {}
    assert all(patch_id == p.id and p.id.startswith("golem.") for patch_id, p in PATCHES.items())
