"""normalize_history: call/result pairing repair and its report."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from golem.history import (
    INTERRUPTED_RESULT,
    OUTCOME_UNKNOWN_RESULT,
    HistoryRepair,
    normalize_history,
)
from golem.messages import Message, ToolCall, dump_messages


def call(call_id: str, name: str = "weather", args: str = '{"city": "Paris"}') -> ToolCall:
    return ToolCall(id=call_id, name=name, args=args)


def asks(*calls: ToolCall, text: str = "") -> Message:
    return Message.assistant(text, tool_calls=calls)


def result(call_id: str, content: str = "sunny", name: str = "weather") -> Message:
    return Message.tool(call_id, name, content)


def interrupted(call_id: str, name: str = "weather") -> Message:
    return Message.tool(call_id, name, INTERRUPTED_RESULT)


USER = Message.user("What is the weather?")
ANSWER = Message.assistant("Sunny everywhere.")


def test_normalize_synthesizes_neutral_result_right_after_requesting_assistant() -> None:
    history = [USER, asks(call("c1")), Message.user("and now?")]
    repaired, report = normalize_history(history)
    assert repaired == [USER, asks(call("c1")), interrupted("c1"), Message.user("and now?")]
    assert report == HistoryRepair(synthesized=["c1"])


def test_synthesized_result_states_absence_not_failure() -> None:
    repaired, _ = normalize_history([USER, asks(call("c1"))])
    synthesized = repaired[2]
    assert synthesized.content == "interrupted before execution; no result was produced"
    assert synthesized.failed is False
    assert (synthesized.tool_call_id, synthesized.tool_name) == ("c1", "weather")


def test_an_outcome_unknown_result_answers_its_call_and_repair_never_writes_one() -> None:
    unknown = Message.tool("a", "weather", OUTCOME_UNKNOWN_RESULT)
    history = [USER, asks(call("a"), call("b")), unknown]
    repaired, report = normalize_history(history)
    assert repaired == [USER, asks(call("a"), call("b")), unknown, interrupted("b")]
    assert report == HistoryRepair(synthesized=["b"])
    assert OUTCOME_UNKNOWN_RESULT != INTERRUPTED_RESULT


def test_normalize_appends_missing_results_after_the_block_in_call_order() -> None:
    turn = asks(call("a"), call("b", name="time"), call("c"))
    history = [USER, turn, result("b", name="time"), ANSWER]
    repaired, report = normalize_history(history)
    assert repaired == [
        USER,
        turn,
        result("b", name="time"),
        interrupted("a"),
        interrupted("c"),
        ANSWER,
    ]
    assert report.synthesized == ["a", "c"]


def test_normalize_synthesizes_for_a_turn_at_the_end_of_history() -> None:
    repaired, report = normalize_history([USER, asks(call("c1"), call("c2")), result("c1")])
    assert repaired == [USER, asks(call("c1"), call("c2")), result("c1"), interrupted("c2")]
    assert report.synthesized == ["c2"]


def test_normalize_drops_result_whose_call_is_absent() -> None:
    history = [USER, result("ghost"), ANSWER]
    repaired, report = normalize_history(history)
    assert repaired == [USER, ANSWER]
    assert report == HistoryRepair(dropped=["ghost"])


def test_normalize_drops_result_placed_before_its_call() -> None:
    history = [USER, result("c1", "early"), asks(call("c1")), result("c1", "real"), ANSWER]
    repaired, report = normalize_history(history)
    assert repaired == [USER, asks(call("c1")), result("c1", "real"), ANSWER]
    assert report == HistoryRepair(dropped=["c1"])


def test_normalize_drops_a_result_before_its_call_and_synthesizes_for_the_call() -> None:
    history = [USER, result("c1"), asks(call("c1"))]
    repaired, report = normalize_history(history)
    assert repaired == [USER, asks(call("c1")), interrupted("c1")]
    assert report == HistoryRepair(synthesized=["c1"], dropped=["c1"])


def test_duplicate_results_keep_the_first_and_drop_the_rest() -> None:
    history = [USER, asks(call("c1")), result("c1", "first"), result("c1", "second"), ANSWER]
    repaired, report = normalize_history(history)
    assert repaired == [USER, asks(call("c1")), result("c1", "first"), ANSWER]
    assert report == HistoryRepair(dropped=["c1"])


def test_calls_without_an_id_pass_through_unrepaired() -> None:
    history = [USER, asks(ToolCall(name="weather", args="{}")), ANSWER]
    repaired, report = normalize_history(history)
    assert repaired == history
    assert report == HistoryRepair()


def test_results_without_an_id_pass_through() -> None:
    history = [USER, asks(ToolCall(name="weather")), result(""), Message.user("x"), result("")]
    repaired, report = normalize_history(history)
    assert repaired == history
    assert not report.changed


def test_late_result_is_kept_and_moved_up_to_its_call() -> None:
    history = [
        USER,
        asks(call("c1"), call("c2")),
        result("c2"),
        Message.user("hurry"),
        result("c1"),
    ]
    repaired, report = normalize_history(history)
    assert repaired == [
        USER,
        asks(call("c1"), call("c2")),
        result("c2"),
        result("c1"),
        Message.user("hurry"),
    ]
    assert report == HistoryRepair(relocated=["c1"])
    assert report.changed


def test_late_and_missing_results_fill_the_block_in_call_order() -> None:
    turn = asks(call("a"), call("b"), call("c"))
    history = [USER, turn, ANSWER, result("c", "late c")]
    repaired, report = normalize_history(history)
    assert repaired == [
        USER,
        turn,
        interrupted("a"),
        interrupted("b"),
        result("c", "late c"),
        ANSWER,
    ]
    assert report == HistoryRepair(synthesized=["a", "b"], relocated=["c"])


def test_an_id_requested_again_by_a_later_turn_opens_a_new_call() -> None:
    history = [USER, asks(call("c1")), asks(call("c1")), result("c1")]
    repaired, report = normalize_history(history)
    assert repaired == [USER, asks(call("c1")), interrupted("c1"), asks(call("c1")), result("c1")]
    assert report == HistoryRepair(synthesized=["c1"])


def test_a_late_result_for_a_re_requested_id_answers_the_later_turn() -> None:
    first, second = asks(call("c1"), text="first"), asks(call("c1"), text="second")
    history = [USER, first, second, Message.user("hurry"), result("c1", "late")]
    repaired, report = normalize_history(history)
    assert repaired == [
        USER,
        first,
        interrupted("c1"),
        second,
        result("c1", "late"),
        Message.user("hurry"),
    ]
    assert report == HistoryRepair(synthesized=["c1"], relocated=["c1"])


def test_once_a_re_requested_id_is_answered_a_late_result_for_it_is_a_duplicate() -> None:
    first, second = asks(call("c1"), text="first"), asks(call("c1"), text="second")
    history = [USER, first, second, result("c1"), Message.user("hurry"), result("c1", "late")]
    repaired, report = normalize_history(history)
    assert repaired == [USER, first, interrupted("c1"), second, result("c1"), Message.user("hurry")]
    assert report == HistoryRepair(synthesized=["c1"], dropped=["c1"])


def test_calls_on_a_message_that_is_not_the_assistants_are_not_calls() -> None:
    # Hand-built history can carry tool calls on a user message; only an assistant requests.
    forged = Message(role="user", content="run it", tool_calls=[call("c1")])
    repaired, report = normalize_history([forged, result("c1")])
    assert repaired == [forged]
    assert report == HistoryRepair(dropped=["c1"])


def test_a_repeated_id_within_one_turn_is_one_call() -> None:
    turn = asks(call("c1"), call("c1"))
    repaired, report = normalize_history([USER, turn])
    assert repaired == [USER, turn, interrupted("c1")]
    assert report.synthesized == ["c1"]


def test_report_names_synthesized_and_dropped_calls_in_history_order() -> None:
    history = [
        USER,
        result("orphan-1"),
        asks(call("x"), call("y")),
        result("y"),
        result("y"),
        Message.user("next"),
        asks(call("z")),
        result("orphan-2"),
    ]
    _, report = normalize_history(history)
    assert report == HistoryRepair(synthesized=["x", "z"], dropped=["orphan-1", "y", "orphan-2"])
    assert report.changed


@pytest.mark.parametrize(
    "args",
    ['{"city": "Par', "[1, 2]", '"Paris"', "null", "42", '{"a": NaN}', "{} {}", "not json"],
)
def test_report_names_calls_whose_args_are_not_a_json_object(args: str) -> None:
    history = [USER, asks(call("c1", args=args)), result("c1"), ANSWER]
    _, report = normalize_history(history)
    assert report == HistoryRepair(truncated=["c1"])


@pytest.mark.parametrize(
    "args", ["", "{}", ' {"city": "Paris"} \n', '{"s": "\\ud83c\\udf27"}', '{"a": "\\ud800"}']
)
def test_empty_args_and_json_objects_are_not_truncated(args: str) -> None:
    history = [USER, asks(call("c1", args=args)), result("c1"), ANSWER]
    _, report = normalize_history(history)
    assert report.truncated == []


def test_truncated_args_stay_verbatim_and_the_history_is_unchanged() -> None:
    history = [USER, asks(call("c1", args='{"city": "Par')), result("c1"), ANSWER]
    repaired, report = normalize_history(history)
    assert repaired == history
    assert repaired[1].tool_calls[0].args == '{"city": "Par'
    assert not report.changed


def test_truncated_call_is_listed_on_every_pass() -> None:
    history = [USER, asks(call("c1", args='{"city": "Par'), call("c2"))]
    once, first = normalize_history(history)
    twice, second = normalize_history(once)
    assert first == HistoryRepair(synthesized=["c1", "c2"], truncated=["c1"])
    assert second == HistoryRepair(truncated=["c1"])
    assert twice == once


def test_normalize_is_idempotent_on_repaired_history() -> None:
    history = [USER, result("ghost"), asks(call("a"), call("b")), result("b"), ANSWER, result("a")]
    once, _ = normalize_history(history)
    twice, report = normalize_history(once)
    assert twice == once
    assert dump_messages(twice) == dump_messages(once)
    assert report == HistoryRepair()


# Many calls per turn, late and missing results: their order must not hang on str hashing.
_HASH_SEED_PROGRAM = """
from golem.history import normalize_history
from golem.messages import Message, ToolCall, dump_messages
ids = [f"call_{n}" for n in range(40)]
turn = Message.assistant(tool_calls=[ToolCall(id=i, name="t" + i, args="{") for i in ids])
history = [Message.user("go"), turn, *(Message.tool(i, "t", "ok") for i in ids[::3])]
history += [Message.user("late"), *(Message.tool(i, "t", "late") for i in ids[1::3])]
repaired, report = normalize_history(history)
print(dump_messages(repaired).decode(), report)
"""


def test_normalize_gives_the_same_bytes_under_any_hash_seed() -> None:
    outputs = {
        subprocess.run(
            [sys.executable, "-c", _HASH_SEED_PROGRAM],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(outputs) == 1
    [output] = outputs
    assert "synthesized=['call_2', 'call_5'" in output and "relocated=['call_1', 'call_4'" in output


def test_synthesized_results_carry_no_run_or_conversation_id() -> None:
    turn = asks(call("c1")).stamped("run-1", "conv-1")
    repaired, _ = normalize_history([USER, turn])
    assert (repaired[2].run_id, repaired[2].conversation_id) == ("", "")
    assert b"runId" not in dump_messages(repaired[2:])


def test_resupplied_history_keeps_the_stamps_it_carried_in() -> None:
    stamped = [m.stamped("run-0", "conv-0") for m in (USER, asks(call("c1")), result("ghost"))]
    repaired, _ = normalize_history(stamped)
    assert repaired[:2] == stamped[:2]
    assert [(m.run_id, m.conversation_id) for m in repaired[:2]] == [("run-0", "conv-0")] * 2


def test_normalize_never_mutates_its_input() -> None:
    history = [USER, result("ghost"), asks(call("c1", args="{")), ANSWER, result("c1")]
    before = dump_messages(history)
    snapshot = list(history)
    normalize_history(history)
    assert history == snapshot
    assert dump_messages(history) == before


def test_clean_history_comes_back_without_copying_messages() -> None:
    history = [USER, asks(call("c1")), result("c1"), ANSWER]
    repaired, report = normalize_history(history)
    assert repaired is not history
    assert all(a is b for a, b in zip(repaired, history, strict=True))
    assert report == HistoryRepair()
    assert not report.changed


def test_repair_keeps_unchanged_messages_as_the_same_objects() -> None:
    history = [USER, asks(call("c1")), ANSWER]
    repaired, _ = normalize_history(history)
    assert repaired[0] is USER and repaired[1] is history[1] and repaired[3] is ANSWER


def test_normalize_accepts_an_empty_history() -> None:
    assert normalize_history([]) == ([], HistoryRepair())


def test_system_and_unknown_fields_pass_through_repair() -> None:
    extra = Message.model_validate({"role": "user", "content": "hi", "priority": 3})
    history = [Message.system("be terse"), extra, asks(call("c1"))]
    repaired, _ = normalize_history(history)
    assert repaired[:2] == history[:2]
    assert repaired[1].model_extra == {"priority": 3}


def test_history_names_are_re_exported_from_the_package_root() -> None:
    import golem
    import golem.history as history

    for name in (
        "INTERRUPTED_RESULT",
        "HistoryRepair",
        "SanitizeReport",
        "UnsafePart",
        "HistoryProcessorError",
        "normalize_history",
        "sanitize_history",
        "trim_history",
        "budget_history",
    ):
        assert getattr(golem, name) is getattr(history, name)
