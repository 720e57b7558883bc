"""golem serve's faults, with real processes: a reader that disconnects mid-turn, a
`golem serve` SIGKILLed mid-stream and started again, a worker SIGKILLed mid-answer. The
turn finishes durably; the reconnect (AG-UI's snapshot, or Last-Event-ID) yields the rest,
nothing lost or repeated; a restarted model call is marked on the stream."""

from __future__ import annotations

import asyncio
import gc
import json
import signal
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import RunAgentInput
from crash_agents import stream_crash
from serve_support import DEADLINE, golem_serve, serving
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker
from test_crash import doomed_worker
from test_serve_rest import parse
from uicheck import free_port
from waiting import eventually

from golem import Message, ToolCall
from golem.agent import Agent
from golem.models import FunctionModel
from golem.worker import GolemPlugin

GATE = asyncio.Event()
USER = {"id": "u1", "role": "user", "content": "go"}


def _slow(messages: list[Message], tools: Any) -> Message:
    if messages[-1].role == "user":
        return Message.assistant("", [ToolCall(id="wait-1", name="wait", args="{}")])
    return Message.assistant(f"finished after {messages[-1].content}")


def slow_agent() -> Agent[Any, Any]:
    """An agent named like examples.refunds' whose tool waits until the test opens GATE."""
    agent = Agent(FunctionModel(_slow, model_name="offline-slow"), name="refunds")

    @agent.tool
    async def wait() -> str:
        """Wait for the test."""
        await GATE.wait()
        return "the gate"

    return agent


