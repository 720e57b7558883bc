"""A run's link to an MCP server in process, on the mcp SDK's ``Client``.

A run opens one connection per server when it lists the server's tools and closes it when
it ends (a stdio server is started then, and stops then). A call that loses the server
fails; the executor tries it again per the tool's retry policy, on a new connection. An
at-most-once call that lost it mid-flight is not tried again: its outcome is unknown.
Connecting (``initialize``) and each page of the tool list are bounded by the toolset's
``timeout`` (else ``golem.mcp.server.LIST_TIMEOUT``), as the listing activity is durably.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from datetime import timedelta
from typing import Any, Literal, Protocol

from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from pydantic import ValidationError

from golem.mcp.results import LOST_CONNECTION, NOT_RETRYABLE, outcome, rejected
from golem.models.base import ToolDefinition
from golem.tools import RunContext, ToolOutcome, ToolOutcomeUnknown, validation_problems
from golem.toolsets import ToolsetError, ToolsetRefusal

#: Pages of a tool list a run follows before it calls the server's cursor a loop.
MAX_PAGES = 1000


class Server(Protocol):
    """What a connection reads of its server (``MCPServer`` is one; it makes connections,
    so this module does not import it)."""

    @property
    def name(self) -> str: ...

    @property
    def transport(self) -> Literal["stdio", "http"]: ...

    @property
    def command(self) -> str: ...

    @property
    def args(self) -> tuple[str, ...]: ...

    @property
    def env(self) -> Mapping[str, str] | None: ...

    @property
    def cwd(self) -> str | None: ...

    @property
    def url(self) -> str: ...

    @property
    def list_timeout(self) -> timedelta: ...

    def once(self, remote: str) -> bool: ...

    async def headers_for(self, ctx: RunContext[Any] | None) -> dict[str, str] | None: ...

    def unanswered(self, step: str) -> str: ...


def new_client(server: Server, headers: Mapping[str, str] | None) -> Client:
    """An unopened client for ``server``; its responses are never cached (a run reads the
    tool list once and keeps it)."""
    if server.transport == "stdio":
        params = StdioServerParameters(
            command=server.command,
            args=list(server.args),
            env=dict(server.env) if server.env is not None else None,
            cwd=server.cwd,
        )
        return Client(params, cache=None)
    if not headers:
        return Client(server.url, cache=None)
    return Client(with_headers(server.url, dict(headers)), cache=None)


@contextlib.asynccontextmanager
async def with_headers(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    """The streamable HTTP transport, sending ``headers`` with every request."""
    import httpx2  # the mcp SDK's HTTP client

    timeout = httpx2.Timeout(30.0, read=300.0)  # the SDK's own defaults
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


class _Open:
    """An open client, owned by one task from start to end (the SDK's transports must be
    closed by the task that opened them, whichever task calls)."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self._ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # Retrieved here, delivered to any waiter all the same: a close before the handshake
        # ended leaves it unawaited, logged at collection wherever the collector runs.
        self._ready.add_done_callback(lambda ready: ready.cancelled() or ready.exception())
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._own())

    async def _own(self) -> None:
        try:
            async with self.client:
                self._ready.set_result(None)
                await self._stop.wait()
        except BaseException as exc:
            if not self._ready.done():
                self._ready.set_exception(exc)
            # else: the transport broke; the calls in flight learn it from their answers

    @property
    def alive(self) -> bool:
        return not self._task.done()

    async def opened(self) -> Client:
        await asyncio.shield(self._ready)
        return self.client

    async def close(self) -> None:
        self._stop.set()
        if not self._ready.done():
            self._task.cancel()
        with contextlib.suppress(BaseException):
            await self._task


class MCPConnection:
    """One run's link to one MCP server, in process."""

    def __init__(self, server: Server, ctx: RunContext[Any]) -> None:
        self.server = server
        self.ctx = ctx
        self._open: _Open | None = None
        self._opening = asyncio.Lock()

    async def _client(self) -> tuple[_Open, Client]:
        async with self._opening:
            if self._open is not None and not self._open.alive:
                await self._retire(self._open)  # lost while idle: nothing in flight on it
            if self._open is None:
                headers = await self.server.headers_for(self.ctx)
                self._open = _Open(new_client(self.server, headers))
            opening = self._open
        try:
            async with asyncio.timeout(self._limit):
                return opening, await opening.opened()
        except TimeoutError as exc:
            await self._retire(opening)
            raise ToolsetError(self.server.unanswered("initialize")) from exc
        except Exception as exc:
            await self._retire(opening)
            raise ToolsetError(
                f"MCP server {self.server.name!r} could not be reached: {_describe(exc)}"
            ) from exc

    @property
    def _limit(self) -> float:
        """Seconds connecting, and each page of the tool list, may take."""
        return self.server.list_timeout.total_seconds()

    async def _retire(self, opened: _Open) -> None:
        if self._open is opened:
            self._open = None
        await opened.close()

    async def aclose(self) -> None:
        if self._open is not None:
            await self._retire(self._open)

    async def list_tools(self) -> list[ToolDefinition]:
        """Every tool of every page, as the server describes it (one attempt)."""
        opened, client = await self._client()
        tools: list[ToolDefinition] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            try:
                async with asyncio.timeout(self._limit):
                    page = await client.list_tools(cursor=cursor, cache_mode="bypass")
            except TimeoutError as exc:
                await self._retire(opened)  # its answer may still come: never read it
                raise ToolsetError(self.server.unanswered("tools/list")) from exc
            except MCPError as exc:
                raise await self._failure(opened, exc, "listing its tools") from exc
            tools += [
                ToolDefinition(
                    name=t.name, description=t.description or "", parameters=t.input_schema
                )
                for t in page.tools
            ]
            cursor = page.next_cursor
            if cursor is None:
                return tools
        raise ToolsetRefusal(f"MCP server {self.server.name!r} listed over {MAX_PAGES} pages")

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        """One attempt of a call (the executor retries per the tool's policy). A lost server
        raises ``ToolsetError`` (the next attempt connects anew), or, for an at-most-once
        tool, ``ToolOutcomeUnknown``: the server may have run the call."""
        opened, client = await self._client()  # ToolsetError: not reached, nothing sent
        try:
            result = await client.call_tool(name, arguments)
        except ValidationError as exc:
            raise ToolsetRefusal(
                f"MCP server {self.server.name!r} answered tools/call of tool {name!r} with a "
                f"malformed result: {validation_problems(exc, 'result')}"
            ) from None
        except MCPError as exc:
            answer = rejected(exc.code, exc.message)
            if answer is not None:
                return answer
            failure = await self._failure(opened, exc, "the call")
            if exc.code in LOST_CONNECTION and self.server.once(name):
                unknown = f"{failure}; whether it took effect is unknown"
                raise ToolOutcomeUnknown(unknown) from exc
            raise failure from exc
        return outcome(result)

    async def _failure(self, opened: _Open, exc: MCPError, during: str) -> ToolsetError:
        """What an error answer means: a lost connection (retired: the next attempt opens
        a new one), an error a retry may fix, or one it cannot."""
        server = self.server.name
        if exc.code in LOST_CONNECTION:
            await self._retire(opened)
            return ToolsetError(f"MCP server {server!r} was lost during {during}: {exc.message}")
        error = f"MCP server {server!r} answered error {exc.code}: {exc.message}"
        return (ToolsetRefusal if exc.code in NOT_RETRYABLE else ToolsetError)(error)


def _describe(exc: BaseException) -> str:
    """The innermost cause's type and text (the SDK's transports raise exception groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
