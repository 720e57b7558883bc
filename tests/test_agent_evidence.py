"""Partial-evidence accounting through both executors: what a failed run's ``partial`` holds
and counts (each test pins a bug that once survived the suite)."""

from __future__ import annotations

import pytest
from agents import ask, call, scripted
from pydantic import BaseModel
from runners import Runner

from golem.history.repair import HistoryRepair, normalize_history
from golem.messages import Message, ToolCall
from golem.models.base import ModelHTTPError
from golem.results import RunError
from golem.usage import UsageLimits


async def test_an_approved_call_that_ran_stays_in_the_evidence_when_no_turn_completed(
    runner: Runner,
) -> None:
    agent, _ = scripted([ask(call("c1", "transfer", amount=5)), ModelHTTPError(400, "bad request")])
    sent: list[int] = []

    @agent.tool(requires_approval=True)
    def transfer(amount: int) -> str:
        """Move money."""
        sent.append(amount)
        return f"sent {amount}"

    paused = await runner(agent, "pay 5")

    with pytest.raises(RunError) as caught:
        await runner(agent, history=paused.messages, approvals={"c1": True})

    assert caught.value.stage == "model"
    assert sent == [5]
    evidence = caught.value.partial
    assert evidence is not None  # no model turn completed, but the transfer happened
    assert evidence.messages[-1].content == "sent 5"
    assert evidence.messages[-1].tool_call_id == "c1"
    assert (evidence.requests, evidence.tool_calls) == (1, 1)


class City(BaseModel):
    name: str


async def test_a_correction_prompt_is_not_evidence_of_a_completed_turn(runner: Runner) -> None:
    agent, model = scripted(
        [Message.assistant("Paris, I think")],
        output_type=City,
        usage_limits=UsageLimits(request_limit=1),
    )

    with pytest.raises(RunError) as caught:
        await runner(agent, "capital of France?")

    assert caught.value.stage == "usage"
    evidence = caught.value.partial
    assert evidence is not None
    # The correction was queued for a next turn that never happened.
    assert [(m.role, m.content) for m in evidence.messages] == [
        ("user", "capital of France?"),
        ("assistant", "Paris, I think"),
    ]
    assert len(model.requests) == 1


def square(x: int) -> int:
    """Square."""
    return x * x


async def test_refused_calls_are_not_counted_as_tool_executions(runner: Runner) -> None:
    agent, _ = scripted(
        [
            ask(
                call("c1", "square", x=3),
                call("c2", "nope"),
                ToolCall(id="c3", name="square", args='{"x": "three"}'),
            ),
            Message.assistant("done"),
        ]
    )
    agent.tool(name="square")(square)

    result = await runner(agent, "go")

    assert result.tool_calls == 1
    assert [m.failed for m in result.messages if m.role == "tool"] == [False, True, True]


async def test_refused_calls_are_not_counted_in_a_failed_runs_evidence(runner: Runner) -> None:
    agent, _ = scripted(
        [
            ask(call("c1", "square", x=3), call("c2", "nope")),
            ModelHTTPError(400, "bad request"),
        ]
    )
    agent.tool(name="square")(square)

    with pytest.raises(RunError) as caught:
        await runner(agent, "go")

    evidence = caught.value.partial
    assert evidence is not None
    assert (evidence.requests, evidence.tool_calls) == (2, 1)
    assert normalize_history(evidence.messages)[1] == HistoryRepair()
