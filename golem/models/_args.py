"""Tool-call arguments between golem's history (verbatim text) and a provider's wire (an object).

    args_object('{"a": NaN}')       # {"truncated_args": '{"a": NaN}'}: NaN is not JSON
    args_object_text('{"a": 1}')    # '{"a": 1}', verbatim

A call whose arguments are not one strict JSON object (a stream that died mid-arguments,
``NaN``) is sent as ``{"truncated_args": "<verbatim text>"}``, the same rule the history
passes use (:func:`golem.strict_json.is_json_object`), so the provider accepts the history
and the model sees what went wrong.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from golem.messages import ToolCall
from golem.strict_json import dumps_strict, is_json_object, loads_strict


def read_call(item: Mapping[str, Any], id_key: str, args: str) -> ToolCall:
    """A tool call read from a provider's JSON object (a missing id or name is "")."""
    return ToolCall(id=item.get(id_key) or "", name=item.get("name") or "", args=args)


def args_object(args: str) -> dict[str, Any]:
    """The arguments as a JSON object for the wire; empty arguments are ``{}``."""
    if args == "":
        return {}
    try:
        value = loads_strict(args)
    except ValueError:
        return {"truncated_args": args}
    return value if isinstance(value, dict) else {"truncated_args": args}


def args_object_text(args: str) -> str:
    """The arguments as JSON object text: verbatim when already an object, else shaped.

    Deterministic byte for byte, so replayed histories stay prompt-cache friendly.
    """
    if args == "":
        return "{}"
    if is_json_object(args):
        return args
    return dumps_strict({"truncated_args": args})


def args_text(value: Any) -> str:
    """A provider's arguments object as the text golem keeps in ``ToolCall.args``."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False)
