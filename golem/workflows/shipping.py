"""Message shipping: how a model request's messages get from the workflow to the model
activity without the conversation riding every activity input.

Workflow side, ``Outbox``: each model call carries only the messages the previous call
did not have, and only when they are small (``inline_bytes``); the rest is served by the
``golem.messages`` query. Activity side, ``MessageCache``: a worker keeps each run's
messages and extends them. Nothing is trusted: every call carries a digest chain value
of its prefix and of its whole request, so a cache that missed a call (another worker
ran it) or holds a stale list refetches, and a wrong conversation is never sent.

No Temporal import: the activity hands the cache its query (``Pager``).
"""

from __future__ import annotations

import hashlib
import operator
from collections import OrderedDict

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from pydantic_core import SchemaSerializer
from pydantic_core.core_schema import any_schema

from golem.messages import Message
from golem.workflows.pages import MessagesPage, MessagesQuery, Pager, message_size, read_pages

__all__ = ["MessageCache", "ModelCallInput", "Outbox", "ShippingError", "chain"]

_JSON = SchemaSerializer(any_schema())


def chain(previous: str, message: Message) -> str:
    """The digest of a list of messages, extended by one message (``""`` for no messages)."""
    data = _JSON.to_json(message, by_alias=True, exclude_defaults=True)
    return hashlib.blake2b(previous.encode() + data, digest_size=16).hexdigest()


def _common_prefix(old: list[Message], new: list[Message]) -> int:
    """How many leading messages ``old`` and ``new`` share (identity first, at C speed)."""
    n = min(len(old), len(new))
    identical = list(map(operator.is_, old[:n], new[:n]))
    start = 0
    while start < n:
        try:
            index = identical.index(False, start)
        except ValueError:
            return n
        if old[index] != new[index]:
            return index
        start = index + 1  # equal but rebuilt (the system message is, every turn)
    return n


class ModelCallInput(BaseModel):
    """Input of the model-request activity: which messages the request is, and at most the
    small new ones; everything else is read through the ``golem.messages`` query."""

    model_config = ConfigDict(frozen=True, alias_generator=to_camel, populate_by_name=True)

    agent: str
    turn: int
    upto: int
    """The request is the first ``upto`` messages of the workflow's request list."""
    since: int = 0
    """Where ``messages`` starts."""
    messages: list[Message] = Field(default_factory=list)
    """``[since, upto)`` when small enough to send; empty otherwise."""
    prefix: str = ""
    """Digest of ``[0, since)``: a cache extends only a prefix with this digest."""
    digest: str = ""
    """Digest of ``[0, upto)``: what the activity must end up with."""
    stream: bool = False
    """Stream the answer, publishing its deltas to the run's stream."""


class ShippingError(Exception):
    """The messages a worker assembled are not the ones the workflow sent (a bug)."""


class Outbox:
    """The workflow side: the current request's messages, shipped as differences."""

    def __init__(self, inline_bytes: int) -> None:
        self.inline_bytes = inline_bytes
        self.messages: list[Message] = []
        """The current request's messages (served by the ``golem.messages`` query)."""
        self._chain: list[str] = [""]  # _chain[i]: digest of messages[:i]

    def ship(
        self, agent: str, turn: int, messages: list[Message], stream: bool = False
    ) -> ModelCallInput:
        """The activity input for a request of ``messages`` (``stream``: publish deltas)."""
        same = _common_prefix(self.messages, messages)  # checked, not assumed append-only
        del self._chain[same + 1 :]
        for message in messages[same:]:
            self._chain.append(chain(self._chain[-1], message))
        self.messages = list(messages)
        new_messages = messages[same:]
        small = sum(message_size(m) for m in new_messages) <= self.inline_bytes
        return ModelCallInput(
            agent=agent,
            turn=turn,
            upto=len(messages),
            since=same,
            messages=new_messages if small else [],
            prefix=self._chain[same],
            digest=self._chain[-1],
            stream=stream,
        )

    def page(self, query: MessagesQuery) -> MessagesPage:
        return MessagesPage.of(self.messages, query)


class MessageCache:
    """The activity side: per worker, each run's last request messages, verified by digest.

    Bounded to the ``max_runs`` most recently used runs (a finished run simply ages out).
    Injected by ``GolemPlugin`` (one per plugin, so per worker unless the plugin sits on a
    client serving several); nothing relies on what another worker's calls did.
    """

    def __init__(self, max_runs: int = 256) -> None:
        self.max_runs = max_runs
        self.queries = 0
        """Query pages asked for so far (for tests and tuning)."""
        self.refetches = 0
        """Times a cached prefix did not match and was dropped."""
        self._runs: OrderedDict[str, tuple[list[Message], list[str]]] = OrderedDict()

    async def fetch(self, run: str, call: ModelCallInput, pager: Pager) -> list[Message]:
        """The request's ``call.upto`` messages for ``run``; ``pager`` asks the workflow."""
        messages, digests = self._runs.pop(run, ([], [""]))
        if len(digests) > call.since and digests[call.since] == call.prefix:
            del messages[call.since :], digests[call.since + 1 :]
        else:
            if len(digests) > 1:
                self.refetches += 1
            messages, digests = [], [""]
        if call.messages and len(messages) == call.since:
            added = list(call.messages)
        else:
            added = await read_pages(self._counting(pager), len(messages), call.upto)
        for message in added:
            digests.append(chain(digests[-1], message))
        messages.extend(added)
        if len(messages) != call.upto or digests[-1] != call.digest:
            raise ShippingError(
                f"run {run}: the {len(messages)} messages assembled for turn {call.turn} "
                f"do not match the {call.upto} the workflow sent (digest {digests[-1]} "
                f"!= {call.digest})"
            )
        self._runs[run] = (messages, digests)
        while len(self._runs) > self.max_runs:
            self._runs.popitem(last=False)
        return list(messages)

    def _counting(self, pager: Pager) -> Pager:
        async def ask(query: MessagesQuery) -> MessagesPage:
            self.queries += 1
            return await pager(query)

        return ask
