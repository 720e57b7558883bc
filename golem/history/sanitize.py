"""Strip what an untrusted history may not assert, and report every attempt.

    history, report = sanitize_history(client_supplied)
    if report.system_prompts or report.unsafe_parts:
        audit.warn("client history sanitized", report)

Sanitizing narrows reach, not trust: authenticate at the transport, scope tools to the
caller, and re-validate high-stakes effects against server-side state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from golem.history.repair import HistoryRepair, normalize_history
from golem.messages import Message, Part

SAFE_URL_SCHEMES = frozenset({"http", "https"})
"""The only URL schemes a sanitized history may name."""

_SCHEME_FIRST = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_SCHEME_REST = _SCHEME_FIRST | frozenset("0123456789+-.")


@dataclass(frozen=True)
class UnsafePart:
    """A URL part :func:`sanitize_history` dropped."""

    message_index: int
    """Index of the message in the history as supplied."""
    kind: str
    """The part's kind (image, document, audio, video)."""
    scheme: str
    """The rejected scheme, lowercased; empty for a relative or scheme-relative URL."""


@dataclass(frozen=True)
class SanitizeReport:
    """Everything :func:`sanitize_history` removed or repaired."""

    system_prompts: int = 0
    """System messages dropped."""
    unsafe_parts: list[UnsafePart] = field(default_factory=list)
    """URL parts dropped because their scheme is not http or https."""
    repair: HistoryRepair = field(default_factory=HistoryRepair)
    """The pairing repair applied after the drops."""

    @property
    def changed(self) -> bool:
        """True when the returned history differs from the input."""
        return bool(self.system_prompts or self.unsafe_parts or self.repair.changed)


def sanitize_history(history: Sequence[Message]) -> tuple[list[Message], SanitizeReport]:
    """Drop system messages and non-http(s) URL parts, repair pairing, and report it all.

    Content is never rewritten: thinking, failure flags, call arguments, unknown fields
    and identity stamps pass through. A user message left empty by the drops is removed;
    a tool message never is, so pairing evidence survives. Deterministic and idempotent.
    """
    kept: list[Message] = []
    system_prompts = 0
    unsafe: list[UnsafePart] = []
    for index, message in enumerate(history):
        if message.role == "system":
            system_prompts += 1
            continue
        if message.parts:
            parts = _safe_parts(message.parts, index, unsafe)
            if parts is not None:
                if message.role == "user" and not message.content and not parts:
                    continue
                message = message.model_copy(update={"parts": parts})
        kept.append(message)
    repaired, repair = normalize_history(kept)
    return repaired, SanitizeReport(system_prompts, unsafe, repair)


def _safe_parts(parts: list[Part], index: int, unsafe: list[UnsafePart]) -> list[Part] | None:
    """The parts worth keeping, or None when every part is safe (nothing to copy)."""
    safe: list[Part] = []
    for part in parts:
        if part.url:
            scheme = url_scheme(part.url)
            if scheme not in SAFE_URL_SCHEMES:
                unsafe.append(UnsafePart(index, part.kind, scheme))
                continue
        safe.append(part)
    return None if len(safe) == len(parts) else safe


def url_scheme(url: str) -> str:
    """The URL's scheme, lowercased (RFC 3986); empty when the URL does not start with one."""
    colon = url.find(":")
    if colon < 1 or url[0] not in _SCHEME_FIRST:
        return ""
    scheme = url[:colon]
    # Anything before the colon that is not scheme syntax means there is no scheme at all.
    if not all(char in _SCHEME_REST for char in scheme):
        return ""
    return scheme.lower()
