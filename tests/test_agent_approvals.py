"""Approvals: a tool that needs a person's decision pauses the run until a later run decides."""

from __future__ import annotations

import json
from typing import Any

import pytest
from agents import answered, ask, call, scripted
from runners import Runner

from golem import ApprovalPolicy, Approve, Ask, Deny, Rule, ToolFailed
from golem.agent import Agent
from golem.approvals import MAX_REASON_CHARS
from golem.messages import Decision, Message
from golem.models.function import ScriptedModel
from golem.phases.batch import DENIED_RESULT
from golem.results import RunError


def undated(messages: list[Message]) -> list[Message]:
    """``messages`` with the time of each decision left out (the clock's, not the test's)."""
    return [
        m.model_copy(update={"decision": m.decision.model_copy(update={"at": ""})})
        if m.decision is not None
        else m
        for m in messages
    ]


def decided(message: Message, **decision: Any) -> Message:
    return message.model_copy(update={"decision": Decision(**decision)})


def transfer_agent(*answers: Message) -> tuple[Agent[Any, Any], ScriptedModel, list[int]]:
    agent, model = scripted(list(answers))
    sent: list[int] = []

    @agent.tool(requires_approval=True)
    def transfer(amount: int) -> str:
        """Move money."""
        sent.append(amount)
        return f"sent {amount}"

    @agent.tool
    def balance() -> str:
        """The balance."""
        return "100"

    return agent, model, sent


def test_an_agent_may_pause_once_it_has_a_tool_that_needs_approval() -> None:
    agent, _ = scripted([])
    agent.tool(name="balance")(lambda: "100")
    assert not agent.may_pause
    agent.tool(name="transfer", requires_approval=True)(lambda: "sent")
    assert agent.may_pause


async def test_a_tool_requiring_approval_pauses_the_run(runner: Runner) -> None:
    agent, _, sent = transfer_agent(ask(call("c1", "transfer", amount=5)))

    result = await runner(agent, "pay 5")

    assert result.output is None
    assert result.pending_approvals == [call("c1", "transfer", amount=5)]
    assert result.paused
    assert sent == []
    ids = (result.run_id, result.conversation_id)
    assert result.messages == [
        Message.user("pay 5").stamped(*ids),
        answered(ask(call("c1", "transfer", amount=5))).stamped(*ids),
    ]


async def test_an_approved_call_runs_and_the_run_continues(runner: Runner) -> None:
    agent, model, sent = transfer_agent(
        ask(call("c1", "transfer", amount=5)), Message.assistant("done")
    )
    paused = await runner(agent, "pay 5")

    result = await runner(agent, history=paused.messages, approvals={"c1": True})

    assert sent == [5]
    assert result.output == "done"
    assert result.pending_approvals == []
    assert result.conversation_id == paused.conversation_id
    assert result.run_id != paused.run_id
    assert undated(result.messages) == [
        *paused.messages,
        *[
            m.stamped(result.run_id, result.conversation_id)
            for m in (
                decided(Message.tool("c1", "transfer", "sent 5"), approved=True),
                answered(Message.assistant("done")),
            )
        ],
    ]
    assert model.requests[1].messages == result.messages[:-1]
    assert result.messages[2].decision is not None and result.messages[2].decision.at


async def test_a_denied_call_is_closed_with_a_failed_denied_result(runner: Runner) -> None:
    agent, model, sent = transfer_agent(
        ask(call("c1", "transfer", amount=500)), Message.assistant("ok, not sent")
    )
    paused = await runner(agent, "pay 500")

    result = await runner(agent, history=paused.messages, approvals={"c1": False})

    assert sent == []
    assert result.output == "ok, not sent"
    assert undated(model.requests[1].messages)[-1] == decided(
        Message.tool("c1", "transfer", DENIED_RESULT, failed=True), approved=False
    ).stamped(result.run_id, result.conversation_id)


