"""Plumbing shared by the provider adapters: SSE parsing, error mapping, the HTTP base.

Adapters speak to providers with plain httpx (no SDKs) and never retry: every
failure becomes a :class:`~golem.models.base.ModelError` whose ``retryable`` and
``retry_after`` let the executor decide.
"""

from __future__ import annotations

import base64
import json
import os
import re
import time
from collections.abc import AsyncGenerator, Mapping
from email.utils import parsedate_to_datetime
from typing import Any, NamedTuple

import httpx

from golem.messages import Message, Part
from golem.models.base import (
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelResponseError,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "HTTPModel",
    "SSEParser",
    "ServerSentEvent",
    "args_object",
    "args_object_text",
    "http_error",
    "parse_json_body",
    "parse_retry_after",
    "sse_json",
]

DEFAULT_TIMEOUT = httpx.Timeout(600.0, connect=10.0)
"""Connect quickly or fail; a long generation may legitimately take minutes."""

_REDACTED = "***"


# --- tool-call arguments on the wire -------------------------------------------------------


def args_object(args: str) -> dict[str, Any]:
    """The arguments as a JSON object for the wire.

    A call whose arguments are not a JSON object (a stream that died mid-arguments)
    is sent as ``{"truncated_args": "<verbatim text>"}`` so the provider accepts the
    history and the model sees what went wrong; empty arguments are ``{}``.
    """
    if args == "":
        return {}
    try:
        value = json.loads(args)
    except ValueError:
        return {"truncated_args": args}
    return value if isinstance(value, dict) else {"truncated_args": args}


def args_object_text(args: str) -> str:
    """The arguments as JSON object text: verbatim when already an object, else shaped.

    Deterministic byte for byte, so replayed histories stay prompt-cache friendly.
    """
    if args == "":
        return "{}"
    try:
        value = json.loads(args)
    except ValueError:
        value = None
    if isinstance(value, dict):
        return args
    return json.dumps({"truncated_args": args}, ensure_ascii=False, separators=(",", ":"))


# --- Server-Sent Events ----------------------------------------------------------------------


class ServerSentEvent(NamedTuple):
    """One dispatched event: ``data`` lines joined with newlines."""

    event: str
    data: str
    id: str = ""
    retry: int | None = None


class SSEParser:
    """Incremental Server-Sent Events parser: feed bytes as they arrive, get events out.

    Follows the WHATWG event-stream rules: LF, CRLF and CR line endings (also split
    across chunks), multi-line ``data:``, ``:`` comments, a leading BOM; an event
    left without its blank line at end of stream is not dispatched.
    """

    __slots__ = ("_data", "_event", "_id", "_pending", "_retry", "_started", "incomplete")

    def __init__(self) -> None:
        self._pending = b""
        self._data: list[bytes] = []
        self._event = b""
        self._id = b""
        self._retry: int | None = None
        self._started = False
        self.incomplete = False
        """After :meth:`close`: whether the stream ended in the middle of an event."""

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Parse a chunk; return the events it completed."""
        if self._pending:
            chunk = self._pending + chunk
            self._pending = b""
        if not self._started and chunk:
            self._started = True
            if chunk.startswith(b"\xef\xbb\xbf"):
                chunk = chunk[3:]
        lines = chunk.splitlines(keepends=True)
        if not lines:
            return []
        last = lines[-1]
        # an unterminated line, or a CR that may be the first half of a CRLF, waits for more
        if last[-1:] == b"\r" or last[-1:] != b"\n":
            self._pending = lines.pop()
        events: list[ServerSentEvent] = []
        data = self._data
        for raw in lines:
            line = raw.rstrip(b"\r\n")
            if not line:
                if data or self._event:
                    events.append(self._dispatch())
                    data = self._data
                continue
            if line[:5] == b"data:":
                data.append(line[6:] if line[5:6] == b" " else line[5:])
            elif line[:1] == b":":
                continue
            else:
                self._field(line)
        return events

    def close(self) -> list[ServerSentEvent]:
        """End of stream: process a held-back final line; report an undispatched event."""
        events: list[ServerSentEvent] = []
        if self._pending:
            pending, self._pending = self._pending, b""
            if pending.endswith(b"\r"):
                events = self.feed(pending[:-1] + b"\n")
            else:
                self.feed(pending + b"\n")
        self.incomplete = bool(self._data or self._event)
        self._data, self._event = [], b""
        return events

    def _field(self, line: bytes) -> None:
        name, sep, value = line.partition(b":")
        if sep and value[:1] == b" ":
            value = value[1:]
        if name == b"event":
            self._event = value
        elif name == b"data":
            self._data.append(value)
        elif name == b"id" and b"\0" not in value:
            self._id = value
        elif name == b"retry" and value.isdigit():
            self._retry = int(value)

    def _dispatch(self) -> ServerSentEvent:
        data = b"\n".join(self._data).decode("utf-8", errors="replace")
        event = ServerSentEvent(
            self._event.decode("utf-8", errors="replace") or "message",
            data,
            self._id.decode("utf-8", errors="replace"),
            self._retry,
        )
        self._data, self._event = [], b""
        return event


def sse_json(event: ServerSentEvent, provider: str) -> Any:
    """Decode an event's JSON data, naming the provider and the bad data when it is not JSON."""
    try:
        return json.loads(event.data)
    except ValueError:
        raise ModelResponseError(
            f"malformed stream event {event.event!r}: data is not JSON: {event.data[:200]!r}",
            provider=provider,
        ) from None


