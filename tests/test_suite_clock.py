"""``make test`` says how long it takes and shows its progress per file (tests/suite_clock.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from suite_clock import LONGEST_FIRST, pytest_collection_modifyitems

pytest_plugins = ["pytester"]

TESTS = Path(__file__).resolve().parent


def two_files(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, one: str, two: str
) -> None:
    """A suite of two test files, ``checks/test_one.py`` and ``checks/test_two.py``."""
    monkeypatch.setenv("PYTHONPATH", str(TESTS))
    # Each pytest run here is a new process: only the plugins these checks need are loaded
    # (xdist by name), not every installed one (hypothesis alone costs a second of CPU).
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makeini("[pytest]\ntestpaths = checks\n")
    checks = pytester.mkdir("checks")
    (checks / "test_one.py").write_text(one)
    (checks / "test_two.py").write_text(two)


def test_make_test_prints_a_line_per_file_and_says_how_long_the_last_whole_run_took(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    two_files(
        pytester, monkeypatch, "def test_a(): pass\ndef test_b(): pass\n", "def test_c(): pass\n"
    )
    first = pytester.runpytest_subprocess("-p", "suite_clock")
    first.stdout.fnmatch_lines(
        [
            "the whole suite takes several minutes (CI requires under 10); a line per test file*",
            "checks/test_one.py .. *",
            "checks/test_two.py . *",
        ]
    )
    pytester.runpytest_subprocess("-p", "suite_clock").stdout.fnmatch_lines(
        ["the whole suite took 0 s here last time; a line per test file*"]
    )
    # Only a whole-suite run is timed: a selection says nothing of the whole.
    (pytester.path / ".pytest_cache" / "v" / "golem" / "suite-seconds").write_text("425")
    pytester.runpytest_subprocess("-p", "suite_clock", "-k", "test_a").assert_outcomes(passed=1)
    pytester.runpytest_subprocess("-p", "suite_clock", "checks/test_two.py").stdout.fnmatch_lines(
        ["the whole suite took 7 min 5 s here last time; a line per test file*"]
    )


def test_under_xdist_each_file_gets_its_line_once_its_tests_end_and_failures_are_summed_up(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    failing = "def test_a(): pass\ndef test_b(): assert 1 == 2\n"
    two_files(
        pytester, monkeypatch, failing, "import pytest\n@pytest.mark.skip\ndef test_c(): pass\n"
    )
    result = pytester.runpytest_subprocess(
        "-p", "xdist.plugin", "-p", "suite_clock", "-n", "2", "--dist", "loadfile"
    )
    # Files end in any order: each line is looked for on its own, with its seconds and worker.
    result.stdout.re_match_lines([r"checks/test_one.py \.F \[ *\d+%\] \d+\.\d s on gw[01]$"])
    result.stdout.re_match_lines([r"checks/test_two.py s \[ *\d+%\] \d+\.\d s on gw[01]$"])
    result.stdout.fnmatch_lines(["FAILED checks/test_one.py::test_b - assert 1 == 2"])
    result.assert_outcomes(passed=1, failed=1, skipped=1)


def test_make_test_runs_the_clock_without_quieting_the_per_file_lines() -> None:
    plan = subprocess.run(
        ["make", "-n", "-W", ".venv/.installed", "test"],
        cwd=TESTS.parent,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    command = next(line for line in plan.splitlines() if "-m pytest" in line)
    assert "-p suite_clock" in command and " -q" not in command and "-n 3" in command
    # xdist would order the files by their number of tests; suite_clock orders them by length.
    assert "--dist loadfile --no-loadscope-reorder" in command


def test_the_longest_files_are_handed_out_first_each_file_whole_and_in_order() -> None:
    for path in LONGEST_FIRST:
        assert (TESTS.parent / path).is_file(), f"{path} is gone: update suite_clock.LONGEST_FIRST"
    first, second = LONGEST_FIRST[:2]
    collected = [
        "tests/test_a.py::one",
        f"{second}::one",
        "tests/test_a.py::two",
        f"{first}::one",
        f"{second}::two",
        f"{first}::two",
    ]
    items = [SimpleNamespace(nodeid=nodeid) for nodeid in collected]
    pytest_collection_modifyitems(items)  # type: ignore[arg-type]
    assert [item.nodeid for item in items] == [
        f"{first}::one",
        f"{first}::two",
        f"{second}::one",
        f"{second}::two",
        "tests/test_a.py::one",
        "tests/test_a.py::two",
    ]
