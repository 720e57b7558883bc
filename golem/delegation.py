"""Agents that call agents: delegation (an agent as a tool) and handoffs.

    billing = Agent(model, name="billing", description="Refunds and invoices.")
    triage = Agent(model, name="triage", delegates=[billing], handoffs=[shipping])
    # tools: billing(prompt) runs billing as a child run; transfer_to_shipping() hands over

    @triage.tool
    async def research(ctx: RunContext, topic: str) -> str:
        parts = await asyncio.gather(*(ctx.delegate(reader, f"{topic}: {s}") for s in sources))
        return "\\n".join(p.output for p in parts)

A delegation is a child run: it sees only what it is given (a prompt, a history), never
the caller's conversation, and its answer (or its failure, naming its run and stage) is the
calling tool's result. A handoff ends the caller's turn and continues it with the target
agent, on the conversation's history. The caller's ``Result`` reports the tree
(``sub_runs``, ``total_usage``, ``agent``), and its usage limits bound it. In process the
children are nested runs; durably each is a run of its own (golem.workflows.delegation).
See docs/adr/0019-agents-calling-agents.md.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from golem.errors import RunError, ToolFailed
from golem.events import RunEvent
from golem.results import Result
from golem.run_state import AgentSpec, RunInput, RunState, resolve_conversation_id
from golem.tools import Asked, RunContext, Tool
from golem.usage import Budget

#: A handoff tool's name is this and the target agent's name.
HANDOFF_PREFIX = "transfer_to_"
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class UnknownAgent(LookupError):
    """A delegation or handoff names an agent nobody serves: the run fails at once."""

    retryable = False  # no retry can make the agent appear


class Handoff(BaseModel):
    """A turn that ends by handing over: the agent that continues it, as which run."""

    model_config = ConfigDict(frozen=True, alias_generator=to_camel, populate_by_name=True)

    agent: str
    run_id: str
    reason: str = ""


@dataclass(frozen=True)
class Delegation:
    """A child run for an executor to run: the agent (by name; ``local`` is the ``Agent``
    itself when the caller has it) and its input."""

    agent: str
    run: RunInput
    local: Any = None
    handoff: bool = False
    """The child continues the caller's turn (a handoff), not a tool's question."""


class Delegate(Protocol):
    """What delegation reads of an agent (``golem.Agent`` is one); this module never
    imports the agent, which builds its tools from here."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str | None: ...

    @property
    def deps_type(self) -> Any: ...

    @property
    def delegates(self) -> Mapping[str, Delegate]: ...

    @property
    def handoffs(self) -> Mapping[str, Delegate]: ...


DelegateT = TypeVar("DelegateT", bound=Delegate)


class ChildRunner(Protocol):
    """The executor's side of a delegation (``Executor.delegate``)."""

    def new_id(self) -> str: ...

    async def delegate(
        self, child: Delegation, ctx: RunContext[Any], emit: Callable[[RunEvent], None] | None
    ) -> Result[Any]: ...


# -- the tools -----------------------------------------------------------------------------


def _checked_name(agent: Delegate, tool_name: str) -> str:
    if not _TOOL_NAME.match(tool_name):
        raise ValueError(
            f"agent {agent.name!r} cannot be a tool: {tool_name!r} is not a tool name "
            "(letters, digits, _ and -, at most 64); rename the agent"
        )
    return tool_name


