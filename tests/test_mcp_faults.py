"""MCP servers that misbehave, through both executors: one that never answers, one whose tool
list is garbage, one whose result is too large for Temporal or malformed. Each ends the run
within its toolset's timeout, with an error naming the server and the step
(tests/mcp_servers/raw_server.py)."""

from __future__ import annotations

import re
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from agents import ask, call, scripted
from runners import Runner
from waiting import within

from golem.mcp import MCPServer
from golem.messages import Message
from golem.results import RunError
from golem.retry import Retry

RAW = Path(__file__).parent / "mcp_servers" / "raw_server.py"
ONCE = Retry(max_attempts=1)


def raw(mode: str, **options: Any) -> MCPServer:
    return MCPServer.stdio("raw", command=sys.executable, args=[str(RAW), mode], **options)


@pytest.mark.parametrize(
    ("mode", "step"),
    [("silent", "initialize"), ("garbage-list", "tools/list")],
)
async def test_a_server_that_never_answers_a_step_fails_the_run_within_its_timeout(
    runner: Runner, mode: str, step: str
) -> None:
    server = raw(mode, timeout=timedelta(seconds=2), retry=ONCE)
    agent, model = scripted([ask(call("c1", "none"))], toolsets=[server])

    with pytest.raises(RunError) as caught:
        await within(runner(agent, "go"), what="the run to fail", timeout=30)

    # Durably one activity connects and lists: its timeout cannot tell which step hung.
    step = step if runner.name == "local" else "initialize or tools/list"
    assert caught.value.stage == "tool"
    assert caught.value.detail == (
        "toolset 'raw': its tools could not be listed: "
        f"MCP server 'raw' did not answer {step} within 2 s (the toolset's timeout)"
    )
    assert model.requests == []


async def test_a_result_over_temporals_limit_without_storage_is_named_as_a_local_tools_is(
    runner: Runner,
) -> None:
    agent, _ = scripted([ask(call("c1", "big")), Message.assistant("done")], toolsets=[raw("big")])

    if runner.name == "local":  # in process no payload limit applies
        result = await runner(agent, "go")
        assert len(result.messages[2].content) == 3_000_000
        return
    with pytest.raises(RunError) as caught:
        await within(runner(agent, "go"), what="the run to fail", timeout=60)

    detail = caught.value.detail
    assert caught.value.stage == "tool"
    assert "TMPRL" not in detail
    assert re.fullmatch(
        r"tool 'big' \(call c1\) failed: MCP server 'raw' tool 'big' produced \d{7} bytes, "
        r"over Temporal's payload limit of 1983616 bytes; return a reference \(a URL or an "
        r"id\) instead of the content, or turn on external storage "
        r"\(GolemPlugin\(external_storage=...\) or GOLEM_STORAGE_DIR\)",
        detail,
    ), detail


async def test_a_malformed_result_names_the_server_the_tool_and_what_was_malformed(
    runner: Runner,
) -> None:
    agent, _ = scripted([ask(call("c1", "bad"))], toolsets=[raw("malformed", retry=ONCE)])

    with pytest.raises(RunError) as caught:
        await within(runner(agent, "go"), what="the run to fail", timeout=60)

    assert caught.value.stage == "tool"
    assert caught.value.detail == (
        "tool 'bad' (call c1) failed: MCP server 'raw' answered tools/call of tool 'bad' with "
        "a malformed result: content: Input should be a valid list"
    )


async def test_a_connection_closed_before_it_opened_leaves_no_unretrieved_exception(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Logged at garbage collection, such an exception's traceback is formatted where the
    # collector happens to run: on Python 3.11 inside another ast.parse it broke that parse
    # ("AST constructor recursion depth mismatch", a flaky failure of the suite).
    import asyncio
    import gc

    from golem.mcp.connection import _Open

    class Hangs:
        async def __aenter__(self) -> None:
            await asyncio.Event().wait()  # a server that never answers the handshake

        async def __aexit__(self, *exc: object) -> None:
            return None

    opening = _Open(Hangs())  # type: ignore[arg-type]
    await asyncio.sleep(0)  # the owner task is inside the handshake
    await opening.close()
    del opening
    gc.collect()
    await asyncio.sleep(0)
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]
