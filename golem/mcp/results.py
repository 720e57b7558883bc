"""What an MCP tool call's answer means to a run, the same in process and durably.

A ``CallToolResult`` becomes the call's outcome: text content as its content, images,
audio and embedded resources as parts, ``is_error`` as a failed result the model sees. A
JSON-RPC error answering the call is either the model's to correct (invalid arguments) or
the tool's failure (retried where a retry may help, as ``temporalio.mcp`` classifies it).
"""

from __future__ import annotations

import base64
import binascii
import json

from mcp.types import (
    CONNECTION_CLOSED,
    HEADER_MISMATCH,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    PARSE_ERROR,
    REQUEST_TIMEOUT,
    UNSUPPORTED_PROTOCOL_VERSION,
    URL_ELICITATION_REQUIRED,
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
)

from golem.messages import Part
from golem.tools import ToolOutcome
from golem.toolsets import ToolsetRefusal

#: Error codes a retry of the same call cannot fix (``temporalio.mcp`` fails its activity
#: for good on them); any other error answer is retried.
NOT_RETRYABLE = frozenset(
    {
        PARSE_ERROR,
        INVALID_REQUEST,
        METHOD_NOT_FOUND,
        INVALID_PARAMS,
        HEADER_MISMATCH,
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        UNSUPPORTED_PROTOCOL_VERSION,
        URL_ELICITATION_REQUIRED,
    }
)
#: The connection broke with the call in flight: the server may have run it.
LOST_CONNECTION = frozenset({CONNECTION_CLOSED, REQUEST_TIMEOUT})


def rejected(code: int, message: str) -> ToolOutcome | None:
    """The outcome of an error answer the model can correct (``None`` for any other)."""
    if code != INVALID_PARAMS:
        return None
    # Counted like golem's own invalid arguments: past max_retries the run ends.
    return ToolOutcome(status="retry", content=f"the server rejected the call: {message}")


def outcome(result: CallToolResult) -> ToolOutcome:
    """The run's outcome of a tool's answer (``ToolsetRefusal`` if its media is not base64)."""
    texts: list[str] = []
    parts: list[Part] = []
    for block in result.content:
        if isinstance(block, TextContent):
            texts.append(block.text)
        elif isinstance(block, ImageContent | AudioContent):
            kind = "image" if isinstance(block, ImageContent) else "audio"
            parts.append(Part(kind=kind, data=_bytes(block.data), media_type=block.mime_type))
        elif isinstance(block, EmbeddedResource):
            part = _resource(block)
            if part.data:  # an empty resource is no part
                parts.append(part)
        elif isinstance(block, ResourceLink):
            texts.append(f"[resource {block.name}: {block.uri}]")
    if not texts and not parts and result.structured_content is not None:
        texts.append(json.dumps(result.structured_content))
    status = "failed" if result.is_error else "ok"
    return ToolOutcome(status=status, content="\n".join(texts), parts=parts)


def _resource(block: EmbeddedResource) -> Part:
    contents = block.resource
    media_type = contents.mime_type or ""
    if isinstance(contents, BlobResourceContents):
        data = _bytes(contents.blob)
        media_type = media_type or "application/octet-stream"
    else:
        data = contents.text.encode()
        media_type = media_type or "text/plain"
    kind = media_type.partition("/")[0]
    return Part(
        kind=kind if kind in ("image", "audio", "video") else "document",
        data=data,
        media_type=media_type,
    )


def _bytes(data: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except binascii.Error as exc:
        raise ToolsetRefusal(f"the server sent media that is not base64: {exc}") from None