# --- errors ----------------------------------------------------------------------------------


def parse_retry_after(
    headers: Mapping[str, str], body: Any = None, *, now: float | None = None
) -> float | None:
    """Seconds to wait, from ``retry-after-ms``, ``retry-after`` or Gemini's ``RetryInfo``.

    An HTTP date is measured against the response's own ``Date`` header when present.
    """
    value = headers.get("retry-after-ms")
    if value:
        try:
            return max(float(value) / 1000.0, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value:
        try:
            return max(float(value), 0.0)
        except ValueError:
            pass
        try:
            when = parsedate_to_datetime(value).timestamp()
        except (TypeError, ValueError, IndexError):
            when = None
        if when is not None:
            if now is None:
                now = _reference_time(headers)
            return max(when - now, 0.0)
    return _gemini_retry_delay(body)


def _reference_time(headers: Mapping[str, str]) -> float:
    date = headers.get("date")
    if date:
        try:
            return parsedate_to_datetime(date).timestamp()
        except (TypeError, ValueError, IndexError):
            pass
    return time.time()


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


def _gemini_retry_delay(body: Any) -> float | None:
    error = _error_object(body)
    details = error.get("details") if error else None
    if not isinstance(details, list):
        return None
    for detail in details:
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("RetryInfo"):
            match = _DURATION.match(str(detail.get("retryDelay", "")))
            if match:
                return float(match.group(1))
    return None


def _error_object(body: Any) -> dict[str, Any] | None:
    if isinstance(body, list) and body:
        body = body[0]  # Gemini's non-SSE streaming endpoint wraps errors in a list
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        error: dict[str, Any] = body["error"]
        return error
    return None


_TITLE = re.compile(rb"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)


def error_message(status: int, reason: str, content_type: str, text: str, body: Any) -> str:
    """The provider's own message from an error body, or a clear description of what came back."""
    error = _error_object(body)
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


def parse_json_body(text: str) -> Any:
    """JSON of a body, or ``None`` when it is not JSON."""
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


def http_error(response: httpx.Response, provider: str, secret: str = "") -> ModelHTTPError:
    """Map an HTTP error response (already read) to :class:`ModelHTTPError`."""
    text = _redact(response.text, secret)
    body = parse_json_body(text)
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
        retry_after=parse_retry_after(response.headers, body),
        body=text[:4000],
    )


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


def stream_error(body: Any, provider: str, secret: str = "") -> ModelHTTPError:
    """An error object sent inside a 200 stream, as the HTTP error it stands for."""
    error = _error_object(body) or {}
    status = error.get("code") if isinstance(error.get("code"), int) else None
    if status is None:
        status = _ERROR_TYPE_STATUS.get(str(error.get("type", "")), 500)
    message = str(error.get("message") or "error event in the response stream")
    return ModelHTTPError(
        status,
        _redact(message, secret),
        provider=provider,
        retry_after=_gemini_retry_delay(body),
        body=_redact(json.dumps(body)[:4000], secret),
    )


def _redact(text: str, secret: str) -> str:
    return text.replace(secret, _REDACTED) if secret and len(secret) >= 8 else text


# --- the HTTP base of every adapter ----------------------------------------------------------


class HTTPModel:
    """Shared construction, client reuse, posting and error mapping for the adapters."""

    provider = ""
    default_base_url = ""
    api_key_env: tuple[str, ...] = ()
    base_url_env: tuple[str, ...] = ()

    def __init__(
        self,
        name: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.name = name
        env_base = next((os.environ[v] for v in self.base_url_env if os.environ.get(v)), None)
        self.base_url = (base_url or env_base or self.default_base_url).rstrip("/")
        env_key = next((os.environ[v] for v in self.api_key_env if os.environ.get(v)), "")
        self._api_key = api_key if api_key is not None else env_key
        self._client = http_client

    @property
    def model_name(self) -> str:
        return self.name

    def __repr__(self) -> str:
        # never the key: reprs end up in logs, tracebacks and Temporal payloads
        return f"{type(self).__name__}(name={self.name!r}, base_url={self.base_url!r})"

    def _require_key(self) -> str:
        if not self._api_key and self.base_url == self.default_base_url:
            names = " or ".join(self.api_key_env)
            raise ModelError(f"no API key: pass api_key= or set {names}", provider=self.provider)
        return self._api_key

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=DEFAULT_TIMEOUT)
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP client this adapter created (a caller's client is left alone)."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def _encode(self, body: dict[str, Any]) -> bytes:
        return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    async def _post_json(self, url: str, headers: dict[str, str], body: dict[str, Any]) -> Any:
        """POST a JSON body, return the decoded JSON answer or raise a ModelError."""
        try:
            response = await self._http().post(url, content=self._encode(body), headers=headers)
        except httpx.TimeoutException as exc:
            raise self._connection_error("timed out", exc) from None
        except httpx.TransportError as exc:
            raise self._connection_error("could not reach the provider", exc) from None
        if response.status_code >= 400:
            raise http_error(response, self.provider, self._api_key)
        text = response.text
        if not text.strip():
            raise ModelResponseError(
                f"empty response body (HTTP {response.status_code})",
                provider=self.provider,
                retryable=True,
            )
        try:
            return json.loads(text)
        except ValueError:
            ctype = response.headers.get("content-type", "")
            raise ModelResponseError(
                f"response body is not JSON (content-type {ctype!r}): {text[:200]!r}",
                provider=self.provider,
                retryable=True,
            ) from None

    async def _post_stream(
        self, url: str, headers: dict[str, str], body: dict[str, Any], terminal: str
    ) -> AsyncGenerator[ServerSentEvent, None]:
        """POST and yield the answer's SSE events; transport failures become ModelErrors.

        ``terminal`` names the provider's end-of-stream marker for error messages.
        """
        try:
            async with self._http().stream(
                "POST", url, content=self._encode(body), headers=headers
            ) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise http_error(response, self.provider, self._api_key)
                ctype = response.headers.get("content-type", "")
                if "html" in ctype:
                    await response.aread()
                    raise ModelResponseError(
                        f"expected an event stream, got {ctype!r}: {response.text[:200]!r}",
                        provider=self.provider,
                        retryable=True,
                    )
                parser = SSEParser()
                try:
                    async for chunk in response.aiter_bytes():
                        for event in parser.feed(chunk):
                            yield event
                except httpx.TimeoutException as exc:
                    raise self._connection_error("timed out reading the stream", exc) from None
                except httpx.TransportError as exc:
                    raise ModelResponseError(
                        f"stream interrupted before {terminal} ({type(exc).__name__}: {exc})",
                        provider=self.provider,
                        retryable=True,
                    ) from None
                for event in parser.close():
                    yield event
        except httpx.TimeoutException as exc:
            raise self._connection_error("timed out", exc) from None
        except httpx.TransportError as exc:
            raise self._connection_error("could not reach the provider", exc) from None

    def _truncated(self, terminal: str, what: str = "") -> ModelResponseError:
        detail = f" ({what})" if what else ""
        return ModelResponseError(
            f"stream ended before {terminal}{detail}", provider=self.provider, retryable=True
        )

    def _connection_error(self, what: str, exc: Exception) -> ModelConnectionError:
        text = _redact(str(exc), self._api_key) or type(exc).__name__
        return ModelConnectionError(f"{what} at {self.base_url}: {text}", provider=self.provider)


# --- request building shared by adapters -----------------------------------------------------


def system_text(messages: list[Message]) -> str:
    """All system messages' text, in order, separated by blank lines."""
    return "\n\n".join(m.content for m in messages if m.role == "system" and m.content)


def base64_text(data: bytes) -> str:
    """Inline media as standard base64 text."""
    return base64.b64encode(data).decode("ascii")


def merge_turns(turns: list[tuple[str, list[Any]]]) -> list[tuple[str, list[Any]]]:
    """Join consecutive turns of the same role (tool results and a following user prompt)."""
    merged: list[tuple[str, list[Any]]] = []
    for role, blocks in turns:
        if not blocks:
            continue
        if merged and merged[-1][0] == role:
            merged[-1][1].extend(blocks)
        else:
            merged.append((role, list(blocks)))
    return merged


def unsupported_part(provider: str, part: Part, where: str) -> ModelError:
    """A media part the provider cannot take in that place (never retryable)."""
    source = "URL" if part.url else "inline data"
    return ModelError(
        f"{part.kind} parts given as {source} are not supported in {where}", provider=provider
    )
