"""The data converter golem runs with: pydantic JSON, camelCase, empty fields omitted.

Payloads stay readable JSON in the Temporal UI (a live stream's items too:
golem.wire.stream_wire), and omitting empty fields keeps every
message, call and result as small in history as in ``dump_messages``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

import temporalio.api.common.v1
import temporalio.api.failure.v1
from pydantic import ValidationError
from pydantic_core import SchemaSerializer
from pydantic_core.core_schema import any_schema
from temporalio import workflow
from temporalio.common import RawValue
from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter
from temporalio.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultFailureConverter,
    DefaultFailureConverterWithEncodedAttributes,
    DefaultPayloadConverter,
    JSONPlainPayloadConverter,
    PayloadConverter,
)
from temporalio.exceptions import ApplicationError

from golem.storage import unreadable_blob
from golem.wire import names, stream_wire

#: ``encoding`` metadata of an encrypted payload (golem.worker.codec writes it).
ENCRYPTED = b"binary/encrypted"
#: Metadata key naming the key a payload was encrypted with.
KEY_ID = "encryption-key-id"
#: Metadata key the codec sets on a payload it could not decrypt: why (the converter says it).
UNDECRYPTED = "golem-cannot-decrypt"
#: Environment variable ``GolemPlugin`` and the CLI read keys from.
ENV_VAR = "GOLEM_ENCRYPTION_KEY"

logger = logging.getLogger("golem.worker")
_told: set[str] = set()  # key ids a missing-key error was logged for, once per process


class CompactJSONPayloadConverter(PydanticJSONPlainPayloadConverter):
    """Pydantic JSON with aliases and without fields that hold their default."""

    _serializer = SchemaSerializer(any_schema())

    def to_payload(self, value: Any) -> temporalio.api.common.v1.Payload | None:
        if isinstance(value, stream_wire.WIRE_TYPES):
            value = stream_wire.readable(value)  # a live stream's items, readable in the UI
        data = self._serializer.to_json(value, by_alias=True, exclude_defaults=True)
        return temporalio.api.common.v1.Payload(
            metadata={"encoding": self.encoding.encode()}, data=data
        )

    def from_payload(
        self, payload: temporalio.api.common.v1.Payload, type_hint: type | None = None
    ) -> Any:
        try:
            if type_hint in stream_wire.WIRE_TYPES:
                return stream_wire.load(payload.data, type_hint)
            return super().from_payload(payload, type_hint)
        except ValidationError as exc:
            # A FailureError fails the workflow (or activity) instead of its task, which
            # Temporal would retry forever on an input no retry can fix.
            name = getattr(type_hint, "__name__", str(type_hint))
            raise ApplicationError(
                f"the payload does not decode as {name}: {_problems(exc, payload.data)}",
                type=names.BAD_PAYLOAD,
                non_retryable=True,
            ) from None


def _problems(exc: ValidationError, data: bytes, most: int = 5) -> str:
    errors = exc.errors(include_url=False, include_input=False)
    text = "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']}{_near(e, data)}"
        for e in errors[:most]
    )
    return text + (f" (and {len(errors) - most} more)" if len(errors) > most else "")


def _near(error: Any, data: bytes) -> str:
    """For unreadable JSON, the bytes around the position the parser gave up at."""
    column = re.search(r"line 1 column (\d+)", str(error.get("ctx", {}).get("error", "")))
    if error["type"] != "json_invalid" or column is None:
        return ""
    end = int(column.group(1))
    return f", near {data[max(0, end - 40) : end + 10].decode('utf-8', 'replace')!r}"


class DecryptionError(ApplicationError):
    """A payload could not be decrypted: its key is not held, or the key is wrong.

    Non-retryable: raised while a worker decodes a workflow task, it fails the run at
    once (the SDK fails the execution for a non-retryable ``ApplicationError``) instead
    of retrying the task forever against a key it will never have."""

    def __init__(self, message: str) -> None:
        super().__init__(message, type=names.DECRYPTION_ERROR, non_retryable=True)


def sealed_error(payload: temporalio.api.common.v1.Payload) -> DecryptionError:
    """The error for an encrypted payload still sealed when it is read: the codec's reason
    (a key id it does not hold, a wrong key), or, with no key at all, the key id it was
    sealed with and what to set (logged once per key id, so a worker's log says it too)."""
    key_id = payload.metadata.get(KEY_ID, b"").decode(errors="replace")
    why = payload.metadata.get(UNDECRYPTED)
    message = (
        why.decode(errors="replace")
        if why
        else (
            f"cannot decrypt: the payload is sealed with encryption key id {key_id!r} and no "
            f"key is set here: set {ENV_VAR} (or GolemPlugin(encryption_key=...)) to the key "
            "the client uses"
        )
    )
    if message not in _told:
        _told.add(message)
        logger.error("%s", message)
    return DecryptionError(message)


def codec_problem(exc: BaseException) -> str | None:
    """What a decryption failure means, in one line (``None`` for any other error)."""
    if isinstance(exc, ApplicationError) and exc.type == names.DECRYPTION_ERROR:
        return exc.message
    return None


def unreadable_error(
    payloads: Sequence[temporalio.api.common.v1.Payload],
) -> ApplicationError | None:
    """The error that fails a read of ``payloads`` at the activation boundary: one is still
    sealed (no key, or not the right one) or is a stored blob the store could not give back;
    ``None`` when every payload can be decoded."""
    for payload in payloads:
        if payload.metadata.get("encoding") == ENCRYPTED:
            return sealed_error(payload)
        if (why := unreadable_blob(payload)) is not None:
            return ApplicationError(why, type=names.STORAGE_ERROR, non_retryable=True)
    return None


class GolemPayloadConverter(CompositePayloadConverter):
    def from_payloads(
        self,
        payloads: Sequence[temporalio.api.common.v1.Payload],
        type_hints: list[type] | None = None,
    ) -> list[Any]:
        hints: list[Any] = list(type_hints or [])
        # A sealed payload read raw is passed on as it is (it stays sealed); a blob that
        # could not be read never is. A FailureError fails the run, naming the culprit.
        readable = [
            p
            for index, p in enumerate(payloads)
            if not (index < len(hints) and hints[index] is RawValue)
            or p.metadata.get("encoding") != ENCRYPTED
        ]
        if (error := unreadable_error(readable)) is not None:
            raise error
        return super().from_payloads(payloads, type_hints)

    def __init__(self) -> None:
        json = CompactJSONPayloadConverter()
        super().__init__(
            *(
                json if isinstance(c, JSONPlainPayloadConverter) else c
                for c in DefaultPayloadConverter.default_encoding_payload_converters
            )
        )


class _OneLineFailures(DefaultFailureConverter):
    """A failure golem's workflow code raises (an ``ApplicationError`` of a ``Golem*`` type,
    whose message names the culprit) reaches Temporal without its stack trace: in the UI's
    Result pane a user reads the one-line message, not the SDK's frames with the worker's
    paths. The trace goes to the worker's log (``golem.worker``, DEBUG)."""

    def to_failure(
        self,
        exception: BaseException,
        payload_converter: PayloadConverter,
        failure: temporalio.api.failure.v1.Failure,
    ) -> None:
        kind = (exception.type or "") if isinstance(exception, ApplicationError) else ""
        if kind.startswith("Golem") and workflow.in_workflow() and exception.__traceback__:
            if not workflow.unsafe.is_replaying():
                logger.debug("%s: %s", kind, exception, exc_info=exception)
            exception.__traceback__ = None
        super().to_failure(exception, payload_converter, failure)


class GolemFailureConverter(_OneLineFailures):
    """golem's failure converter (see ``_OneLineFailures``)."""


class GolemEncodedFailureConverter(_OneLineFailures, DefaultFailureConverterWithEncodedAttributes):
    """golem's failure converter for an encrypting client: message and trace encoded; one
    whose attributes this process cannot decrypt raises ``DecryptionError`` (the SDK's would
    read "Encoded failure")."""

    def from_failure(
        self, failure: temporalio.api.failure.v1.Failure, payload_converter: PayloadConverter
    ) -> BaseException:
        sealed = [failure.encoded_attributes] if failure.HasField("encoded_attributes") else []
        if (error := unreadable_error(sealed)) is not None:
            raise error
        return super().from_failure(failure, payload_converter)


golem_data_converter = DataConverter(
    payload_converter_class=GolemPayloadConverter, failure_converter_class=GolemFailureConverter
)
