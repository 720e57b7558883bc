"""History processors: bound what a long conversation sends to the model.

    agent = Agent(model, history_processor=trim_history(20))
    agent = Agent(model, history_processor=budget_history(estimate_tokens, 8000))

A processor rewrites the supplied history once per run, before validation and repair;
the fresh prompt and the instructions always join in full. Both builtins keep the newest
messages and, when they cut, start the kept window at a user message: a tool result
whose call was cut, an assistant turn (its results would be cut or it would open the
request as the model) and a system message (instructions replace it) cannot open a
request. A cut that leaves no user message raises :class:`HistoryProcessorError`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from golem.history.tokens import TokenCounter
from golem.messages import Message

HistoryProcessor = Callable[[list[Message]], list[Message] | Awaitable[list[Message]]]
"""Rewrites the supplied history once per run; sync or async."""


class HistoryProcessorError(ValueError):
    """A history processor could not produce a history that can open a request."""


class _Processor:
    """A named processor: its repr is the call that built it, e.g. ``trim_history(20)``."""

    def __init__(self, name: str, window_start: Callable[[Sequence[Message]], int]) -> None:
        self.__name__ = self.__qualname__ = name
        self._window_start = window_start

    def __call__(self, history: Sequence[Message]) -> list[Message]:
        cut = self._window_start(history)
        if cut <= 0:
            return list(history)
        for start in range(cut, len(history)):
            if history[start].role == "user":
                return list(history[start:])
        raise HistoryProcessorError(
            f"{self.__name__}: after cutting {cut} of {len(history)} messages, no user message "
            "is left to open the request (only tool results, assistant turns or system prompts)"
        )

    def __repr__(self) -> str:
        return self.__name__


def trim_history(max_messages: int) -> HistoryProcessor:
    """Keep at most the newest ``max_messages`` messages, starting at a user message.

    A history of ``max_messages`` or fewer is returned unchanged.
    """
    if max_messages < 1:
        raise ValueError(f"trim_history needs max_messages >= 1, got {max_messages}")

    def window_start(history: Sequence[Message]) -> int:
        return len(history) - max_messages

    return _Processor(f"trim_history({max_messages})", window_start)


def budget_history(counter: TokenCounter, max_tokens: int) -> HistoryProcessor:
    """Keep the newest messages whose tokens fit in ``max_tokens``, starting at a user message.

    ``counter`` is called on one message at a time, newest first, and stops at the first
    message that would overflow the budget; the window's cost is the sum. A history that
    fits whole is returned unchanged.
    """
    if max_tokens < 1:
        raise ValueError(f"budget_history needs max_tokens >= 1, got {max_tokens}")

    def window_start(history: Sequence[Message]) -> int:
        spent = 0
        for start in range(len(history) - 1, -1, -1):
            spent += counter([history[start]])
            if spent > max_tokens:
                return start + 1
        return 0

    name = getattr(counter, "__name__", type(counter).__name__)
    return _Processor(f"budget_history({name}, {max_tokens})", window_start)
