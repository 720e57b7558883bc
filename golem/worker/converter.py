"""The data converter golem runs with: pydantic JSON, camelCase, empty fields omitted.

Payloads stay readable JSON in the Temporal UI, and omitting empty fields keeps every
message, call and result as small in history as in ``dump_messages``.
"""

from __future__ import annotations

from typing import Any

import temporalio.api.common.v1
from pydantic_core import SchemaSerializer
from pydantic_core.core_schema import any_schema
from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter
from temporalio.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultPayloadConverter,
    JSONPlainPayloadConverter,
)

__all__ = ["golem_data_converter"]


class CompactJSONPayloadConverter(PydanticJSONPlainPayloadConverter):
    """Pydantic JSON with aliases and without fields that hold their default."""

    _serializer = SchemaSerializer(any_schema())

    def to_payload(self, value: Any) -> temporalio.api.common.v1.Payload | None:
        data = self._serializer.to_json(value, by_alias=True, exclude_defaults=True)
        return temporalio.api.common.v1.Payload(
            metadata={"encoding": self.encoding.encode()}, data=data
        )


class GolemPayloadConverter(CompositePayloadConverter):
    def __init__(self) -> None:
        json = CompactJSONPayloadConverter()
        super().__init__(
            *(
                json if isinstance(c, JSONPlainPayloadConverter) else c
                for c in DefaultPayloadConverter.default_encoding_payload_converters
            )
        )


golem_data_converter = DataConverter(payload_converter_class=GolemPayloadConverter)
