"""Messages served page by page through a workflow query, and read back page by page.

Both queries golem answers use it: ``golem.messages`` (a model request's messages, read
by the model activity) and ``golem.conversation`` (a run's conversation, read by the
client when a result or failure was too big to carry it). Serving and reading sit side
by side so the two cannot drift apart. No Temporal import: the reader is given the query.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from golem.messages import Message

__all__ = ["PAGE_BYTES", "MessagesPage", "MessagesQuery", "Pager", "message_size", "read_pages"]

#: Most bytes of messages a run's result, failure or one query page carries inline
#: (Temporal rejects payloads and query results near 2 MB).
PAGE_BYTES = 1_000_000


def message_size(message: Message) -> int:
    """A quick upper estimate of a message's JSON size."""
    return (
        len(message.content)
        + sum(len(c.args) + len(c.name) + len(c.signature) for c in message.tool_calls)
        + sum(len(b.text) + len(b.signature) + len(b.redacted) for b in message.thinking)
        + sum(len(p.url) + len(p.data) * 4 // 3 for p in message.parts)
        + 200
    )


class MessagesQuery(BaseModel):
    """Ask for ``[since, upto)``; ``upto`` 0 means everything there is."""

    model_config = ConfigDict(frozen=True, alias_generator=to_camel, populate_by_name=True)

    since: int = 0
    upto: int = 0


class MessagesPage(BaseModel):
    model_config = ConfigDict(frozen=True, alias_generator=to_camel, populate_by_name=True)

    messages: list[Message]
    next: int
    """Where the next page starts (``== upto`` when done)."""

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


#: Asks a workflow for one page (``handle.query`` bound to a query name).
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