def delegate_tool(agent: Delegate) -> Tool:
    """The tool ``Agent(delegates=[agent])`` gives: named after ``agent``, described by its
    ``description``; its arguments a prompt (and ``deps`` when ``agent`` has a deps type)."""
    name = _checked_name(agent, agent.name)
    fields: dict[str, Any] = {
        "prompt": (
            str,
            Field(description=f"What to ask {name}: all it needs, for it sees nothing else"),
        )
    }
    if agent.deps_type is not None:
        fields["deps"] = (agent.deps_type, Field(description=f"The input {name} works on"))

    async def run_delegate(ctx: RunContext[Any], prompt: str, deps: Any = None) -> Any:
        try:
            result = await ctx.delegate(agent, prompt, deps=deps)
        except RunError as exc:
            raise ToolFailed(failure_text(name, exc)) from exc
        if result.paused:  # in process: a nested run cannot wait (durably it does)
            calls = ", ".join(f"{c.name} ({c.id})" for c in result.pending_approvals)
            raise ToolFailed(
                f"{name} (run {result.run_id}) stopped to wait for approval of {calls}; "
                "in process a delegated run cannot wait for a person"
            )
        return result.output

    description = agent.description or f"Ask the {name} agent."
    tool = Tool.with_fields(
        run_delegate, name=name, description=description, fields=fields, delegate=name
    )
    try:
        tool.args_model.model_json_schema()
    except Exception as exc:
        raise TypeError(
            f"agent {name!r} cannot be a delegate: its deps_type has no JSON schema for a "
            f"model to fill ({exc}); call it with ctx.delegate from a tool instead"
        ) from None
    return tool


def handoff_tool(agent: Delegate) -> Tool:
    """The tool ``Agent(handoffs=[agent])`` gives: ``transfer_to_<name>``, with an optional
    ``reason``; calling it ends the turn, which ``agent`` continues."""
    name = _checked_name(agent, HANDOFF_PREFIX + agent.name)

    def transfer(reason: str = "") -> str:
        return f"Transferred to {agent.name}."

    tool = Tool.from_function(transfer, name=name, handoff=agent.name)
    what = f": {agent.description}" if agent.description else "."
    return dataclasses.replace(
        tool,
        description=f"Hand the conversation over to the {agent.name} agent{what} "
        "It answers from then on.",
    )


def failure_text(name: str, error: RunError) -> str:
    """A failed child as its caller's tool result: which run, at which stage, and why."""
    run = error.run_id or "(it completed nothing)"
    kept = f"; its partial evidence stays with run {error.run_id}" if error.partial else ""
    return f"{name} (run {run}) failed at stage {error.stage}: {error.detail}{kept}"


# -- the graph -----------------------------------------------------------------------------


def inline_problem(agent: Any) -> str:
    """Why ``agent``'s conversation turns cannot run inline yet ("" when they can): a
    history by value (its own, or that of an agent it hands off to) needs a turn's run of
    its own until docs/adr/0050-turns-inline.md's next steps."""
    for reached in reachable([agent]):
        if reached.history_processor is not None or reached.usage_limits.request_input_tokens_limit:
            # The conversation's history reader takes inline turns to continue it by reference.
            return (
                f"agent {reached.name!r}, which needs the whole history in its loop (a "
                "history processor or a per-request token limit)"
            )
    return ""


def inline_refusal(what: str) -> str:
    """Why a conversation whose turns run inline refuses ``what``."""
    return (
        f"conversation turns that run inline cannot {what} yet: start the conversation "
        "without inline_turns (docs/adr/0050-turns-inline.md)"
    )


def reachable(agents: Iterable[DelegateT]) -> list[DelegateT]:
    """``agents`` and every agent they delegate or hand off to, nested, each once; two
    different agents with one name are an error naming it."""
    found: dict[str, DelegateT] = {}
    # An agent's delegates are agents of its own kind (an Agent's are Agents).
    todo: list[Any] = list(agents)
    while todo:
        agent = todo.pop(0)
        known = found.get(agent.name)
        if known is agent:
            continue
        if known is not None:
            raise ValueError(
                f"two different agents are named {agent.name!r} (reached by delegation or "
                "handoff): a worker serves agents by name, so names must be unique"
            )
        found[agent.name] = agent
        todo += [*agent.delegates.values(), *agent.handoffs.values()]
    return list(found.values())


def handoff_target(result: Result[Any]) -> str | None:
    """The agent a run handed the conversation to (``None``: it answered itself).

    In process there is no conversation object to remember it, so the caller picks the
    agent for the next turn: ``agents.get(handoff_target(result), triage).run(...)``."""
    last = next((m for m in reversed(result.messages) if m.role == "assistant"), None)
    if last is None or not result.agent or last.run_id in ("", result.run_id):
        return None
    return result.agent


