"""The one base of every payload golem writes to a Temporal history.

camelCase keys (like the message contract), snake_case accepted on reading, frozen, and
fields at their defaults left out when written (golem's converter writes
``exclude_defaults``), so the Temporal UI and CLI show short, readable JSON.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer
from pydantic.alias_generators import to_camel


class Wire(BaseModel):
    """Base of golem's payloads: camelCase JSON, immutable."""

    model_config = ConfigDict(frozen=True, alias_generator=to_camel, populate_by_name=True)


class Stamps(Wire):
    """The identity a run stamps on every message it adds."""

    run_id: str
    conversation_id: str


class Tagged(Wire):
    """A variant of a tagged union: its ``kind`` is always written (and written first),
    though it is the field's default, so a reader knows the variant at a glance."""

    kind: str
    #: JSON keys written right after ``kind`` (what a person reading the UI looks for first).
    first_keys: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _with_kind(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        head = {key: data.pop(key) for key in self.first_keys if key in data}
        return {"kind": self.kind, **head, **data}
