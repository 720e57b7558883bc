"""``MCPServer``: an MCP server as an agent's toolset (over stdio or streamable HTTP).

    files = MCPServer.stdio("files", command="python", args=["files_server.py"])
    docs = MCPServer.http("docs", url="http://localhost:9000/mcp",
                          headers=lambda ctx: {"Authorization": f"Bearer {ctx.deps.token}"})
    agent = Agent(model, toolsets=[files, docs.filtered(["search"])])

Defining one imports nothing of the mcp SDK: a run that uses it does (in process,
``golem.mcp.connection``; durably, on the worker, ``golem.worker.mcp``).
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal, Unpack

from golem.tools import RunContext
from golem.toolsets import Toolset, ToolsetConnection, ToolsetOptions
from golem.user_functions import call_user_function

if TYPE_CHECKING:
    from mcp import Client

#: HTTP headers for every request to a server: fixed, or made per run from its context
#: (evaluated where the call runs: in process, or on the worker; never recorded).
Headers = (
    Mapping[str, str]
    | Callable[[RunContext[Any]], Mapping[str, str] | Awaitable[Mapping[str, str]]]
    | None
)

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
#: How long connecting to a server and listing its tools may take unless the toolset's
#: ``timeout`` says (in process each step; durably the listing activity, which does both).
LIST_TIMEOUT = timedelta(minutes=1)
INSTALL = "MCP toolsets need the mcp SDK: pip install 'golem-temporal[mcp]'"


@dataclass(frozen=True, kw_only=True)
class MCPServer(Toolset):
    """An MCP server whose tools an agent calls. Build one with ``MCPServer.stdio`` or
    ``MCPServer.http``; ``filtered([...])`` and ``prefixed(...)`` return changed copies."""

    transport: Literal["stdio", "http"]
    command: str = ""
    """stdio: the program that serves (started by whoever calls: the run in process, the
    worker durably)."""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = field(default=None, repr=False)
    """stdio: environment variables added to the server's."""
    cwd: str | None = None
    url: str = ""
    """http: the streamable HTTP endpoint, e.g. ``http://localhost:9000/mcp``."""
    headers: Headers = field(default=None, repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not _NAME.match(self.name):
            raise ValueError(
                f"MCP server name {self.name!r}: use 1-64 letters, digits, '_' or '-' "
                "(it names the server's activities)"
            )
        if importlib.util.find_spec("mcp") is None:
            raise ImportError(INSTALL)

    @classmethod
    def stdio(
        cls,
        name: str,
        *,
        command: str,
        args: Iterable[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        **options: Unpack[ToolsetOptions],
    ) -> MCPServer:
        """A server run as ``command args...``, spoken to over its stdin and stdout.
        ``options``: ``prefix``, ``requires_approval``, ``at_most_once``, ``timeout``,
        ``retry``, ``max_retries`` (golem.toolsets.Toolset)."""
        return cls(
            name=name,
            transport="stdio",
            command=command,
            args=tuple(args),
            env=dict(env) if env is not None else None,
            cwd=cwd,
            **options,
        )

    @classmethod
    def http(
        cls,
        name: str,
        *,
        url: str,
        headers: Headers = None,
        **options: Unpack[ToolsetOptions],
    ) -> MCPServer:
        """A server at ``url`` (streamable HTTP). ``headers``: a dict, or a function of the
        run's ``RunContext`` returning one (e.g. a token from ``ctx.deps``); ``options`` as
        for ``stdio``."""
        return cls(name=name, transport="http", url=url, headers=headers, **options)

    @property
    def headers_per_run(self) -> bool:
        """Whether the headers are made from each run's context."""
        return callable(self.headers)

    @property
    def shareable(self) -> bool:
        """Runs share one connection unless each sends its own headers."""
        return not self.headers_per_run

    @property
    def endpoint(self) -> tuple[Any, ...]:
        """Where the server is: two toolsets with one name must agree on it."""
        env = tuple(sorted((self.env or {}).items()))
        return (self.transport, self.command, self.args, env, self.cwd, self.url, self.headers)

    async def headers_for(self, ctx: RunContext[Any] | None) -> dict[str, str] | None:
        """The headers of a run's requests (``ctx`` is ``None`` where no run is known)."""
        headers = self.headers
        if callable(headers):
            what = f"headers function of MCP server {self.name!r}"
            if ctx is None:
                raise ValueError(f"{what} needs the run's context")
            headers = await call_user_function(headers, ctx, what=what)
        if headers is None:
            return None
        if not isinstance(headers, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
        ):
            # Never the value itself: headers carry credentials.
            raise TypeError(
                f"headers of MCP server {self.name!r} must map str to str "
                f"(got a {type(headers).__name__})"
            )
        return dict(headers)

    @property
    def list_timeout(self) -> timedelta:
        """The bound of connecting and of each page of the tool list."""
        return self.timeout or LIST_TIMEOUT

    def unanswered(self, step: str) -> str:
        """That ``step`` (``initialize``, ``tools/list``) got no answer within its bound."""
        limit = self.list_timeout.total_seconds()
        bound = "the toolset's timeout" if self.timeout else "golem's default; set timeout="
        return f"MCP server {self.name!r} did not answer {step} within {limit:g} s ({bound})"

    def client(self, headers: Mapping[str, str] | None = None) -> Client:
        """A new, unopened ``mcp.Client`` for this server."""
        from golem.mcp.connection import new_client

        return new_client(self, headers)

    def connect(self, ctx: RunContext[Any]) -> ToolsetConnection:
        from golem.mcp.connection import MCPConnection

        return MCPConnection(self, ctx)
