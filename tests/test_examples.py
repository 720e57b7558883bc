"""The README's offline examples and ``make demo`` run whole, as a user runs them: exit 0,
the lines that show each part worked, and the commands they print work when pasted."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from subprocess import DEVNULL

import pytest
from uicheck import free_port
from waiting import eventually

from golem.cli.recorded import recorded
from golem.testing import temporal_cli

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("example", "lines"),
    [
        (
            "mcp_tools.py",
            ["waiting for approval of ['write_note']", "the run waits in its workflow for"],
        ),
        ("triage.py", ["the next turn went to billing", "serving now: billing"]),
        (
            "client_tools.py",
            [
                "the app is asked: pick_date",
                "Delivery booked for 2026-12-24.",
                "No date yet (the user closed the calendar); I will ask again later.",
            ],
        ),
        (
            "refunds.py",
            [
                "a small refund runs without asking: Done: order 41 refunded 30.",
                "approved with other arguments: Done: order 42 refunded 100.",
                "denied with a reason: No refund: over the limit; offer store credit.",
                '(approved by alice, ran with {"order":43,"amount":90})',
                "No refund: ask the customer first.",
            ],
        ),
    ],
)
def test_an_offline_example_runs_both_halves(example: str, lines: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / example)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    for line in lines:
        assert line in done.stdout, done.stdout[-2000:]
    # The dev server the durable half starts is the example's business, not the reader's.
    assert "Temporal CLI" not in done.stdout, done.stdout[-2000:]
    assert "Temporal Server:" not in done.stdout, done.stdout[-2000:]
    assert "Cluster Id" not in done.stderr, done.stderr[-2000:]


# -- make demo and golem dev (issue 30 items 12 to 15) ------------------------------------


def answering(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def shell() -> dict[str, str]:
    """A user's shell: no TEMPORAL_* settings."""
    return {k: v for k, v in os.environ.items() if not k.startswith("TEMPORAL_")}


async def up(port: int) -> None:
    """Once a server answers on ``port``."""

    async def answers() -> bool:
        return answering(port)

    await eventually(answers, what=f"a server on port {port}", timeout=60)


async def started(command: list[str], port: int, cwd: Path) -> subprocess.Popen[bytes]:
    """``command`` (a server) once it answers on ``port``."""
    server = subprocess.Popen(command, cwd=cwd, env=shell(), stdout=DEVNULL, stderr=DEVNULL)
    await up(port)
    return server


def demo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "examples" / "demo.py"), *args],
        cwd=ROOT,
        env=shell(),
        capture_output=True,
        text=True,
        timeout=300,
    )


def hint(stdout: str, label: str) -> str:
    """The command a closing hint names after ``label``."""
    line = next(line for line in stdout.splitlines() if line.startswith(label))
    return line[len(label) :].split("   (", 1)[0].strip()


def run_hint(command: str) -> subprocess.CompletedProcess[str]:
    """A hint's command as a user pastes it into a shell in the checkout."""
    return subprocess.run(
        command, shell=True, cwd=ROOT, env=shell(), capture_output=True, text=True, timeout=60
    )


