"""Request bodies: the pieces every adapter builds them from, and their strict encoding.

content = encode_body(body, "openai")     # bytes; a NaN anywhere is a ModelError
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Iterator
from typing import Any

from golem.errors import ModelError
from golem.messages import Message, Part
from golem.strict_json import dumps_strict


def encode_body(body: dict[str, Any], provider: str) -> bytes:
    """The body as JSON bytes, refusing ``NaN``, infinities and non-JSON values.

    No provider accepts a bare ``NaN``; the error names where it is (never retryable).
    """
    try:
        return dumps_strict(body).encode("utf-8")
    except (TypeError, ValueError) as exc:
        culprit = next(_not_json(body, "body"), None)
        what = f"{culprit[0]} is {culprit[1]!r}" if culprit else str(exc)
        raise ModelError(
            f"request body is not JSON: {what}; NaN, infinities and non-JSON values cannot be sent",
            provider=provider,
        ) from None


def _not_json(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _not_json(item, f"{path}.{key}")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _not_json(item, f"{path}[{index}]")
    elif isinstance(value, float):
        if not math.isfinite(value):
            yield path, value
    elif not (value is None or isinstance(value, str | int)):
        yield path, value


def system_text(messages: list[Message]) -> str:
    """All system messages' text, in order, separated by blank lines."""
    return "\n\n".join(m.content for m in messages if m.role == "system" and m.content)


def with_format(extra: dict[str, Any], key: str, format: dict[str, Any]) -> dict[str, Any]:
    """``{"format": format}`` with the caller's own ``extra[key]`` settings beside it (taken
    out of ``extra``, so ``body.update(extra)`` does not overwrite the format)."""
    given = extra.pop(key) if isinstance(extra.get(key), dict) else {}
    return {"format": format, **given}


def system_entry(key: str, messages: list[Message]) -> dict[str, str]:
    """``{key: the system text}`` for a body, or nothing when the messages hold none."""
    text = system_text(messages)
    return {key: text} if text else {}


def tool_result_text(message: Message) -> str:
    """A tool message's text where results have no error flag: a failure is ``{"error": ...}``."""
    if message.failed:
        return json.dumps({"error": message.content}, ensure_ascii=False)
    return message.content


def base64_text(data: bytes) -> str:
    """Inline media as standard base64 text."""
    return base64.b64encode(data).decode("ascii")


def data_url(part: Part) -> str:
    """Inline media as a ``data:`` URL."""
    return f"data:{part.media_type};base64,{base64_text(part.data)}"


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
