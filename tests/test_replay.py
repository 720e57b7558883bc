"""Recorded workflow histories replay without a nondeterminism error."""

from __future__ import annotations

from pathlib import Path

import pytest
from replay_agents import AGENTS
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from golem.worker import GolemPlugin

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))


def test_histories_are_checked_in() -> None:
    assert {p.stem for p in HISTORIES} >= {
        "tools_batch_failed_unknown",
        "continued_conversation",
        "tool_canceled",
        "streamed_run",
    }


@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: p.stem)
async def test_recorded_history_replays_deterministically(path: Path) -> None:
    history = WorkflowHistory.from_json(path.stem, path.read_text())
    replayer = Replayer(workflows=[], plugins=[GolemPlugin(*AGENTS)])
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure
