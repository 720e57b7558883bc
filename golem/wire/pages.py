"""Messages served page by page through a workflow query, and what points at messages
held by an earlier workflow run.

Two queries serve pages: ``golem.messages`` (a run's current model request, read by the
model activity) and ``golem.conversation`` (a run's conversation, or a conversation
workflow's transcript, read by activities and clients).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from pydantic import Field

from golem.messages import Message
from golem.wire.base import Wire

#: Most bytes of messages one payload or one query page carries inline (Temporal rejects
#: payloads and query results near 2 MB).
PAGE_BYTES = 1_000_000


def message_size(message: Message, length: Callable[[str], int] = len) -> int:
    """A quick estimate of a message's JSON size, its text counted in characters (``len``;
    ``message_bytes`` counts its UTF-8 bytes)."""
    return (
        length(message.content)
        + sum(length(c.args) + len(c.name) + length(c.signature) for c in message.tool_calls)
        + sum(length(b.text) + length(b.signature) + length(b.redacted) for b in message.thinking)
        + sum(length(p.url) + len(p.data) * 4 // 3 for p in message.parts)
        + 200
    )


def message_bytes(message: Message) -> int:
    """``message_size`` in UTF-8 bytes: a character of non-ASCII text takes up to four."""
    return message_size(message, _utf8)


def _utf8(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode())  # isascii: a flag, no scan


class MessagesQuery(Wire):
    """Ask for messages ``[since, upto)``; ``upto`` 0 means everything there is."""

    since: int = 0
    upto: int = 0


class Segment(Wire):
    """Messages ``[start, end)`` of a conversation held by an earlier workflow run (a run
    before a continue-as-new, or the conversation a fork continues), read from that run's
    history events, never through a query."""

    workflow_id: str
    run_id: str
    """The workflow run (execution) that holds them."""
    start: int
    end: int
    digest: str
    """Chain digest (``golem.wire.shipping.chain``) of the conversation's first ``end``."""
    turns: bool = False
    """That workflow run's turns are turns of this conversation (not of a forked one)."""


class MessagesPage(Wire):
    """One page of an answer to a ``MessagesQuery``."""

    messages: list[Message]
    next: int
    """Where the next page starts (``== upto`` when done)."""
    held: list[Segment] = Field(default_factory=list)
    """``[since, next)`` is held by earlier workflow runs (``messages`` is then empty)."""

    @classmethod
    def of(cls, source: list[Message], query: MessagesQuery) -> MessagesPage:
        """``source[since:upto]`` cut to at most ``PAGE_BYTES`` (at least one message)."""
        upto = min(query.upto or len(source), len(source))
        page: list[Message] = []
        size = 0
        index = query.since
        while index < upto and (not page or size + message_size(source[index]) <= PAGE_BYTES):
            size += message_size(source[index])
            page.append(source[index])
            index += 1
        return cls(messages=page, next=index)


#: Asks a workflow for one page (a query handle bound to a query name).
Pager = Callable[[MessagesQuery], Awaitable[MessagesPage]]


async def read_pages(pager: Pager, since: int = 0, upto: int = 0) -> list[Message]:
    """``[since, upto)`` page by page (``upto`` 0: everything there is)."""
    messages: list[Message] = []
    while True:
        page = await pager(MessagesQuery(since=since + len(messages), upto=upto))
        if not page.messages:
            if upto and since + len(messages) < upto:
                raise LookupError(
                    f"the workflow served no messages from {since + len(messages)} to {upto}"
                )
            return messages
        messages.extend(page.messages)
        if upto and since + len(messages) >= upto:
            return messages
