"""JSON read the way the providers read it: RFC 8259, no ``NaN``/``Infinity``.

    value = loads_strict(text)          # ValueError naming the problem otherwise
    ok = is_json_object(call.args)      # what the history passes call "not truncated"

Python's ``json`` accepts ``NaN``, ``Infinity`` and ``-Infinity``; no provider does, so a
lenient reader would let a model's broken arguments through to a request that is then
rejected. Every place golem reads JSON that came from a model or a user uses this one.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic_core import from_json

__all__ = ["dumps_strict", "is_json_object", "loads_strict"]


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


_STRICT = json.JSONDecoder(parse_constant=_reject_constant)


def loads_strict(text: str | bytes) -> Any:
    """Parse one JSON value strictly; ``ValueError`` (a ``json.JSONDecodeError`` for syntax)
    otherwise."""
    try:
        return from_json(
            text,
            allow_inf_nan=False,
            cache_strings=False,  # pragma: no mutate (memory only: nothing a test can see)
        )
    except ValueError:
        pass
    # pydantic-core rejects escaped lone surrogates that the RFC 8259 grammar allows, and
    # its messages lack positions: the stdlib decides, and explains.
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    return _STRICT.decode(text)


def is_json_object(text: str) -> bool:
    """True when ``text`` is one valid JSON object (surrounding whitespace allowed)."""
    try:
        return isinstance(loads_strict(text), dict)
    except (ValueError, TypeError, UnicodeDecodeError):
        return False


def dumps_strict(value: Any) -> str:
    """Compact JSON that refuses ``NaN`` and infinities (``ValueError``) instead of writing
    a bare ``NaN`` no provider accepts."""
    return json.dumps(value, allow_nan=False, separators=(",", ":"), ensure_ascii=False)