async def test_a_paused_batch_waits_whole_and_runs_in_call_order_once_decided(
    runner: Runner,
) -> None:
    agent, _, sent = transfer_agent(
        ask(
            call("c1", "balance"),
            call("c2", "transfer", amount=5),
            call("c3", "transfer", amount=7),
        ),
        Message.assistant("done"),
    )
    paused = await runner(agent, "check, then pay twice")

    assert paused.pending_approvals == [
        call("c2", "transfer", amount=5),
        call("c3", "transfer", amount=7),
    ]
    assert paused.tool_calls == 0

    result = await runner(agent, history=paused.messages, approvals={"c2": True, "c3": False})

    assert sent == [5]
    assert [(m.tool_call_id, m.content, m.failed) for m in result.messages[2:5]] == [
        ("c1", "100", False),
        ("c2", "sent 5", False),
        ("c3", DENIED_RESULT, True),
    ]
    assert result.output == "done"


async def test_deciding_some_calls_keeps_the_run_paused_on_the_rest(
    runner: Runner, request: pytest.FixtureRequest
) -> None:
    agent, model, sent = transfer_agent(
        ask(call("c1", "transfer", amount=5), call("c2", "transfer", amount=7)),
        Message.assistant("done"),
    )
    paused = await runner(agent, "pay twice")

    still = await runner(agent, history=paused.messages, approvals={"c1": True})

    assert sent == [5]
    assert still.output is None
    assert still.pending_approvals == [call("c2", "transfer", amount=7)]
    assert len(model.requests) == 1

    done = await runner(agent, history=still.messages, approvals={"c2": True})

    assert sent == [5, 7]
    assert done.output == "done"
    assert [m.content for m in done.messages if m.role == "tool"] == ["sent 5", "sent 7"]


async def test_approvals_naming_a_call_that_is_not_pending_fail_at_history(
    runner: Runner,
) -> None:
    agent, model, sent = transfer_agent(ask(call("c1", "transfer", amount=5)))
    paused = await runner(agent, "pay 5")

    with pytest.raises(RunError) as caught:
        await runner(agent, history=paused.messages, approvals={"c9": True})

    assert caught.value.stage == "history"
    assert "['c9']" in str(caught.value)
    assert sent == []
    assert len(model.requests) == 1


async def test_a_new_prompt_instead_of_a_decision_closes_the_pending_call_by_repair(
    runner: Runner,
) -> None:
    agent, model, sent = transfer_agent(
        ask(call("c1", "transfer", amount=5)), Message.assistant("fine, nothing sent")
    )
    paused = await runner(agent, "pay 5")

    result = await runner(agent, "never mind", history=paused.messages)

    assert sent == []
    assert result.output == "fine, nothing sent"
    assert (
        model.requests[1].messages[2].content
        == "interrupted before execution; no result was produced"
    )


async def test_an_approval_with_edited_arguments_runs_them_and_the_transcript_keeps_both(
    runner: Runner,
) -> None:
    agent, model, sent = transfer_agent(
        ask(call("c1", "transfer", amount=500)), Message.assistant("sent 50 instead")
    )
    paused = await runner(agent, "pay 500")

    result = await runner(
        agent, history=paused.messages, approvals={"c1": Approve(args={"amount": 50})}
    )

    assert sent == [50]
    assert result.messages[1].tool_calls == [call("c1", "transfer", amount=500)]
    tool = result.messages[2]
    assert tool.decision is not None
    assert (tool.decision.approved, tool.decision.args) == (True, '{"amount":50}')
    told = model.requests[1].messages[-1].content
    assert told == (
        "[a person changed this call's arguments before it ran; it ran with "
        '{"amount":50}]\nsent 50'
    )


async def test_edited_arguments_the_tool_would_not_take_are_refused_before_the_run(
    runner: Runner,
) -> None:
    agent, model, sent = transfer_agent(ask(call("c1", "transfer", amount=500)))
    paused = await runner(agent, "pay 500")

    with pytest.raises(ValueError) as caught:
        await runner(
            agent, history=paused.messages, approvals={"c1": Approve(args={"amount": "lots"})}
        )

    assert str(caught.value) == (
        "the edited arguments are invalid: call 'c1' (transfer): invalid arguments: amount: "
        "Input should be a valid integer, unable to parse string as an integer"
    )
    assert sent == []
    assert len(model.requests) == 1


