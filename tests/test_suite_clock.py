"""``make test`` says how long it takes and shows its progress per file (tests/suite_clock.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

TESTS = Path(__file__).resolve().parent


def two_files(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, one: str, two: str
) -> None:
    """A suite of two test files, ``checks/test_one.py`` and ``checks/test_two.py``."""
    monkeypatch.setenv("PYTHONPATH", str(TESTS))
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
    result = pytester.runpytest_subprocess("-p", "suite_clock", "-n", "2", "--dist", "loadfile")
    # Files end in any order: each line is looked for on its own.
    result.stdout.re_match_lines([r"checks/test_one.py \.F \[ *\d+%\]"])
    result.stdout.re_match_lines([r"checks/test_two.py s \[ *\d+%\]"])
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
    assert "-p suite_clock" in command and " -q" not in command and "-n 2" in command
