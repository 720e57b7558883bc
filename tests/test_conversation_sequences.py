"""Random sequences of sends, approvals (complete, partial, empty, unknown ids, twice), the
approval timeout and close against a durable conversation: every call answers as a model
of the conversation says it must, and the conversation never wedges."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.worker import Worker
from test_conversation_approvals import details
from waiting import eventually

from golem import Agent, Message, ToolCall
from golem.client import ConversationClosedError, DurableAgent, DurableConversation
from golem.models import FunctionModel
from golem.results import Result
from golem.worker import GolemPlugin

ACTIONS = ["send", "all", "one", "empty", "unknown", "again", "timeout", "close"]


def two_calls_per_turn() -> Agent[Any, str]:
    """Each turn asks to approve two transfers, then answers with their results."""

    def answer(messages: list[Message], tools: Any) -> Message:
        turn = sum(1 for m in messages if m.role == "user")
        own = messages[max(i for i, m in enumerate(messages) if m.role == "user") :]
        results = [m.content for m in own if m.role == "tool"]
        if results:
            return Message.assistant(" | ".join(results))
        calls = [ToolCall(id=f"t{turn}{x}", name="transfer", args="{}") for x in "ab"]
        return Message.assistant("", calls)

    agent: Agent[Any, str] = Agent(
        FunctionModel(answer), name="pairs", approval_timeout=timedelta(seconds=1)
    )

    @agent.tool(requires_approval=True)
    def transfer() -> str:
        """Move money."""
        return "moved"

    return agent


class Model:
    """What the conversation must answer: closed, and the calls of the waiting turn."""

    def __init__(self, conv: DurableConversation[Any]) -> None:
        self.conv = conv
        self.closed = False
        self.pending: list[str] = []
        self.decided: list[str] = []

    def paused(self, result: Result[Any]) -> None:
        ids = [c.id for c in result.pending_approvals]
        self.decided = [c for c in self.pending if c not in ids] if ids else []
        self.pending = ids

    async def approve(self, decisions: dict[str, bool], refusal: str | None) -> None:
        try:
            result = await self.conv.approve(decisions)
        except ValueError as exc:
            if "approval timeout" in str(exc):  # the timeout won the race: fine
                self.pending, self.decided = [], []
                return
            assert refusal is not None and refusal in str(exc), (decisions, str(exc))
            return
        assert refusal is None, (decisions, refusal)
        self.paused(result)

    async def step(self, action: str) -> None:
        conv = self.conv
        if self.closed and action != "timeout":
            try:
                await (conv.close() if action == "close" else conv.approve({"x": True}))
            except ConversationClosedError:
                return
            assert action == "close"  # closing twice answers quietly
            return
        if action == "send":
            if self.pending:
                try:
                    await conv.send("pay")
                except ValueError as exc:
                    assert "waits for approvals" in str(exc)
                    return
                raise AssertionError("a send while a turn waits was accepted")
            self.paused(await conv.send("pay"))
            assert len(self.pending) == 2
        elif action == "all":
            await self.approve(dict.fromkeys(self.pending, True), self._none_waits())
        elif action == "one":
            await self.approve(dict.fromkeys(self.pending[:1], True), self._none_waits())
        elif action == "empty":
            await self.approve({}, "name no call" if self.pending else "no turn")
        elif action == "unknown":
            await self.approve({"nope": True}, "not pending" if self.pending else "no turn")
        elif action == "again":
            again = self.decided[:1] or ["nope"]
            refusal = "decided already" if self.decided else "not pending"
            await self.approve(dict.fromkeys(again, False), refusal if self.pending else "no turn")
        elif action == "timeout":

            async def settled() -> bool:
                return not self.pending or "approval** none" in await details(conv)

            await eventually(settled, what="the approval timeout to settle the waiting turn")
            self.pending, self.decided = [], []
        else:
            await conv.close()
            self.closed, self.pending = True, []

    def _none_waits(self) -> str | None:
        return None if self.pending else "no turn"


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(st.lists(st.sampled_from(ACTIONS), min_size=1, max_size=6))
@example(["one", "again", "one", "send"])  # a partial approval used to freeze it for good
@example(["empty", "unknown", "all", "send", "timeout", "all"])
@example(["one", "close"])
async def test_random_sequences_of_turns_and_approvals_always_answer_and_never_wedge(
    temporal_client: Client, actions: list[str]
) -> None:
    agent = two_calls_per_turn()
    task_queue = f"sequences-{uuid.uuid4().hex[:12]}"
    plugin = GolemPlugin(agent, heartbeat_timeout=timedelta(seconds=5))
    async with Worker(temporal_client, task_queue=task_queue, plugins=[plugin]):
        durable = DurableAgent(temporal_client, agent, task_queue=task_queue)
        conv = await durable.conversation()
        model = Model(conv)
        for action in ["send", *actions, "close"]:
            async with asyncio.timeout(20):  # every call answers: it never waits for good
                await model.step(action)
        status = (await conv.handle.describe()).status
        turns = [
            (await temporal_client.get_workflow_handle(run).describe()).status
            for run in await conv.runs()
        ]
    assert status == WorkflowExecutionStatus.COMPLETED
    assert all(s == WorkflowExecutionStatus.COMPLETED for s in turns), turns
