"""``make test``'s clock: how long the whole suite took last time, said before it starts.

    .venv/bin/python -m pytest -p suite_clock -n 2 --dist loadfile   # what `make test` runs

Without ``-q`` pytest prints a line per test file as it goes; this plugin adds the time the
last whole-suite run took here (kept in pytest's cache), and records this one's. Under
pytest-xdist (``-n``), which prints only a row of letters, it prints a line per test file
once all of that file's tests have run (files finish in any order).
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from typing import Any

import pytest
from _pytest.terminal import TerminalReporter

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


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    # Replacing the reporter is pytest's way (pytest-sugar's too) to change what each
    # result prints; only xdist's controller prints (its workers have ``workerinput``).
    default = config.pluginmanager.getplugin("terminalreporter")
    distributed = getattr(config.option, "numprocesses", None) and not hasattr(
        config, "workerinput"
    )
    if distributed and default is not None and config.get_verbosity() <= 0:
        config.pluginmanager.unregister(default)
        config.pluginmanager.register(FileLines(config), "terminalreporter")


class FileLines(TerminalReporter):
    """Results as a line per test file, written when the file's last test ends."""

    def __init__(self, config: pytest.Config) -> None:
        super().__init__(config)
        self.expected: Counter[str] = Counter()
        self.ended: Counter[str] = Counter()
        self.letters: defaultdict[str, str] = defaultdict(str)

    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        if not self.expected:  # every worker collects the same tests
            self.expected = Counter(nodeid.split("::")[0] for nodeid in ids)

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        pass

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        pass

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        status = self.config.hook.pytest_report_teststatus(report=report, config=self.config)
        category, letter = status[0], status[1]
        self._add_stats(category, [report])
        self._tests_ran = True
        path = report.nodeid.split("::")[0]
        self.letters[path] += letter
        if report.when != "teardown":
            return
        self.ended[path] += 1
        if self.ended[path] == self.expected[path]:
            done = sum(self.ended.values()) * 100 // max(sum(self.expected.values()), 1)
            self.write_line(f"{path} {self.letters.pop(path)} [{done:3d}%]")


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
