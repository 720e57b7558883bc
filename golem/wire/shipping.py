"""How messages travel to a model activity and back in a run's outcome, without the
conversation riding every payload.

Two layers shape a list of messages for the wire (``Compact``), each named and undone in
one place (``compact`` / ``expand``):

- **stamps**: the trailing messages that carry the run's ``runId`` and
  ``conversationId`` travel without them (``Compact.stamped`` counts them); the payload
  that holds the ``Compact`` names the run's stamps once;
- **content references**: a long content one of the run's activities returned (a model
  answer, a tool result) is already in the run's history: it travels as its
  ``content_digest`` (``Compact.refs``) and is put back from what the reader holds.

A model call says which messages its request is (``ModelCall``: a count and a chain
digest of them) and how the new ones since the previous call travel, one variant each:
``Inline`` (small: in the input), ``Derived`` (the previous answer and its calls' tool
messages: a worker that ran those activities makes them itself) or ``ByQuery`` (read
through the run's ``golem.messages`` query). Whoever assembles a request checks it
against the digest, so a wrong conversation is never sent.

No Temporal import: the workflow, the activity and the client share these.
"""

from __future__ import annotations

import hashlib
import operator
from collections.abc import Collection, Mapping
from typing import Annotated, Literal

from pydantic import Field
from pydantic_core import SchemaSerializer
from pydantic_core.core_schema import any_schema

from golem.messages import Message
from golem.tools import ToolOutcome, tool_message
from golem.wire.base import Stamps, Tagged, Wire

_JSON = SchemaSerializer(any_schema())

#: Contents at least this long travel by reference when an activity of the run returned them.
REF_BYTES = 256


def content_digest(text: str) -> str:
    """The key a content travels by when it travels by reference."""
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def common_prefix(old: list[Message], new: list[Message]) -> int:
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


def chain(previous: str, message: Message) -> str:
    """The digest of a list of messages, extended by one message (``""`` for no messages)."""
    data = _JSON.to_json(message, by_alias=True, exclude_defaults=True)
    return hashlib.blake2b(previous.encode() + data, digest_size=16).hexdigest()


def chain_all(messages: list[Message], start: str = "") -> list[str]:
    """``[start, digest of messages[:1], ..., digest of messages]``."""
    digests = [start]
    for message in messages:
        digests.append(chain(digests[-1], message))
    return digests


class ShippingError(Exception):
    """The messages a reader assembled are not the ones the workflow sent (a bug)."""


# -- the two layers -------------------------------------------------------------------


class Compact(Wire):
    """Messages shaped for the wire; ``expand`` gives them back."""

    messages: list[Message] = Field(default_factory=list)
    stamped: int = 0
    """The last ``stamped`` messages carried their run's stamps; they are left out."""
    refs: dict[int, str] = Field(default_factory=dict)
    """``messages[i]``'s content is left out: it is the content whose ``content_digest``
    is ``refs[i]``, returned by one of the run's activities."""


def compact(
    messages: list[Message], stamps: Stamps | None = None, recorded: Collection[str] = ()
) -> Compact:
    """``messages`` without the run's ``stamps`` (on its trailing messages that carry them)
    and without the long contents whose digest is in ``recorded``."""
    out = list(messages)
    refs: dict[int, str] = {}
    if recorded:
        for index, message in enumerate(out):
            if len(message.content) >= REF_BYTES:
                key = content_digest(message.content)
                if key in recorded:
                    out[index] = message.model_copy(update={"content": ""})
                    refs[index] = key
    start = len(out)
    if stamps is not None:
        ids = (stamps.run_id, stamps.conversation_id)
        while start and (out[start - 1].run_id, out[start - 1].conversation_id) == ids:
            start -= 1
        out[start:] = [m.stamped("", "") for m in out[start:]]
    return Compact(messages=out, stamped=len(out) - start, refs=refs)


def expand(
    shaped: Compact, stamps: Stamps | None = None, contents: Mapping[str, str] | None = None
) -> list[Message]:
    """The messages ``shaped`` stands for: ``stamps`` put back (the run's, named by the
    payload that holds it), ``contents`` (by digest) filling its references (``KeyError``
    naming the digest when one is missing)."""
    out = list(shaped.messages)
    if shaped.refs:
        if contents is None:
            raise KeyError(next(iter(shaped.refs.values())))
        for index, key in shaped.refs.items():
            out[index] = out[index].model_copy(update={"content": contents[key]})
    if shaped.stamped:
        if stamps is None:
            raise ValueError("the messages left their run's stamps out and none are given")
        start = len(out) - shaped.stamped
        out[start:] = [m.stamped(stamps.run_id, stamps.conversation_id) for m in out[start:]]
    return out


def derived(
    answer: Message, outcomes: Mapping[str, ToolOutcome], stamps: Stamps
) -> list[Message] | None:
    """A model answer and its calls' tool messages as the loop makes them, stamped
    (``None`` while a call has no outcome): the workflow and a worker that ran those
    activities build the same messages with it."""
    if any(c.id not in outcomes for c in answer.tool_calls):
        return None
    tools = [tool_message(c, outcomes[c.id]) for c in answer.tool_calls]
    return [m.stamped(stamps.run_id, stamps.conversation_id) for m in (answer, *tools)]


# -- a model call -----------------------------------------------------------------------


class HistoryBase(Wire):
    """A run's history by reference: the first ``count`` messages of conversation workflow
    ``conversation``'s transcript, whose chain digest is ``digest``."""

    conversation: str
    count: int
    digest: str
    after: str = ""
    """The run of the turn before (its messages end the base): a worker that served that
    run's last model call extends the base it holds with them, without a query."""


class Inline(Tagged):
    """The new messages ride in the input."""

    kind: Literal["inline"] = "inline"
    messages: Compact = Field(default_factory=Compact)


class Derived(Tagged):
    """The new messages are the previous call's answer and its calls' tool messages, in
    order, stamped with the run's stamps: a worker that ran those activities makes them
    (``derived``); another reads them by query."""

    kind: Literal["derived"] = "derived"


class ByQuery(Tagged):
    """The new messages are too long to ride the input: read them through the run's
    ``golem.messages`` query (a worker that holds nothing reads everything that way)."""

    kind: Literal["query"] = "query"


NewMessages = Annotated[Inline | Derived | ByQuery, Field(discriminator="kind")]


class ModelCall(Wire):
    """Input of the model-request activity: which messages the request is, and the new
    ones since the previous call of the run."""

    agent: str
    turn: int
    count: int
    """The request is the first ``count`` messages of the run's request list."""
    digest: str
    """Chain digest of those ``count`` messages: what the activity must end up with."""
    since: int = 0
    """Where the new messages start."""
    prefix: str | None = None
    """Chain digest of the first ``since`` messages, which a reader's cached list must
    match; ``None`` when the request extends the previous call's (a reader holding that
    many messages extends them; the final ``digest`` still decides)."""
    new: NewMessages = Field(default_factory=Inline)
    stamps: Stamps | None = None
    """The run's stamps, which its new messages carry (left out of them)."""
    base: HistoryBase | None = None
    """The run's history by reference: the request is ``[instructions] + base + own``."""
    stream: bool = False
    """Stream the answer, publishing its deltas to the run's stream."""
    model_index: int = 0
    """Which model of the agent's ``FallbackModel`` to call (0: the first, or the only one)."""
    tools: str = ""
    """The digest of the run's toolset tools (``golem.workflows.mcp``) and its own external
    tools, which the request offers after the agent's own (the list: query
    ``names.TOOLS``); empty for a run with neither."""
