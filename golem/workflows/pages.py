"""Messages served page by page through a workflow query, and read back page by page.

Both queries golem answers use it: ``golem.messages`` (a model request's messages, read
by the model activity) and ``golem.conversation`` (a run's conversation, read by the
client when a result or failure was too big to carry it). Serving and reading sit side
by side so the two cannot drift apart. No Temporal import: the reader is given the query.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from golem.messages import Message

__all__ = [
    "PAGE_BYTES",
    "MessagesPage",
    "MessagesQuery",
    "Pager",
    "Segment",
    "SegmentReader",
    "message_size",
    "read_pages",
    "with_segments",
]

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


class Segment(BaseModel):
    """Messages ``[start, end)`` of a conversation, held by an earlier workflow run (a run
    before a continue-as-new, or the conversation a fork continues): read from that run's
    history events, never through a query."""

    model_config = ConfigDict(frozen=True, alias_generator=to_camel, populate_by_name=True)

    workflow_id: str
    run_id: str
    """The workflow run (execution) that holds them."""
    start: int
    end: int
    digest: str
    """``shipping.chain`` digest of the conversation's first ``end`` messages."""
    turns: bool = False
    """That workflow run's turns are turns of this conversation (not of a forked one)."""


class MessagesPage(BaseModel):
    model_config = ConfigDict(frozen=True, alias_generator=to_camel, populate_by_name=True)

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


#: Asks a workflow for one page (``handle.query`` bound to a query name).
Pager = Callable[[MessagesQuery], Awaitable[MessagesPage]]

#: Reads the messages ``[start, end)`` a segment names, from its workflow run's history.
SegmentReader = Callable[[Segment], Awaitable[list[Message]]]


def with_segments(pager: Pager, read: SegmentReader) -> Pager:
    """``pager`` whose pages held by earlier workflow runs are read from their histories."""

    async def page(query: MessagesQuery) -> MessagesPage:
        served = await pager(query)
        if not served.held:
            return served
        messages: list[Message] = []
        for segment in served.held:
            held = await read(segment)
            low = max(query.since, segment.start)
            high = min(segment.end, query.upto) if query.upto else segment.end
            messages.extend(held[low - segment.start : high - segment.start])
        return MessagesPage(messages=messages, next=query.since + len(messages))

    return page


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
