"""``LocalDirectory`` and golem's storage settings on their own, no server: where blobs go,
what a claim may name, and the settings refused before anything runs."""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.converter import (
    ExternalStorage,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
    StorageDriverWorkflowInfo,
)
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from golem.activities import PAYLOAD_LIMIT
from golem.messages import Message, Part
from golem.storage import (
    DEFAULT_THRESHOLD,
    LocalDirectory,
    StoredPayloadMissing,
    storage_from_env,
    unreadable_blob,
)
from golem.wire import ByQuery, Inline, Stamps
from golem.worker import GolemPlugin, golem_converter
from golem.workflows.shipper import Shipper

RETRIEVE = StorageDriverRetrieveContext()


def stored_for(workflow_id: str) -> StorageDriverStoreContext:
    return StorageDriverStoreContext(
        target=StorageDriverWorkflowInfo(namespace="default", id=workflow_id, run_id="r")
    )


@settings(max_examples=50, deadline=None)
@given(workflow_id=st.text(min_size=1, max_size=300), data=st.binary(max_size=64))
def test_any_workflow_id_files_its_blobs_in_its_own_folder_inside_the_store(
    tmp_path_factory: pytest.TempPathFactory, workflow_id: str, data: bytes
) -> None:
    store = LocalDirectory(tmp_path_factory.mktemp("blobs"))
    payload = Payload(metadata={"encoding": b"binary/plain"}, data=data)
    [claim] = asyncio.run(store.store(stored_for(workflow_id), [payload]))
    path = (store.root / claim.claim_data["path"]).resolve()
    assert path.parent == store.run_folder(workflow_id).resolve()
    assert path.is_relative_to(store.root) and len(path.name) == 64
    assert asyncio.run(store.retrieve(RETRIEVE, [claim])) == [payload]


async def test_the_same_bytes_are_written_once_and_the_folder_is_created(tmp_path: Path) -> None:
    store = LocalDirectory(tmp_path / "a" / "b")
    assert store.root.is_dir()
    payload = Payload(metadata={"encoding": b"json/plain"}, data=b'"x"' * 1000)
    first = await store.store(stored_for("run-1"), [payload, payload])
    assert first[0] == first[1] and store.writes == 1
    assert store.bytes_written == len(payload.SerializeToString())
    assert [p.name for p in store.root.rglob(".partial-*")] == []


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "ns-default/../../x", "", "."])
async def test_a_claim_naming_a_path_outside_the_store_is_refused(
    tmp_path: Path, path: str
) -> None:
    store = LocalDirectory(tmp_path)
    claim = StorageDriverClaim(claim_data={"path": path, "sha256": "0" * 64})
    with pytest.raises(ValueError, match="is not inside the store"):
        await store.retrieve(RETRIEVE, [claim])


async def test_a_blob_that_is_gone_or_altered_is_refused_naming_it_and_what_is_wrong(
    tmp_path: Path,
) -> None:
    store = LocalDirectory(tmp_path)
    converter = golem_converter(external_storage=ExternalStorage(drivers=[store]))
    [reference] = await converter.encode(["hello" * 100_000])
    [claim] = [StorageDriverClaim(claim_data=c) for c in stored_claims(store)]
    relative = claim.claim_data["path"]
    blob = store.root / relative
    written = blob.read_bytes()
    digest = hashlib.sha256(written[:-1] + b"!").hexdigest()
    damages = [
        (written[:-1] + b"!", f"{relative} does not match its SHA-256 (its bytes hash to {digest}"),
        (written[:100], f"{relative} is 100 bytes, not the {len(written)} written (truncated"),
        (None, f"{relative} is missing: the store was cleaned up"),
    ]
    for damaged, why in damages:
        if damaged is None:
            blob.unlink()
        else:
            blob.write_bytes(damaged)
        [unreadable] = await store.retrieve(RETRIEVE, [claim])
        assert (unreadable_blob(unreadable) or "").startswith(f"{store}: the stored payload {why}")
        with pytest.raises(ApplicationError) as failure:
            await converter.decode([reference], [str])
        assert failure.value.type == "GolemStoredPayloadUnreadable"
        assert why in failure.value.message and failure.value.non_retryable
    with pytest.raises(StoredPayloadMissing, match="GOLEM_STORAGE_DIR"):
        store._read(claim.claim_data)


