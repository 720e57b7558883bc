"""The documentation site: every Python example on its pages runs, its printed output
checked against the page's ``#>`` lines, and the site builds with warnings as errors.

An example may only be left out for a provider key (a ``requires="OPENAI_API_KEY"``
setting on its fence): it then runs where the key is set. Durable examples start their own
dev server through golem.testing.dev_server, so each runs as a reader would copy it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import traceback
from pathlib import Path

import pytest
from pytest_examples import CodeExample, EvalExample, find_examples

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if "adr" not in p.parts)
EXAMPLES = [example for page in PAGES for example in find_examples(page)]


def test_the_pages_have_examples_to_run() -> None:
    assert len(EXAMPLES) >= 20, [str(e) for e in EXAMPLES]


@pytest.mark.parametrize("example", EXAMPLES, ids=str)
def test_docs_example_runs_as_written(example: CodeExample, eval_example: EvalExample) -> None:
    settings = example.prefix_settings()
    unknown = set(settings) - {"requires", "title"}
    assert not unknown, f"{example}: only requires= may leave an example out, not {unknown}"
    if (variable := settings.get("requires")) and not os.environ.get(variable):
        pytest.skip(f"needs {variable}")
    eval_example.set_config(line_length=120, target_version="py311")
    failure = None
    try:
        if eval_example.update_examples:  # pytest --update-examples rewrites the #> lines
            eval_example.run_print_update(example)
        else:
            eval_example.run_print_check(example)
    except Exception as exc:
        # pytest-examples rewrites the traceback to the page's lines, which neither pytest
        # nor traceback.format_exc can format: name the frames' lines and the error alone.
        frames, tb = [], exc.__traceback__
        while tb is not None:
            frames.append(f"  {tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}")
            tb = tb.tb_next
        failure = "\n".join([*frames, *traceback.format_exception_only(exc)])
    if failure is not None:
        pytest.fail(f"{example} raised:\n{failure}", pytrace=False)


def test_site_builds_with_warnings_as_errors(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert built.returncode == 0, built.stderr[-4000:]
    assert (tmp_path / "guides" / "durable-runs" / "index.html").exists()
    cli = (tmp_path / "guides" / "cli" / "index.html").read_text()
    assert "golem worker" in cli and "--task-queue" in cli  # written from the parser
