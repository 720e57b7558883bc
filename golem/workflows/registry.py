"""Which agents a worker serves, per task queue (shared by its workflows and activities)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from golem.agent import Agent

__all__ = ["ANY_TASK_QUEUE", "UNKNOWN_AGENT", "heartbeat_timeout", "lookup", "register"]

UNKNOWN_AGENT = "GolemUnknownAgent"
#: Agents registered for replay, where the history names the task queue.
ANY_TASK_QUEUE = "*"

_agents: dict[str, dict[str, Agent[Any, Any]]] = {}
_heartbeats: dict[str, timedelta] = {}


def register(task_queue: str, agents: list[Agent[Any, Any]], heartbeat: timedelta) -> None:
    served = _agents.setdefault(task_queue, {})
    for agent in agents:
        served[agent.name] = agent
    _heartbeats[task_queue] = heartbeat


def heartbeat_timeout(task_queue: str) -> timedelta:
    """How long a silent model or tool activity may go before Temporal retries it elsewhere."""
    return _heartbeats.get(task_queue) or _heartbeats.get(ANY_TASK_QUEUE, timedelta(seconds=30))


def lookup(task_queue: str, name: str) -> Agent[Any, Any]:
    """The agent named ``name``; ``LookupError`` naming the agents this worker has otherwise."""
    served = _agents.get(task_queue) or _agents.get(ANY_TASK_QUEUE, {})
    if name not in served:
        have = ", ".join(sorted(served)) or "none"
        raise LookupError(
            f"unknown agent {name!r}: the worker on task queue {task_queue!r} has: {have}"
        )
    return served[name]
