"""The worker side of MCP toolsets: ``temporalio.mcp``'s plugin, with a factory per server.

``GolemPlugin`` builds it for the MCP servers of the agents it serves (imported only
then: a worker without MCP toolsets never imports the mcp SDK). The worker owns the
factories, so a server's command, URL and headers never enter a workflow's history; a
stdio server is started by the worker that first calls it and kept (``temporalio.mcp``'s
pool) until it has been idle ``idle_timeout`` or the worker stops. A server whose headers
are made per run gets a new connection per call instead (the run's context rides the
activity's input: ``temporalio.mcp`` keys fresh connections on it).

The activities ``temporalio.mcp`` runs do not heartbeat; this module's interceptor does
for them, so a worker that dies mid-call is noticed after ``heartbeat_timeout``, as for
golem's own tool activities.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from datetime import timedelta
from typing import Any

import pydantic_core
from mcp import Client
from mcp.types import CallToolResult
from pydantic import TypeAdapter
from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.mcp import MCPPlugin
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from golem.activities import check_size
from golem.agent import Agent
from golem.mcp.connection import new_client, with_headers
from golem.mcp.results import outcome
from golem.mcp.server import MCPServer
from golem.tools import RunContext
from golem.toolsets import ToolsetRefusal
from golem.wire import RunOfCall, names
from golem.wire.cache import MessageCache

#: What ``temporalio.mcp`` says of an answer its client could not validate (the details say why).
INVALID_RESPONSE = "MCP server returned an invalid response"


def servers_of(agents: Sequence[Agent[Any, Any]]) -> dict[str, tuple[MCPServer, Agent[Any, Any]]]:
    """Each MCP server the agents use, by name (and the first agent using it). Raises
    ``ValueError`` for a toolset golem cannot run durably or two servers sharing a name."""
    servers: dict[str, tuple[MCPServer, Agent[Any, Any]]] = {}
    for agent in agents:
        for toolset in agent.toolsets:
            if not isinstance(toolset, MCPServer):
                raise ValueError(
                    f"agent {agent.name!r}: toolset {toolset.name!r} is a "
                    f"{type(toolset).__name__}; durably golem runs MCPServer toolsets only"
                )
            known = servers.get(toolset.name)
            if known is not None and known[0].endpoint != toolset.endpoint:
                raise ValueError(
                    f"agents {known[1].name!r} and {agent.name!r} use two different MCP "
                    f"servers named {toolset.name!r}; a worker knows a server by its name"
                )
            servers.setdefault(toolset.name, (toolset, agent))
    return servers


def mcp_plugin(
    agents: Sequence[Agent[Any, Any]], idle_timeout: timedelta | None = timedelta(minutes=5)
) -> MCPPlugin | None:
    """``temporalio.mcp``'s plugin for the agents' MCP servers (``None``: they have none)."""
    servers = servers_of(agents)
    if not servers:
        return None
    by_name = {agent.name: agent for agent in agents}
    factories = {name: _factory(server, by_name) for name, (server, _) in servers.items()}
    return MCPPlugin(factories, connection_idle_timeout=idle_timeout)


def _factory(server: MCPServer, agents: dict[str, Agent[Any, Any]]) -> Callable[[Any], Client]:
    def client(run: Any) -> Client:
        if run is None:  # headers fixed (or none): one pooled connection per worker
            return new_client(server, None if callable(server.headers) else server.headers)
        ctx = _context(RunOfCall.model_validate(run), agents)
        return Client(_per_run(server, ctx), cache=None)

    return client


def _context(run: RunOfCall, agents: dict[str, Agent[Any, Any]]) -> RunContext[Any]:
    agent = agents.get(run.agent)
    if agent is None:
        raise LookupError(f"this worker serves no agent named {run.agent!r}")
    deps = run.deps
    if agent.deps_type is not None and deps is not None:
        deps = TypeAdapter(agent.deps_type).validate_python(deps)
    return RunContext(
        deps=deps, run_id=run.run_id, conversation_id=run.conversation_id, agent_name=agent.name
    )


@contextlib.asynccontextmanager
async def _per_run(server: MCPServer, ctx: RunContext[Any]) -> AsyncIterator[Any]:
    """The transport of one call whose headers its run's context makes (here, on the worker)."""
    headers = await server.headers_for(ctx)
    async with with_headers(server.url, headers or {}) as streams:
        yield streams


class MCPHeartbeats(Interceptor):
    """Heartbeats for the MCP activities of golem's servers; keeps each call's content in
    the worker's message cache (the run's next model call names it by digest)."""

    def __init__(self, servers: Sequence[str], cache: MessageCache) -> None:
        self.prefixes = tuple(f"{names.MCP_ACTIVITY_PREFIX}{name}." for name in servers)
        self.cache = cache

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Heartbeating(next, self)


class _Heartbeating(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, owner: MCPHeartbeats) -> None:
        super().__init__(next)
        self.owner = owner

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        if not info.activity_type.startswith(self.owner.prefixes):
            return await self.next.execute_activity(input)
        every = (info.heartbeat_timeout or timedelta(seconds=30)).total_seconds() / 3
        server, _, operation = info.activity_type.removeprefix(
            names.MCP_ACTIVITY_PREFIX
        ).rpartition(".")
        step = _step(operation, input.args)
        try:
            with _heartbeats(every):
                result = await self.next.execute_activity(input)
        except ApplicationError as exc:
            if exc.type == names.MCP_PROTOCOL_ERROR and exc.message == INVALID_RESPONSE:
                raise ApplicationError(
                    f"MCP server {server!r} answered {step} with a malformed result: "
                    f"{_problems(exc.details)}",
                    type=names.MCP_PROTOCOL_ERROR,
                    non_retryable=True,
                ) from exc
            raise
        if operation == "call-tool":
            size = len(pydantic_core.to_json(result))  # as compact as json.dumps, a sixth the time
            check_size(size, f"MCP server {server!r} {step.removeprefix('tools/call of ')}")
            with contextlib.suppress(ValueError, ToolsetRefusal):  # the workflow says what is wrong
                self.owner.cache.keep(outcome(CallToolResult.model_validate(result)).content)
        return result


@contextlib.contextmanager
def _heartbeats(every: float) -> Iterator[None]:
    """An activity heartbeat every ``every`` seconds while the block runs. From a timer on
    the loop, not a task beside the call: the call keeps the activity's own task, so its
    answer reaches the activity without a hop through another task (benchmarks/mcp_tools.py)."""
    loop = asyncio.get_running_loop()
    timer: asyncio.TimerHandle

    def beat() -> None:
        nonlocal timer
        try:
            activity.heartbeat()
        finally:  # one failed beat (logged by the loop) does not end the beating
            timer = loop.call_later(every, beat)  # in the activity's context, as this one

    timer = loop.call_later(every, beat)
    try:
        yield
    finally:
        timer.cancel()


def _step(operation: str, args: Sequence[Any]) -> str:
    """The MCP request an activity made: ``tools/call of tool 'x'``, ``tools/list``, ..."""
    if operation == "call-tool":
        name = args[0].get("name") if args and isinstance(args[0], dict) else None
        return f"tools/call of tool {name!r}"
    return operation.replace("-", "/", 1)


def _problems(details: Sequence[Any]) -> str:
    """``temporalio.mcp``'s validation errors (its failure's details) as one line."""
    errors = details[0] if details and isinstance(details[0], list) else []
    told = [
        f"{'.'.join(str(p) for p in e.get('loc', ())) or 'result'}: {e.get('msg', '')}"
        for e in errors
        if isinstance(e, dict)
    ]
    return "; ".join(told) or "its answer does not read as the protocol's"
