"""Provider error bodies as :class:`~golem.models.base.ModelHTTPError`.

raise http_error(response, "openai")          # an HTTP error status, body already read
raise stream_error(event_data, "anthropic")   # an error object inside a 200 stream
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx

from golem.errors import ModelHTTPError, ModelResponseError
from golem.models._retry_after import parse_retry_after, retry_info_delay
from golem.models._sse import ServerSentEvent, event_json
from golem.strict_json import dumps_strict, loads_strict

_TITLE = re.compile(rb"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)

# Anthropic names its error types; map them to the HTTP status they stand for mid-stream.
_ERROR_TYPE_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}
# OpenAI names error codes in stream error events and failed responses; the status of each.
_ERROR_CODE_STATUS = {
    "rate_limit_exceeded": 429,
    "server_error": 500,
    "invalid_prompt": 400,
    "context_length_exceeded": 400,
}


def error_object(body: Any) -> dict[str, Any] | None:
    """The ``"error"`` object of a provider's error body, or ``None``."""
    if isinstance(body, list) and body:
        body = body[0]  # Gemini's non-SSE streaming endpoint wraps errors in a list
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        error: dict[str, Any] = body["error"]
        return error
    return None


def error_message(status: int, reason: str, content_type: str, text: str, body: Any) -> str:
    """The provider's own message from an error body, or a clear description of what came back."""
    error = error_object(body)
    if error is not None and isinstance(error.get("message"), str) and error["message"]:
        return str(error["message"])
    if isinstance(body, dict):
        for key in ("error", "message", "detail"):
            if isinstance(body.get(key), str) and body[key]:
                return str(body[key])
    stripped = text.strip()
    if not stripped:
        return f"empty response body ({status} {reason})".rstrip()
    if "html" in content_type or stripped.startswith("<"):
        match = _TITLE.search(stripped.encode("utf-8", errors="replace"))
        title = match.group(1).decode("utf-8", errors="replace").strip() if match else ""
        where = f" titled {title!r}" if title else ""
        return (
            f"the server answered {status} with an HTML page{where} instead of an API error "
            "(probably a proxy or gateway in front of the provider)"
        )
    return stripped[:500]


def _json_or_none(text: str) -> Any:
    try:
        return loads_strict(text) if text else None
    except ValueError:
        return None


def http_error(response: httpx.Response, provider: str) -> ModelHTTPError:
    """Map an HTTP error response (already read) to :class:`ModelHTTPError`."""
    text = response.text
    body = _json_or_none(text)
    message = error_message(
        response.status_code,
        response.reason_phrase,
        response.headers.get("content-type", ""),
        text,
        body,
    )
    return ModelHTTPError(
        response.status_code,
        message,
        provider=provider,
        retry_after=parse_retry_after(response.headers, error_object(body)),
        body=text[:4000],
    )


def stream_error(body: Any, provider: str) -> ModelHTTPError:
    """An error object sent inside a 200 answer, as the HTTP error it stands for.

    The error is the body's ``"error"`` object, or the body itself when its fields sit at the
    top (the Responses API's ``error`` event: ``{"type": "error", "code", "message"}``).
    """
    error = error_object(body) or (body if isinstance(body, dict) else {})
    code = error.get("code")
    if isinstance(code, int):
        status = code
    elif str(code) in _ERROR_CODE_STATUS:
        status = _ERROR_CODE_STATUS[str(code)]
    elif error.get("param"):
        status = 400  # an error that names a request parameter is the request's fault
    else:
        status = _ERROR_TYPE_STATUS.get(str(error.get("type", "")), 500)
    message = str(error.get("message") or "error event in the response stream")
    return ModelHTTPError(
        status,
        message,
        provider=provider,
        retry_after=retry_info_delay(error),
        body=json.dumps(body, ensure_ascii=False)[:4000],
    )


def raise_for_error(data: Any, provider: str) -> None:
    """Raise the provider error a 200 answer or stream event carries instead of content."""
    if isinstance(data, dict) and (data.get("type") == "error" or data.get("error")):
        raise stream_error(data, provider)


def event_data(event: ServerSentEvent, provider: str) -> Any:
    """A stream event's JSON data; the provider error it carries is raised."""
    data = event_json(event, provider)
    if event.event == "error":
        raise stream_error(data, provider)
    raise_for_error(data, provider)
    return data


def unreadable_answer(data: Any, missing: str, provider: str) -> ModelResponseError:
    """A 200 answer without the part every answer has (never retryable: it is not transient)."""
    return ModelResponseError(
        f"response has no {missing}: {dumps_strict(data)[:200]}", provider=provider
    )
