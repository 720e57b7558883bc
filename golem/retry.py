"""Retry policies for model requests and tool calls."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Retry"]


@dataclass(frozen=True)
class Retry:
    """How a failed model request or tool call is tried again.

    For a model: retryable errors, in process by the executor and under Temporal by the
    activity retry policy; a provider's Retry-After replaces the computed delay. For a
    tool: under Temporal, the tool activity's retry policy (in process a tool is not retried).
    """

    max_attempts: int = 4
    initial_interval: float = 1.0
    """Seconds before the first retry."""
    backoff: float = 2.0
    max_interval: float = 60.0
    """Longest wait between attempts; a Retry-After beyond it ends the run instead."""

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before attempt ``attempt + 1``."""
        if retry_after is not None:
            return retry_after
        return min(self.initial_interval * self.backoff ** (attempt - 1), self.max_interval)
