"""The agent: a model, instructions and tools, run in process or durably.

agent = Agent("openai:gpt-4o", instructions="Be brief.")

@agent.tool
def add(a: int, b: int) -> int:
    '''Add two numbers.'''
    return a + b

result = await agent.run("What is 2 + 3?")
follow_up = await agent.run("And times 4?", history=result.messages)

triage = Agent(model, name="triage", delegates=[billing], handoffs=[shipping])
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import timedelta
from functools import cached_property
from typing import Any, Generic, Self, TypeVar, overload

from pydantic import TypeAdapter

from golem.approvals import DecisionInput
from golem.delegation import delegate_tool, handoff_tool, reachable
from golem.errors import RunError
from golem.events import RunEvent
from golem.external import ExternalTool, external_tool, run_tools, with_results
from golem.history.processors import HistoryProcessor
from golem.local import LocalExecutor
from golem.loop import RunLoop
from golem.messages import HistoryItem, Part, as_messages
from golem.models.base import Model, ModelSettings, ToolDefinition
from golem.models.fallback import plan
from golem.phases.prepare import checked_approvals
from golem.policies import ApprovalPolicy
from golem.results import Result, StreamResult
from golem.retry import Retry
from golem.run_state import RunInput
from golem.tools import ApprovalPredicate, RunContext, Tool
from golem.toolsets import OpenToolsets, Toolset, check_toolsets
from golem.usage import UsageLimits

DepsT = TypeVar("DepsT")
OutputT = TypeVar("OutputT")
F = TypeVar("F", bound=Callable[..., Any])

InstructionsFn = Callable[[RunContext[Any]], "str | Awaitable[str]"]


class Agent(Generic[DepsT, OutputT]):
    """A model with instructions and tools. ``run`` runs it in process; a ``DurableAgent``
    (golem.client) runs the very same loop as a Temporal workflow."""

    def __init__(
        self,
        model: Model | str,
        *,
        name: str = "agent",
        instructions: str | None = None,
        instructions_fn: InstructionsFn | None = None,
        tools: Iterable[Callable[..., Any] | Tool] = (),
        deps_type: type[DepsT] | None = None,
        output_type: type[OutputT] = str,  # type: ignore[assignment]
        history_processor: HistoryProcessor | None = None,
        max_iterations: int = 25,
        usage_limits: UsageLimits | None = None,
        model_settings: ModelSettings | None = None,
        retries: int = 2,
        output_retries: int = 2,
        model_retry: Retry | None = None,
        approval_timeout: timedelta | None = None,
        external_timeout: timedelta | None = None,
        approval_policy: ApprovalPolicy | None = None,
        max_concurrent_tools: int = 100,
        toolsets: Sequence[Toolset] = (),
        delegates: Sequence[Agent[Any, Any]] = (),
        handoffs: Sequence[Agent[Any, Any]] = (),
        description: str | None = None,
    ) -> None:
        if max_concurrent_tools < 1:
            raise ValueError(f"max_concurrent_tools must be at least 1, got {max_concurrent_tools}")
        self._model = model
        self.name = name
        self.instructions = instructions
        self.instructions_fn = instructions_fn
        self.deps_type = deps_type
        self.output_type = output_type
        self.history_processor = history_processor
        self.max_iterations = max_iterations
        self.usage_limits = usage_limits or UsageLimits()
        self.model_settings = model_settings or ModelSettings()
        self.retries = retries
        self.output_retries = output_retries
        self.model_retry = model_retry or Retry()
        """The retry policy of model requests (in process and under Temporal)."""
        self.approval_timeout = approval_timeout
        """Under Temporal: how long a run waits for approvals; calls still undecided then
        are not executed and the model is told no decision arrived in time (``None``: it
        waits as long as it takes). A later approval is refused. In process a run pauses
        instead."""
        self.external_timeout = external_timeout
        """Under Temporal: how long a run waits for the application's result of a
        client-run tool's call (``external_tool``, ``run(external_tools=...)``); a call
        still unanswered then gets a failed result saying none arrived in time, which the
        model reads, and a later ``complete`` is refused (``None``: it waits as long as it
        takes). Durable only: in process a run pauses and returns instead, so nothing waits.
        Approvals in the same batch keep their ``approval_timeout``."""
        self.approval_policy = approval_policy
        """Rules that allow, deny or send calls to a person, and an evaluator that decides
        before a person does (golem.policies)."""
        self.max_concurrent_tools = max_concurrent_tools
        """The most calls of one batch in flight at once (under Temporal, activities: it
        keeps a wide batch under Temporal's 2,000 pending activities); the rest wait their
        turn in call order."""
        self.tools: dict[str, Tool] = {}
        self.toolsets = tuple(toolsets)
        """Servers whose tools join the agent's own, read once per run (golem.toolsets)."""
        self.description = description
        """What this agent does, for the tool an agent delegating to it gives its model."""
        self.delegates: dict[str, Agent[Any, Any]] = {}
        """Agents this one asks through a tool named after each (golem.delegation)."""
        self.handoffs: dict[str, Agent[Any, Any]] = {}
        """Agents this one may hand the conversation to (``transfer_to_<name>``)."""
        self._open: OpenToolsets | None = None  # while ``async with agent:`` lasts
        self._spans = 0
        check_toolsets(self.name, (), self.toolsets)
        for item in tools:
            self._register(item if isinstance(item, Tool) else Tool.from_function(item))
        self.add_delegates(*delegates)
        self.add_handoffs(*handoffs)

    def __repr__(self) -> str:
        return f"Agent(name={self.name!r}, model={self.model_name!r}, tools={sorted(self.tools)})"

    async def __aenter__(self) -> Self:
        """``async with agent:``: in-process runs in the block share one connection per
        toolset server (a stdio server starts once, not per run; one that died starts again
        on the next call), let go when the block ends. Blocks nest; without one, each run
        opens and closes its own. A server whose headers are made per run is never shared."""
        if self._open is None:
            self._open = OpenToolsets()
        self._spans += 1
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._spans -= 1
        if self._spans == 0 and self._open is not None:
            opened, self._open = self._open, None
            await opened.aclose()

    # -- configuration --------------------------------------------------------------

    @property
    def model(self) -> Model:
        if isinstance(self._model, str):
            from golem.models.infer import infer_model

            self._model = infer_model(self._model)
        return self._model

    @property
    def model_name(self) -> str:
        return self._model if isinstance(self._model, str) else self._model.model_name

    @property
    def model_plan(self) -> list[tuple[str, Retry]]:
        """Each model a request may go to (a ``FallbackModel``'s, in order), by name, with the
        retry policy of its attempts."""
        return plan(self._model, self.model_retry)

    @overload
    def tool(self, function: F, /) -> F: ...

    @overload
    def tool(
        self,
        *,
        name: str | None = None,
        sequential: bool = False,
        requires_approval: bool | ApprovalPredicate = False,
        max_retries: int | None = None,
        timeout: timedelta | None = None,
        retry: Retry | None = None,
        retry_attempts: int | None = None,
        at_most_once: bool = False,
        on_loop: bool = False,
    ) -> Callable[[F], F]: ...

    def tool(  # type: ignore[misc]
        self, function: F | None = None, /, **options: Any
    ) -> F | Callable[[F], F]:
        """Register a function as a tool (``@agent.tool`` or ``@agent.tool(sequential=True)``).

        A first parameter typed ``RunContext`` receives the run's context. A sync function
        runs in a thread, an async one on the event loop. ``timeout`` bounds an attempt and
        ``retry`` (or just ``retry_attempts``; default ``golem.retry.TOOL_RETRY``) says how a
        failed one is tried again, in process and under Temporal alike; ``at_most_once``
        means one attempt, and a crash is reported, never repeated. ``on_loop`` runs a sync
        function on the event loop, for one that is quick and never blocks (``Tool.on_loop``).
        """
        if options.get("max_retries") is None:
            options.pop("max_retries", None)

        def register(fn: F) -> F:
            self._register(Tool.from_function(fn, **options))
            return fn

        return register(function) if function is not None else register

    def add_delegates(self, *agents: Agent[Any, Any]) -> None:
        """Delegate to ``agents`` too: each a tool named after it, its argument a prompt
        (and ``deps`` when it has a deps type); durably each call is a child run."""
        for agent in agents:
            self._register(delegate_tool(agent))
            self.delegates[agent.name] = agent

    def add_handoffs(self, *agents: Agent[Any, Any]) -> None:
        """Let this agent hand the conversation to ``agents`` too (``transfer_to_<name>``),
        e.g. a specialist that hands back to the agent that handed to it."""
        for agent in agents:
            self._register(handoff_tool(agent))
            self.handoffs[agent.name] = agent

    def external_tool(
        self,
        name: str,
        description: str,
        parameters: Mapping[str, Any],
        *,
        result_schema: Mapping[str, Any] | None = None,
    ) -> ExternalTool:
        """Register a tool the application runs (golem.external): the model may call it
        with arguments matching ``parameters`` (a JSON schema); its calls wait, in
        ``Result.pending_calls``, for ``complete`` (in process ``run(tool_results=...)``)."""
        tool = external_tool(name, description, parameters, result_schema)
        self._register(tool)
        return tool

    def _register(self, tool: Tool) -> None:
        if tool.name in self.tools:
            raise ValueError(f"agent {self.name!r} already has a tool named {tool.name!r}")
        check_toolsets(self.name, {*self.tools, tool.name}, self.toolsets)
        self.tools[tool.name] = tool
        self.__dict__.pop("tool_definitions", None)

    @cached_property
    def tool_definitions(self) -> list[ToolDefinition]:
        return [tool.definition for tool in self.tools.values()]

    @cached_property
    def output_adapter(self) -> TypeAdapter[Any] | None:
        return None if self.output_type is str else TypeAdapter(self.output_type)

    @cached_property
    def output_schema(self) -> dict[str, Any] | None:
        adapter = self.output_adapter
        return None if adapter is None else adapter.json_schema()

    @property
    def may_pause(self) -> bool:
        """Some tool (its own, a toolset's, or one of an agent it delegates or hands off to)
        needs a person's approval, so a run of this agent may pause for it."""
        return any(
            agent.approval_policy is not None
            or any(
                tool.requires_approval or isinstance(tool, ExternalTool)
                for tool in agent.tools.values()
            )
            or any(toolset.may_need_approval() for toolset in agent.toolsets)
            for agent in reachable([self])
        )

    # -- running --------------------------------------------------------------------

    async def run(
        self,
        prompt: str | None = None,
        *,
        history: Sequence[HistoryItem] | None = None,
        parts: Sequence[Part] = (),
        deps: DepsT | None = None,
        run_id: str | None = None,
        conversation_id: str | None = None,
        approvals: Mapping[str, DecisionInput] | None = None,
        tool_results: Mapping[str, object] | None = None,
        external_tools: Sequence[ToolDefinition] = (),
    ) -> Result[OutputT]:
        """Run in process. ``history`` continues a conversation (the caller's list is never
        changed); failures raise :class:`golem.RunError` with the partial evidence. A
        handoff's target answers in the same call (``Result.agent`` names it); the next call
        is the caller's to route (``golem.handoff_target``). ``external_tools``: tools this
        run offers beside the agent's, run by the application (pass them again with the
        ``tool_results`` that continue it)."""
        inputs = self._inputs(
            prompt,
            history,
            parts,
            deps,
            run_id,
            conversation_id,
            approvals,
            tool_results,
            external_tools,
        )
        return await self._run_local(inputs)

    def run_sync(
        self,
        prompt: str | None = None,
        *,
        history: Sequence[HistoryItem] | None = None,
        parts: Sequence[Part] = (),
        deps: DepsT | None = None,
        run_id: str | None = None,
        conversation_id: str | None = None,
        approvals: Mapping[str, DecisionInput] | None = None,
        tool_results: Mapping[str, object] | None = None,
        external_tools: Sequence[ToolDefinition] = (),
    ) -> Result[OutputT]:
        """``run`` for code without an event loop (a script, a REPL): the same ``Result``
        and ``RunError``, on an event loop of its own. Inside a running loop it raises
        ``RuntimeError`` (it would block that loop): ``await agent.run(...)`` there."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError(
                f"Agent.run_sync({self.name!r}) was called inside a running event loop, which "
                "it would block: use `await agent.run(...)` there"
            )
        inputs = self._inputs(
            prompt,
            history,
            parts,
            deps,
            run_id,
            conversation_id,
            approvals,
            tool_results,
            external_tools,
        )
        return asyncio.run(self._run_local(inputs))

    def run_stream(
        self,
        prompt: str | None = None,
        *,
        history: Sequence[HistoryItem] | None = None,
        parts: Sequence[Part] = (),
        deps: DepsT | None = None,
        run_id: str | None = None,
        conversation_id: str | None = None,
        approvals: Mapping[str, DecisionInput] | None = None,
        tool_results: Mapping[str, object] | None = None,
        external_tools: Sequence[ToolDefinition] = (),
    ) -> RunStream[OutputT]:
        """Run in process, yielding events (text and tool-call deltas as they arrive, tool
        start/end); once exhausted, ``.result`` is the same ``Result`` ``run`` gives."""
        inputs = self._inputs(
            prompt,
            history,
            parts,
            deps,
            run_id,
            conversation_id,
            approvals,
            tool_results,
            external_tools,
        )
        return RunStream(self, inputs)

    def _inputs(
        self,
        prompt: str | None,
        history: Sequence[HistoryItem] | None,
        parts: Sequence[Part],
        deps: Any,
        run_id: str | None,
        conversation_id: str | None,
        approvals: Mapping[str, DecisionInput] | None,
        tool_results: Mapping[str, object] | None,
        external_tools: Sequence[ToolDefinition],
    ) -> RunInput:
        """What ``run``, ``run_sync`` and ``run_stream`` pass the loop, checked the same way."""
        tools = run_tools(self.name, self.tools, external_tools)
        decided = with_results(tools, history, approvals, tool_results)
        messages = as_messages(history or ())
        return RunInput.of(
            prompt,
            parts=parts,
            history=messages,
            deps=deps,
            run_id=run_id or "",
            conversation_id=conversation_id or "",
            approvals=checked_approvals(tools, messages, decided),
            external_tools=list(external_tools),
        )

    def _local_executor(self) -> LocalExecutor:
        return LocalExecutor(self, self._open)

    async def _run_local(
        self, inputs: RunInput, emit: Callable[[RunEvent], None] | None = None
    ) -> Result[OutputT]:
        executor = self._local_executor()
        try:
            return await RunLoop(self, executor, inputs, emit).run()
        finally:
            await executor.aclose()  # the run's toolset servers are let go when it ends


class RunStream(StreamResult[OutputT]):
    """Events of an in-process run as they happen; ``result`` once the stream is exhausted."""

    def __init__(self, agent: Agent[Any, OutputT], inputs: RunInput) -> None:
        self._agent = agent
        self._inputs = inputs
        self._task: asyncio.Task[Result[Any]] | None = None

    async def __aiter__(self) -> AsyncIterator[RunEvent]:
        queue: asyncio.Queue[RunEvent | None] = asyncio.Queue()
        self._task = asyncio.ensure_future(self._agent._run_local(self._inputs, queue.put_nowait))
        self._task.add_done_callback(lambda _: queue.put_nowait(None))
        try:
            while (event := await queue.get()) is not None:
                yield event
            self._result = self._task.result()
        finally:
            if not self._task.done():
                self._task.cancel()
                with contextlib.suppress(RunError, asyncio.CancelledError):
                    await self._task