async def test_a_denial_reason_is_what_the_model_reads_as_the_result(runner: Runner) -> None:
    agent, model, sent = transfer_agent(
        ask(call("c1", "transfer", amount=500)), Message.assistant("I can offer store credit")
    )
    paused = await runner(agent, "pay 500")

    reason = "over the limit; offer store credit"
    result = await runner(agent, history=paused.messages, approvals={"c1": Deny(reason=reason)})

    assert sent == []
    assert undated(model.requests[1].messages)[-1] == decided(
        Message.tool("c1", "transfer", reason, failed=True), approved=False, reason=reason
    ).stamped(result.run_id, result.conversation_id)


async def test_a_denial_reason_over_the_limit_is_refused(runner: Runner) -> None:
    agent, model, _ = transfer_agent(ask(call("c1", "transfer", amount=500)))
    paused = await runner(agent, "pay 500")

    with pytest.raises(ValueError) as caught:
        await runner(
            agent,
            history=paused.messages,
            approvals={"c1": Deny(reason="x" * (MAX_REASON_CHARS + 1))},
        )

    assert str(caught.value) == (
        f"the denial of call 'c1' has a reason of {MAX_REASON_CHARS + 1} characters, over "
        f"the limit of {MAX_REASON_CHARS}: shorten it"
    )
    assert len(model.requests) == 1


async def test_a_decision_of_the_wrong_type_is_refused_naming_the_call(runner: Runner) -> None:
    agent, model, _ = transfer_agent(ask(call("refund-7", "transfer", amount=5)))
    paused = await runner(agent, "pay 5")

    with pytest.raises(ValueError) as caught:
        await runner(agent, history=paused.messages, approvals={"refund-7": "yes"})  # type: ignore[dict-item]

    assert str(caught.value) == (
        "the decision for call 'refund-7' is 'yes' (str): give True, False, "
        "Approve(args=..., always=...) or Deny(reason=...)"
    )
    assert len(model.requests) == 1


async def test_deciding_a_call_again_is_refused_naming_who_decided_first(runner: Runner) -> None:
    agent, _, sent = transfer_agent(
        ask(call("c1", "transfer", amount=5), call("c2", "transfer", amount=7)),
        Message.assistant("done"),
    )
    paused = await runner(agent, "pay twice")
    first = Decision(approved=True, by="alice")
    still = await runner(agent, history=paused.messages, approvals={"c1": first})

    with pytest.raises(RunError) as caught:
        await runner(agent, history=still.messages, approvals={"c1": False})

    assert caught.value.stage == "history"
    assert caught.value.detail == "calls ['c1'] are decided already (c1 by alice); pending: ['c2']"
    assert sent == [5]


def refund_agent(
    *answers: Message, over: int = 100
) -> tuple[Agent[Any, Any], ScriptedModel, list[int], list[Any]]:
    """``refund`` waits for a person only when the amount is over ``over``; the predicate
    sees the run's context and the validated arguments."""
    agent, model = scripted(list(answers))
    refunded: list[int] = []
    seen: list[Any] = []

    def large(ctx: Any, args: dict[str, Any]) -> bool:
        seen.append((ctx.tool_name, args))
        return bool(args["amount"] > over)

    @agent.tool(requires_approval=large)
    def refund(amount: int) -> str:
        """Refund an order."""
        refunded.append(amount)
        return f"refunded {amount}"

    return agent, model, refunded, seen


async def test_a_predicate_decides_which_calls_wait_on_their_validated_arguments(
    runner: Runner,
) -> None:
    agent, _, refunded, seen = refund_agent(
        ask(call("small", "refund", amount=20), call("large", "refund", amount=500)),
        Message.assistant("done"),
    )

    paused = await runner(agent, "refund both")

    assert paused.pending_approvals == [call("large", "refund", amount=500)]
    assert refunded == []  # the batch waits whole
    result = await runner(agent, history=paused.messages, approvals={"large": True})
    assert refunded == [20, 500]
    assert result.output == "done"
    if runner.name == "local":  # durably the predicate runs in the worker's workflow
        assert seen[:2] == [("refund", {"amount": 20}), ("refund", {"amount": 500})]


