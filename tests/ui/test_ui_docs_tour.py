"""The observability guide's tour of the Temporal UI (docs/guides/observability.md), taken
from the real UI in headless Chromium over real runs: each screenshot the page embeds, and
the texts the page says it shows, checked on every run of the suite.

    make docs-screenshots        # the same test, writing the PNGs to docs/guides/img/

Without ``GOLEM_DOCS_SCREENSHOTS=1`` the screenshots stay in ``.artifacts/ui/docs_tour/``
and the committed ones are only checked (embedded by the page, small PNGs), so a run of
the suite leaves the working tree as it was.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle
from test_ui_first_hour import desk  # the guide's agent: a lookup, a refund, a failing tool
from uicheck import ROOT, Page, TemporalUI, run_page, snap

from golem.results import RunError

GUIDE = ROOT / "docs" / "guides" / "observability.md"
IMAGES = GUIDE.parent / "img"
UPDATE = os.environ.get("GOLEM_DOCS_SCREENSHOTS") == "1"
#: A committed screenshot stays under this many bytes (crop it, or shrink the viewport).
MAX_BYTES = 150_000
VIEWPORT = (1440, 1200)
#: The main column, without the UI's navigation bar.
LEFT = 256
WIDTH = VIEWPORT[0] - LEFT


@dataclass(frozen=True)
class Shot:
    """One screenshot of the tour: the PNG the guide embeds, the snapshot it is taken from,
    what the UI must show in it, and what the guide says about it."""

    png: str
    snapshot: str
    shows: tuple[str, ...]
    guide_says: tuple[str, ...]


async def event_page(ui: str, handle: WorkflowHandle[Any, Any], kind: EventType.ValueType) -> str:
    """The UI's page of the run's last event of ``kind``."""
    events = [e async for e in handle.fetch_history_events()]
    [*_, last] = [e for e in events if e.event_type == kind]
    run_id = (await handle.describe()).run_id
    return f"{ui}/namespaces/default/workflows/{handle.id}/{run_id}/history/events/{last.event_id}"


async def test_the_observability_guides_screenshots_show_what_it_describes(
    temporal_ui: TemporalUI,
) -> None:
    ui = temporal_ui.url
    async with desk(temporal_ui) as durable:
        done = await durable.run("Where is order 42?")
        conversation = await durable.conversation()
        turn = await conversation.send("Where is order 7?")
        waiting = await durable.start("refund order 42")
        assert (await waiting.result()).paused
        approved = await durable.start("refund order 43")
        assert (await approved.result()).paused
        assert (await approved.approve({"c1": True}, by="alice")).output == "Order 42: refunded."
        failed = await durable.start("break order 42")
        with pytest.raises(RunError):
            await failed.result()
        listed = quote(f'TaskQueue = "{durable.task_queue}"')  # the tour's runs only
        label = f"waiting for approval: refund (c1) · answer: golem approve {waiting.run_id} c1"
        message = "run failed at stage 'tool': tool 'explode' (call c1) failed: ValueError: boom"
        shots = [
            Shot(
                "ui-workflow-list.png",
                "list",
                ("desk: Where is order 42?", "desk: conversation", "desk: Where is order 7?"),
                ("GolemSummary", "GolemConversationId"),
            ),
            Shot(
                "ui-run-page.png",
                "run",
                ("golem.model_request • model: desk (turn 1)", "golem.tool • tool: order_status"),
                ("model: <model> (turn N)", "tool: <name>"),
            ),
            Shot(
                "ui-run-details.png",
                "run_1",
                ("desk: Where is order 42?", f"golem run id {done.run_id}", "completed"),
                ("User Metadata", "Current Details"),
            ),
            Shot("ui-waiting-run.png", "waiting", (label,), ("waiting for approval:",)),
            Shot(
                "ui-approval-answer.png",
                "approved",
                ('"name": "golem.approve"', '"kind": "completed"', '"decided"', '"by": "alice"'),
                ("golem.approve", "decided"),
            ),
            Shot("ui-failed-run.png", "failed", (f'"message": "{message}"',), ("one line",)),
        ]
        top = 70  # below the UI's namespace bar
        seen = await snap(
            "docs_tour",
            [
                Page(
                    "list",
                    f"{ui}/namespaces/default/workflows?query={listed}",
                    wait=[done.run_id, turn.run_id, conversation.id, failed.run_id, label],
                    clip=(LEFT, top, WIDTH, 420),
                ),
                Page(
                    "run",
                    run_page(ui, done.run_id),
                    wait=["COMPLETED", "golem.tool • tool: order_status"],
                    clicks=[("User Metadata", [f"golem run id {done.run_id}", "completed"])],
                    clip=(LEFT, top, WIDTH, 880),
                ),
                Page(
                    "waiting",
                    run_page(ui, waiting.run_id),
                    wait=[label],
                    clip=(LEFT, top, WIDTH, 720),
                ),
                Page(
                    "approved",
                    await event_page(
                        ui,
                        approved.handle,
                        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED,
                    ),
                    wait=['"decided"'],
                    clip=(LEFT, 365, WIDTH, 835),
                ),
                Page(
                    "failed",
                    run_page(ui, failed.run_id),
                    wait=["FAILED", message],
                    clip=(LEFT, top, WIDTH, 590),
                ),
            ],
            columns=("Status", "Workflow ID", "Type", "GolemSummary"),
            viewport=VIEWPORT,
        )
        await waiting.approve({"c1": False})  # nothing left waiting on the shared server
    guide = GUIDE.read_text()
    for shot in shots:
        page = seen[shot.snapshot]
        assert not page.missing, (shot.png, page.missing)
        for text in shot.shows:
            assert text in page.text, (shot.png, text)
        assert f"](img/{shot.png})" in guide, f"{GUIDE.name} does not embed img/{shot.png}"
        for text in shot.guide_says:
            assert text in guide, f"{GUIDE.name} no longer says {text!r} (beside {shot.png})"
        if UPDATE:
            IMAGES.mkdir(exist_ok=True)
            shutil.copyfile(page.png, IMAGES / shot.png)
        committed = IMAGES / shot.png
        assert committed.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", committed
        assert committed.stat().st_size < MAX_BYTES, (committed, committed.stat().st_size)
    embedded = {p.name for p in IMAGES.glob("*.png")}
    assert embedded == {s.png for s in shots}, "every committed screenshot is one of the tour's"
