"""Live-stream items the Temporal UI can read: golem's converter writes them as JSON.

    payload = converter.to_payload(publish_input)   # items: [{"topic": ..., "json": {...}}]
    converter.from_payload(payload, PublishInput)   # the same PublishInput back

``temporalio.contrib.workflow_streams`` carries each item as base64 of a serialized
``Payload``, in its publish signal's input and its poll update's result: in a run's
history nobody can read it. An item whose payload is plain JSON (every golem item) is
written as that JSON instead (``"json"`` in place of ``"data"``) and read back into an
equal payload; any other item keeps its base64. See docs/adr/0007-live-streams.md.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from typing import Any

from pydantic import BaseModel, Field, TypeAdapter
from temporalio.api.common.v1 import Payload
from temporalio.contrib.workflow_streams import PollResult, PublishInput

from golem.wire.streams import StreamEvent

#: The contrib's types that hold items: a publish signal's input, a poll's result.
WIRE_TYPES: tuple[type, ...] = (PublishInput, PollResult)
_JSON = {"encoding": b"json/plain"}
_ADAPTERS: dict[type, TypeAdapter[Any]] = {t: TypeAdapter(t) for t in WIRE_TYPES}
_OBJECT: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])


def readable(value: Any) -> dict[str, Any]:
    """``value`` (one of ``WIRE_TYPES``) as a JSON-ready dict, its JSON items inline."""
    out = dataclasses.asdict(value)
    out["items"] = [_inline(item) for item in out["items"]]
    return out


def load(data: bytes, type_hint: type[Any]) -> Any:
    """The ``type_hint`` (one of ``WIRE_TYPES``) that ``readable`` wrote as ``data``;
    pydantic's ``ValidationError`` for anything else."""
    value = _OBJECT.validate_json(data)
    if isinstance(value.get("items"), list):
        value["items"] = [_packed(item) for item in value["items"]]
    return _ADAPTERS[type_hint].validate_python(value)


class PolledItem(BaseModel):
    """One item of a poll's result as ``readable`` wrote it: its event (``"json"``), or the
    base64 of a ``Payload`` that is not plain JSON (``data``)."""

    offset: int
    event: StreamEvent | None = Field(default=None, alias="json")
    data: str = ""

    def payload(self) -> Payload:
        """The item's ``Payload``, when it is not plain JSON."""
        return Payload.FromString(base64.b64decode(self.data))


class Polled(BaseModel):
    """A poll's result (the contrib's ``PollResult``) as ``readable`` wrote it."""

    items: list[PolledItem]
    next_offset: int
    more_ready: bool = False


def polled(data: bytes) -> Polled:
    """A poll's result, its events read straight from its JSON (one pass of pydantic): not
    made into a ``Payload`` each, as ``load`` does for the contrib's reader. Pydantic's
    ``ValidationError`` for anything else (an item that is no ``StreamEvent``)."""
    return Polled.model_validate_json(data)


def _inline(item: dict[str, Any]) -> dict[str, Any]:
    payload = Payload()
    payload.ParseFromString(base64.b64decode(item["data"]))
    if dict(payload.metadata) != _JSON:
        return item
    try:
        value = json.loads(payload.data)
    except ValueError:
        return item  # not JSON after all: it stays as it came
    rest = {k: v for k, v in item.items() if k != "data"}
    return {**rest, "json": value}


def _packed(item: Any) -> Any:
    if not isinstance(item, dict) or "json" not in item:
        return item
    data = json.dumps(item.pop("json"), ensure_ascii=False, separators=(",", ":")).encode()
    payload = Payload(metadata=_JSON, data=data)
    return {**item, "data": base64.b64encode(payload.SerializeToString()).decode("ascii")}
