"""Look at pages as a person would: headless Chromium through ``tests/ui/snap.mjs``.

    pages = await snap("my_test", [Page("run", run_page(ui, run_id), wait=["Completed"])])
    assert "golem.tool" in pages["run"].text          # every frame's text; a PNG beside it

    async with ui_dev_server() as (env, ui):           # a dev server with its Temporal UI
        ...

Screenshots and texts land in ``.artifacts/ui/<test>/`` (git-ignored). Needs Debian's
``chromium`` and ``npm ci --prefix tests/ui`` (``.ci/run`` installs both); where either is
missing the browser tests skip, naming the install step, except under CI (``CI`` set),
where they fail.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shutil
import socket
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from golem.testing import dev_server

ROOT = Path(__file__).resolve().parent.parent
SNAP = ROOT / "tests" / "ui" / "snap.mjs"
NODE_MODULES = ROOT / "tests" / "ui" / "node_modules" / "playwright-core"
ARTIFACTS = ROOT / ".artifacts" / "ui"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
#: The columns the workflow list shows (the UI keeps them per browser).
COLUMNS = ("Status", "GolemSummary", "Workflow ID", "Type", "GolemConversationId", "GolemAgent")


@dataclasses.dataclass
class TemporalUI:
    """A dev server's client and its UI's base address (``http://127.0.0.1:PORT``)."""

    client: Client
    url: str


@dataclasses.dataclass
class Page:
    """One page to open: wait until every ``wait`` text shows (in any frame) and ``until``
    (a JS expression) holds; then click ``clicks`` in turn (text, or text and its waits)."""

    name: str
    url: str
    wait: Sequence[str] = ()
    until: str = ""
    clicks: Sequence[str | tuple[str, Sequence[str]]] = ()
    evaluate: str = ""
    timeout_ms: int = 30_000
    clip: tuple[int, int, int, int] | None = None
    """Only this part of the page in its screenshots: x, y, width, height (CSS pixels)."""

    def job(self) -> dict[str, Any]:
        clicks = [
            {"text": c} if isinstance(c, str) else {"text": c[0], "wait": list(c[1])}
            for c in self.clicks
        ]
        step: dict[str, Any] = {"name": self.name, "url": self.url, "wait": list(self.wait)}
        step.update(clicks=clicks, timeout_ms=self.timeout_ms)
        if self.until:
            step["until"] = self.until
        if self.evaluate:
            step["evaluate"] = self.evaluate
        if self.clip:
            step["clip"] = dict(zip(("x", "y", "width", "height"), self.clip, strict=True))
        return step


@dataclasses.dataclass
class Seen:
    """What one snapshot showed: the text of every frame, the screenshot's path."""

    name: str
    url: str
    text: str
    png: str
    frames: list[dict[str, str]]
    missing: list[str]
    value: Any = None
    console: list[str] = dataclasses.field(default_factory=list)
    error: str | None = None

    def frame_text(self, url_part: str) -> str:
        """The text of the frames whose address contains ``url_part``."""
        return "\n".join(f["text"] for f in self.frames if url_part in f["url"])


def browser_missing() -> str:
    """Why no browser test can run here, or ``""``."""
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM}: apt-get install -y chromium"
    if shutil.which("node") is None:
        return "no node on PATH: install Node.js (20 or newer)"
    if not NODE_MODULES.exists():
        return "playwright-core is not installed: npm ci --prefix tests/ui"
    return ""


def need_browser() -> None:
    """Skip the calling test where no browser is installed, or fail it under CI."""
    missing = browser_missing()
    if missing and os.environ.get("CI"):
        pytest.fail(f"browser tests must run in CI: {missing}")
    if missing:
        pytest.skip(missing)


async def snap(
    test: str,
    pages: Sequence[Page],
    *,
    columns: bool | Sequence[str] = False,
    viewport: tuple[int, int] | None = None,
) -> dict[str, Seen]:
    """Open ``pages`` in one headless Chromium (a ``viewport`` of width and height, else
    1600x1000; the workflow list's ``columns``, or ``COLUMNS`` for ``True``); every
    snapshot by name (``NAME`` for the page, ``NAME_1``... after each click). Runs beside
    the event loop, so a worker in this process keeps answering the queries the UI sends."""
    need_browser()
    out = ARTIFACTS / test
    shutil.rmtree(out, ignore_errors=True)
    job: dict[str, Any] = {"out": str(out), "steps": [p.job() for p in pages]}
    if columns:
        job["columns"] = list(COLUMNS if columns is True else columns)
    if viewport:
        job["viewport"] = list(viewport)
    process = await asyncio.create_subprocess_exec(
        "node",
        str(SNAP),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "CHROMIUM": CHROMIUM},
    )
    stdout, stderr = await process.communicate(json.dumps(job).encode())
    if process.returncode != 0:
        raise RuntimeError(f"snap.mjs exited {process.returncode}: {stderr.decode()[-2000:]}")
    fields = {f.name for f in dataclasses.fields(Seen)}
    seen = [Seen(**{k: v for k, v in r.items() if k in fields}) for r in json.loads(stdout)]
    for s in seen:  # kept for a person to read beside the screenshot
        (out / f"{s.name}.txt").write_text(f"URL {s.url}\n{s.text}\n")
    return {s.name: s for s in seen}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@asynccontextmanager
async def ui_dev_server() -> AsyncIterator[tuple[WorkflowEnvironment, str]]:
    """A Temporal dev server with its UI on a free port; the UI's base address."""
    port = free_port()
    async with dev_server(ui=True, ui_port=port) as env:
        yield env, f"http://127.0.0.1:{port}"


def run_page(ui: str, run_id: str, namespace: str = "default") -> str:
    """The UI's page of a run (its workflow id is the run id): the latest execution."""
    return f"{ui}/namespaces/{namespace}/workflows/{run_id}"
