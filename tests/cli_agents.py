"""Agents the CLI tests serve with ``golem worker --agent cli_agents:echo``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from golem import Message, ToolCall
from golem.agent import Agent
from golem.models import FunctionModel, ModelHTTPError


def _echo(messages: list[Message], tools: Any) -> Message:
    if messages[-1].role == "user":
        return Message.assistant("", [ToolCall(id=f"up-{len(messages)}", name="shout", args="{}")])
    prompt = next(m.content for m in reversed(messages) if m.role == "user")
    return Message.assistant(f"echo: {prompt} ({messages[-1].content})")


echo = Agent(FunctionModel(_echo, model_name="echo-model"), name="echo")


@echo.tool
def shout() -> str:
    """Shout."""
    return "LOUD"


def _reject(messages: list[Message], tools: Any) -> Message:
    raise ModelHTTPError(400, "model_not_found", provider="openai")


broken = Agent(FunctionModel(_reject, model_name="missing-model"), name="broken")

not_an_agent = "just a string"


def _moody(messages: list[Message], tools: Any) -> Message:
    """Answers ``ok: PROMPT``; a prompt containing "explode" calls a tool that always raises."""
    last = messages[-1]
    if last.role == "user" and "explode" in last.content:
        return Message.assistant("", [ToolCall(id=f"x-{len(messages)}", name="explode", args="{}")])
    prompt = next(m.content for m in reversed(messages) if m.role == "user")
    return Message.assistant(f"ok: {prompt}")


moody = Agent(FunctionModel(_moody, model_name="moody-model"), name="moody")


@moody.tool(retry_attempts=1)
def explode() -> str:
    """Always fails."""
    raise ValueError("boom")


def _count(messages: list[Message], tools: Any) -> Message:
    """Answers ``N: PROMPT`` (N counts the user turns it sees): a continued conversation
    shows in the count. A prompt containing "explode" calls a tool that always raises."""
    users = [m for m in messages if m.role == "user"]
    last = messages[-1]
    if last.role == "user" and "explode" in last.content:
        return Message.assistant("", [ToolCall(id=f"x-{len(messages)}", name="explode", args="{}")])
    return Message.assistant(f"{len(users)}: {users[-1].content}")


counter = Agent(FunctionModel(_count, model_name="count-model"), name="counter")
counter.tool(retry_attempts=1)(explode)


def _bank(messages: list[Message], tools: Any) -> Message:
    """Asks to transfer (which needs approval), then reports the result."""
    if messages[-1].role == "user":
        call = ToolCall(id=f"t-{len(messages)}", name="transfer", args='{"amount": 5}')
        return Message.assistant("", [call])
    return Message.assistant(f"transfer: {messages[-1].content}")


bank = Agent(FunctionModel(_bank, model_name="bank-model"), name="bank")


@bank.tool(requires_approval=True)
def transfer(amount: int) -> str:
    """Move money."""
    return f"moved {amount}"


class Plan(BaseModel):
    """planner's structured answer."""

    city: str
    days: int


def _plan(messages: list[Message], tools: Any) -> Message:
    return Message.assistant('{"city": "Lisbon", "days": 3}')


planner = Agent(FunctionModel(_plan, model_name="plan-model"), name="planner", output_type=Plan)


def _schedule(messages: list[Message], tools: Any) -> Message:
    """Asks the application for a date (a client-run tool), then confirms it."""
    if messages[-1].role == "user":
        call = ToolCall(id=f"d-{len(messages)}", name="pick_date", args="{}")
        return Message.assistant("", [call])
    return Message.assistant(f"booked: {messages[-1].content}")


scheduler = Agent(FunctionModel(_schedule, model_name="schedule-model"), name="scheduler")
scheduler.external_tool("pick_date", "Ask the user for a date", {"type": "object"})


def _desk(name: str) -> FunctionModel:
    """Answers ``NAME: PROMPT``; a prompt naming the billing desk is handed over to it."""

    def answer(messages: list[Message], tools: Any) -> Message:
        last = messages[-1]
        if name != "billing" and last.role == "user" and "billing" in last.content:
            call = ToolCall(id=f"h-{len(messages)}", name="transfer_to_billing", args="{}")
            return Message.assistant("", [call])
        prompt = next(m.content for m in reversed(messages) if m.role == "user")
        return Message.assistant(f"{name}: {prompt}")

    return FunctionModel(answer, model_name=f"{name}-model")


billing = Agent(_desk("billing"), name="billing")
front = Agent(_desk("front"), name="front", handoffs=[billing])
