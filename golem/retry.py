"""Retry policies for model requests and tool calls."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

__all__ = ["Retry"]


def _seconds(value: float | timedelta, name: str) -> float:
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if seconds < 0:
        raise ValueError(f"Retry {name} must not be negative, got {value!r}")
    return seconds


@dataclass(frozen=True, init=False)
class Retry:
    """How a failed model request or tool call is tried again.

    For a model: retryable errors, in process by the executor and under Temporal by the
    activity retry policy; a provider's Retry-After replaces the computed delay. For a
    tool: only under Temporal, the tool activity's retry policy (in process a tool is not
    retried). Intervals are seconds or ``timedelta``, as in Temporal's ``RetryPolicy``;
    they are kept as seconds.
    """

    max_attempts: int = 4
    initial_interval: float = 1.0
    """Seconds before the first retry."""
    backoff: float = 2.0
    max_interval: float = 60.0
    """Longest wait between attempts; a Retry-After beyond it ends the run instead."""

    def __init__(
        self,
        max_attempts: int = 4,
        initial_interval: float | timedelta = 1.0,
        backoff: float = 2.0,
        max_interval: float | timedelta = 60.0,
    ) -> None:
        if max_attempts < 1:
            raise ValueError(f"Retry max_attempts must be at least 1, got {max_attempts}")
        object.__setattr__(self, "max_attempts", max_attempts)
        object.__setattr__(self, "initial_interval", _seconds(initial_interval, "initial_interval"))
        object.__setattr__(self, "backoff", backoff)
        object.__setattr__(self, "max_interval", _seconds(max_interval, "max_interval"))

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before attempt ``attempt + 1``."""
        if retry_after is not None:
            return retry_after
        return min(self.initial_interval * self.backoff ** (attempt - 1), self.max_interval)
