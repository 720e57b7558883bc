"""Places in a JSON value, and the value with one place changed: what the fuzz tests
(tests/test_serve_fuzz.py, tests/test_wire_fuzz.py) mutate a valid input with."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: What a change returns to take its place out of the value.
REMOVE = object()


def places(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in ``value`` (its keys' and indexes' paths; ``()``: the value itself)."""
    found = [at]
    if isinstance(value, dict):
        for key, item in value.items():
            found += places(item, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += places(item, (*at, index))
    return found


def changed(value: Any, at: tuple[Any, ...], change: Callable[[Any], Any]) -> Any:
    """``value`` with the place ``at`` given to ``change`` (a function of what is there;
    ``REMOVE`` takes it out); ``value`` itself is left as it was."""
    if not at:
        return change(value)
    head, rest = at[0], at[1:]
    out: Any = dict(value) if isinstance(value, dict) else list(value)
    inner = changed(value[head], rest, change)
    if inner is REMOVE:
        del out[head]
    else:
        out[head] = inner
    return out
