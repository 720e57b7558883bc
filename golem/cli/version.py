"""golem's installed version, read without importing temporalio or the agent core."""

from __future__ import annotations

__all__ = ["package_version"]


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("golem-temporal")
    except PackageNotFoundError:
        return "unknown"
