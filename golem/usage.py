"""Usage limits, checked before each model request and each tool batch.

    agent = Agent(model, usage_limits=UsageLimits(request_limit=10, total_tokens_limit=50_000))

A run's limits bound its whole tree: the run and every run it delegates or hands off to
(``Spent`` is what a tree spent; a delegated run gets the rest as its ``Budget``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from golem.history.tokens import estimate_tokens
from golem.messages import Message, Usage

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
        limit = self.tool_calls_limit
        return _over_tools(limit, tool_calls, batch, f"tool_calls_limit={limit}")


class _Payload(BaseModel):
    # camelCase on the wire, like every payload in a durable run's history.
    model_config = ConfigDict(frozen=True, alias_generator=to_camel, populate_by_name=True)


class Spent(_Payload):
    """What runs spent: tokens, model requests and tool calls (e.g. a run's descendants)."""

    usage: Usage = Usage()
    requests: int = 0
    tool_calls: int = 0

    def __add__(self, other: Spent) -> Spent:
        return Spent(
            usage=self.usage + other.usage,
            requests=self.requests + other.requests,
            tool_calls=self.tool_calls + other.tool_calls,
        )

    @classmethod
    def tree(cls, usage: Usage, requests: int, tool_calls: int, descendants: Spent) -> Spent:
        """What a run that spent ``usage``, ``requests`` and ``tool_calls`` spent together
        with its ``descendants``."""
        return cls(usage=usage, requests=requests, tool_calls=tool_calls) + descendants


class Budget(_Payload):
    """What a delegated run and its own descendants may still spend: the tighter of each
    caller's limits, less what that caller's tree had spent when it delegated (``None``:
    no bound). Parallel delegations each get the whole rest, so together they may overshoot
    it by what they spend at once; the caller stops at its next check."""

    requests: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    tool_calls: int | None = None

    @classmethod
    def of(cls, limits: UsageLimits, spent: Spent, given: Budget | None) -> Budget:
        """What a run under ``limits`` (and a ``given`` budget) may let a delegate spend,
        its tree having spent ``spent``."""
        usage = spent.usage

        def rest(limit: int | None, used: int, cap: int | None) -> int | None:
            left = None if limit is None else max(limit - used, 0)
            if cap is not None:
                left = max(cap - used, 0) if left is None else min(left, max(cap - used, 0))
            return left

        given = given or cls()
        return cls(
            requests=rest(limits.request_limit, spent.requests, given.requests),
            input_tokens=rest(limits.input_tokens_limit, usage.input_tokens, given.input_tokens),
            output_tokens=rest(
                limits.output_tokens_limit, usage.output_tokens, given.output_tokens
            ),
            total_tokens=rest(limits.total_tokens_limit, usage.total_tokens, given.total_tokens),
            tool_calls=rest(limits.tool_calls_limit, spent.tool_calls, given.tool_calls),
        )

    def before_request(self, spent: Spent) -> str:
        """Why the next request may not be made within the budget, or ``""``."""
        if self.requests is not None and spent.requests + 1 > self.requests:
            return f"the next request would exceed the {self.requests} requests {_LEFT}"
        for name, used, limit in (
            ("input", spent.usage.input_tokens, self.input_tokens),
            ("output", spent.usage.output_tokens, self.output_tokens),
            ("total", spent.usage.total_tokens, self.total_tokens),
        ):
            if limit is not None and used > limit:
                return f"{used} {name} tokens used exceed the {limit} {_LEFT}"
        return ""

    def before_tools(self, tool_calls: int, batch: int) -> str:
        """Why the next tool batch may not run within the budget, or ``""``."""
        limit = self.tool_calls
        return _over_tools(limit, tool_calls, batch, f"the {limit} tool calls {_LEFT}")


def _over_tools(limit: int | None, tool_calls: int, batch: int, bound: str) -> str:
    """Why ``batch`` more tool calls after ``tool_calls`` pass ``limit`` (named ``bound``)."""
    if limit is not None and tool_calls + batch > limit:
        return f"{batch} more tool calls after {tool_calls} would exceed {bound}"
    return ""


_LEFT = "its delegating run's usage limits left it (they bound every run it delegates to)"
