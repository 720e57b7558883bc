"""An MCP server over streamable HTTP: ``python docs_server.py PORT``; prints ``ready`` once
it listens on 127.0.0.1:PORT (path ``/mcp``)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent))

import uvicorn
from mcp.server.mcpserver import Context, MCPServer

from mcp_servers.common import add_tools, announce, record


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


async def serve(port: int) -> None:
    app = build().streamable_http_app()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()  # it failed to start: say why
        await asyncio.sleep(0.01)
    announce()
    print("ready", flush=True)
    await task


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1])))
