"""The MCP tests' servers: the stdio one as a toolset, the HTTP one as a process on a free
127.0.0.1 port, and what both logged (tests/mcp_servers/common.py)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from golem.mcp import MCPServer

SERVERS = Path(__file__).parent / "mcp_servers"
STDIO_SERVER = SERVERS / "files_server.py"
HTTP_SERVER = SERVERS / "docs_server.py"


def files_server(log: Path | str, *server_args: str, **options: Any) -> MCPServer:
    """The stdio test server, logging to ``log``."""
    return MCPServer.stdio(
        "files",
        command=sys.executable,
        args=[str(STDIO_SERVER), *server_args],
        env={"MCP_TEST_DIR": str(log)},
        **options,
    )


def lines(log: Path, name: str = "executions") -> list[str]:
    path = log / name
    return path.read_text().split() if path.exists() else []


class Log:
    """What a server shared by several tests logged since one test began."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.seen = {name: len(lines(folder, name)) for name in ("executions", "lists")}

    def __call__(self, name: str = "executions") -> list[str]:
        return lines(self.folder, name)[self.seen.get(name, 0) :]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its parent to reap it does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


async def started(*command: str, env: dict[str, str]) -> asyncio.subprocess.Process:
    """``python *command`` (with ``env`` added), once it has printed ``ready``."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, *command, env={**os.environ, **env}, stdout=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None
    async with asyncio.timeout(60):
        said = await process.stdout.readline()
    if said.strip() != b"ready":
        await killed(process)
        raise RuntimeError(f"{command[0]} did not start (it said {said!r})")
    return process


async def killed(process: asyncio.subprocess.Process) -> None:
    """SIGKILL ``process`` (when it still runs) and reap it."""
    if process.returncode is None:
        process.send_signal(signal.SIGKILL)
    await process.wait()


@dataclass
class HTTPServer:
    """The streamable HTTP test server, run as its own process."""

    log: Path
    port: int
    process: asyncio.subprocess.Process | None = None
    script: Path = HTTP_SERVER
    name: str = "docs"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def toolset(self, **options: Any) -> MCPServer:
        return MCPServer.http(self.name, url=self.url, **options)

    async def start(self) -> None:
        env = {"MCP_TEST_DIR": str(self.log)}
        self.process = await started(str(self.script), str(self.port), env=env)

    async def kill(self) -> None:
        if self.process is not None:
            await killed(self.process)


@asynccontextmanager
async def http_server(
    log: Path, script: Path = HTTP_SERVER, name: str = "docs"
) -> AsyncIterator[HTTPServer]:
    """``script`` (default: the docs server) serving on a free port, as toolset ``name``."""
    server = HTTPServer(log, free_port(), script=script, name=name)
    await server.start()
    try:
        yield server
    finally:
        await server.kill()
