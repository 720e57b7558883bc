"""MCP toolsets in a run's workflow: every MCP operation an activity of ``temporalio.mcp``.

A run lists each server's tools once, in one activity (``temporalio.mcp`` follows every
page), before its first model request; the list is recorded, so replay reads it from
history and the run keeps it to its end. The model activity learns it by digest: a
worker that has seen that list before uses its own copy, another asks the run once
(query ``golem.tools``). A call is one activity, summary ``mcp: <server>.<tool>``,
with its tool's timeout and retry policy (an at-most-once tool: one attempt).

Imported only for an agent with toolsets: a run without them never imports the mcp SDK.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.exceptions import TimeoutError as ActivityTimeoutError
from temporalio.workflow import ActivityConfig

with workflow.unsafe.imports_passed_through():
    from temporalio.mcp import TemporalMCPClient

    from golem.mcp.results import LOST_CONNECTION, outcome, rejected
    from golem.mcp.server import LIST_TIMEOUT, MCPServer
    from golem.messages import ToolCall
    from golem.models.base import ToolDefinition
    from golem.tools import RunContext, ToolOutcome, ToolOutcomeUnknown
    from golem.toolsets import Toolset, ToolsetError, ToolsetRefusal, ToolsetTool, tools_digest
    from golem.wire import RunOfCall, names
    from golem.workflows.patches import TOOLSETS_IN_AGENT_ORDER, patched

#: A call's start-to-close timeout unless its toolset's ``timeout`` says (as golem's tools).
CALL_TIMEOUT = timedelta(minutes=5)


class RunToolsets:
    """One run's MCP toolsets: listed once, called as activities."""

    def __init__(self, heartbeat_timeout: timedelta) -> None:
        self.heartbeat_timeout = heartbeat_timeout
        self.definitions: list[ToolDefinition] = []
        """Every toolset tool of the run, as the model sees them."""
        self.digest = ""
        self._listed: list[list[ToolDefinition]] = []  # per toolset, in the agent's order
        workflow.set_query_handler(names.TOOLS, lambda: self.definitions)

    def _client(self, server: MCPServer, ctx: RunContext[Any], config: ActivityConfig) -> Any:
        argument = None
        if server.headers_per_run:
            argument = RunOfCall(
                agent=ctx.agent_name,
                run_id=ctx.run_id,
                conversation_id=ctx.conversation_id,
                deps=ctx.deps,
            ).model_dump(mode="json", by_alias=True)
        return TemporalMCPClient(
            server.name,
            activity_config=ActivityConfig(heartbeat_timeout=self.heartbeat_timeout, **config),
            cache_tools_list=False,  # the run keeps the list itself
            factory_argument=argument,
        )

    async def tools(
        self, toolset: Toolset, ctx: RunContext[Any], policy: RetryPolicy
    ) -> list[ToolsetTool]:
        """``toolset``'s tools for this run: one listing activity."""
        if not isinstance(toolset, MCPServer):
            raise ValueError(f"toolset {toolset.name!r}: durably only MCPServer toolsets run")
        config = ActivityConfig(
            start_to_close_timeout=toolset.timeout or LIST_TIMEOUT,
            retry_policy=policy,
            summary=f"mcp: {toolset.name} (tool list)",
        )
        slot = len(self._listed)  # taken before the await: listings start in the agent's order
        self._listed.append([])
        try:
            listed = await self._client(toolset, ctx, config).list_tools()
        except ActivityError as exc:
            if isinstance(exc.cause, ActivityTimeoutError):  # the activity connects, then lists
                raise ToolsetError(toolset.unanswered("initialize or tools/list")) from exc
            raise
        tools = toolset.tools(
            [
                ToolDefinition(
                    name=t.name, description=t.description or "", parameters=t.input_schema
                )
                for t in listed.tools
            ]
        )
        self._listed[slot] = [tool.definition for tool in tools]
        if len(self._listed) > 1 and patched(TOOLSETS_IN_AGENT_ORDER):
            self.definitions = [d for definitions in self._listed for d in definitions]
        else:  # as 0.2.0 recorded it: in the order the listings completed
            self.definitions += self._listed[slot]
        self.digest = tools_digest(self.definitions)
        return tools

    async def call(
        self,
        tool: ToolsetTool,
        call: ToolCall,
        ctx: RunContext[Any],
        timeout: timedelta | None,
        policy: RetryPolicy,
    ) -> ToolOutcome:
        """One call, one activity (``policy``: the tool's, one attempt if at-most-once). An
        error answer the model can correct is its result; a lost connection of an
        at-most-once call is an unknown outcome; anything else raises (``ActivityError``)
        as a golem tool activity's failure does."""
        server = tool.toolset
        assert isinstance(server, MCPServer)
        config = ActivityConfig(
            start_to_close_timeout=timeout or CALL_TIMEOUT,
            retry_policy=policy,
            summary=f"mcp: {server.name}.{tool.remote_name}",
        )
        client = self._client(server, ctx, config)
        try:
            result = await client.call_tool(tool.remote_name, tool.arguments(call.args))
        except ActivityError as exc:
            cause = exc.cause
            if isinstance(cause, ApplicationError) and cause.type == names.MCP_PROTOCOL_ERROR:
                code = cause.details[0] if cause.details else None
                answer = rejected(code, cause.message) if isinstance(code, int) else None
                if answer is not None:
                    return answer
                if isinstance(code, int) and code in LOST_CONNECTION and tool.at_most_once:
                    raise ToolOutcomeUnknown(
                        f"the connection to MCP server {server.name!r} broke during the call "
                        f"({cause.message}); whether it took effect is unknown"
                    ) from exc
            raise
        try:
            return outcome(result)
        except ToolsetRefusal as exc:
            raise ToolsetRefusal(f"MCP server {server.name!r}: {exc}") from None
