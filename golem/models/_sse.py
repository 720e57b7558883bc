"""Server-Sent Events: an incremental parser and the JSON reading of an event's data.

parser = SSEParser()
for event in parser.feed(chunk): ...        # as bytes arrive
events = parser.close()                     # at end of stream; parser.incomplete
"""

from __future__ import annotations

from typing import Any, NamedTuple

from golem.errors import ModelResponseError
from golem.strict_json import TooDeep, loads_strict


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


def event_json(event: ServerSentEvent, provider: str) -> Any:
    """Decode an event's data as strict JSON, naming the provider and the bad data otherwise."""
    try:
        return loads_strict(event.data)
    except TooDeep as exc:
        raise ModelResponseError(
            f"malformed stream event {event.event!r}: data is {exc}", provider=provider
        ) from None
    except ValueError:
        raise ModelResponseError(
            f"malformed stream event {event.event!r}: data is not JSON: {event.data[:200]!r}",
            provider=provider,
        ) from None
