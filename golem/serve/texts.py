"""The text message open in a protocol's stream: what AG-UI and the AI SDK stream share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

E = TypeVar("E")


class OpenText(Generic[E]):
    """One model turn's text open at a time (keyed by run and turn), opened on its first
    text and closed before anything else goes out; ``start`` and ``end`` make the events."""

    def __init__(self, start: Callable[[str], E], end: Callable[[str], E]) -> None:
        self.start, self.end = start, end
        self.key: str | None = None
        """The text open now."""
        self.texted: set[str] = set()
        """The turns whose text went out (a model that did not stream sends it at its end)."""

    def open(self, key: str) -> list[E]:
        """The events that leave turn ``key``'s text open (closing another first)."""
        if self.key == key:
            return []
        out = self.close()
        self.key = key
        self.texted.add(key)
        return [*out, self.start(key)]

    def close(self) -> list[E]:
        """The event that closes the open text, if one is open."""
        if self.key is None:
            return []
        ended = self.end(self.key)
        self.key = None
        return [ended]
