"""JSON read the way the providers read it: RFC 8259, no ``NaN``/``Infinity``.

    value = loads_strict(text)          # ValueError naming the problem otherwise
    ok = is_json_object(call.args)      # what the history passes call "not truncated"

Python's ``json`` accepts ``NaN``, ``Infinity`` and ``-Infinity``; no provider does, so a
lenient reader would let a model's broken arguments through to a request that is then
rejected. Every place golem reads JSON that came from a model or a user uses this one.

Nothing nested deeper than :data:`MAX_DEPTH` levels is JSON to golem (:class:`TooDeep`,
a ``ValueError``): a recursive reader would otherwise exhaust the stack on 5,000 brackets
(docs/adr/0001-message-contract.md).
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

from pydantic_core import from_json

#: The deepest nesting of arrays and objects golem reads (as common JSON parsers do).
MAX_DEPTH = 256

_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class TooDeep(ValueError):
    """JSON nested deeper than :data:`MAX_DEPTH` levels."""

    def __init__(self, depth: int) -> None:
        self.depth = depth
        super().__init__(f"JSON nested {depth} levels deep, past golem's limit of {MAX_DEPTH}")


def check_depth(text: str) -> None:
    """Raise :class:`TooDeep` when arrays and objects in ``text`` nest deeper than
    :data:`MAX_DEPTH` (brackets inside strings aside); cheap for text that cannot."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return
    brackets = _NOT_BRACKETS.sub("", _STRINGS.sub("", text))
    depth = max(itertools.accumulate((_STEP[c] for c in brackets), initial=0))
    if depth > MAX_DEPTH:
        raise TooDeep(depth)


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


_STRICT = json.JSONDecoder(parse_constant=_reject_constant)


def loads_strict(text: str | bytes) -> Any:
    """Parse one JSON value strictly; ``ValueError`` otherwise (a ``json.JSONDecodeError``
    for syntax, :class:`TooDeep` past :data:`MAX_DEPTH`)."""
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
    check_depth(text)
    try:
        return _STRICT.decode(text)
    except RecursionError:  # a caller already deep in its own stack
        raise TooDeep(MAX_DEPTH + 1) from None


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
