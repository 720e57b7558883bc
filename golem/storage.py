"""Payloads of any size: Temporal's external storage, with a local folder for development.

    from temporalio.converter import ExternalStorage
    from golem.storage import LocalDirectory
    plugin = GolemPlugin(agent, external_storage=ExternalStorage(drivers=[LocalDirectory("blobs")]))
    client = await Client.connect("localhost:7233", plugins=[plugin])   # on the Client

Every payload golem's client and workers write that is over the threshold (256 KiB unless
``payload_size_threshold`` says otherwise) goes to the store; the history keeps a
reference (driver name, claim, size). With encryption on, a payload is encrypted first,
then stored: the blob is ciphertext, and a reader needs both the key and the store. S3
and GCS are temporalio's own drivers (``temporalio.contrib.aws.s3driver``,
``temporalio.contrib.gcp.gcsdriver``); ``GOLEM_STORAGE_DIR`` turns a ``LocalDirectory``
on from the environment (the CLI's worker, client and codec server read it).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from urllib.parse import quote

from google.protobuf import json_format
from temporalio.api.common.v1 import Payload
from temporalio.api.sdk.v1 import ExternalStorageReference
from temporalio.converter import (
    ExternalStorage,
    PayloadCodec,
    StorageDriver,
    StorageDriverActivityInfo,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
    StorageDriverWorkflowInfo,
)

__all__ = [
    "DEFAULT_THRESHOLD",
    "DIR_VARIABLE",
    "PREVIEW_BYTES",
    "THRESHOLD_VARIABLE",
    "LocalDirectory",
    "StoredPayloadMissing",
    "for_display",
    "storage_from_env",
]

#: Payloads at least this large go to the store (temporalio's own default).
DEFAULT_THRESHOLD = 256 * 1024
DIR_VARIABLE = "GOLEM_STORAGE_DIR"
THRESHOLD_VARIABLE = "GOLEM_STORAGE_THRESHOLD"
#: The most of a stored payload's data ``for_display`` shows (the UI renders it whole).
PREVIEW_BYTES = 64 * 1024
_REFERENCE = ExternalStorageReference.DESCRIPTOR.full_name.encode()
_SEGMENT_BYTES = 120  # longer ids are hashed: a file name has at most 255 bytes


class StoredPayloadMissing(FileNotFoundError):
    """A reference names a blob the store does not hold (cleaned up, or another folder)."""


class LocalDirectory(StorageDriver):
    """A ``StorageDriver`` over a folder (created if absent): for development, tests, and
    a volume every worker and client mounts.

    A payload is filed under its run, ``ns-<namespace>/wf-<workflow id>/<sha256>``, so
    one run's blobs are one folder to measure or delete; it is written to a temporary file
    and renamed into place once synced, so a reference never names a partial blob, and
    read back only if its SHA-256 matches the claim. ``bytes_written`` and ``writes``
    count what this instance stored."""

    def __init__(self, path: str | os.PathLike[str], *, name: str = "golem.local") -> None:
        self.root = Path(path).expanduser().resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self._name = name
        self.bytes_written = 0
        self.writes = 0

    def name(self) -> str:
        return self._name

    def type(self) -> str:
        return "golem.local"

    def __repr__(self) -> str:
        return f"LocalDirectory({str(self.root)!r}, name={self._name!r})"

    async def store(
        self, context: StorageDriverStoreContext, payloads: Sequence[Payload]
    ) -> list[StorageDriverClaim]:
        folder = _folder(context)
        blobs = [p.SerializeToString() for p in payloads]
        return await asyncio.to_thread(lambda: [self._write(folder, blob) for blob in blobs])

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        return await asyncio.to_thread(lambda: [self._read(c.claim_data) for c in claims])

    def run_folder(self, workflow_id: str, namespace: str = "default") -> Path:
        """Where the blobs stored for workflow ``workflow_id`` are (one run's, for golem)."""
        target = StorageDriverWorkflowInfo(namespace=namespace, id=workflow_id)
        return self.root / _folder(StorageDriverStoreContext(target=target))

    def _write(self, folder: str, blob: bytes) -> StorageDriverClaim:
        digest = hashlib.sha256(blob).hexdigest()
        relative = f"{folder}/{digest}"
        path = self.root / relative
        if not path.exists():  # content-addressed: the same bytes are stored once
            path.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".partial-")
            try:
                with os.fdopen(handle, "wb") as file:
                    file.write(blob)
                    file.flush()
                    os.fsync(file.fileno())  # durable before a history can name it
                os.replace(temporary, path)
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
            self.bytes_written += len(blob)
            self.writes += 1
        return StorageDriverClaim(claim_data={"path": relative, "sha256": digest})

    def _read(self, claim: Mapping[str, str]) -> Payload:
        relative = claim.get("path", "")
        parts = PurePosixPath(relative).parts
        if not parts or relative.startswith("/") or any(p in ("..", ".") for p in parts):
            raise ValueError(f"{self}: the claim's path {relative!r} is not inside the store")
        path = self.root.joinpath(*parts)
        try:
            blob = path.read_bytes()
        except FileNotFoundError:
            raise StoredPayloadMissing(
                f"{self}: the stored payload {relative} is missing: the store was cleaned "
                f"up before the history that names it, or this reader's folder ({DIR_VARIABLE}) "
                "is not the one the writer used"
            ) from None
        if hashlib.sha256(blob).hexdigest() != claim.get("sha256"):
            raise ValueError(f"{self}: the stored payload {relative} does not match its SHA-256")
        return Payload.FromString(blob)


def _folder(context: StorageDriverStoreContext) -> str:
    target = context.target
    if target is None:
        return "unscoped"
    kind = "wf" if isinstance(target, StorageDriverWorkflowInfo) else "act"
    if isinstance(target, StorageDriverActivityInfo | StorageDriverWorkflowInfo):
        return f"ns-{_segment(target.namespace)}/{kind}-{_segment(target.id or '')}"
    return "unscoped"


def _segment(value: str) -> str:
    """``value`` as one safe path segment (``..`` cannot occur: every segment is prefixed)."""
    quoted = quote(value, safe="")
    if len(quoted) > _SEGMENT_BYTES:
        return "h-" + hashlib.sha256(value.encode()).hexdigest()
    return quoted


def storage_from_env(environ: Mapping[str, str] | None = None) -> ExternalStorage | None:
    """``ExternalStorage`` over a ``LocalDirectory`` at ``GOLEM_STORAGE_DIR`` (payloads from
    ``GOLEM_STORAGE_THRESHOLD`` bytes on, default 256 KiB), or ``None`` when it is unset."""
    env = os.environ if environ is None else environ
    folder = env.get(DIR_VARIABLE, "").strip()
    if not folder:
        return None
    raw = env.get(THRESHOLD_VARIABLE, "").strip()
    try:
        threshold = int(raw) if raw else DEFAULT_THRESHOLD
    except ValueError:
        raise ValueError(f"{THRESHOLD_VARIABLE}={raw!r}: expected a number of bytes") from None
    return ExternalStorage(drivers=[LocalDirectory(folder)], payload_size_threshold=threshold)


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
    if codec is not None:
        out = await codec.decode(out)
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
