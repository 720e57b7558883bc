"""golem's installed version, read without importing anything heavy (``golem --version``)."""

from __future__ import annotations


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("golem-temporal")
    except PackageNotFoundError:
        return "unknown"
