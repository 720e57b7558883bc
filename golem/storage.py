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
import os
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from urllib.parse import quote, unquote

from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    ExternalStorage,
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
    "THRESHOLD_VARIABLE",
    "Blob",
    "LocalDirectory",
    "Pruned",
    "StoredPayloadMissing",
    "StoredPayloadUnreadable",
    "prune",
    "storage_from_env",
]

#: Payloads at least this large go to the store (temporalio's own default).
DEFAULT_THRESHOLD = 256 * 1024
DIR_VARIABLE = "GOLEM_STORAGE_DIR"
THRESHOLD_VARIABLE = "GOLEM_STORAGE_THRESHOLD"
#: A ``.partial-*`` file older than this (seconds) is left by a writer that died: removed
#: when a ``LocalDirectory`` opens (a write takes well under a minute even for 2 GB).
STALE_PARTIAL_SECONDS = 15 * 60
#: ``encoding`` of the payload ``LocalDirectory.retrieve`` returns for a blob it cannot read:
#: its data says why; golem's converter refuses it, so the run fails at stage ``storage``.
UNREADABLE = b"golem/unreadable-blob"
_PARTIAL = ".partial-"
_SEGMENT_BYTES = 120  # longer ids are hashed: a file name has at most 255 bytes


class StoredPayloadUnreadable(ValueError):
    """A reference names a blob the store cannot give back as written: missing, of another
    size, or with another SHA-256 (the message names the blob and which)."""


class StoredPayloadMissing(StoredPayloadUnreadable, FileNotFoundError):
    """A reference names a blob the store does not hold (cleaned up, or another folder)."""


@dataclass(frozen=True)
class Blob:
    """One blob in a ``LocalDirectory``: where it is, its size and when it was written."""

    path: Path
    workflow_id: str
    """The folder's workflow id as filed (``h-<sha256>`` for a long one)."""
    namespace: str
    size: int
    modified: float
    """Seconds since the epoch."""


class LocalDirectory(StorageDriver):
    """A ``StorageDriver`` over a folder (created if absent): for development, tests, and
    a volume every worker and client mounts.

    A payload is filed under its run, ``ns-<namespace>/wf-<workflow id>/<sha256>``, so
    one run's blobs are one folder to measure or delete; it is written to a temporary file
    and renamed into place once synced, so a reference never names a partial blob, and
    read back only if its SHA-256 matches the claim. ``bytes_written`` and ``writes``
    count what this instance stored."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        name: str = "golem.local",
        stale_partial_seconds: float = STALE_PARTIAL_SECONDS,
    ) -> None:
        self.root = Path(path).expanduser().resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self._name = name
        self.bytes_written = 0
        self.writes = 0
        #: The ``.partial-*`` files this instance removed when it opened (writers that died).
        self.removed_partials = self._remove_stale_partials(stale_partial_seconds)

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
        """The payloads ``claims`` name; one that cannot be read (missing, other size, other
        SHA-256) comes back as an ``UNREADABLE`` payload saying why, so that its reader, not
        the worker's task loop, fails: a workflow then fails at stage ``storage``."""
        return await asyncio.to_thread(lambda: [self._read_or_why(c.claim_data) for c in claims])

    def _read_or_why(self, claim: Mapping[str, str]) -> Payload:
        try:
            return self._read(claim)
        except StoredPayloadUnreadable as exc:
            return Payload(metadata={"encoding": UNREADABLE}, data=str(exc).encode())

    def run_folder(self, workflow_id: str, namespace: str = "default") -> Path:
        """Where the blobs stored for workflow ``workflow_id`` are (one run's, for golem)."""
        target = StorageDriverWorkflowInfo(namespace=namespace, id=workflow_id)
        return self.root / _folder(StorageDriverStoreContext(target=target))

    def blobs(self) -> Iterator[Blob]:
        """Every blob in the store, folder by folder (never a ``.partial-*`` file)."""
        for folder in [*sorted(self.root.glob("ns-*/*-*")), self.root / "unscoped"]:
            if not folder.is_dir():
                continue
            namespace = folder.parent.name.removeprefix("ns-") if folder.parent != self.root else ""
            workflow_id = folder.name.split("-", 1)[1] if "-" in folder.name else ""
            for path in sorted(folder.iterdir()):
                if not _is_blob_name(path.name):
                    continue
                with_stat = path.stat()
                yield Blob(path, workflow_id, namespace, with_stat.st_size, with_stat.st_mtime)

    def _remove_stale_partials(self, older_than: float) -> list[Path]:
        removed = []
        cutoff = time.time() - older_than
        for partial in self.root.glob(f"**/{_PARTIAL}*"):
            try:
                if partial.stat().st_mtime < cutoff:
                    partial.unlink()
                    removed.append(partial)
            except FileNotFoundError:
                continue  # another process removed it first
        return removed

    def _write(self, folder: str, blob: bytes) -> StorageDriverClaim:
        digest = hashlib.sha256(blob).hexdigest()
        relative = f"{folder}/{digest}"
        path = self.root / relative
        # Content-addressed: the same bytes are stored once (a damaged copy is rewritten).
        if not _holds(path, len(blob)):
            path.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=_PARTIAL)
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
        claim = {"path": relative, "sha256": digest, "size": str(len(blob))}
        return StorageDriverClaim(claim_data=claim)

    def _read(self, claim: Mapping[str, str]) -> Payload:
        relative = claim.get("path", "")
        parts = PurePosixPath(relative).parts
        if not parts or relative.startswith("/") or any(p in ("..", ".") for p in parts):
            raise ValueError(f"{self}: the claim's path {relative!r} is not inside the store")
        if not _is_blob_name(parts[-1]):
            raise ValueError(f"{self}: the claim's path {relative!r} names no blob")
        path = self.root.joinpath(*parts)
        try:
            blob = path.read_bytes()
        except FileNotFoundError:
            raise StoredPayloadMissing(
                f"{self}: the stored payload {relative} is missing: the store was cleaned "
                f"up before the history that names it, or this reader's folder ({DIR_VARIABLE}) "
                "is not the one the writer used"
            ) from None
        size = claim.get("size")
        if size is not None and size != str(len(blob)):
            raise StoredPayloadUnreadable(
                f"{self}: the stored payload {relative} is {len(blob)} bytes, not the {size} "
                "written (truncated or overwritten)"
            )
        found = hashlib.sha256(blob).hexdigest()
        if found != claim.get("sha256"):
            raise StoredPayloadUnreadable(
                f"{self}: the stored payload {relative} does not match its SHA-256 "
                f"(its bytes hash to {found}: corrupted)"
            )
        return Payload.FromString(blob)