async def test_a_predicate_that_raises_sends_the_call_to_a_person(runner: Runner) -> None:
    agent, _ = scripted([ask(call("c1", "refund", amount=1)), Message.assistant("done")])

    def broken(ctx: Any, args: dict[str, Any]) -> bool:
        raise RuntimeError("no limits table")

    @agent.tool(requires_approval=broken)
    def refund(amount: int) -> str:
        """Refund an order."""
        return f"refunded {amount}"

    assert agent.may_pause
    paused = await runner(agent, "refund 1")

    assert paused.pending_approvals == [call("c1", "refund", amount=1)]  # never fails open


async def test_a_call_whose_arguments_are_invalid_does_not_wait_and_the_model_is_told(
    runner: Runner,
) -> None:
    agent, model, refunded, _ = refund_agent(
        ask(call("c1", "refund", amount="lots")), Message.assistant("sorry")
    )

    result = await runner(agent, "refund lots")

    assert not result.paused and refunded == []
    assert model.requests[1].messages[-1].failed
    assert model.requests[1].messages[-1].content.startswith("tool 'refund': invalid arguments")


async def test_approve_always_lets_later_calls_of_the_tool_run_without_asking(
    runner: Runner,
) -> None:
    agent, _, sent = transfer_agent(
        ask(call("c1", "transfer", amount=5)),
        Message.assistant("sent"),
        ask(call("c2", "transfer", amount=7)),
        Message.assistant("sent again"),
    )
    paused = await runner(agent, "pay 5")
    first = await runner(
        agent,
        history=paused.messages,
        approvals={"c1": Decision(approved=True, always=True, by="alice")},
    )

    later = await runner(agent, "pay 7", history=first.messages)

    assert not later.paused and later.output == "sent again"
    assert sent == [5, 7]
    standing = later.messages[-2].decision
    assert standing is not None
    assert (standing.approved, standing.always, standing.by) == (True, True, "alice")


def desk_agent(
    *answers: Message, policy: ApprovalPolicy
) -> tuple[Agent[Any, Any], ScriptedModel, list[str]]:
    """``lookup`` (asks nobody), ``refund`` (needs approval) and ``note`` (asks nobody),
    under ``policy``; ``ran`` records what executed."""
    agent, model = scripted(list(answers), approval_policy=policy)
    ran: list[str] = []

    @agent.tool
    def lookup(order: int) -> str:
        """Look an order up."""
        ran.append(f"lookup {order}")
        return f"order {order}"

    @agent.tool(requires_approval=True)
    def refund(amount: int) -> str:
        """Refund."""
        ran.append(f"refund {amount}")
        return f"refunded {amount}"

    @agent.tool
    def note(text: str) -> str:
        """Write a note."""
        ran.append(f"note {text}")
        return "noted"

    return agent, model, ran


async def test_policy_rules_allow_deny_and_ask_first_match_wins_else_the_tool_decides(
    runner: Runner,
) -> None:
    policy = ApprovalPolicy(
        rules=[
            Rule(tool="look*", decide="allow"),
            Rule(
                tool="refund",
                when=lambda ctx, args: args["amount"] > 1000,
                decide="deny",
                reason="refunds over 1000 go through finance",
            ),
            Rule(tool="refund", when=lambda ctx, args: args["amount"] < 10, decide="allow"),
            Rule(tool="note", decide="ask"),
        ]
    )
    agent, _, ran = desk_agent(
        ask(
            call("l1", "lookup", order=1),
            call("r1", "refund", amount=5000),
            call("r2", "refund", amount=5),
            call("r3", "refund", amount=50),
            call("n1", "note", text="hi"),
        ),
        Message.assistant("done"),
        policy=policy,
    )

    paused = await runner(agent, "go")

    assert [c.id for c in paused.pending_approvals] == ["r3", "n1"]
    result = await runner(agent, history=paused.messages, approvals={"r3": True, "n1": False})
    assert ran == ["lookup 1", "refund 5", "refund 50"]
    tools = {m.tool_call_id: m for m in result.messages if m.role == "tool"}
    assert tools["r1"].content == "refunds over 1000 go through finance" and tools["r1"].failed
    assert tools["r1"].decision is not None and tools["r1"].decision.by == "policy:refund"
    assert tools["l1"].decision is not None and tools["l1"].decision.by == "policy:look*"


