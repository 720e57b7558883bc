"""Usage limits, checked before each model request and each tool batch."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from golem.history.tokens import estimate_tokens
from golem.messages import Message, Usage

__all__ = ["TokenCounter", "UsageLimits"]

TokenCounter = Callable[[Sequence[Message]], int]


@dataclass(frozen=True)
class UsageLimits:
    """Bounds on one run; a run that would cross one fails at stage ``usage``."""

    request_limit: int | None = 50
    input_tokens_limit: int | None = None
    output_tokens_limit: int | None = None
    total_tokens_limit: int | None = None
    tool_calls_limit: int | None = None
    request_input_tokens_limit: int | None = None
    """Estimated input tokens of any single request, counted with ``token_counter``."""
    token_counter: TokenCounter | None = None
    """Counts a request's messages (default: ``golem.history.tokens.estimate_tokens``)."""

    def before_request(self, requests: int, usage: Usage, messages: Sequence[Message]) -> str:
        """Why the next request may not be made, or ``""``."""
        if self.request_limit is not None and requests + 1 > self.request_limit:
            return f"the next request would exceed request_limit={self.request_limit}"
        for name, used, limit in (
            ("input_tokens_limit", usage.input_tokens, self.input_tokens_limit),
            ("output_tokens_limit", usage.output_tokens, self.output_tokens_limit),
            ("total_tokens_limit", usage.total_tokens, self.total_tokens_limit),
        ):
            if limit is not None and used > limit:
                return f"{used} tokens used exceed {name}={limit}"
        if self.request_input_tokens_limit is not None:
            counter = self.token_counter or estimate_tokens
            size = counter(messages)
            if size > self.request_input_tokens_limit:
                return (
                    f"the next request has about {size} input tokens, over "
                    f"request_input_tokens_limit={self.request_input_tokens_limit}"
                )
        return ""

    def before_tools(self, tool_calls: int, batch: int) -> str:
        """Why the next tool batch may not run, or ``""``."""
        if self.tool_calls_limit is not None and tool_calls + batch > self.tool_calls_limit:
            return (
                f"{batch} more tool calls after {tool_calls} would exceed "
                f"tool_calls_limit={self.tool_calls_limit}"
            )
        return ""
