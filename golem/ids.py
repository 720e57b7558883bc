"""Run and conversation identifiers: time-ordered UUIDv7 strings.

Identifiers are opaque: match and store them, parse nothing from them beyond the
UUID's timestamp. Inside a Temporal workflow ids are minted by the executor
(``workflow.uuid7()``), never here, because this module reads the wall clock.
"""

from __future__ import annotations

import uuid

import uuid6

#: The longest id Temporal takes for a workflow (its server's default ``limit.maxIDLength``):
#: a child turn's run id is its workflow id.
MAX_ID_CHARS = 1000


def new_id() -> str:
    """Return a fresh canonical lowercase UUIDv7 (time-ordered) string."""
    return str(uuid6.uuid7())


def minted(text: str) -> bool:
    """Whether ``text`` could be an id golem minted: a canonical UUIDv7 string."""
    try:
        parsed = uuid.UUID(text)
    except ValueError:
        return False
    return parsed.version == 7 and str(parsed) == text
