"""The README's offline examples run whole, as a user runs them (each starts its own dev
server for its durable half): exit 0 and the lines that show each half worked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("example", "lines"),
    [
        (
            "mcp_tools.py",
            ["waiting for approval of ['write_note']", "the run waits in its workflow for"],
        ),
        ("triage.py", ["the next turn went to billing", "serving now: billing"]),
        (
            "client_tools.py",
            [
                "the app is asked: pick_date",
                "Delivery booked for 2026-12-24.",
                "No date yet (the user closed the calendar); I will ask again later.",
            ],
        ),
        (
            "refunds.py",
            [
                "a small refund runs without asking: Done: order 41 refunded 30.",
                "approved with other arguments: Done: order 42 refunded 100.",
                "denied with a reason: No refund: over the limit; offer store credit.",
                '(approved by alice, ran with {"order":43,"amount":90})',
                "No refund: ask the customer first.",
            ],
        ),
    ],
)
def test_an_offline_example_runs_both_halves(example: str, lines: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / example)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    for line in lines:
        assert line in done.stdout, done.stdout[-2000:]
