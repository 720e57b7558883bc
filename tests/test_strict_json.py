"""golem.strict_json: JSON read and written the way the providers read it."""

from __future__ import annotations

import json

import pytest

from golem.strict_json import dumps_strict, is_json_object, loads_strict


@pytest.mark.parametrize("text", ["NaN", '{"a": Infinity}', "[-Infinity]"])
def test_loads_strict_refuses_the_constants_python_accepts(text: str) -> None:
    assert json.loads(text) is not None  # the lenient reader takes them
    with pytest.raises(ValueError, match=r"(NaN|-?Infinity) is not JSON"):
        loads_strict(text)


@pytest.mark.parametrize("text", ['{"a": "\\ud800"}', b'{"a": "\\ud800"}'])
def test_loads_strict_reads_escaped_lone_surrogates_from_str_and_bytes(text: str | bytes) -> None:
    assert loads_strict(text) == {"a": "\ud800"}


def test_loads_strict_reads_utf8_bytes() -> None:
    assert loads_strict('{"city": "Zürich", "sky": "🌧"}'.encode()) == {"city": "Zürich", "sky": "🌧"}


def test_loads_strict_syntax_errors_say_where() -> None:
    with pytest.raises(json.JSONDecodeError) as info:
        loads_strict('{"city": "Par')
    assert (info.value.lineno, info.value.colno) == (1, 10)


@pytest.mark.parametrize(
    ("text", "expected"),
    [('{"a": 1}', True), (" {} \n", True), ("[1]", False), ("{", False)],
)
def test_is_json_object(text: str, expected: bool) -> None:
    assert is_json_object(text) is expected


def test_dumps_strict_is_compact_keeps_non_ascii_and_refuses_nan() -> None:
    assert dumps_strict({"city": "Zürich", "days": [1, 2]}) == '{"city":"Zürich","days":[1,2]}'
    with pytest.raises(ValueError, match="not JSON compliant"):
        dumps_strict({"a": float("nan")})
