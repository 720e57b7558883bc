"""One Temporal dev server with its UI for every test in tests/ui/ (started on first use)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from uicheck import TemporalUI, need_browser, ui_dev_server


@pytest.fixture(scope="session")
async def temporal_ui() -> AsyncIterator[TemporalUI]:
    need_browser()  # no server at all where no browser can look at it
    async with ui_dev_server() as (env, url):
        yield TemporalUI(env.client, url)
