"""What ``golem dev`` records in its ``--dir`` (``.golem/dev-server.json``), so the commands
run in that directory reach the server it started and nothing opens its database twice.

    server = recorded()              # the live dev server of ./.golem, or None
    server.address, server.ui_url    # "localhost:7800", "http://localhost:8800"
    holder(Path(".golem/temporal.sqlite"))   # "pid 4242 (temporal server start-dev ...)"

A record whose process has ended is ignored: a stopped server leaves no stale address.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

#: ``golem dev``'s default ``--dir``, relative to the directory a command runs in.
DEV_DIR = Path(".golem")
RECORD = "dev-server.json"


@dataclass(frozen=True)
class DevServer:
    """A dev server ``golem dev`` started: its gRPC address, UI and process."""

    address: str
    ui_url: str
    pid: int
    database: str


def record(directory: Path, server: DevServer) -> None:
    """Write ``server``'s record in ``directory`` (the UI's address in ``ui-url`` too, where
    the codec server looks for the origin it allows)."""
    (directory / RECORD).write_text(json.dumps(asdict(server)) + "\n")
    (directory / "ui-url").write_text(f"{server.ui_url}\n")


def recorded(directory: Path = DEV_DIR) -> DevServer | None:
    """The dev server recorded in ``directory`` while its process runs, else ``None``."""
    try:
        server = DevServer(**json.loads((directory / RECORD).read_text()))
    except (OSError, ValueError, TypeError):
        return None
    return server if _alive(server.pid) else None


def forget(directory: Path, server: DevServer) -> None:
    """Remove ``server``'s record (and its ``ui-url``) from ``directory``, if still its own."""
    path = directory / RECORD
    with contextlib.suppress(OSError, ValueError, TypeError):
        if DevServer(**json.loads(path.read_text())) == server:
            path.unlink()
            ui = directory / "ui-url"
            if ui.read_text().strip() == server.ui_url:
                ui.unlink()


def holder(path: Path) -> str | None:
    """Which process has ``path`` open (from /proc on Linux), or ``None``."""
    target = str(path.resolve())
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if any(os.readlink(fd) == target for fd in (proc / "fd").iterdir()):
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                return f"pid {proc.name} ({cmdline[:120].strip()})"
    return None


def _alive(pid: int) -> bool:
    if not Path("/proc").is_dir():  # not Linux: whether the pid runs at all
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    # The server golem dev became (or is about to become), not a reused pid.
    return b"start-dev" in cmdline or b"\0dev\0" in cmdline
