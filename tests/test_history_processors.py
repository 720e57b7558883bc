"""trim_history, budget_history and the token counters."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Sequence

import pytest

from golem.history import (
    HistoryProcessorError,
    budget_history,
    estimate_tokens,
    tiktoken_counter,
    trim_history,
)
from golem.messages import Message, Part, ThinkingBlock, ToolCall


def exchange(n: int) -> list[Message]:
    """A user prompt, a tool turn with its result and an answer: four messages."""
    call = ToolCall(id=f"c{n}", name="weather", args='{"city": "Paris"}')
    return [
        Message.user(f"question {n}"),
        Message.assistant(tool_calls=[call]),
        Message.tool(f"c{n}", "weather", "sunny"),
        Message.assistant(f"answer {n}"),
    ]


HISTORY = exchange(1) + exchange(2) + exchange(3)


def test_trim_keeps_the_newest_messages_when_the_cut_lands_on_a_user_message() -> None:
    assert trim_history(8)(HISTORY) == HISTORY[4:]


def test_trim_returns_short_histories_unchanged() -> None:
    only_results = [Message.tool("c1", "t", "x"), Message.tool("c2", "t", "y")]
    assert trim_history(12)(HISTORY) == HISTORY
    assert trim_history(2)(only_results) == only_results


def test_trim_returns_a_new_list_so_the_callers_history_is_never_aliased() -> None:
    trimmed = trim_history(50)(HISTORY)
    assert trimmed == HISTORY and trimmed is not HISTORY


def test_trim_advances_past_tool_results_whose_call_was_trimmed() -> None:
    # The newest 6 start at c2's result; its call was cut.
    assert trim_history(6)(HISTORY) == HISTORY[8:]


def test_trim_advances_past_assistant_tool_call_turns() -> None:
    # The newest 7 start at c2's tool-call turn: a request cannot open with the model's turn.
    assert trim_history(7)(HISTORY) == HISTORY[8:]


def test_trim_advances_past_plain_assistant_answers_and_system_messages() -> None:
    history = [Message.user("a"), Message.system("s"), Message.assistant("b"), Message.user("c")]
    assert trim_history(3)(history) == [Message.user("c")]


def test_trim_fails_when_a_cut_leaves_nothing_that_can_open_a_request() -> None:
    history = [Message.user("hi"), *[Message.tool(f"c{i}", "t", "x") for i in range(3)]]
    with pytest.raises(HistoryProcessorError) as info:
        trim_history(2)(history)
    assert str(info.value) == (
        "trim_history(2): after cutting 2 of 4 messages, no user message is left to open the "
        "request (only tool results, assistant turns or system prompts)"
    )


def test_trim_to_one_message_keeps_a_final_user_message() -> None:
    assert trim_history(1)([*HISTORY, Message.user("next")]) == [Message.user("next")]


def test_history_processor_error_is_a_value_error() -> None:
    assert issubclass(HistoryProcessorError, ValueError)


@pytest.mark.parametrize("bad", [0, -3])
def test_trim_rejects_a_non_positive_size_at_construction(bad: int) -> None:
    with pytest.raises(ValueError, match=f"max_messages >= 1, got {bad}"):
        trim_history(bad)


def test_processors_are_named_after_the_call_that_built_them() -> None:
    trim = trim_history(20)
    budget = budget_history(estimate_tokens, 8000)
    assert (repr(trim), trim.__name__) == ("trim_history(20)", "trim_history(20)")  # type: ignore[attr-defined]
    assert repr(budget) == "budget_history(estimate_tokens, 8000)"


def test_trim_never_mutates_its_input() -> None:
    history = list(HISTORY)
    trim_history(5)(history)
    assert history == HISTORY


def counting(cost: int) -> Callable[[list[Message]], int]:
    def count(messages: Sequence[Message]) -> int:
        return cost * len(messages)

    return count


def test_budget_keeps_the_newest_messages_that_fit() -> None:
    assert budget_history(counting(10), 80)(HISTORY) == HISTORY[4:]


def test_budget_applies_the_same_boundary_rule() -> None:
    # 70 tokens fit 7 messages, which start at c2's tool-call turn: advance to the next user.
    assert budget_history(counting(10), 79)(HISTORY) == HISTORY[8:]


def test_budget_returns_a_history_that_fits_unchanged() -> None:
    assert budget_history(counting(10), 120)(HISTORY) == HISTORY


def test_budget_cuts_when_only_the_oldest_message_overflows() -> None:
    history = [Message.user("old"), Message.user("a"), Message.user("b")]
    assert budget_history(counting(10), 29)(history) == history[1:]


def test_budget_of_one_token_keeps_a_message_that_costs_one() -> None:
    history = [Message.assistant("x"), Message.user("y")]
    assert budget_history(counting(1), 1)(history) == [Message.user("y")]


def test_budget_counts_each_message_once_when_the_history_fits() -> None:
    seen: list[str] = []

    def count(messages: Sequence[Message]) -> int:
        seen.extend(m.content for m in messages)
        return 1

    assert budget_history(count, 100)(HISTORY) == HISTORY
    assert seen == [m.content for m in reversed(HISTORY)]


def test_budget_is_named_after_a_counter_object_by_its_type() -> None:
    class Words:
        def __call__(self, messages: list[Message]) -> int:
            return sum(len(m.content.split()) for m in messages)

    assert repr(budget_history(Words(), 100)) == "budget_history(Words, 100)"


def test_budget_fails_when_even_the_newest_message_does_not_fit() -> None:
    with pytest.raises(HistoryProcessorError, match=r"^budget_history\(count, 5\)"):
        budget_history(counting(10), 5)(HISTORY)


def test_budget_counts_one_message_at_a_time_newest_first_and_stops_at_the_overflow() -> None:
    seen: list[str] = []

    def count(messages: Sequence[Message]) -> int:
        seen.extend(m.content for m in messages)
        return 10

    with pytest.raises(HistoryProcessorError):
        budget_history(count, 25)(HISTORY)
    assert seen == ["answer 3", "sunny", ""]


@pytest.mark.parametrize("bad", [0, -1])
def test_budget_rejects_a_non_positive_budget_at_construction(bad: int) -> None:
    with pytest.raises(ValueError, match=f"max_tokens >= 1, got {bad}"):
        budget_history(estimate_tokens, bad)


def test_estimate_tokens_counts_about_four_chars_per_token_plus_overhead() -> None:
    assert estimate_tokens([]) == 0
    assert estimate_tokens([Message.user("")]) == 4
    assert estimate_tokens([Message.user("abcd")]) == 5
    assert estimate_tokens([Message.user("abcde")]) == 6


def test_estimate_tokens_counts_calls_thinking_tool_names_and_parts() -> None:
    assistant = Message.assistant(
        "ab",
        tool_calls=[ToolCall(id="ignored", name="weather", args='{"c":"P"}')],
        thinking=[ThinkingBlock(text="hmm"), ThinkingBlock(redacted="opaque")],
    )
    # 2 + 7 + 9 + 3 = 21 chars -> 6 tokens, plus 4 overhead.
    assert estimate_tokens([assistant]) == 10
    # "weather" (7) + "sunny" (5) = 12 chars -> 3 tokens, plus 4 overhead.
    assert estimate_tokens([Message.tool("c1", "weather", "sunny")]) == 7
    with_part = Message.user("", parts=[Part(kind="image", url="https://a/b.png")])
    assert estimate_tokens([with_part]) == 4 + 256


def test_estimate_tokens_is_additive_over_messages() -> None:
    assert estimate_tokens(HISTORY) == sum(estimate_tokens([m]) for m in HISTORY)


def test_tiktoken_counter_without_tiktoken_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tiktoken", None)
    with pytest.raises(ImportError) as info:
        tiktoken_counter()
    assert str(info.value) == (
        "tiktoken_counter needs the tiktoken package: "
        "pip install 'golem-temporal[tiktoken]' (or use estimate_tokens)"
    )


def test_tiktoken_counter_counts_with_the_named_encoding(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []

    class Encoding:
        def encode(self, text: str) -> list[str]:
            return text.split()

    def get_encoding(name: str) -> Encoding:
        asked.append(name)
        return Encoding()

    fake = types.ModuleType("tiktoken")
    fake.get_encoding = get_encoding  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tiktoken", fake)
    counter = tiktoken_counter("cl100k_base")
    assert asked == ["cl100k_base"]
    assert counter([Message.user("one two three"), Message.assistant("four")]) == 4 + 3 + 4 + 1
    assert counter.__name__ == "tiktoken_counter('cl100k_base')"
    with_part = Message.user("look", parts=[Part(kind="image", url="https://a/b.png")])
    assert counter([with_part]) == 4 + 256 + 1
    tiktoken_counter()
    assert asked == ["cl100k_base", "o200k_base"]
