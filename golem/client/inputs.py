"""What a client sends a run, checked before anything starts.

    check_sendable("deps", deps)        # ValueError naming "deps" unless JSON keeps it whole

Nothing that fails a check reaches Temporal.
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError, SchemaSerializer
from pydantic_core.core_schema import any_schema

from golem.messages import Message, Part
from golem.strict_json import loads_strict
from golem.tools import validation_problems

__all__ = ["MAX_INPUT_BYTES", "MESSAGE", "PARTS", "check_sendable"]

#: Largest history a run may start with (the workflow input is one Temporal payload).
MAX_INPUT_BYTES = 2_000_000 - 65_536

_STRICT_JSON = SchemaSerializer(any_schema(), {"ser_json_inf_nan": "constants"})

MESSAGE: TypeAdapter[Message] = TypeAdapter(Message)
PARTS: TypeAdapter[list[Part]] = TypeAdapter(list[Part])


def check_sendable(field: str, value: Any, kind: TypeAdapter[Any] | None = None) -> None:
    """``ValueError`` naming ``field`` unless it survives a JSON round trip unchanged: lone
    surrogates cannot be encoded, NaN or Infinity would silently become null, and a
    ``model_construct``-ed message would fail the run's input decoding."""
    try:
        data = _STRICT_JSON.to_json(value, by_alias=True, exclude_defaults=True)
    except PydanticSerializationError as exc:
        raise ValueError(f"{field} cannot be sent to Temporal: {exc}") from None
    try:
        loads_strict(data)
    except ValueError as exc:
        raise ValueError(
            f"{field} cannot be sent to Temporal: {exc} (JSON has no NaN or Infinity; "
            "encode such numbers yourself, e.g. as null or a string)"
        ) from None
    if kind is not None:
        try:
            kind.validate_json(data)
        except ValidationError as exc:
            raise ValueError(f"{field} is invalid: {validation_problems(exc)}") from None
