"""How the codec server shows payloads to the Temporal UI: each stored one read from the
store, all decoded with the codec, a large stored one as a preview naming its size.

    shown = await for_display(payloads, storage, codec)    # golem codec-server's /decode
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from google.protobuf import json_format
from temporalio.api.common.v1 import Payload
from temporalio.api.sdk.v1 import ExternalStorageReference
from temporalio.converter import (
    ExternalStorage,
    PayloadCodec,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
)

from golem.storage import StoredPayloadUnreadable, unreadable_blob
from golem.wire.converter import UNDECRYPTED, DecryptionError

#: The most of a stored payload's data ``for_display`` shows (the UI renders it whole).
PREVIEW_BYTES = 64 * 1024
_REFERENCE = ExternalStorageReference.DESCRIPTOR.full_name.encode()


async def for_display(
    payloads: Sequence[Payload],
    storage: ExternalStorage | None,
    codec: PayloadCodec | None,
    preview_bytes: int = PREVIEW_BYTES,
) -> list[Payload]:
    """``payloads`` as a codec server shows them: each stored one read from ``storage`` (a
    reference stays as it is without it), all decoded with ``codec``; a stored payload whose
    data is over ``preview_bytes`` becomes a JSON preview naming its size."""
    stored = [_reference(p) if storage is not None else None for p in payloads]
    out = list(payloads)
    for index, reference in enumerate(stored):
        if reference is not None and storage is not None:
            driver = next((d for d in storage.drivers if d.name() == reference.driver_name), None)
            if driver is None:
                raise LookupError(f"no storage driver named {reference.driver_name!r} here")
            claim = StorageDriverClaim(claim_data=dict(reference.claim_data))
            [out[index]] = await driver.retrieve(StorageDriverRetrieveContext(), [claim])
            if (why := unreadable_blob(out[index])) is not None:
                raise StoredPayloadUnreadable(why)
    if codec is not None:
        out = await codec.decode(out)
        for payload in out:
            if sealed := payload.metadata.get(UNDECRYPTED):
                raise DecryptionError(sealed.decode(errors="replace"))
    return [
        _preview(p, preview_bytes) if ref is not None and len(p.data) > preview_bytes else p
        for p, ref in zip(out, stored, strict=True)
    ]


def _reference(payload: Payload) -> ExternalStorageReference | None:
    meta = payload.metadata
    if meta.get("encoding") != b"json/protobuf" or meta.get("messageType") != _REFERENCE:
        return None
    return json_format.Parse(payload.data, ExternalStorageReference())


def _preview(payload: Payload, shown: int) -> Payload:
    text = payload.data[:shown].decode("utf-8", errors="replace")
    summary = {
        "golemStoredPayload": {
            "bytes": len(payload.data),
            "encoding": payload.metadata.get("encoding", b"").decode(errors="replace"),
            "shown": shown,
        },
        "preview": text,
    }
    return Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(summary).encode())
