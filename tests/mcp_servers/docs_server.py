"""An MCP server over streamable HTTP: ``python docs_server.py PORT``; prints ``ready`` once
it listens on 127.0.0.1:PORT (path ``/mcp``)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent))

from mcp.server.mcpserver import Context, MCPServer

from mcp_servers.common import add_tools, record, serve_http


def build() -> MCPServer:
    server = MCPServer("docs", log_level="WARNING")
    add_tools(server)

    @server.tool()
    def whoami(ctx: Context) -> str:
        """The Authorization header the request carried."""
        record("whoami")
        headers = ctx.headers or {}
        return headers.get("authorization", "anonymous")

    return server


if __name__ == "__main__":
    asyncio.run(serve_http(build(), int(sys.argv[1])))
