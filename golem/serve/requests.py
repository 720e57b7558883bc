"""Reading a request: its JSON body, bounded (413 with the limit once it is over)."""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.requests import Request

from golem.serve.errors import Problem
from golem.strict_json import loads_strict

#: The largest request body served by default: a long transcript sent back by AG-UI.
MAX_BODY_BYTES = 4 * 1024 * 1024
#: An escaped UTF-16 surrogate: JSON's grammar takes a lone one, which no UTF-8 text holds.
_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


async def read_json(request: Request, limit: int) -> dict[str, Any]:
    """The body as a JSON object; 413 past ``limit`` bytes (never read further), 400 when
    it is not a JSON object (RFC 8259 in UTF-8: no NaN, no lone surrogate, nothing nested
    past golem's depth limit)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise Problem(413, f"the request body is {declared} bytes: this server takes {limit}")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise Problem(413, f"the request body is over {limit} bytes: this server takes no more")
        chunks.append(chunk)
    data = b"".join(chunks) or b"null"
    try:
        body = loads_strict(data)
    except ValueError as exc:
        raise Problem(400, f"the request body is not JSON: {exc}") from None
    if _SURROGATE.search(data):  # a pair is a character; a lone one fails where it is encoded
        try:
            json.dumps(body, ensure_ascii=False).encode()
        except UnicodeEncodeError as exc:
            lone = f"\\u{ord(exc.object[exc.start]):04x}"
            raise Problem(
                400, f"the request body is not UTF-8 text: it holds a lone surrogate ({lone})"
            ) from None
    if not isinstance(body, dict):
        raise Problem(400, f"the request body must be a JSON object, not {type(body).__name__}")
    return body
