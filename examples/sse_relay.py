"""Relay durable runs to a browser as server-sent events (Starlette, the ``web`` extra).

    pip install 'golem-temporal[web]'
    golem dev                                   # a Temporal dev server, and a golem worker
    GOLEM_AGENT=support uvicorn examples.sse_relay:app

    POST /runs {"prompt": "Hello"}     -> {"run_id": "..."}   (the run streams its deltas)
    GET  /runs/{run_id}/events         -> text/event-stream of the run's RunEvents

Each SSE event is ``event: <kind>``, ``data: <the RunEvent as JSON>`` and ``id: <offset>``;
a browser's ``EventSource`` that loses its connection reconnects with ``Last-Event-ID``
and gets the rest of the run, each event once. The stream ends with ``event: result``
(the Result as JSON) or ``event: error`` (the RunError's stage, message). The relay holds
no state: any replica can serve any reconnect.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from pydantic import TypeAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from temporalio.client import Client

from golem import Result, RunError
from golem.client import DurableAgent
from golem.events import RunEvent
from golem.worker.converter import golem_data_converter

_EVENT = TypeAdapter(RunEvent)
_RESULT = TypeAdapter(Result[Any])


def sse(event: str, data: bytes | str, id: int | None = None) -> bytes:
    """One server-sent event (``data`` is JSON: it holds no newline)."""
    text = data.decode() if isinstance(data, bytes) else data
    head = f"id: {id}\n" if id is not None else ""
    return f"{head}event: {event}\ndata: {text}\n\n".encode()


def make_app(durable: DurableAgent[Any] | None = None) -> Starlette:
    """The relay for ``durable``; without one, it connects from the environment at startup
    (``TEMPORAL_ADDRESS``, ``GOLEM_AGENT``, ``GOLEM_TASK_QUEUE``)."""
    agents: dict[str, DurableAgent[Any]] = {}
    if durable is not None:
        agents["agent"] = durable

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if not agents:
            address = os.environ.get("TEMPORAL_ADDRESS", "localhost:7233")
            client = await Client.connect(address, data_converter=golem_data_converter)
            name = os.environ.get("GOLEM_AGENT", "agent")
            task_queue = os.environ.get("GOLEM_TASK_QUEUE", "golem")
            agents["agent"] = DurableAgent(client, name, task_queue=task_queue)
        yield

    async def start(request: Request) -> Response:
        body = await request.json()
        prompt = body.get("prompt") if isinstance(body, dict) else None
        if not isinstance(prompt, str) or not prompt:
            return JSONResponse({"error": 'send {"prompt": "..."}'}, status_code=400)
        run = await agents["agent"].start(prompt, stream=True)
        return JSONResponse({"run_id": run.run_id, "conversation_id": run.conversation_id})

    async def events(request: Request) -> Response:
        last = request.headers.get("last-event-id", "0")
        if not last.isdigit():
            return JSONResponse({"error": f"Last-Event-ID must be an offset, not {last!r}"}, 400)
        run = await agents["agent"].attach(request.path_params["run_id"])
        stream = run.stream(from_offset=int(last))

        async def relay() -> AsyncIterator[bytes]:
            try:
                async for event in stream:
                    data = _EVENT.dump_json(event, by_alias=True, exclude_defaults=True)
                    yield sse(event.kind, data, id=stream.offset)
            except RunError as exc:
                yield sse("error", json.dumps({"stage": exc.stage, "message": exc.detail}))
                return
            result = _RESULT.dump_json(stream.result, by_alias=True, exclude_defaults=True)
            yield sse("result", result, id=stream.offset)

        return StreamingResponse(relay(), media_type="text/event-stream")

    return Starlette(
        routes=[
            Route("/runs", start, methods=["POST"]),
            Route("/runs/{run_id}/events", events, methods=["GET"]),
        ],
        lifespan=lifespan,
    )


app = make_app()
