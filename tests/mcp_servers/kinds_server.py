"""An MCP server over streamable HTTP for failure kinds, media and time:
``python kinds_server.py PORT``; prints ``ready`` once it listens on 127.0.0.1:PORT.

``refuse(code)`` answers a JSON-RPC error with ``code``; ``sound`` answers text and audio;
``stall`` waits for the test's ``release`` file. Each execution is logged as the other
servers log theirs (tests/mcp_servers/common.py). A ``tools/list`` request with header
``x-list-delay: SECONDS`` is answered that much later.
"""

from __future__ import annotations

import asyncio
import base64
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent))

from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import AudioContent, TextContent

from mcp_servers.common import record, serve_http, test_dir

#: The bytes of the clip ``sound`` returns (a RIFF header and a little more).
CLIP = b"RIFF\x24\x00\x00\x00WAVEmcp-test-clip"


async def delayed_listing(
    ctx: ServerRequestContext[Any, Any], call_next: CallNext
) -> HandlerResult:
    """Answer ``tools/list`` after the request's ``x-list-delay`` seconds (none: at once)."""
    headers = getattr(ctx.request, "headers", None) or {}
    if ctx.method == "tools/list" and "x-list-delay" in headers:
        await asyncio.sleep(float(headers["x-list-delay"]))
    return await call_next(ctx)


def build() -> MCPServer:
    server = MCPServer("kinds", middleware=[delayed_listing], log_level="WARNING")

    @server.tool()
    def refuse(code: int) -> str:
        """Answers a JSON-RPC error with ``code``."""
        record(f"refuse:{code}")
        raise MCPError(code=code, message=f"refused with {code}")

    @server.tool()
    def sound() -> list[TextContent | AudioContent]:
        """A caption and its clip."""
        record("sound")
        clip = AudioContent(data=base64.b64encode(CLIP).decode(), mime_type="audio/wav")
        return [TextContent(text="a clip"), clip]

    @server.tool()
    async def stall() -> str:
        """Waits for the test's ``release`` file."""
        record("stall")
        folder = test_dir()
        while folder is not None and not (folder / "release").exists():
            await asyncio.sleep(0.02)
        return "released"

    return server


if __name__ == "__main__":
    asyncio.run(serve_http(build(), int(sys.argv[1])))