async def test_an_evaluator_decides_first_and_never_fails_open(runner: Runner) -> None:
    async def reviewer(ctx: Any, call: Any) -> Any:
        amount = json.loads(call.args)["amount"]
        if amount == 1:
            return Approve()
        if amount == 2:
            return Deny(reason="the reviewer says no")
        if amount == 3:
            return Ask(reason="a person should look")
        if amount == 4:
            raise RuntimeError("reviewer down")
        return "maybe"  # not an answer

    agent, _, ran = desk_agent(
        ask(*[call(f"r{n}", "refund", amount=n) for n in (1, 2, 3, 4, 5)]),
        Message.assistant("done"),
        policy=ApprovalPolicy(evaluator=reviewer),
    )

    paused = await runner(agent, "go")

    assert [c.id for c in paused.pending_approvals] == ["r3", "r4", "r5"]
    assert ran == []  # the batch waits whole for the person
    decided = dict.fromkeys(["r3", "r4", "r5"], False)
    result = await runner(agent, history=paused.messages, approvals=decided)
    assert ran == ["refund 1"]
    tools = {m.tool_call_id: m for m in result.messages if m.role == "tool"}
    assert tools["r1"].decision is not None and tools["r1"].decision.by == "evaluator:reviewer"
    assert tools["r2"].content == "the reviewer says no"


def date_agent(*answers: Message) -> tuple[Agent[Any, Any], ScriptedModel]:
    """``pick_date`` runs in the application; ``transfer`` needs a person."""
    agent, model = scripted(list(answers))
    agent.external_tool(
        "pick_date",
        "Ask the user for a date",
        {"type": "object", "properties": {"why": {"type": "string"}}},
        result_schema={"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"},
    )

    @agent.tool(requires_approval=True)
    def transfer(amount: int) -> str:
        """Move money."""
        return f"sent {amount}"

    return agent, model


async def test_a_client_run_tool_waits_for_the_applications_result_beside_an_approval(
    runner: Runner,
) -> None:
    agent, _ = date_agent(
        ask(call("d1", "pick_date", why="delivery"), call("t1", "transfer", amount=5)),
        Message.assistant("done"),
    )
    assert agent.may_pause
    assert [t.name for t in agent.tool_definitions] == ["pick_date", "transfer"]

    paused = await runner(agent, "deliver and pay")

    assert paused.pending_calls == [call("d1", "pick_date", why="delivery")]
    assert paused.pending_approvals == [call("t1", "transfer", amount=5)]
    with pytest.raises(ValueError) as bad:
        await runner(agent, history=paused.messages, tool_results={"d1": "soon"})
    result = await runner(
        agent, history=paused.messages, approvals={"t1": True}, tool_results={"d1": "2026-12-24"}
    )
    assert str(bad.value) == (
        "the result for call 'd1' does not match its schema: "
        "'soon' does not match '^\\\\d{4}-\\\\d{2}-\\\\d{2}$'"
    )
    tools = {m.tool_call_id: m for m in result.messages if m.role == "tool"}
    assert (tools["d1"].content, tools["d1"].failed) == ("2026-12-24", False)
    assert tools["t1"].content == "sent 5"
    assert result.output == "done"


async def test_a_client_run_tool_that_failed_reads_as_a_failed_result(runner: Runner) -> None:
    agent, model = date_agent(ask(call("d1", "pick_date")), Message.assistant("ok"))
    paused = await runner(agent, "when?")

    result = await runner(
        agent, history=paused.messages, tool_results={"d1": ToolFailed("user closed the dialog")}
    )

    assert model.requests[1].messages[-1].content == "user closed the dialog"
    assert model.requests[1].messages[-1].failed
    assert result.output == "ok"
