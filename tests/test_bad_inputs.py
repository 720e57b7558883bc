"""Every kind of bad input ends (a run, a client call, the codec server) within a bound,
naming its culprit: the catalogue of tests/bad_inputs.py, printed as a table of kind ->
outcome -> seconds at the end of the run (each row rides its test's report, so the table
is whole under pytest-xdist too; tests/conftest.py prints it)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from bad_inputs import CannedProvider, Env, HTTPStatus, Kind, kinds
from temporalio.client import Client

from golem.results import RunError

BOUND = 60.0
"""Seconds any kind may take to end (most take milliseconds; durable ones about one)."""

KINDS = kinds()


@pytest.fixture(scope="module")
def canned() -> Iterator[CannedProvider]:
    provider = CannedProvider()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            status, data = provider.answer(self.path)
            stream = data.startswith(b"data:")
            self.send_response(status)
            self.send_header("Content-Type", "text/event-stream" if stream else "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    provider.base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield provider
    finally:
        server.shutdown()
        server.server_close()


def outcome_of(exc: BaseException) -> str:
    if isinstance(exc, RunError):
        return f"RunError({exc.stage})"
    if isinstance(exc, HTTPStatus):
        return f"HTTP {exc.status}"
    return type(exc).__name__


async def attempt(kind: Kind, env: Env, request: pytest.FixtureRequest) -> None:
    began = time.perf_counter()
    async with asyncio.timeout(BOUND):
        try:
            value = await kind.attempt(env)
            outcome, text = "completed", str(value)
        except Exception as exc:
            outcome, text = outcome_of(exc), str(exc)
    seconds = time.perf_counter() - began
    shown = f"{outcome} (open: {kind.known})" if kind.known else outcome
    request.node.user_properties.append(("bad input", (kind.name, kind.where, shown, seconds)))
    assert (outcome, kind.culprit in text) == (kind.outcome, True), text[:500]


def _no_client() -> Client:
    raise AssertionError("an in-process kind asked for Temporal: mark it durable")


def params(kinds: list[Kind]) -> list[Any]:
    """Each kind a case; one not handled yet is expected to fail, naming its issue item."""
    return [
        pytest.param(
            k, id=k.name, marks=[pytest.mark.xfail(strict=True, reason=k.known)] * bool(k.known)
        )
        for k in kinds
    ]


LOCAL = params([k for k in KINDS if not k.durable])
DURABLE = params([k for k in KINDS if k.durable])


@pytest.mark.parametrize("kind", LOCAL)
async def test_a_bad_input_ends_in_bounded_time_naming_its_culprit(
    kind: Kind, canned: CannedProvider, request: pytest.FixtureRequest
) -> None:
    await attempt(kind, Env(_no_client, canned), request)


@pytest.mark.parametrize("kind", DURABLE)
async def test_a_bad_durable_input_ends_in_bounded_time_naming_its_culprit(
    kind: Kind, canned: CannedProvider, temporal_client: Client, request: pytest.FixtureRequest
) -> None:
    await attempt(kind, Env(lambda: temporal_client, canned), request)


def test_the_catalogue_names_each_kind_once() -> None:
    names = [k.name for k in KINDS]
    assert len(names) == len(set(names))
    assert len(names) >= 100
