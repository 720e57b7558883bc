"""Retry policies for model requests and tool calls, the same in process and under Temporal.

    agent = Agent(model, model_retry=Retry(max_attempts=5, initial_interval=0.5))

    @agent.tool(retry=Retry(max_attempts=2, non_retryable=(PermissionError,)))
    def fetch(url: str) -> str: ...

One policy means the same attempts, backoff and non-retryable errors in both executors:
in process the executor waits and tries again; under Temporal the policy becomes the
activity's ``RetryPolicy`` and the activity marks what ``retryable`` refuses non-retryable.
See docs/adr/0017-fallback-and-retry.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from golem.errors import ModelError
from golem.user_functions import UserCodeError


def _seconds(value: float | timedelta, name: str) -> float:
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if seconds < 0:
        raise ValueError(f"Retry {name} must not be negative, got {value!r}")
    return seconds


@dataclass(frozen=True, init=False)
class Retry:
    """How a failed model request or tool call is tried again, in process and durably alike.

    A model request is retried on a ``ModelError`` that says it is retryable (connection
    errors, 408/409/429, 5xx), a provider's Retry-After replacing the computed delay; any
    other exception a model raises is a bug and ends the run. A tool call is retried on any
    exception it raises (``ToolFailed``, ``ModelRetry`` and ``Canceled`` are outcomes, not
    failures), and on its ``timeout``, except what ``non_retryable`` names and what is not an
    ``Exception`` at all (``SystemExit``). Intervals are seconds or ``timedelta``, as in
    Temporal's ``RetryPolicy``; they are kept as seconds.
    """

    max_attempts: int = 4
    """Attempts in all, the first included (1: never retried)."""
    initial_interval: float = 1.0
    """Seconds before the first retry."""
    backoff: float = 2.0
    """Each wait is this many times the one before."""
    max_interval: float = 60.0
    """Longest wait between attempts; a Retry-After beyond it ends the tries instead."""
    non_retryable: tuple[type[BaseException], ...] = ()
    """Exception types never retried (their subclasses neither)."""

    def __init__(
        self,
        max_attempts: int = 4,
        initial_interval: float | timedelta = 1.0,
        backoff: float = 2.0,
        max_interval: float | timedelta = 60.0,
        non_retryable: tuple[type[BaseException], ...] = (),
    ) -> None:
        if max_attempts < 1:
            raise ValueError(f"Retry max_attempts must be at least 1, got {max_attempts}")
        if backoff < 1:
            raise ValueError(f"Retry backoff must be at least 1, got {backoff}")
        if not all(isinstance(t, type) and issubclass(t, BaseException) for t in non_retryable):
            raise TypeError(f"Retry non_retryable takes exception types, got {non_retryable!r}")
        object.__setattr__(self, "max_attempts", max_attempts)
        object.__setattr__(self, "initial_interval", _seconds(initial_interval, "initial_interval"))
        object.__setattr__(self, "backoff", backoff)
        object.__setattr__(self, "max_interval", _seconds(max_interval, "max_interval"))
        object.__setattr__(self, "non_retryable", tuple(non_retryable))

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before attempt ``attempt + 1``."""
        if retry_after is not None:
            return retry_after
        return min(self.initial_interval * self.backoff ** (attempt - 1), self.max_interval)

    def retryable(self, exc: BaseException) -> bool:
        """Whether ``exc`` may be tried again under this policy, attempts left aside."""
        if isinstance(exc, (*self.non_retryable, UserCodeError)):
            return False
        if isinstance(exc, ModelError):
            # A provider asking for a longer wait than the policy allows ends the tries.
            too_long = exc.retry_after is not None and exc.retry_after > self.max_interval
            return exc.retryable and not too_long
        # An error that says no retry can help (golem.delegation.UnknownAgent) is not tried.
        return isinstance(exc, Exception) and getattr(exc, "retryable", True) is not False

    def wait_after(self, attempt: int, exc: BaseException) -> float | None:
        """Seconds to wait before trying again after attempt ``attempt`` raised ``exc``, or
        ``None`` when the tries end here."""
        if attempt >= self.max_attempts or not self.retryable(exc):
            return None
        return self.delay(attempt, exc.retry_after if isinstance(exc, ModelError) else None)


#: A tool's retry policy unless it names its own (Temporal's default interval, 3 attempts).
TOOL_RETRY = Retry(max_attempts=3)
