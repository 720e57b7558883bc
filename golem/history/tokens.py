"""Token counters for :func:`golem.history.budget_history`.

    budget_history(estimate_tokens, 8000)            # offline, no dependency
    budget_history(tiktoken_counter(), 8000)         # needs golem-temporal[tiktoken]

A counter is any callable ``list[Message] -> int``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from golem.messages import Message

TokenCounter = Callable[[list[Message]], int]
"""Counts the tokens a list of messages costs in a request."""

CHARS_PER_TOKEN = 4
"""The estimator's rule of thumb for English text and JSON."""
MESSAGE_OVERHEAD_TOKENS = 4
"""Role markers and separators every message costs."""
PART_TOKENS = 256
"""Fixed cost of one media part: its real cost depends on the provider and the media."""


def estimate_tokens(messages: Sequence[Message]) -> int:
    """Estimate tokens offline: about 4 characters per token plus a small per-message overhead.

    Counts content, tool call names and arguments, tool names and thinking text; each media
    part costs a fixed :data:`PART_TOKENS`. Deterministic, and additive over messages.
    """
    total = 0
    for message in messages:
        chars = sum(len(text) for text in _texts(message))
        total += MESSAGE_OVERHEAD_TOKENS + -(-chars // CHARS_PER_TOKEN)
        total += PART_TOKENS * len(message.parts)
    return total


def tiktoken_counter(encoding: str = "o200k_base") -> TokenCounter:
    """Return a counter that tokenizes with tiktoken's ``encoding``.

    Raises ImportError naming the ``golem-temporal[tiktoken]`` extra when tiktoken is
    not installed.
    """
    try:
        import tiktoken
    except ImportError as exc:
        raise ImportError(
            "tiktoken_counter needs the tiktoken package: "
            "pip install 'golem-temporal[tiktoken]' (or use estimate_tokens)"
        ) from exc
    encoder = tiktoken.get_encoding(encoding)

    def count_tokens(messages: list[Message]) -> int:
        total = 0
        for message in messages:
            total += MESSAGE_OVERHEAD_TOKENS + PART_TOKENS * len(message.parts)
            total += sum(len(encoder.encode(text)) for text in _texts(message) if text)
        return total

    count_tokens.__name__ = f"tiktoken_counter({encoding!r})"
    return count_tokens


def _texts(message: Message) -> Iterator[str]:
    """The text of a message that a provider tokenizes."""
    yield message.content
    yield message.tool_name
    for call in message.tool_calls:
        yield call.name
        yield call.args
    for block in message.thinking:
        yield block.text
