"""The offline models' usage estimate: counted by what each request adds, the same figures."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from golem.agent import Agent
from golem.messages import Message, ToolCall, Usage
from golem.models.base import ModelRequest
from golem.models.function import FunctionModel, ScriptedModel, SentChars, estimate_usage


def whole(messages: list[Message]) -> int:
    return sum(len(m.content) + sum(len(c.args) for c in m.tool_calls) for m in messages)


messages = st.builds(
    lambda text, args: Message.assistant(
        text, tool_calls=[ToolCall(id=f"c{i}", name="t", args=a) for i, a in enumerate(args)]
    ),
    st.text(max_size=20),
    st.lists(st.text(max_size=10), max_size=2),
)


@given(st.lists(st.tuples(st.integers(0, 3), st.lists(messages, max_size=4)), max_size=8))
def test_a_request_counts_as_much_as_counting_it_whole(
    steps: list[tuple[int, list[Message]]],
) -> None:
    """Requests that grow, restart, drop messages or hold equal but new copies."""
    sent = SentChars()
    history: list[Message] = []
    for keep_from, new in steps:
        history = [*history[keep_from if keep_from < 3 else 0 :], *new]
        if keep_from == 3:
            history = [m.model_copy() for m in history]  # equal messages, other objects
        assert sent(history) == whole(history)


def fresh_usage(requests: list[ModelRequest], answers: list[Message]) -> Usage:
    """What the run's requests cost, each counted whole."""
    total = Usage()
    for request, answer in zip(requests, answers, strict=True):
        total += estimate_usage(request, answer)
    return total


def test_a_runs_usage_is_what_counting_each_request_whole_gives() -> None:
    def answer(messages: list[Message], tools: object) -> Message:
        if len(messages) > 6:
            return Message.assistant("done")
        return Message.assistant(
            tool_calls=[ToolCall(id=f"c{len(messages)}", name="echo", args="{}")]
        )

    model = FunctionModel(answer)
    agent = Agent(model, instructions="Echo.")

    @agent.tool
    def echo() -> str:
        return "echoed " * 10

    result = agent.run_sync("go")
    answers = [m for m in result.messages if m.role == "assistant"]
    assert len(model.requests) == 4
    assert result.usage == fresh_usage(model.requests, answers)


def test_a_model_shared_by_two_runs_counts_each_request_whole() -> None:
    model = ScriptedModel([Message.assistant("a"), Message.assistant("b")])
    agent = Agent(model)
    first = agent.run_sync("a long first prompt " * 5)
    second = agent.run_sync("short")
    assert [first.usage, second.usage] == [
        fresh_usage([r], [a])
        for r, a in zip(model.requests, [first.messages[-1], second.messages[-1]], strict=True)
    ]
