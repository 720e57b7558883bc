"""Reading a run's history back (golem.wire.run_history) in one pass over its events."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from temporalio.api.history.v1 import HistoryEvent
from test_replay import history

from golem.wire import run_history
from golem.wire.converter import golem_data_converter
from golem.wire.run_history import RequestLog, RunHistory


async def _events(stem: str) -> AsyncIterator[HistoryEvent]:
    for event in history(stem).events:
        yield event


async def test_a_history_is_closed_into_its_conversation_once_not_at_every_event(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Closing the last answer's calls at every event made reading a run quadratic in its
    # length; what it gives is the same.
    closes: list[int] = []
    so_far = RequestLog.so_far

    def counted(self: RequestLog) -> list:  # type: ignore[type-arg]
        closes.append(1)
        return so_far(self)

    monkeypatch.setattr(run_history.RequestLog, "so_far", counted)
    read = await RunHistory.read(_events("tools_batch_failed_unknown"), golem_data_converter)

    assert len(history("tools_batch_failed_unknown").events) > 10
    assert closes == [1]
    assert read.so_far and read.so_far[0].role == "user"
    assert read.tool_calls >= 1 and read.requests >= 1
