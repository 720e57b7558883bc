"""The ``golem`` entry point: ``--version`` answers before any heavy import.

golem --version        # instant: neither temporalio nor the agent core is imported
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NoReturn

from golem.cli.version import package_version


def answer_at_once(argv: Sequence[str]) -> bool:
    """Print the version for ``golem --version`` (and nothing else); whether it did."""
    if list(argv) != ["--version"]:
        return False
    print(f"golem {package_version()}")
    return True


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """The ``golem`` command (golem.cli.app runs every command but ``--version``)."""
    import sys

    arguments = sys.argv[1:] if argv is None else argv
    if answer_at_once(arguments):
        sys.stdout.flush()
        raise SystemExit(0)
    from golem.cli.app import main as run_main

    run_main(arguments)