def assert_the_demo_told_the_truth(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    out = done.stdout
    # The narration promises no less time than a takeover takes, and each says what it took.
    assert "(up to 10 s later when the dead worker also held the run's workflow task:" in out
    assert out.count("   (the run went on ") == 2, out
    assert "The conversation rests: 5 s without a turn closed its workflow" in out


async def test_the_demo_uses_the_server_golem_dev_runs_and_its_hints_work(tmp_path: Path) -> None:
    port, ui_port = free_port(), free_port()
    state = tmp_path / ".golem"
    dev = [sys.executable, "-m", "golem.cli", "dev", "--port", str(port), "--ui-port", str(ui_port)]
    server = await started([*dev, "--dir", str(state)], port, ROOT)
    try:
        done = demo("--dir", str(state))
        assert_the_demo_told_the_truth(done)
        first = done.stdout.splitlines()[0]
        assert first == (
            f"Temporal: using the server `golem dev` runs from {state}/ (localhost:{port})"
        )
        assert "starting the dev server" not in done.stdout
        assert "Bring back its dev server" not in done.stdout  # the user's server stays up
        conversation = run_hint(hint(done.stdout, "Every run of the conversation:"))
        assert conversation.returncode == 0, conversation.stderr
        assert "(ConversationWorkflow, resting: its next turn reopens it): 5 run(s)" in (
            conversation.stdout
        )
        link = hint(done.stdout, "See it in the Temporal UI:")
        assert link.startswith(f"http://localhost:{ui_port}/namespaces/default/workflows/"), link
    finally:
        server.terminate()
        server.wait(timeout=30)


async def test_the_demos_hints_work_after_it_stops_the_server_it_started(tmp_path: Path) -> None:
    port, ui_port = free_port(), free_port()
    state = tmp_path / ".golem"
    done = demo("--port", str(port), "--ui-port", str(ui_port), "--dir", str(state))
    assert_the_demo_told_the_truth(done)
    assert f"Temporal: starting the dev server (golem dev), data in {state}/temporal.sqlite" in (
        done.stdout
    )
    assert not (state / "dev-server.json").exists() and not (state / "ui-url").exists()
    again = hint(done.stdout, "Bring back its dev server first:")
    assert again == f".venv/bin/golem dev --port {port} --ui-port {ui_port} --dir {state}"
    server = await started(again.split(), port, ROOT)
    try:
        shown = run_hint(hint(done.stdout, "The last run's messages:"))
        assert shown.returncode == 0, shown.stderr
        assert "I can't tell: the booking was interrupted" in shown.stdout
    finally:
        server.terminate()
        server.wait(timeout=30)


async def test_the_demo_never_opens_a_database_another_server_holds(tmp_path: Path) -> None:
    port, state = free_port(), tmp_path / ".golem"
    state.mkdir()
    bare = [temporal_cli(), "server", "start-dev", "--headless", "--port", str(port)]
    server = await started([*bare, "--db-filename", str(state / "temporal.sqlite")], port, ROOT)
    try:
        done = demo("--port", str(free_port()), "--dir", str(state))
        assert done.returncode == 1
        said = done.stderr.strip().splitlines()[-1]
        assert said.startswith(f"demo: {state}/temporal.sqlite is open in pid {server.pid} ("), said
        assert said.endswith(
            "that server owns it; point TEMPORAL_ADDRESS at it, or stop it and run `make demo`"
            " again"
        ), said
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_make_demo_passes_the_ports_a_user_chooses() -> None:
    plan = subprocess.run(
        ["make", "-n", "demo", "PORT=7300", "UI_PORT=8300"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "examples/demo.py --port 7300 --ui-port 8300" in plan


# golem dev records where its server is; commands in its directory go there.


def golem(*args: str, cwd: Path, **kwargs: object) -> subprocess.Popen[str]:
    """A ``golem`` command started in ``cwd`` from a user's shell (the checkout importable)."""
    return subprocess.Popen(
        [sys.executable, "-m", "golem.cli", *args],
        cwd=cwd,
        env={**shell(), "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,  # type: ignore[call-overload]
    )


@pytest.fixture
def dev_on_7800_like(tmp_path: Path) -> Iterator[tuple[Path, int, int]]:
    """A user's ``golem dev --port P --ui-port U`` (P not 7233) in ``tmp_path``."""
    port, ui_port = free_port(), free_port()
    server = golem("dev", "--port", str(port), "--ui-port", str(ui_port), cwd=tmp_path)
    try:
        asyncio.run(up(port))
        yield tmp_path, port, ui_port
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_commands_in_golem_devs_directory_reach_its_server(
    dev_on_7800_like: tuple[Path, int, int],
) -> None:
    here, port, ui_port = dev_on_7800_like
    dev = recorded(here / ".golem")
    assert dev is not None
    assert (dev.address, dev.ui_url) == (f"localhost:{port}", f"http://localhost:{ui_port}")
    worker = golem("worker", "--agent", "examples.demo_agent:agent", "--task-queue", "q", cwd=here)
    try:
        assert worker.stdout is not None
        line = worker.stdout.readline()
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    assert f"on task queue 'q' (localhost:{port}, namespace default)" in line, line


def test_a_second_golem_dev_never_opens_a_database_a_server_holds(
    dev_on_7800_like: tuple[Path, int, int],
) -> None:
    here, _, _ = dev_on_7800_like
    second = golem("dev", "--port", str(free_port()), "--ui-port", str(free_port()), cwd=here)
    _, err = second.communicate(timeout=60)
    assert second.returncode == 1, err
    held = err.strip().splitlines()[-1]
    assert held.startswith("golem dev: .golem/temporal.sqlite is open in pid "), held
    assert held.endswith(": a server already uses it; stop that one, or pass another --dir"), held


def test_a_stopped_dev_servers_record_is_ignored(tmp_path: Path) -> None:
    port = free_port()
    server = golem("dev", "--port", str(port), "--ui-port", str(free_port()), cwd=tmp_path)
    asyncio.run(up(port))
    assert recorded(tmp_path / ".golem") is not None
    server.terminate()
    server.wait(timeout=30)
    assert recorded(tmp_path / ".golem") is None
