"""What both test servers share: the log of executions a test reads, and the tools.

``MCP_TEST_DIR`` (when set) is where a server appends each tool execution to
``executions`` (one name a line) and its process id to ``pids``; ``slow`` waits there for
a ``release`` file, so a test decides when a call in flight ends.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, EmbeddedResource, TextContent, TextResourceContents

#: The bytes of the image ``picture`` returns (a PNG signature and a little more).
PICTURE = b"\x89PNG\r\n\x1a\nmcp-test-image"


def test_dir() -> Path | None:
    path = os.environ.get("MCP_TEST_DIR")
    return Path(path) if path else None


def record(line: str, file: str = "executions") -> None:
    """Append ``line`` to the test's log (a whole line per write: a crash never tears it)."""
    folder = test_dir()
    if folder is not None:
        with (folder / file).open("a") as log:
            log.write(f"{line}\n")


def add_tools(server: MCPServer) -> None:
    """The tools both servers offer."""

    @server.tool()
    def read(path: str) -> str:
        """Read a file.

        Args:
            path: Which file.
        """
        record("read")
        return f"contents of {path}"

    @server.tool()
    def broken(why: str) -> str:
        """A tool that always fails (an ``is_error`` result)."""
        record("broken")
        raise ToolError(why)

    @server.tool()
    def strict(count: int) -> str:
        """Answers a JSON-RPC invalid-params error when ``count`` is negative."""
        record("strict")
        if count < 0:
            raise MCPError(code=INVALID_PARAMS, message=f"count must be >= 0, got {count}")
        return f"counted {count}"

    @server.tool()
    def picture() -> Image:
        """An image."""
        record("picture")
        return Image(data=PICTURE, format="png")

    @server.tool()
    def attachment() -> list[TextContent | EmbeddedResource]:
        """Text and an embedded resource."""
        record("attachment")
        resource = TextResourceContents(
            uri="file:///notes.txt", text="a note", mime_type="text/plain"
        )
        return [TextContent(text="see the note"), EmbeddedResource(resource=resource)]

    @server.tool()
    def delete(path: str) -> str:
        """Delete a file (the tests require approval for it)."""
        record("delete")
        return f"deleted {path}"

    @server.tool()
    def crash() -> str:
        """Ends the server's process mid-call (its client sees the connection close)."""
        record("crash")
        os._exit(1)

    @server.tool()
    async def slow(label: str) -> str:
        """Waits for the test's ``release`` file, then answers (at once without a test dir)."""
        record(f"slow:{label}")
        folder = test_dir()
        if folder is not None:
            record(label, "started")
            while not (folder / "release").exists():
                await asyncio.sleep(0.02)
        return f"slow {label} done"


async def serve_http(server: MCPServer, port: int) -> None:
    """Serve ``server`` over streamable HTTP on 127.0.0.1:``port`` (path ``/mcp``); print
    ``ready`` once it listens."""
    import uvicorn

    app = server.streamable_http_app()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    running = uvicorn.Server(config)
    task = asyncio.create_task(running.serve())
    while not running.started:
        if task.done():
            task.result()  # it failed to start: say why
        await asyncio.sleep(0.01)
    announce()
    print("ready", flush=True)
    await task


def announce() -> None:
    """Note this process in the test's log: the tests check none outlives its worker."""
    record(str(os.getpid()), "pids")
