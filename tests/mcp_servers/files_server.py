"""An MCP server over stdio: ``python files_server.py [--tools N] [--page-size K]``.

``--tools N`` adds ``N`` numbered tools (``tool_000`` ...); ``--page-size K`` lists the
tools ``K`` at a time, each page naming the next by cursor.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent.parent))

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer

from mcp_servers.common import add_tools, announce, record


class Pages:
    """Middleware that lists the server's tools one page at a time."""

    def __init__(self, size: int) -> None:
        self.size = size

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        result = await call_next(ctx)
        if ctx.method != "tools/list" or not isinstance(result, dict):
            return result  # the wire form: a dict in the protocol's own (camelCase) names
        record("page", "lists")
        start = int((ctx.params or {}).get("cursor") or 0)
        tools = result["tools"]
        end = start + self.size
        page = {**result, "tools": tools[start:end]}
        if end < len(tools):
            page["nextCursor"] = str(end)
        return page


def numbered(server: MCPServer, count: int) -> None:
    for index in range(count):
        server.add_tool(
            answer(index), name=f"tool_{index:03d}", description=f"Numbered tool {index}."
        )


def answer(index: int) -> Any:
    def tool() -> str:
        return f"numbered {index}"

    return tool


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tools", type=int, default=0)
    parser.add_argument("--page-size", type=int, default=0)
    options = parser.parse_args()
    middleware = [Pages(options.page_size)] if options.page_size else []
    server = MCPServer("files", middleware=middleware, log_level="WARNING")
    add_tools(server)
    numbered(server, options.tools)
    announce()
    server.run("stdio")


if __name__ == "__main__":
    main()