def handed_over(caller: Result[Any], target: Result[Any]) -> Result[Any]:
    """The caller's ``Result`` once the run it handed over to ended: the target's answer and
    conversation, the caller's ids and own usage, the target counted among its children."""
    return Result.of(
        caller,
        target.output,
        target.messages,
        pending_approvals=target.pending_approvals,
        pending_runs=target.pending_runs,
        agent=target.agent,
        sub_runs=[*caller.sub_runs, target.run_id],
        descendants=caller.descendants + target.spent,
    )


# -- a run's children ----------------------------------------------------------------------


class Delegations:
    """One run's children: started through its executor, counted in its state. It is the
    ``ctx.delegate`` of the run's tools (where they run in the run's own process)."""

    def __init__(
        self,
        agent: AgentSpec,
        executor: ChildRunner,
        state: RunState,
        emit: Callable[[RunEvent], None] | None,
    ) -> None:
        self.agent = agent
        self.executor = executor
        self.state = state
        self.emit = emit

    def delegate(self, ctx: RunContext[Any], agent: Any, asked: Asked) -> Awaitable[Result[Any]]:
        name, local = self.resolve(agent)
        given = list(asked.history or ())
        conversation = resolve_conversation_id(given, None) or ctx.conversation_id
        run = RunInput.of(
            asked.prompt, history=given, deps=asked.deps, conversation_id=conversation
        )
        # The id is minted now, in call order, so parallel delegations get stable ids.
        return self.run(Delegation(name, run, local), ctx)

    def resolve(self, agent: Any) -> tuple[str, Any]:
        """The target's name and, when this run can reach it, the ``Agent`` itself."""
        if not isinstance(agent, str):
            return agent.name, agent
        graph = {a.name: a for a in reachable([self._root()])}
        return agent, graph.get(agent)

    def _root(self) -> Any:
        return getattr(self.agent, "agent", self.agent)  # a run's RunTools wraps its agent

    def budget(self) -> Budget:
        """What a child may spend now: this run's limits (and budget) less its tree's spend."""
        state = self.state
        return Budget.of(self.agent.usage_limits, state.tree, state.budget)

    def run(self, child: Delegation, ctx: RunContext[Any]) -> Awaitable[Result[Any]]:
        """Start ``child`` now (its run id minted, its budget given) and await its end."""
        run_id = child.run.run_id or self.executor.new_id()
        run = child.run.model_copy(update={"run_id": run_id, "budget": self.budget()})
        self.state.sub_runs.append(run_id)
        return self._await(dataclasses.replace(child, run=run), ctx)

    async def _await(self, child: Delegation, ctx: RunContext[Any]) -> Result[Any]:
        try:
            result = await self.executor.delegate(child, ctx, self.emit)
        except RunError as exc:
            exc.run_id = exc.run_id or child.run.run_id
            if exc.partial is not None:
                self.state.descendants += exc.partial.spent
            task = asyncio.current_task()
            if exc.stage == "canceled" and task is not None and task.cancelling():
                raise asyncio.CancelledError() from exc  # the caller itself is cancelled
            raise
        self.state.descendants += result.spent
        return result

    def adopt(self, sub_runs: list[str], spent: Any) -> None:
        """Count runs a tool started where it ran (an activity), now that it returned."""
        self.state.sub_runs += sub_runs
        if spent is not None:
            self.state.descendants += spent

    async def hand_off(self, caller: Result[Any], handoff: Handoff, deps: Any) -> Result[Any]:
        """Continue the caller's turn with ``handoff.agent``, on the conversation so far;
        the result is the caller's (``handed_over``)."""
        name, local = self.resolve(handoff.agent)
        run = RunInput.of(
            history=caller.messages,
            deps=deps,
            run_id=handoff.run_id,
            conversation_id=caller.conversation_id,
        )
        ctx = RunContext(
            deps=deps,
            run_id=caller.run_id,
            conversation_id=caller.conversation_id,
            agent_name=self.agent.name,
        )
        # ``caller`` counts the children so far; handed_over adds the target.
        return handed_over(caller, await self.run(Delegation(name, run, local, True), ctx))
