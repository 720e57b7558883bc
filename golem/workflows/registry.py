"""Which agents a worker serves, per task queue (shared by its workflows and activities)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from golem.agent import Agent

#: Agents registered for replay, where the history names the task queue.
ANY_TASK_QUEUE = "*"
#: The one default: how long a silent model or tool activity may go before Temporal retries it.
HEARTBEAT_TIMEOUT = timedelta(seconds=10)
#: The one default: a turn's new messages up to this size ride the model activity's input
#: (only the new ones, so history still grows with content, at most twice); larger ones are
#: read by query, a ~6 ms round trip. See docs/adr/0005-durable-runs.md.
INLINE_MESSAGES_BYTES = 64 * 1024


@dataclass(frozen=True)
class WorkerSettings:
    heartbeat_timeout: timedelta = HEARTBEAT_TIMEOUT
    """How long a silent model or tool activity may go before Temporal retries it elsewhere."""
    inline_messages_bytes: int = INLINE_MESSAGES_BYTES
    """New messages up to this size ride the model activity's input instead of a query."""
    stored_bytes: int | None = None
    """External storage's threshold: new messages this large ride the input too (the store
    takes the payload, history keeps a reference); ``None``: no external storage."""
    versioned: bool = False
    """The worker is a version of a Worker Deployment: the runs it starts are routed by the
    deployment, never started eagerly on itself."""


_agents: dict[str, dict[str, Agent[Any, Any]]] = {}
_settings: dict[str, WorkerSettings] = {}


def register(task_queue: str, agents: list[Agent[Any, Any]], settings: WorkerSettings) -> None:
    served = _agents.setdefault(task_queue, {})
    for agent in agents:
        served[agent.name] = agent
    _settings[task_queue] = settings


def settings(task_queue: str) -> WorkerSettings:
    return _settings.get(task_queue) or _settings.get(ANY_TASK_QUEUE) or WorkerSettings()


def lookup(task_queue: str, name: str) -> Agent[Any, Any]:
    """The agent named ``name``; ``LookupError`` naming the agents this worker has otherwise."""
    served = _agents.get(task_queue) or _agents.get(ANY_TASK_QUEUE, {})
    if name not in served:
        have = ", ".join(sorted(served)) or "none"
        raise LookupError(
            f"unknown agent {name!r}: the worker on task queue {task_queue!r} has: {have}"
        )
    return served[name]
