"""A durable agent inside your own web app: ``golem.serve``'s API mounted beside your routes,
and a page of your own that streams a turn live and answers its approvals (the ``serve`` extra).

    golem dev                                                            # a Temporal dev server
    golem worker --agent examples.demo_agent:agent --agent examples.refunds:agent   # both agents
    GOLEM_AGENT=travel uvicorn examples.sse_relay:app --port 8000        # open http://localhost:8000/
    (travel asks nobody; with GOLEM_AGENT=refunds, "Refund order 42" waits for your approval)

    GET  /                                       examples/sse_relay.html: your page
    POST /golem/conversations {"agent": "travel"}        -> {"id": ...}
    POST /golem/conversations/{id}/messages {"text": ...} -> {"runId": ...}
    GET  /golem/conversations/{id}/events        the turn's RunEvents, as server-sent events
    POST /golem/conversations/{id}/decisions     approve or deny what the turn waits for
    (and the rest of golem serve's REST API under /golem: see /golem/openapi.json)

``create_app`` does the work: every event's ``id`` is ``<run id>:<offset>``, so an
``EventSource`` that loses its connection reconnects with ``Last-Event-ID`` and gets the
rest of the turn, each event once; the turn's last event is ``result``, ``failed`` or
``waiting`` (the calls a person must decide), with id ``<run id>:end``; a reconnect past it
is answered 204, which stops an ``EventSource``. Errors are JSON ``{"error": ..., "code": ...}``
with a 4xx status. The app holds no state: any replica serves any reconnect.

Pages on other origins may call it when ``GOLEM_RELAY_ORIGINS`` (comma-separated) or
``make_app(allow_origins=...)`` lists theirs. Settings: ``TEMPORAL_ADDRESS``
(localhost:7233), ``GOLEM_AGENT`` (travel), ``GOLEM_TASK_QUEUE`` (golem), and as for
workers ``GOLEM_STORAGE_DIR`` and ``GOLEM_ENCRYPTION_KEY``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send
from temporalio.client import Client

from golem.client import DurableAgent
from golem.serve import create_app
from golem.worker import golem_converter

PAGE = Path(__file__).with_name("sse_relay.html")
#: Where golem's API is mounted in this app.
PREFIX = "/golem"


class Later:
    """An ASGI app made at startup (it needs a connected client), mounted before that."""

    def __init__(self) -> None:
        self.app: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self.app is not None, "the app is made when the server starts"
        await self.app(scope, receive, send)


def origins_from_env() -> list[str]:
    return [o.strip() for o in os.environ.get("GOLEM_RELAY_ORIGINS", "").split(",") if o.strip()]


def make_app(
    durable: DurableAgent[Any] | None = None, *, allow_origins: Sequence[str] | None = None
) -> Starlette:
    """Your app, with ``durable``'s conversations under ``/golem``; without ``durable``, it
    connects from the environment at startup (``TEMPORAL_ADDRESS``, ``GOLEM_AGENT``,
    ``GOLEM_TASK_QUEUE``). ``allow_origins``: the pages on other origins that may call it
    (default ``GOLEM_RELAY_ORIGINS``)."""
    golem = Later()
    origins = origins_from_env() if allow_origins is None else list(allow_origins)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        agent = durable
        if agent is None:
            address = os.environ.get("TEMPORAL_ADDRESS", "localhost:7233")
            # GOLEM_STORAGE_DIR and GOLEM_ENCRYPTION_KEY, as the workers read them
            client = await Client.connect(address, data_converter=golem_converter())
            name = os.environ.get("GOLEM_AGENT", "travel")
            task_queue = os.environ.get("GOLEM_TASK_QUEUE", "golem")
            agent = DurableAgent(client, name, task_queue=task_queue)
        golem.app = create_app(agent.client, [agent], origins=origins)
        yield

    async def page(request: Request) -> Response:
        return FileResponse(PAGE, media_type="text/html")

    routes = [Route("/", page, methods=["GET"]), Mount(PREFIX, app=golem)]
    return Starlette(routes=routes, lifespan=lifespan)


app = make_app()
