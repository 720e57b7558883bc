"""Builders for the delegation and handoff tests: agents whose models answer from what they
are asked, so parallel runs answer the same whatever order they run in."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest
from temporalio.client import WorkflowHandle
from waiting import eventually

from golem import Agent, Message, ToolCall, streaming
from golem.messages import Usage
from golem.models import FunctionModel, ModelResponse
from golem.wire import lineage


def read_late(
    monkeypatch: pytest.MonkeyPatch, agent: str, until: Callable[[], Awaitable[bool]]
) -> None:
    """Streams start reading a followed run of ``agent`` only once ``until()`` holds: a
    reader the load of a busy machine has held back."""
    found = streaming.workflow_started

    async def late(handle: WorkflowHandle[Any, Any]) -> bool:
        started = await found(handle)
        if (await handle.describe()).typed_search_attributes.get(lineage.AGENT) == agent:
            await eventually(until, what=f"a stream of {agent}'s run may be read", timeout=30)
        return started

    monkeypatch.setattr(streaming, "workflow_started", late)


def usage(input_tokens: int, output_tokens: int) -> Usage:
    return Usage(input_tokens=input_tokens, output_tokens=output_tokens)


def answer(text: str, spent: Usage | None = None) -> ModelResponse:
    return ModelResponse(message=Message.assistant(text), usage=spent or usage(10, 5))


def calls(*items: tuple[str, str, dict[str, Any]], spent: Usage | None = None) -> ModelResponse:
    """An assistant turn asking for ``(call id, tool, args)`` calls."""
    message = Message.assistant(
        tool_calls=[ToolCall(id=i, name=n, args=json.dumps(a)) for i, n, a in items]
    )
    return ModelResponse(message=message, usage=spent or usage(10, 5))


def prompt_of(messages: Sequence[Message]) -> str:
    return next(m.content for m in messages if m.role == "user")


def results_of(messages: Sequence[Message]) -> list[Message]:
    return [m for m in messages if m.role == "tool"]


def echo_agent(
    name: str, reply: Callable[[str], str] = lambda p: f"done: {p}", **options: Any
) -> Agent[Any, Any]:
    """Answers ``reply(prompt)`` at once (10 in, 5 out)."""

    def model(messages: list[Message], tools: Any) -> ModelResponse:
        return answer(reply(prompt_of(messages)))

    return Agent(FunctionModel(model, model_name=f"{name}-model"), name=name, **options)


def caller_agent(
    name: str,
    first: Callable[[str], ModelResponse],
    then: Callable[[list[Message]], ModelResponse] | None = None,
    **options: Any,
) -> Agent[Any, Any]:
    """Asks ``first(prompt)`` on its first turn; then ``then(tool results)`` (default: an
    answer joining the results' contents)."""

    def finish(results: list[Message]) -> ModelResponse:
        return answer(" | ".join(("FAILED " if m.failed else "") + m.content for m in results))

    def model(messages: list[Message], tools: Any) -> ModelResponse:
        results = results_of(messages)
        if not results:
            return first(prompt_of(messages))
        return (then or finish)(results)

    return Agent(FunctionModel(model, model_name=f"{name}-model"), name=name, **options)


def triage_of(delegate: Agent[Any, Any], prompt: str = "refund") -> Agent[Any, Any]:
    """A triage agent whose first turn asks ``delegate`` ``prompt``."""
    return caller_agent(
        "triage", lambda p: calls(("c1", delegate.name, {"prompt": prompt})), delegates=[delegate]
    )


def refund_agent(refunds: list[int], name: str = "billing") -> Agent[Any, Any]:
    """Asks to refund 5 (which needs approval; ``refunds`` records it), then answers with
    the refund's result."""

    def model(messages: list[Message], tools: Any) -> ModelResponse:
        done = [m for m in messages if m.role == "tool" and m.tool_name == "refund"]
        if done:
            return answer(done[-1].content)
        return calls((f"{name}-r{len(messages)}", "refund", {"amount": 5}))

    agent = Agent(FunctionModel(model), name=name)

    @agent.tool(requires_approval=True)
    def refund(amount: int) -> str:
        """Refund money."""
        refunds.append(amount)
        return f"refunded {amount}"

    return agent