async def test_a_damaged_blob_is_written_anew_when_the_same_bytes_are_stored_again(
    tmp_path: Path,
) -> None:
    store = LocalDirectory(tmp_path)
    payload = Payload(metadata={"encoding": b"json/plain"}, data=b'"x"' * 1000)
    [claim] = await store.store(stored_for("run-3"), [payload])
    blob = store.root / claim.claim_data["path"]
    blob.write_bytes(blob.read_bytes()[:10])
    assert await store.store(stored_for("run-3"), [payload]) == [claim]
    assert store.writes == 2 and await store.retrieve(RETRIEVE, [claim]) == [payload]


def test_stale_partial_files_are_removed_when_the_store_opens_and_never_read(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "ns-default" / "wf-run-4"
    folder.mkdir(parents=True)
    stale, fresh = folder / ".partial-dead1", folder / ".partial-live2"
    stale.write_bytes(b"half a blob")
    fresh.write_bytes(b"being written")
    hour_ago = time.time() - 3600
    os.utime(stale, (hour_ago, hour_ago))
    store = LocalDirectory(tmp_path)
    assert store.removed_partials == [stale]
    assert not stale.exists() and fresh.exists()  # a write in progress is left alone
    assert list(store.blobs()) == []
    claim = StorageDriverClaim(
        claim_data={"path": "ns-default/wf-run-4/.partial-live2", "sha256": "0" * 64}
    )
    with pytest.raises(ValueError, match="names no blob"):
        asyncio.run(store.retrieve(RETRIEVE, [claim]))


def stored_claims(store: LocalDirectory) -> list[dict[str, str]]:
    return [
        {
            "path": b.path.relative_to(store.root).as_posix(),
            "sha256": b.path.name,
            "size": str(b.size),
        }
        for b in store.blobs()
    ]


def test_the_environment_turns_a_local_directory_on(tmp_path: Path) -> None:
    assert storage_from_env({}) is None
    storage = storage_from_env({"GOLEM_STORAGE_DIR": str(tmp_path / "s")})
    assert storage is not None and storage.payload_size_threshold == DEFAULT_THRESHOLD
    [driver] = storage.drivers
    assert isinstance(driver, LocalDirectory) and driver.root == (tmp_path / "s").resolve()
    env = {"GOLEM_STORAGE_DIR": str(tmp_path), "GOLEM_STORAGE_THRESHOLD": "1000"}
    assert storage_from_env(env).payload_size_threshold == 1000  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="GOLEM_STORAGE_THRESHOLD='1k': expected a number"):
        storage_from_env({"GOLEM_STORAGE_DIR": str(tmp_path), "GOLEM_STORAGE_THRESHOLD": "1k"})


def test_a_threshold_over_the_payload_limit_is_refused(tmp_path: Path) -> None:
    storage = ExternalStorage(
        drivers=[LocalDirectory(tmp_path)], payload_size_threshold=PAYLOAD_LIMIT + 1
    )
    with pytest.raises(ValueError, match="over Temporal's payload limit"):
        golem_converter(external_storage=storage)


async def test_storage_on_a_worker_alone_is_refused(
    temporal_client: Client, tmp_path: Path
) -> None:
    storage = ExternalStorage(drivers=[LocalDirectory(tmp_path)])
    with pytest.raises(ValueError, match=r"external_storage=\.\.\.\) must be on the Client"):
        Worker(temporal_client, task_queue="x", plugins=[GolemPlugin(external_storage=storage)])


def image(size: int) -> Message:
    return Message.user(
        "look", parts=[Part(kind="image", data=b"x" * size, media_type="image/png")]
    )


@pytest.mark.parametrize(
    ("size", "stored_bytes", "travels"),
    [
        (10_000, None, Inline),  # small: inline in history, as without storage
        (150_000, None, ByQuery),  # no storage: past the inline threshold, by query
        (150_000, 256 * 1024, ByQuery),  # under the store's threshold: still by query
        (300_000, 256 * 1024, Inline),  # the store takes it: inline, one stored payload
        (300_000, None, ByQuery),
    ],
)
def test_new_messages_the_store_takes_ride_the_model_calls_input(
    size: int, stored_bytes: int | None, travels: type
) -> None:
    shipper = Shipper(64 * 1024, stored_bytes=stored_bytes)
    call = shipper.model_call("a", 1, [image(size)], Stamps(run_id="r", conversation_id="c"), False)
    assert isinstance(call.new, travels)
    assert shipper.logged == (travels is Inline)
