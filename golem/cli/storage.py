"""``golem storage prune``: reclaim the blobs of runs Temporal no longer holds.

    golem storage prune --older-than 30d --dry-run    # what would go, and the bytes
    golem storage prune --older-than 30d              # remove them

The store is ``--dir`` (default ``GOLEM_STORAGE_DIR``), a ``LocalDirectory``. A blob goes
only when it is older than ``--older-than`` and Temporal has no workflow by its folder's id
in the namespace (open, or closed and still within retention): every blob a run that can
still be read names is kept. S3 and GCS buckets expire objects with their own lifecycle
rules (docs/adr/0018-payload-storage.md).
"""

from __future__ import annotations

import argparse
import os
import re
from typing import Any

from golem.cli.connect import CliError, connect_args
from golem.client.lookups import existing_run
from golem.storage import DIR_VARIABLE, LocalDirectory, prune

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_age(text: str) -> float:
    """Seconds in ``30d``, ``12h``, ``90m``, ``45s`` (or a bare number of seconds)."""
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text)
    if found is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an age: give a number and a unit, e.g. 30d, 12h, 90m or 45s"
        )
    return float(found.group(1)) * _UNITS[found.group(2) or "s"]


def add_parser(commands: Any, parents: list[argparse.ArgumentParser], formatter: Any) -> None:
    """The ``storage`` command and its ``prune`` action."""
    help = "manage the payload store (GOLEM_STORAGE_DIR)"
    storage = commands.add_parser("storage", help=help, description=help, formatter_class=formatter)
    actions = storage.add_subparsers(dest="action", required=True, metavar="ACTION")
    help = "remove the blobs of runs Temporal no longer holds"
    pruning = actions.add_parser(
        "prune", help=help, description=help, parents=parents, formatter_class=formatter
    )
    pruning.add_argument(
        "--older-than",
        type=parse_age,
        required=True,
        help="only blobs written longer ago than this (30d, 12h, 90m, 45s)",
    )
    pruning.add_argument("--dry-run", action="store_true", help="remove nothing; say what would go")
    pruning.add_argument("--dir", help=f"the store's folder (default: {DIR_VARIABLE})")


async def cmd_storage(args: argparse.Namespace) -> int:
    folder = args.dir or os.environ.get(DIR_VARIABLE, "").strip()
    if not folder:
        raise CliError(f"no store to prune: give --dir or set {DIR_VARIABLE}")
    if not os.path.isdir(folder):
        raise CliError(f"no store at {folder}: --dir (or {DIR_VARIABLE}) names no folder")
    store = LocalDirectory(folder)
    client = await connect_args(args)

    async def exists(workflow_id: str) -> bool:
        return await existing_run(client, workflow_id) is not None

    pruned = await prune(
        store, args.older_than, exists, namespace=client.namespace, dry_run=args.dry_run
    )
    verb = "would remove" if args.dry_run else "removed"
    for blob in pruned.removed:
        print(f"{verb} {blob.path.relative_to(store.root)} ({blob.size} bytes)")
    print(
        f"{verb} {len(pruned.removed)} blobs, {pruned.bytes_removed} bytes reclaimed; kept "
        f"{pruned.kept_referenced} of runs Temporal holds, {pruned.kept_recent} newer than "
        f"--older-than, {pruned.kept_unknown} of no workflow in namespace {client.namespace}"
    )
    return 0
