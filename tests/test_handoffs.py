"""Handoffs through both executors: a ``transfer_to_<name>`` call ends the caller's turn and
the target answers it, on the conversation so far, under its own instructions."""

from __future__ import annotations

from typing import Any

from delegation_agents import answer, calls, usage
from runners import Runner

from golem import Agent, Message, handoff_target
from golem.models import FunctionModel, ModelResponse
from golem.models.base import ToolDefinition


def recording(name: str, reply: Any, **options: Any) -> tuple[Agent[Any, Any], list[list[Message]]]:
    """An agent whose model answers ``reply(messages)`` and records what it was sent."""
    seen: list[list[Message]] = []

    def model(messages: list[Message], tools: Any) -> ModelResponse:
        seen.append(list(messages))
        return reply(messages)  # type: ignore[no-any-return]

    return Agent(FunctionModel(model), name=name, **options), seen


def hands_to(target: str, reason: str = "") -> Any:
    """A model that hands over on its first turn in a run, and answers once it is its turn."""

    def reply(messages: list[Message]) -> ModelResponse:
        args = {"reason": reason} if reason else {}
        return calls((f"h-{len(messages)}", f"transfer_to_{target}", args))

    return reply


async def test_a_handoff_ends_the_callers_turn_and_the_target_answers_it(runner: Runner) -> None:
    billing, billing_saw = recording(
        "billing",
        lambda m: answer(f"billing here ({len(m)} messages)", usage(7, 3)),
        instructions="You handle refunds.",
        description="Refunds and invoices.",
    )
    triage, triage_saw = recording(
        "triage", hands_to("billing", "a refund"), instructions="Route.", handoffs=[billing]
    )

    result = await runner(triage, "I was charged twice")

    assert result.agent == "billing"
    assert handoff_target(result) == "billing"
    assert result.output == "billing here (4 messages)"
    assert triage_saw[0][0] == Message.system("Route.")
    [target_run] = result.sub_runs
    roles = [(m.role, m.run_id) for m in result.messages]
    assert roles == [
        ("user", result.run_id),
        ("assistant", result.run_id),
        ("tool", result.run_id),
        ("assistant", target_run),
    ]
    assert result.messages[2].content == "Transferred to billing."
    # The target's instructions replace the caller's; it sees the conversation so far.
    [request] = billing_saw
    assert request[0] == Message.system("You handle refunds.")
    assert [m.role for m in request[1:]] == ["user", "assistant", "tool"]
    assert result.usage == usage(10, 5)  # triage's own turn
    assert result.total_usage == usage(17, 8)


async def test_handoff_tools_are_named_after_their_targets_with_an_optional_reason(
    runner: Runner,
) -> None:
    shipping, _ = recording("shipping", lambda m: answer("shipped"))
    seen: list[list[ToolDefinition]] = []

    def triage_model(messages: list[Message], tools: list[ToolDefinition]) -> ModelResponse:
        seen.append(tools)
        return calls(("h1", "transfer_to_shipping", {}))

    triage = Agent(FunctionModel(triage_model), name="triage", handoffs=[shipping])

    result = await runner(triage, "where is it?")

    assert result.output == "shipped"
    [tool] = seen[0]
    assert tool.name == "transfer_to_shipping"
    assert tool.description == (
        "Hand the conversation over to the shipping agent. It answers from then on."
    )
    assert tool.parameters["properties"] == {"reason": {"default": "", "type": "string"}}
    assert "required" not in tool.parameters


async def test_only_the_first_handoff_of_a_turn_counts(runner: Runner) -> None:
    billing, _ = recording("billing", lambda m: answer("billing answers"))
    shipping, shipping_saw = recording("shipping", lambda m: answer("shipping answers"))
    triage, _ = recording(
        "triage",
        lambda m: calls(("a", "transfer_to_billing", {}), ("b", "transfer_to_shipping", {})),
        handoffs=[billing, shipping],
    )

    result = await runner(triage, "help")

    assert result.agent == "billing"
    tools = [m for m in result.messages if m.role == "tool"]
    assert [(m.tool_call_id, m.failed) for m in tools] == [("a", False), ("b", True)]
    assert tools[1].content == "the conversation is handed over to billing already"
    assert shipping_saw == []


async def test_the_callers_next_run_does_not_follow_the_handoff_by_itself(
    runner: Runner,
) -> None:
    billing, _ = recording("billing", lambda m: answer("billing answers"))

    def triage_reply(messages: list[Message]) -> ModelResponse:
        if any(m.role == "tool" for m in messages):
            return answer("triage answers again")
        return calls(("h1", "transfer_to_billing", {}))

    triage, _ = recording("triage", triage_reply, handoffs=[billing])
    first = await runner(triage, "help")
    assert handoff_target(first) == "billing"

    again = await runner(triage, "and now?", history=first.messages)

    # The caller runs again (golem.handoff_target says who should have): no conversation
    # object remembers the handoff in process, so the caller routes the next turn.
    assert again.agent == "triage" and handoff_target(again) is None
    assert again.output == "triage answers again"
    routed = await runner(billing, "and now?", history=first.messages)
    assert routed.output == "billing answers"


async def test_a_handoff_chain_answers_with_the_last_agent(runner: Runner) -> None:
    shipping, _ = recording("shipping", lambda m: answer("shipping answers"))
    billing, _ = recording("billing", hands_to("shipping"), handoffs=[shipping])
    triage, _ = recording("triage", hands_to("billing"), handoffs=[billing])

    result = await runner(triage, "help")

    assert result.agent == "shipping"
    assert result.output == "shipping answers"
    assert len(result.sub_runs) == 1  # billing; shipping is billing's handoff
    assert result.total_usage == usage(30, 15)


async def test_the_triage_example_runs_offline_in_process(capsys: Any) -> None:
    from examples import triage

    await triage.in_process()

    out = capsys.readouterr().out
    assert "triage handed over to billing, whose refund waits for approval" in out
    assert "billing answered: 'Done: refunded 19.90 on order 42.'" in out
    assert "(sees 1 message) order 42" in out  # the delegate saw only what it was asked
