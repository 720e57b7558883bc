"""``create_app``: the ASGI app ``golem serve`` runs, to mount in an application too."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from temporalio.client import Client

from golem.agent import Agent
from golem.client import DurableAgent
from golem.serve.agui import agui_routes
from golem.serve.auth import Auth
from golem.serve.errors import Problem
from golem.serve.openapi import openapi
from golem.serve.requests import MAX_BODY_BYTES
from golem.serve.rest import rest_routes
from golem.serve.threads import Served
from golem.serve.vercel import chat_routes

#: The console's page and its module: plain files, no build step.
CONSOLE = Path(__file__).with_name("console")
AgentLike = Agent[Any, Any] | DurableAgent[Any] | str


def create_app(
    client: Client,
    agents: Sequence[AgentLike],
    *,
    task_queue: str = "golem",
    auth: Auth | None = None,
    origins: Sequence[str] = (),
    max_body_bytes: int = MAX_BODY_BYTES,
    ui_url: str = "",
    inline_turns: bool = False,
) -> Starlette:
    """An ASGI app serving ``agents`` (``Agent``s, their names, or ``DurableAgent``s) over
    AG-UI, the Vercel AI SDK's UI message stream and REST, with the console at ``/``.

    ``auth`` names who calls (without it anyone who reaches the app may do anything: serve
    it on loopback only); ``origins`` are the pages on other origins that may call it;
    bodies over ``max_body_bytes`` get 413; ``ui_url`` is the Temporal UI to link turns to;
    ``inline_turns`` runs new conversations' turns in their own workflow (about half the
    worker CPU per turn; docs/adr/0050-turns-inline.md), for agents whose loop does not need
    the whole history (a history processor).
    """
    if "*" in origins:
        raise ValueError("origins must be listed explicitly: '*' would let any page call it")
    durable: dict[str, DurableAgent[Any]] = {}
    for agent in agents:
        served = (
            agent
            if isinstance(agent, DurableAgent)
            else DurableAgent(client, agent, task_queue=task_queue)
        )
        durable[served.agent_name] = served
    if not durable:
        raise ValueError("create_app needs at least one agent to serve")
    for served in durable.values():
        if inline_turns and (problem := served.inline_problem):
            raise ValueError(
                f"inline_turns cannot serve {problem} yet: create the app without inline_turns "
                "(docs/adr/0050-turns-inline.md)"
            )
    state = Served(client, durable, ui_url, auth, max_body_bytes, inline_turns=inline_turns)

    async def document(request: Request) -> Response:
        return JSONResponse(openapi(sorted(durable)))

    async def console(request: Request) -> Response:
        return FileResponse(CONSOLE / "index.html", media_type="text/html")

    routes: list[BaseRoute] = [
        Route("/openapi.json", document, methods=["GET"]),
        Route("/", console, methods=["GET"]),
        Mount("/console", StaticFiles(directory=CONSOLE), name="console"),
    ]
    routes += rest_routes(state)
    routes += agui_routes(state)
    routes += chat_routes(state)
    cors = Middleware(
        CORSMiddleware,
        allow_origins=list(origins),
        allow_methods=["GET", "POST"],
        allow_headers=["authorization", "content-type", "last-event-id"],
    )
    return Starlette(
        routes=routes,
        middleware=[cors],
        exception_handlers={Problem: _problem, HTTPException: _no_route},  # type: ignore[dict-item]
    )


async def _problem(request: Request, exc: Problem) -> Response:
    body = {"error": exc.reason, "code": exc.code, **exc.more}
    return JSONResponse(body, status_code=exc.status)


async def _no_route(request: Request, exc: HTTPException) -> Response:
    """A path or method no route serves, answered in the problem's shape as well."""
    path = request.url.path
    if exc.status_code == 405:
        problem = Problem(405, f"{request.method} is not allowed on {path!r}", "method_not_allowed")
    elif exc.status_code == 404:
        problem = Problem(404, f"no route for {request.method} {path!r} (see /openapi.json)")
    else:
        problem = Problem(exc.status_code, str(exc.detail))
    answer = await _problem(request, problem)
    answer.headers.update(exc.headers or {})
    return answer
