"""Relay durable runs to a browser as server-sent events (Starlette, the ``web`` extra).

    golem dev                                                            # a Temporal dev server
    golem worker --agent examples.demo_agent:agent --task-queue golem    # serves agent "travel"
    GOLEM_AGENT=travel uvicorn examples.sse_relay:app --port 8000        # open http://localhost:8000/

    POST /runs {"prompt": "Hello"}     -> {"run_id": "...", "conversation_id": "..."}
    GET  /runs/{run_id}/events         -> text/event-stream of the run's RunEvents
    GET  /                             -> examples/sse_relay.html, a page that shows a run live

Each SSE event is ``event: <kind>``, ``data: <the RunEvent as JSON>`` and ``id: <offset>``;
a browser's ``EventSource`` that loses its connection reconnects with ``Last-Event-ID``
and gets the rest of the run, each event once. The stream ends with ``event: result``
(the Result as JSON) or ``event: failed`` (the RunError's stage and message), both with
``id: end``: call ``es.close()`` on either. A page that does not is answered 204 on its
next reconnect, which an ``EventSource`` takes as the end (it stops reconnecting).

Errors are JSON ``{"error": ...}``: 404 for an unknown run, 400 for a body that is not
``{"prompt": "..."}`` or a ``Last-Event-ID`` that is not an offset of the run's stream, 413
for a prompt over one Temporal payload (2 MB) when the relay's client stores no payloads
(with storage on, ``GOLEM_STORAGE_DIR`` or a client with a storing ``GolemPlugin``, it is
accepted).
Pages on other origins may call the relay when ``GOLEM_RELAY_ORIGINS`` (comma-separated,
``*`` for any) or ``make_app(allow_origins=...)`` lists theirs. The relay holds no state:
any replica can serve any reconnect. Settings: ``TEMPORAL_ADDRESS`` (localhost:7233),
``GOLEM_AGENT`` (travel), ``GOLEM_TASK_QUEUE`` (golem), and as for workers
``GOLEM_STORAGE_DIR`` and ``GOLEM_ENCRYPTION_KEY``.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from temporalio.client import Client
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.service import RPCError, RPCStatusCode

from golem import Result, RunError
from golem.client import DurableAgent, DurableRun
from golem.events import RunEvent
from golem.worker import golem_converter

_EVENT = TypeAdapter(RunEvent)
_RESULT = TypeAdapter(Result[Any])
#: The id of the last event of a run's stream (``result`` or ``failed``).
END = "end"
PAGE = Path(__file__).with_name("sse_relay.html")


def sse(event: str, data: bytes | str, id: int | str | None = None) -> bytes:
    """One server-sent event (``data`` is JSON: it holds no newline)."""
    text = data.decode() if isinstance(data, bytes) else data
    head = f"id: {id}\n" if id is not None else ""
    return f"{head}event: {event}\ndata: {text}\n\n".encode()


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def origins_from_env() -> list[str]:
    return [o.strip() for o in os.environ.get("GOLEM_RELAY_ORIGINS", "").split(",") if o.strip()]


def make_app(
    durable: DurableAgent[Any] | None = None, *, allow_origins: Sequence[str] | None = None
) -> Starlette:
    """The relay for ``durable``; without one, it connects from the environment at startup
    (``TEMPORAL_ADDRESS``, ``GOLEM_AGENT``, ``GOLEM_TASK_QUEUE``). ``allow_origins``: the
    pages on other origins that may call it (default ``GOLEM_RELAY_ORIGINS``)."""
    agents: dict[str, DurableAgent[Any]] = {}
    if durable is not None:
        agents["agent"] = durable

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if not agents:
            address = os.environ.get("TEMPORAL_ADDRESS", "localhost:7233")
            # GOLEM_STORAGE_DIR and GOLEM_ENCRYPTION_KEY, as the workers read them
            client = await Client.connect(address, data_converter=golem_converter())
            name = os.environ.get("GOLEM_AGENT", "travel")
            task_queue = os.environ.get("GOLEM_TASK_QUEUE", "golem")
            agents["agent"] = DurableAgent(client, name, task_queue=task_queue)
        yield

    async def start(request: Request) -> Response:
        try:
            body = json.loads(await request.body())
        except ValueError:
            return error(400, 'the body is not JSON: send {"prompt": "..."}')
        prompt = body.get("prompt") if isinstance(body, dict) else None
        if not isinstance(prompt, str) or not prompt:
            return error(400, 'send {"prompt": "..."} with a non-empty prompt')
        try:
            run = await agents["agent"].start(prompt, stream=True)
        except ValueError as exc:  # JSON would not carry it unchanged (a lone surrogate)
            return error(400, str(exc))
        except RunError as exc:  # over one Temporal payload, and this client stores none
            return error(413, exc.detail)
        return JSONResponse({"run_id": run.run_id, "conversation_id": run.conversation_id})

    async def events(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        last = request.headers.get("last-event-id", "0")
        if last == END:
            return Response(status_code=204)  # the reader has the last event: nothing follows
        if not last.isdigit():
            return error(400, f"Last-Event-ID must be an offset or {END!r}, not {last!r}")
        try:
            run = await agents["agent"].attach(run_id)
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return error(404, f"no run {run_id!r}")
            raise
        offset = int(last)
        if offset and offset > await WorkflowStreamClient(run.handle).get_offset():
            return error(400, f"Last-Event-ID {offset} is past the end of run {run_id}'s stream")
        return StreamingResponse(relay(run, offset), media_type="text/event-stream")

    async def page(request: Request) -> Response:
        return FileResponse(PAGE, media_type="text/html")

    cors = Middleware(
        CORSMiddleware,
        allow_origins=list(origins_from_env() if allow_origins is None else allow_origins),
        allow_methods=["GET", "POST"],
        allow_headers=["content-type", "last-event-id"],
    )
    return Starlette(
        routes=[
            Route("/", page, methods=["GET"]),
            Route("/runs", start, methods=["POST"]),
            Route("/runs/{run_id}/events", events, methods=["GET"]),
        ],
        middleware=[cors],
        lifespan=lifespan,
    )


async def relay(run: DurableRun[Any], offset: int) -> AsyncIterator[bytes]:
    """The run's events from ``offset`` as SSE, then ``result`` or ``failed`` (id ``end``)."""
    stream = run.stream(from_offset=offset)
    try:
        async for event in stream:
            data = _EVENT.dump_json(event, by_alias=True, exclude_defaults=True)
            yield sse(event.kind, data, id=stream.offset)
    except RunError as exc:
        yield sse("failed", json.dumps({"stage": exc.stage, "message": exc.detail}), id=END)
        return
    result = _RESULT.dump_json(stream.result, by_alias=True, exclude_defaults=True)
    yield sse("result", result, id=END)


app = make_app()
