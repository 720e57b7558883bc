"""The in-process executor: ``agent.run`` drives the loop through this."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pydantic import BaseModel

from golem.errors import ModelError
from golem.events import RunEvent
from golem.ids import new_id
from golem.messages import Decision, Message, ToolCall
from golem.models.base import Model, ModelRequest, ModelResponse, StreamDelta
from golem.models.fallback import chain, falls_over, move_on, stamp
from golem.policies import Evaluated, evaluate, in_turn
from golem.results import Result
from golem.retry import Retry
from golem.run_state import AgentSpec, DeltaSink
from golem.tools import RunContext, Tool, ToolOutcome, ToolOutcomeUnknown
from golem.toolsets import OpenToolsets, Toolset, ToolsetConnection, ToolsetTool
from golem.user_functions import call_instructions_function, call_user_function, describe

if TYPE_CHECKING:
    from golem.delegation import Delegation


class LocalAgent(AgentSpec, Protocol):
    """What the in-process executor reads of an agent (``golem.Agent`` is one)."""

    model_retry: Retry

    @property
    def model(self) -> Model: ...


T = TypeVar("T")


class LocalExecutor:
    """Runs every effect in process: model requests and tool calls retried by their policies
    (``golem.Retry``), a ``FallbackModel``'s models tried in order."""

    def __init__(self, agent: LocalAgent, shared: OpenToolsets | None = None) -> None:
        self.agent = agent
        self._shared = shared  # the links ``async with agent:`` keeps open for its runs
        self._connections: list[ToolsetConnection] = []  # this run's, closed by aclose
        self._toolset_tools: dict[str, Tool] = {}

    async def aclose(self) -> None:
        """Let go of the run's toolset servers (a stdio server process ends)."""
        connections, self._connections = self._connections, []
        for connection in reversed(connections):
            await connection.aclose()

    async def toolset_tools(self, toolset: Toolset, ctx: RunContext[Any]) -> list[ToolsetTool]:
        connection = self._shared.connect(toolset, ctx) if self._shared else None
        if connection is None:
            connection = toolset.connect(ctx)
            self._connections.append(connection)
        listed = await retrying(toolset.retry_policy, Exception, lambda _: connection.list_tools())
        tools = toolset.tools(listed, connection.call_tool)
        self._toolset_tools.update((tool.name, tool) for tool in tools)
        return tools

    def new_id(self) -> str:
        return new_id()

    async def process_history(self, ctx: RunContext[Any], history: list[Message]) -> list[Message]:
        processor = self.agent.history_processor
        result = await call_user_function(
            processor, history, what=_named("history processor", processor)
        )
        return list(result)

    async def resolve_instructions(self, ctx: RunContext[Any]) -> str:
        fn = self.agent.instructions_fn
        return await call_instructions_function(fn, ctx, what=_named("instructions function", fn))

    async def await_approvals(
        self, pending: list[ToolCall], ctx: RunContext[Any]
    ) -> dict[str, Decision | None] | None:
        return None  # in process a run pauses: the caller answers with a new run

    async def evaluate_approvals(
        self, waiting: list[ToolCall], evaluated: Evaluated, asked: str = ""
    ) -> dict[str, Decision | None]:
        policy = self.agent.approval_policy
        # In process nobody else can answer meanwhile: the evaluator first, then a person.
        return await in_turn(evaluated, lambda call, ctx: evaluate(policy, ctx, call, asked))

    async def request(
        self, request: ModelRequest, ctx: RunContext[Any], on_delta: DeltaSink | None
    ) -> ModelResponse:
        model = self.agent.model
        failures: list[tuple[str, str]] = []
        for index, (link, policy) in enumerate(chain(model, self.agent.model_retry)):

            async def attempt(number: int, link: Model = link, index: int = index) -> ModelResponse:
                if on_delta is not None and (number > 1 or index > 0):
                    on_delta.restarted(number, link.model_name)
                return await _request_once(link, request, on_delta)

            try:
                return stamp(await retrying(policy, ModelError, attempt), link)
            except Exception as exc:
                move_on(failures, link.model_name, exc, falls_over(model, index, exc))
        raise AssertionError("unreachable: the last model of a chain never moves on")

    async def delegate(
        self, child: Delegation, ctx: RunContext[Any], emit: Callable[[RunEvent], None] | None
    ) -> Result[Any]:
        """A nested run of the child's agent; its events join this run's stream."""
        if child.local is None:
            from golem.delegation import UnknownAgent

            raise UnknownAgent(
                f"unknown agent {child.agent!r}: agent {ctx.agent_name!r} delegates and hands "
                "off to no agent by that name (pass the Agent itself to ctx.delegate)"
            )
        result: Result[Any] = await child.local._run_local(child.run, emit)
        return result

    async def call_tool(self, call: ToolCall, ctx: RunContext[Any]) -> ToolOutcome:
        tool = self._toolset_tools.get(call.name) or self.agent.tools[call.name]
        args = call.args if ctx.tool_args is None else ctx.tool_args  # validated once
        return await retrying(tool.retry_policy, Exception, lambda _: _call_once(tool, ctx, args))


async def _call_once(tool: Tool, ctx: RunContext[Any], args: str | BaseModel) -> ToolOutcome:
    """One attempt of a tool call, bounded by the tool's timeout."""
    if tool.timeout is None:
        return await tool.execute(ctx, args)
    seconds = tool.timeout.total_seconds()
    try:
        async with asyncio.timeout(seconds) as deadline:
            return await tool.execute(ctx, args)
    except TimeoutError:
        if not deadline.expired():
            raise  # the tool's own TimeoutError
        # A sync tool's thread cannot be stopped: whether it took effect is unknown.
        raise ToolOutcomeUnknown(
            f"timed out after {seconds:g} s (the tool's timeout); its outcome is unknown"
        ) from None


async def _request_once(
    model: Model, request: ModelRequest, on_delta: DeltaSink | None
) -> ModelResponse:
    """One attempt of a model request, streamed to ``on_delta`` when there is one."""
    if on_delta is None:
        return await model.request(request)
    response: ModelResponse | None = None
    async for item in model.request_stream(request):
        if isinstance(item, StreamDelta):
            on_delta(item)
        else:
            response = item
    if response is None:
        raise ModelError("the stream ended without a complete response", provider=model.model_name)
    return response


async def retrying(
    policy: Retry, retry_on: type[Exception], attempt: Callable[[int], Awaitable[T]]
) -> T:
    """``attempt(1)``, ``attempt(2)``, ... until one returns or ``policy`` ends the tries
    (only ``retry_on`` errors are considered; the last error is raised)."""
    number = 1
    while True:
        try:
            return await attempt(number)
        except retry_on as exc:
            delay = policy.wait_after(number, exc)
            if delay is None:
                raise
        await asyncio.sleep(delay)
        number += 1


def _named(role: str, fn: Any) -> str:
    return f"{role} {describe(fn)}"
