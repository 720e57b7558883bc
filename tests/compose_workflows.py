"""User-written workflows that call ``run_agent`` (a module of its own: the workflow
sandbox re-imports it)."""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from golem import Agent, Message, RunError, ToolCall
    from golem.models import FunctionModel
    from golem.tools import RunContext
    from golem.workflows import run_agent


def _answer(messages: list[Message], tools: Any) -> Message:
    last = messages[-1]
    if last.role == "user" and last.content == "explode":
        return Message.assistant("", [ToolCall(id="c1", name="explode", args="{}")])
    return Message.assistant(f"seen {sum(1 for m in messages if m.role == 'user')}")


helper: Agent[None, str] = Agent(FunctionModel(_answer), name="helper")


@helper.tool
def explode() -> str:
    """Fail for real."""
    raise RuntimeError("boom")


@workflow.defn(name="CatchingWorkflow")
class CatchingWorkflow:
    """Runs the helper both ways and reports what a failing run raised."""

    @workflow.run
    async def run(self, inline: bool) -> list[str]:
        first = await run_agent("helper", "hi", inline=inline)
        second = await run_agent("helper", "again", history=first.messages, inline=inline)
        try:
            await run_agent("helper", "explode", inline=inline)
        except RunError as exc:
            partial = exc.partial
            return [
                first.output,
                second.output,
                str(second.conversation_id == first.conversation_id),
                exc.stage,
                str(len(partial.messages) if partial else -1),
            ]
        return ["no error"]


def _ask_whoami(messages: list[Message], tools: Any) -> Message:
    last = messages[-1]
    if last.role == "tool":
        return Message.assistant(last.content)
    return Message.assistant("", [ToolCall(id="c1", name="whoami", args="{}")])


identity: Agent[None, str] = Agent(FunctionModel(_ask_whoami), name="identity")


@identity.tool
def whoami(ctx: RunContext[None]) -> str:
    """Say which run and conversation ask."""
    return f"{ctx.run_id} {ctx.conversation_id}"


@workflow.defn(name="IdentityWorkflow")
class IdentityWorkflow:
    """Runs ``identity`` and reports what its tool saw next to the run's own identity."""

    @workflow.run
    async def run(self, inline: bool) -> list[str]:
        result = await run_agent("identity", "who?", inline=inline)
        return [result.output, f"{result.run_id} {result.conversation_id}"]
