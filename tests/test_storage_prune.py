"""``golem storage prune``: the blobs of runs Temporal no longer holds go, every blob a run
it still holds names stays (issue 29 item 13)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.converter import ExternalStorage, StorageDriverStoreContext
from temporalio.converter import StorageDriverWorkflowInfo as Target
from temporalio.testing import WorkflowEnvironment
from test_storage_readers import MARKER, cli, stored_run

from golem.cli.storage import parse_age
from golem.client import fetch_run
from golem.storage import LocalDirectory
from golem.worker import GolemPlugin

DAYS_40 = 40 * 86400


def aged(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


async def blob_of(store: LocalDirectory, workflow_id: str, namespace: str, data: bytes) -> Path:
    context = StorageDriverStoreContext(target=Target(namespace=namespace, id=workflow_id))
    [claim] = await store.store(context, [Payload(data=data)])
    return store.root / claim.claim_data["path"]


async def test_prune_removes_only_old_blobs_of_workflows_that_are_gone(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    store = LocalDirectory(tmp_path / "blobs")
    run_id = await stored_run(temporal_env, store)
    live = list(store.run_folder(run_id).iterdir())
    gone = await blob_of(store, "gone-run", "default", b"x" * 5000)
    fresh = await blob_of(store, "just-starting", "default", b"y" * 10)
    elsewhere = await blob_of(store, "gone-run", "other-namespace", b"z" * 10)
    for path in (*live, gone, elsewhere):
        aged(path, DAYS_40)  # all old: only what Temporal no longer holds may go
    address = temporal_env.client.service_client.config.target_host
    argv = [sys.executable, "-m", "golem.cli", "storage", "prune", "--older-than", "30d"]
    argv += ["--address", address, "--dir", str(store.root)]
    relative = gone.relative_to(store.root)
    kept = f"kept {len(live)} of runs Temporal holds, 1 newer than --older-than, 1 of no "

    dry = await cli([*argv, "--dry-run"], dict(os.environ))
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.decode().splitlines() == [
        f"would remove {relative} ({gone.stat().st_size} bytes)",
        f"would remove 1 blobs, {gone.stat().st_size} bytes reclaimed; "
        + kept
        + "workflow in namespace default",
    ]
    assert gone.exists()

    done = await cli(argv, dict(os.environ))
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().splitlines()[0].startswith(f"removed {relative} (")
    assert not gone.exists() and not gone.parent.exists()  # its empty folder went too
    assert fresh.exists() and elsewhere.exists() and all(p.exists() for p in live)
    client_config = temporal_env.client.config()
    storage = ExternalStorage(drivers=[LocalDirectory(store.root)])
    client_config["plugins"] = [GolemPlugin(external_storage=storage)]
    record = await fetch_run(type(temporal_env.client)(**client_config), run_id)
    assert [m.content for m in record.messages if m.role == "tool"] == [MARKER * 50_000]


async def test_prune_without_a_store_says_which_setting_names_it(
    temporal_env: WorkflowEnvironment,
) -> None:
    environ = {k: v for k, v in os.environ.items() if k != "GOLEM_STORAGE_DIR"}
    argv = [sys.executable, "-m", "golem.cli", "storage", "prune", "--older-than", "30d"]
    answer = await cli(argv, environ)
    assert answer.returncode != 0
    assert b"no store to prune: give --dir or set GOLEM_STORAGE_DIR" in answer.stderr


@pytest.mark.parametrize(("text", "seconds"), [("30d", 2592000), ("12h", 43200), ("45", 45)])
def test_an_age_reads_as_seconds(text: str, seconds: float) -> None:
    assert parse_age(text) == seconds


def test_an_age_without_a_unit_it_knows_is_refused() -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="'30 days' is not an age"):
        parse_age("30 days")
