"""``make test``'s clock: how long the whole suite took last time, said before it starts.

    .venv/bin/python -m pytest -p suite_clock        # what `make test` runs

Without ``-q`` pytest prints a line per test file as it goes; this plugin adds the time the
last whole-suite run took here (kept in pytest's cache), and records this one's.
"""

from __future__ import annotations

import time

import pytest

KEY = "golem/suite-seconds"
STARTED = pytest.StashKey[float]()
#: Said when no whole-suite run was timed here yet (a fresh clone, CI).
FIRST_RUN = "the whole suite takes several minutes (CI requires under 10)"


def pytest_report_header(config: pytest.Config) -> str:
    last = config.cache.get(KEY, None) if config.cache is not None else None
    took = (
        f"the whole suite took {duration(last)} here last time" if last is not None else FIRST_RUN
    )
    return f"{took}; a line per test file follows"


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[STARTED] = time.monotonic()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    whole = config.args_source == pytest.Config.ArgsSource.TESTPATHS and not (
        config.option.keyword or config.option.markexpr or config.option.collectonly
    )
    if whole and config.cache is not None and session.testscollected:
        config.cache.set(KEY, round(time.monotonic() - config.stash[STARTED]))


def duration(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes} min {rest} s" if minutes else f"{rest} s"
