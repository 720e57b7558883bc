"""The ``golem`` command line against a real dev server."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from cli_agents import broken, echo
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from golem import cli
from golem.client import DurableAgent
from golem.worker import GolemPlugin


@pytest.fixture
def address(temporal_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch) -> str:
    target = temporal_env.client.service_client.config.target_host
    monkeypatch.setenv("TEMPORAL_ADDRESS", target)
    return target


def run_cli(*argv: str) -> asyncio.Future[int]:
    """Run one async CLI command in the test's own event loop."""
    args = cli.parser().parse_args(argv)
    commands = {
        "run": cli.cmd_run,
        "chat": cli.cmd_chat,
        "show": cli.cmd_show,
        "conversation": cli.cmd_conversation,
        "setup": cli.cmd_setup,
        "worker": cli.cmd_worker,
    }
    return asyncio.ensure_future(commands[args.command](args))


async def until(condition: object, timeout: float = 20.0) -> None:
    async with asyncio.timeout(timeout):
        while not await condition():  # type: ignore[operator]
            await asyncio.sleep(0.05)


async def test_run_prints_the_answer_the_ids_and_the_ui_link(
    address: str, temporal_client: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    tq = f"cli-{uuid.uuid4().hex[:8]}"
    async with Worker(temporal_client, task_queue=tq, plugins=[GolemPlugin(echo)]):
        assert await run_cli("run", "--agent", "echo", "--task-queue", tq, "hello there") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "echo: hello there (LOUD)"
    run_id = out[2].split()[-1]
    assert out[2].startswith("run id:") and out[3].startswith("conversation id:")
    assert out[4] == f"UI:              http://localhost:8233/namespaces/default/workflows/{run_id}"


async def test_chat_chains_turns_into_one_conversation(
    address: str,
    temporal_client: Client,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines = iter(["first", "second", ""])
    monkeypatch.setattr(cli, "read_line", lambda prompt: next(lines))
    tq = f"cli-{uuid.uuid4().hex[:8]}"
    async with Worker(temporal_client, task_queue=tq, plugins=[GolemPlugin(echo)]):
        assert await run_cli("chat", "--agent", "echo", "--task-queue", tq) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1:3] == ["echo> echo: first (LOUD)", "echo> echo: second (LOUD)"]
    conversation_id = out[3].split()[-1]
    query = f'GolemConversationId = "{conversation_id}"'

    async def both_visible() -> bool:
        return (await temporal_client.count_workflows(query)).count == 2

    await until(both_visible)


async def test_run_of_a_failing_agent_exits_1_naming_the_stage(
    address: str, temporal_client: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    tq = f"cli-{uuid.uuid4().hex[:8]}"
    async with Worker(temporal_client, task_queue=tq, plugins=[GolemPlugin(broken)]):
        assert await run_cli("run", "--agent", "broken", "--task-queue", tq, "hi") == 1
    err = capsys.readouterr().err
    assert err.startswith("run failed at stage model:")
    assert "model_not_found" in err


async def test_show_and_conversation_list_a_conversations_runs_in_order(
    address: str, temporal_client: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    tq = f"cli-{uuid.uuid4().hex[:8]}"
    async with Worker(temporal_client, task_queue=tq, plugins=[GolemPlugin(echo)]):
        durable = DurableAgent(temporal_client, echo, task_queue=tq)
        first = await durable.run("one")
        second = await durable.run("two", history=first.messages)
    query = f'GolemConversationId = "{first.conversation_id}"'

    async def both_visible() -> bool:
        return (await temporal_client.count_workflows(query)).count == 2

    await until(both_visible)
    assert await run_cli("show", second.run_id) == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown[0] == f"run {second.run_id}: completed"
    assert [line.split()[1] for line in shown[1:-1]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert shown[-2].endswith("echo: two (LOUD)")

    assert await run_cli("conversation", first.conversation_id) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[0] == f"conversation {first.conversation_id}: 2 run(s)"
    assert first.run_id in listed[1] and "completed" in listed[1] and "parent=-" in listed[1]
    assert listed[2].strip() == "answer: echo: one (LOUD)"
    assert second.run_id in listed[3] and f"parent={first.run_id}" in listed[3]


async def test_show_a_failed_run_prints_its_partial_evidence(
    address: str, temporal_client: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    tq = f"cli-{uuid.uuid4().hex[:8]}"
    async with Worker(temporal_client, task_queue=tq, plugins=[GolemPlugin(broken)]):
        run = await DurableAgent(temporal_client, broken, task_queue=tq).start("hi")
        with pytest.raises(Exception, match="model_not_found"):
            await run.result()
    assert await run_cli("show", run.run_id) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"run {run.run_id}: failed (run failed at stage 'model'")


async def test_worker_serves_the_agents_it_is_given(
    address: str, temporal_client: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    tq = f"cli-{uuid.uuid4().hex[:8]}"
    worker = run_cli("worker", "--agent", "cli_agents:echo", "--task-queue", tq)
    try:
        result = await DurableAgent(temporal_client, "echo", task_queue=tq).run("via cli")
        assert result.output == "echo: via cli (LOUD)"
        assert f"serving echo on task queue {tq!r}" in capsys.readouterr().out
    finally:
        worker.cancel()
        with pytest.raises(asyncio.CancelledError):
            await worker


def test_worker_refuses_what_is_not_an_agent() -> None:
    with pytest.raises(SystemExit, match="cli_agents:not_an_agent is a str, not a golem Agent"):
        cli.load_agent("cli_agents:not_an_agent")
    with pytest.raises(SystemExit, match="--agent wants module:attribute"):
        cli.load_agent("cli_agents")


async def test_setup_registers_the_search_attributes_and_is_idempotent(
    address: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await run_cli("setup") == 0
    assert await run_cli("setup") == 0
    out = capsys.readouterr().out
    assert "GolemConversationId, GolemAgent, GolemParentRunId" in out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_dev_starts_a_persistent_server_with_golems_search_attributes(
    tmp_path: Path,
) -> None:
    port, ui_port = free_port(), free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "golem.cli",
            "dev",
            "--dir",
            str(tmp_path),
            "--port",
            str(port),
            "--ui-port",
            str(ui_port),
        ],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert server.stdout is not None
        assert f"localhost:{port}" in server.stdout.readline().decode()
        client: Client | None = None
        async with asyncio.timeout(30):
            while client is None:
                try:
                    client = await Client.connect(f"127.0.0.1:{port}")
                except RuntimeError:
                    await asyncio.sleep(0.1)
        tq = f"dev-{uuid.uuid4().hex[:8]}"
        plugin = GolemPlugin(echo, heartbeat_timeout=timedelta(seconds=5))
        client = await Client.connect(f"127.0.0.1:{port}", plugins=[plugin])
        async with Worker(client, task_queue=tq):
            result = await DurableAgent(client, echo, task_queue=tq).run("persist me")
        described = await client.get_workflow_handle(result.run_id).describe()
        assert described.search_attributes["GolemAgent"] == ["echo"]
        assert (tmp_path / "temporal.sqlite").exists()
    finally:
        server.terminate()
        server.wait(timeout=30)
    # Stopping `golem dev` stops the server itself: nothing is left listening.
    async with asyncio.timeout(30):
        while answering(port):
            await asyncio.sleep(0.1)


def answering(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0