def _is_blob_name(name: str) -> bool:
    """A blob is named by its SHA-256 (a ``.partial-*`` file, being written, never is)."""
    return len(name) == 64 and all(c in "0123456789abcdef" for c in name)


def _holds(path: Path, size: int) -> bool:
    """``path`` holds a blob of ``size`` bytes whose name is its SHA-256."""
    try:
        if path.stat().st_size != size:
            return False
        return hashlib.sha256(path.read_bytes()).hexdigest() == path.name
    except FileNotFoundError:
        return False


def unreadable_blob(payload: Payload) -> str | None:
    """Why a stored payload could not be read (``LocalDirectory.retrieve`` said so), or
    ``None`` for any other payload."""
    if payload.metadata.get("encoding") != UNREADABLE:
        return None
    return payload.data.decode(errors="replace")


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


@dataclass
class Pruned:
    """What ``prune`` removed (or, dry, would remove) and what it kept, and why."""

    removed: list[Blob] = field(default_factory=list)
    kept_referenced: int = 0
    """Blobs of workflows Temporal still holds (open, or closed within retention)."""
    kept_recent: int = 0
    """Blobs younger than the age given (a run being started may not be visible yet)."""
    kept_unknown: int = 0
    """Blobs whose folder names no workflow of the namespace (another namespace, a hashed
    long id, a standalone activity's, unscoped): never removed by ``prune``."""

    @property
    def bytes_removed(self) -> int:
        return sum(b.size for b in self.removed)


async def prune(
    store: LocalDirectory,
    older_than: float,
    exists: Callable[[str], Awaitable[bool]],
    *,
    namespace: str = "default",
    dry_run: bool = False,
    now: float | None = None,
) -> Pruned:
    """Remove the blobs of workflows that are gone: a blob is removed only when it is older
    than ``older_than`` seconds and its folder's workflow (of ``namespace``) no longer
    ``exists`` (an open or retained run keeps every blob of its folder). ``dry_run``
    removes nothing and says what would go. Empty folders left behind are removed."""
    cutoff = (time.time() if now is None else now) - older_than
    pruned = Pruned()
    alive: dict[str, bool] = {}
    for blob in store.blobs():
        workflow_id = _workflow_of(blob, namespace)
        if workflow_id is None:
            pruned.kept_unknown += 1
        elif blob.modified >= cutoff:
            pruned.kept_recent += 1
        else:
            if workflow_id not in alive:
                alive[workflow_id] = await exists(workflow_id)
            if alive[workflow_id]:
                pruned.kept_referenced += 1
            else:
                pruned.removed.append(blob)
    if not dry_run:
        for blob in pruned.removed:
            blob.path.unlink(missing_ok=True)
        for folder in {b.path.parent for b in pruned.removed}:
            if not any(folder.iterdir()):
                folder.rmdir()
    return pruned


def _workflow_of(blob: Blob, namespace: str) -> str | None:
    """The workflow id ``blob``'s folder is filed under, when it is one ``prune`` can ask
    about (a workflow's folder in ``namespace`` whose id was not hashed)."""
    folder = blob.path.parent.name
    if blob.namespace != _segment(namespace) or not folder.startswith("wf-"):
        return None
    if blob.workflow_id.startswith("h-"):
        return None
    return unquote(blob.workflow_id)


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
