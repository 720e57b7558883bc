"""``make test``'s clock: how long the whole suite took last time, said before it starts.

    .venv/bin/python -m pytest -p suite_clock -n 3 --dist loadfile --no-loadscope-reorder

Without ``-q`` pytest prints a line per test file as it goes; this plugin adds the time the
last whole-suite run took here (kept in pytest's cache), and records this one's. Under
pytest-xdist (``-n``), which prints only a row of letters, it prints a line per test file
once all of that file's tests have run (files finish in any order), with the seconds the
file took on its worker and which worker ran it, so a slow file or a lopsided split shows.
It also hands the longest files out first (``LONGEST_FIRST``).
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


#: The test files that take longest, longest first (by the seconds printed per file; the
#: rest take under about 6 s each). ``--dist loadfile`` hands whole files to the workers in
#: collection order, so these go first and the many short files fill in at the end: started
#: last, a long one would leave a worker alone with it for its whole length.
LONGEST_FIRST = (
    "tests/test_cli.py",
    "tests/test_examples.py",
    "tests/test_cli_serving.py",
    "tests/ui/test_ui_serve_console.py",
    "tests/test_crash.py",
    "tests/test_cli_approvals.py",
    "tests/ui/test_ui_first_hour.py",
    "tests/test_durable.py",
    "tests/test_conversation.py",
    "tests/test_import_cycles.py",
    "tests/test_show_pinned.py",
    "tests/test_mcp.py",
    "tests/test_unreadable.py",
    "tests/test_deploy_rollout.py",
    "tests/ui/test_deploy_ui.py",
    "tests/test_unreadable_blobs.py",
    "tests/test_conversation_segments.py",
    "tests/ui/test_ui_outcome_page.py",
    "tests/test_mcp_durable.py",
    "tests/test_bad_inputs.py",
    "tests/test_storage.py",
    "tests/test_conversation_approvals.py",
    "tests/test_sse_relay.py",
    "tests/ui/test_ui_docs_tour.py",
    "tests/test_serve_faults.py",
    "tests/test_tracing.py",
    "tests/test_pinned_iii_mcp.py",
    "tests/test_agent_failures.py",
    "tests/test_mcp_faults.py",
    "tests/test_docs.py",
    "tests/test_retry.py",
    "tests/ui/test_ui_run_page.py",
    "tests/test_streaming.py",
    "tests/test_conversation_recovery.py",
    "tests/ui/test_ui_delegation.py",
    "tests/test_compose.py",
    "tests/test_conversation_boundaries.py",
    "tests/test_handoff_conversation.py",
    "tests/test_fallback_durable.py",
    "tests/test_encryption.py",
    "tests/test_conversation_crash.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest files first; every file's tests stay together and in their order."""
    rank = {path: index for index, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))


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
        self.started: dict[str, float] = {}

    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        if not self.expected:  # every worker collects the same tests
            self.expected = Counter(nodeid.split("::")[0] for nodeid in ids)

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        # A file runs on one worker from its first test's start to its last's teardown.
        self.started.setdefault(nodeid.split("::")[0], time.monotonic())

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
            seconds = time.monotonic() - self.started.pop(path, time.monotonic())
            worker = getattr(getattr(report, "node", None), "gateway", None)
            where = f" on {worker.id}" if worker is not None else ""
            self.write_line(f"{path} {self.letters.pop(path)} [{done:3d}%] {seconds:.1f} s{where}")


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
