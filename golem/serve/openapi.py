"""The OpenAPI 3.1 document ``GET /openapi.json`` serves: every path ``golem serve`` answers."""

from __future__ import annotations

from typing import Any

from golem.serve.decisions import DECISION_SCHEMA

_ERROR = {
    "description": "refused: the reason in one line",
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "properties": {"error": {"type": "string"}, "code": {"type": "string"}},
                "required": ["error", "code"],
            }
        }
    },
}
_SSE = {"description": "server-sent events", "content": {"text/event-stream": {}}}
_ID = [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}]


def _body(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    schema = {"type": "object", "properties": properties, "required": required}
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def _op(summary: str, ok: dict[str, Any], body: dict[str, Any] | None = None, **more: Any) -> Any:
    operation: dict[str, Any] = {"summary": summary, "responses": {**ok, "4XX": _ERROR}}
    if body is not None:
        operation["requestBody"] = body
    return {**operation, **more}


def openapi(agents: list[str]) -> dict[str, Any]:
    """The document, naming the agents served."""
    json_ok = {"200": {"description": "done", "content": {"application/json": {}}}}
    agent = [{"name": "agent", "in": "path", "required": True, "schema": {"enum": agents}}]
    text = _body({"text": {"type": "string"}}, ["text"])

    def streamed(summary: str) -> dict[str, Any]:
        """A protocol endpoint: a JSON body in its own schema, events out."""
        body = {"required": True, "content": {"application/json": {}}}
        return {"post": _op(summary, {"200": _SSE}, body, parameters=agent)}

    decisions = _body(
        {"decisions": {"type": "object", "additionalProperties": DECISION_SCHEMA}}, ["decisions"]
    )
    result = {
        "type": "object",
        "properties": {
            "result": {"description": "the call's result: any JSON (a string as it is)"},
            "error": {"type": "string", "description": "why it failed (the model reads it)"},
        },
        "minProperties": 1,
        "maxProperties": 1,
        "additionalProperties": False,
    }
    results = _body({"results": {"type": "object", "additionalProperties": result}}, ["results"])
    return {
        "openapi": "3.1.0",
        "info": {"title": "golem serve", "version": "1"},
        "paths": {
            "/agents/{agent}/agui": streamed(
                "AG-UI 1.0: a RunAgentInput (threadId = conversation id) -> its events"
            ),
            "/agents/{agent}/chat": streamed(
                "Vercel AI SDK UI message stream: useChat's body (id = conversation id)"
            ),
            "/conversations": {
                "post": _op(
                    "start a conversation",
                    {"201": {"description": "its id", "content": {"application/json": {}}}},
                    _body({"agent": {"enum": agents}, "id": {"type": "string"}}, ["agent"]),
                ),
                "get": _op("the newest conversations", json_ok),
            },
            "/conversations/{id}": {
                "get": _op(
                    "transcript, status, the turn in flight (its run id and prompt), what waits",
                    json_ok,
                    parameters=_ID,
                )
            },
            "/conversations/{id}/messages": {
                "post": _op(
                    "a turn: returns once its run exists; follow it on /events",
                    {
                        "202": {"description": "its run id", "content": {"application/json": {}}},
                        "503": {"description": "no worker polls: the turn is queued (runId)"},
                    },
                    text,
                    parameters=_ID,
                )
            },
            "/conversations/{id}/events": {
                "get": _op(
                    "SSE of the turn in flight (or the last); Last-Event-ID <run id>:<offset> "
                    "resumes; the last event is waiting, result or failed",
                    {"200": _SSE, "204": {"description": "nothing to follow"}},
                    parameters=[
                        *_ID,
                        {"name": "Last-Event-ID", "in": "header", "schema": {"type": "string"}},
                    ],
                )
            },
            "/conversations/{id}/decisions": {
                "post": _op(
                    "answer waiting calls; returns when the turn ends or waits again",
                    json_ok,
                    decisions,
                    parameters=_ID,
                )
            },
            "/conversations/{id}/tool-results": {
                "post": _op(
                    "answer client-run tools' waiting calls (kind result); returns when the "
                    "turn ends or waits again",
                    json_ok,
                    results,
                    parameters=_ID,
                )
            },
            "/conversations/{id}/close": {
                "post": _op("close the conversation for good", json_ok, parameters=_ID)
            },
            "/pending": {"get": _op("every call that waits for a person", json_ok)},
            "/openapi.json": {"get": _op("this document", json_ok)},
            "/": {"get": _op("the console", {"200": {"description": "an HTML page"}})},
        },
    }