async def test_a_reader_that_leaves_mid_turn_finds_the_finished_turn_in_the_snapshot(
    temporal_env: WorkflowEnvironment,
) -> None:
    GATE.clear()
    thread = str(uuid.uuid4())
    asked = [{"id": "u1", "role": "user", "content": "go"}]
    body = {"threadId": thread, "runId": "r1", "messages": asked}
    async with (
        serving(temporal_env, [slow_agent()]) as server,
        httpx.AsyncClient(base_url=server.url, timeout=DEADLINE) as http,
    ):
        seen = []
        async with http.stream("POST", "/agents/refunds/agui", json=body) as answer:
            async for kind in _types(answer.aiter_lines()):
                seen.append(kind)
                if kind == "TOOL_CALL_END":
                    break  # the reader leaves while the tool runs
        GATE.set()

        async def transcript() -> list[dict[str, Any]]:
            messages: list[dict[str, Any]] = (await http.get(f"/conversations/{thread}")).json()[
                "messages"
            ]
            return messages

        await eventually(
            lambda: _has_four(transcript), what="the turn to finish durably", timeout=DEADLINE
        )
        again = await http.post("/agents/refunds/agui", json={**body, "runId": "r2"})

    data = [json.loads(line[6:]) for line in again.text.splitlines() if line.startswith("data: ")]
    assert seen == ["RUN_STARTED", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"]
    assert [d["type"] for d in data] == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    assert [m.get("content") for m in data[1]["messages"]] == [
        "go",
        None,
        "the gate",
        "finished after the gate",
    ]


async def _has_four(read: Any) -> bool:
    return len(await read()) == 4


async def _types(lines: AsyncIterator[str]) -> AsyncIterator[str]:
    """The AG-UI event types of a stream's lines, as they come."""
    async for line in lines:
        if line.startswith("data: "):
            yield json.loads(line[6:])["type"]


def _input_of(thing: object, thread: str) -> bool:
    return isinstance(thing, RunAgentInput) and thing.thread_id == thread


async def test_an_open_stream_holds_what_it_relays_not_its_input(
    temporal_env: WorkflowEnvironment,
) -> None:
    GATE.clear()
    thread = str(uuid.uuid4())
    body = {"threadId": thread, "runId": "r", "messages": [USER]}
    async with (
        serving(temporal_env, [slow_agent()]) as server,
        httpx.AsyncClient(base_url=server.url, timeout=DEADLINE) as http,
        http.stream("POST", "/agents/refunds/agui", json=body) as answer,
    ):
        kinds, held = [], None
        try:
            async for kind in _types(answer.aiter_lines()):
                kinds.append(kind)
                if kind == "TOOL_CALL_END":  # the stream is open while the tool runs
                    gc.collect()
                    held = [o for o in gc.get_objects() if _input_of(o, thread)]
                    GATE.set()
        finally:
            GATE.set()  # the tool never waits past the test, whatever the stream did

    assert kinds[-1] == "RUN_FINISHED"
    assert held == []  # the input (a client sends its whole history) was let go


async def test_a_killed_golem_serve_started_again_gives_the_rest_by_last_event_id(
    temporal_env: WorkflowEnvironment,
) -> None:
    GATE.clear()
    port, queue = free_port(), f"faults-{uuid.uuid4().hex[:8]}"
    url = f"http://127.0.0.1:{port}"
    plugin = GolemPlugin(slow_agent(), heartbeat_timeout=timedelta(seconds=5))
    async with Worker(temporal_env.client, task_queue=queue, plugins=[plugin]):
        async with (
            golem_serve(temporal_env.client, port, queue) as first,
            httpx.AsyncClient(base_url=url, timeout=DEADLINE) as http,
        ):
            conversation = (await http.post("/conversations", json={"agent": "refunds"})).json()
            events = f"/conversations/{conversation['id']}/events"
            await http.post(f"/conversations/{conversation['id']}/messages", json={"text": "go"})
            before: list[str] = []
            async with http.stream("GET", events) as answer:
                async for line in answer.aiter_lines():
                    if line.startswith("id: "):
                        before.append(line[4:])
                    if line == "event: model_end":
                        first.send_signal(signal.SIGKILL)  # mid-stream: the tool still runs
                        break
        GATE.set()
        async with (
            golem_serve(temporal_env.client, port, queue),
            httpx.AsyncClient(base_url=url, timeout=DEADLINE) as http,
        ):
            rest = parse((await http.get(events, headers={"Last-Event-ID": before[-1]})).text)
            whole = parse((await http.get(events)).text)

    assert [e["id"] for e in whole[: len(before)]] == before
    assert [e["id"] for e in whole] == before + [e["id"] for e in rest]  # none lost or repeated
    assert [e["event"] for e in rest] == [
        "tool_start",
        "tool_end",
        "model_start",
        "text_delta",
        "model_end",
        "result",
    ]
    assert json.loads(rest[-1]["data"])["output"] == "finished after the gate"


async def test_a_worker_killed_mid_answer_marks_the_restart_and_the_stream_goes_on(
    temporal_env: WorkflowEnvironment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOLEM_CRASH_DIR", str(tmp_path))
    monkeypatch.delenv("GOLEM_CRASH_HANG", raising=False)
    body = {"threadId": str(uuid.uuid4()), "runId": "r1", "messages": [USER]}
    async with (
        serving(temporal_env, [stream_crash], worker=False) as server,
        httpx.AsyncClient(base_url=server.url, timeout=DEADLINE) as http,
    ):
        async with doomed_worker(temporal_env, server.task_queue, tmp_path) as doomed:
            lines: list[str] = []

            async def read() -> None:
                async with http.stream("POST", "/agents/stream_crash/agui", json=body) as answer:
                    async for line in answer.aiter_lines():
                        lines.append(line)

            reading = asyncio.ensure_future(read())
            # Killed once the partial text is on the stream (deltas go out in batches).
            await eventually(
                lambda: any("a partial" in line for line in lines),
                what="the partial answer to stream",
                timeout=DEADLINE,
            )
            doomed.send_signal(signal.SIGKILL)
            await doomed.wait()
        plugin = GolemPlugin(stream_crash, heartbeat_timeout=timedelta(seconds=2))
        async with Worker(temporal_env.client, task_queue=server.task_queue, plugins=[plugin]):
            await reading

    events = [json.loads(line[6:]) for line in lines if line.startswith("data: ")]
    kinds = [e.get("name") or e["type"] for e in events]
    restart = kinds.index("golem.turn_restarted")
    texts = [e.get("delta", "") for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"]
    before = [e.get("delta", "") for e in events[:restart] if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert before == ["a partial "]
    assert "".join(texts[len(before) :]) == "the retried answer"
    assert events[restart]["value"]["attempt"] == 2
    assert kinds[-1] == "RUN_FINISHED" and events[-1]["outcome"] == {"type": "success"}
