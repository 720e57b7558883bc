"""Message shipping: how a model request's messages get from the workflow to the model
activity without the conversation riding every activity input.

Workflow side, ``Outbox``: each model call carries only the messages the previous call
did not have, and only when they are small (``inline_bytes``); the rest is served by the
``golem.messages`` query. Activity side, ``MessageCache``: a worker keeps each run's
messages and extends them. Nothing is trusted: every call carries a digest chain value
of its prefix and of its whole request, so a cache that missed a call (another worker
ran it) or holds a stale list refetches, and a wrong conversation is never sent.

A run of a conversation (``ConversationWorkflow``) gets its history by reference: its
input names a ``HistoryBase`` (the conversation workflow's id, a message count and the
digest of that prefix) instead of the messages, its requests are shipped without it, and
the worker's cache reads the base through the conversation's ``golem.conversation`` query
(once per worker and conversation, then only what was appended), verified by digest. The
request the model sees is ``[system?] + base + the run's own messages``.

No Temporal import: the activity hands the cache its query (``Pager``).
"""

from __future__ import annotations

import hashlib
import operator
from collections import OrderedDict
from collections.abc import Collection, Mapping

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from pydantic_core import SchemaSerializer
from pydantic_core.core_schema import any_schema

from golem.messages import Message, ToolCall
from golem.tools import ToolOutcome, tool_message
from golem.workflows.pages import MessagesPage, MessagesQuery, Pager, message_size, read_pages

__all__ = [
    "REF_BYTES",
    "HistoryBase",
    "MessageCache",
    "ModelCallInput",
    "Outbox",
    "RequestLog",
    "ShippingError",
    "by_reference",
    "chain",
    "chain_all",
    "content_digest",
    "derived",
    "filled",
    "with_base",
]

_JSON = SchemaSerializer(any_schema())


#: A run's ``(run_id, conversation_id)``: what the loop stamps its own messages with.
Stamps = tuple[str, str]

#: Contents at least this long travel by reference when an activity of the run returned them.
REF_BYTES = 256


def content_digest(text: str) -> str:
    """The key a content travels by when it travels by reference."""
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


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


class HistoryBase(BaseModel):
    """A run's history by reference: the first ``count`` messages of conversation workflow
    ``conversation``'s transcript, whose digest (``chain``) is ``digest``."""

    model_config = ConfigDict(frozen=True, alias_generator=to_camel, populate_by_name=True)

    conversation: str
    count: int
    digest: str


def with_base(base: list[Message], own: list[Message]) -> list[Message]:
    """A based run's request: its instructions (a leading system message) first, then the
    base, then its own messages (the loop drops system messages from histories, so only
    the instructions can lead)."""
    split = 1 if own and own[0].role == "system" else 0
    return [*own[:split], *base, *own[split:]]


def by_reference(
    messages: list[Message], recorded: Collection[str]
) -> tuple[list[Message], dict[int, str]]:
    """``messages`` with each long content in ``recorded`` emptied, and ``{index: digest}``."""
    if not recorded:
        return messages, {}
    out, refs = list(messages), {}
    for index, message in enumerate(messages):
        if len(message.content) >= REF_BYTES:
            key = content_digest(message.content)
            if key in recorded:
                out[index] = message.model_copy(update={"content": ""})
                refs[index] = key
    return out, refs


def filled(
    messages: list[Message], refs: dict[int, str], contents: Mapping[str, str]
) -> list[Message]:
    """``messages`` with the contents ``refs`` names put back (``KeyError`` if one is missing)."""
    if not refs:
        return messages
    out = list(messages)
    for index, key in refs.items():
        out[index] = out[index].model_copy(update={"content": contents[key]})
    return out


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


def derived(
    answer: Message, outcomes: Mapping[str, ToolOutcome], stamps: Stamps
) -> list[Message] | None:
    """A model answer and its calls' tool messages as the loop makes them, stamped
    (``None`` while a call has no outcome): the workflow and a worker that ran those
    activities build the same ``derived`` messages with it."""
    if any(c.id not in outcomes for c in answer.tool_calls):
        return None
    tools = [tool_message(c, outcomes[c.id]) for c in answer.tool_calls]
    return [m.stamped(*stamps) for m in (answer, *tools)]


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
    """Digest of ``[0, since)``: a cache extends only a prefix with this digest. Left out
    when the request extends the previous one: a cache holding ``since`` messages extends
    them, and reads anew if the result does not match ``digest``."""
    digest: str = ""
    """Digest of ``[0, upto)``: what the activity must end up with."""
    stream: bool = False
    """Stream the answer, publishing its deltas to the run's stream."""
    base: HistoryBase | None = None
    """The run's history by reference: the request is ``with_base(base, messages)``."""
    refs: dict[int, str] = Field(default_factory=dict)
    """``messages[i]``'s content is empty here: it is what one of the run's activities
    returned (``content_digest`` ``refs[i]``), kept by the worker that ran it."""
    unstamped: bool = False
    """Every message in ``messages`` carried the run's stamps; they are left out here and
    put back from ``stamps`` (sent with a request's first messages, then kept by the cache)."""
    stamps: Stamps | None = None
    """The run's ``(run_id, conversation_id)``, sent when ``since`` is 0."""
    tools: str = ""
    """The digest of the run's toolset tools (``golem.workflows.mcp``), which the request
    offers after the agent's own; empty for a run without toolsets."""
    derived: bool = False
    """The new messages are the previous model call's answer and the tool messages of the
    calls it asked for, in order, stamped with the run's stamps: a worker that ran those
    activities makes them itself (``MessageCache.answered``/``called``), another reads them
    by query; ``messages`` is then empty."""
    model_index: int = 0
    """Which model of the agent's ``FallbackModel`` to call (0: the first, or the only one)."""


class ShippingError(Exception):
    """The messages a worker assembled are not the ones the workflow sent (a bug)."""


class Outbox:
    """The workflow side: the current request's messages, shipped as differences."""

    def __init__(self, inline_bytes: int, base: HistoryBase | None = None) -> None:
        self.inline_bytes = inline_bytes
        self.base = base
        """The run's history by reference; ``messages`` are only the run's own."""
        self.messages: list[Message] = []
        """The current request's messages (served by the ``golem.messages`` query)."""
        self._chain: list[str] = [""]  # _chain[i]: digest of messages[:i]
        self.logged = True
        """Every request so far shipped its new messages inline or derived: the history
        holds them all (``RequestLog`` rebuilds them), none was left to a query."""

    def ship(
        self,
        agent: str,
        turn: int,
        messages: list[Message],
        stream: bool = False,
        recorded: Collection[str] = (),
        stamps: Stamps | None = None,
        derivable: list[Message] | None = None,
    ) -> ModelCallInput:
        """The activity input for a request of ``messages`` (``stream``: publish deltas);
        new contents whose digest is in ``recorded`` (the run's own activity results)
        travel by reference; new messages equal to ``derivable`` (the previous answer and
        its calls' tool messages, stamped) travel as ``derived``."""
        same = _common_prefix(self.messages, messages)  # checked, not assumed append-only
        appended = same == len(self.messages)  # the cache that served the last call can extend
        del self._chain[same + 1 :]
        for message in messages[same:]:
            self._chain.append(chain(self._chain[-1], message))
        self.messages = list(messages)
        if appended and derivable and messages[same:] == derivable:
            return ModelCallInput(
                agent=agent,
                turn=turn,
                upto=len(messages),
                since=same,
                digest=self._chain[-1],
                stream=stream,
                base=self.base,
                derived=True,
            )
        new_messages, refs = by_reference(messages[same:], recorded)
        small = sum(message_size(m) for m in new_messages) <= self.inline_bytes
        self.logged = self.logged and small
        unstamped = bool(
            stamps
            and small
            and new_messages
            and all((m.run_id, m.conversation_id) == stamps for m in new_messages)
        )
        if unstamped:
            new_messages = [m.stamped("", "") for m in new_messages]
        return ModelCallInput(
            agent=agent,
            turn=turn,
            upto=len(messages),
            since=same,
            messages=new_messages if small else [],
            refs=refs if small else {},
            prefix="" if appended else self._chain[same],
            digest=self._chain[-1],
            stream=stream,
            base=self.base,
            unstamped=unstamped,
            stamps=stamps if same == 0 else None,
        )

    def page(self, query: MessagesQuery) -> MessagesPage:
        return MessagesPage.of(self.messages, query)


async def _unreadable(query: MessagesQuery) -> MessagesPage:
    raise ShippingError("the history does not hold this request: it was read by query")


class RequestLog:
    """A run's model requests rebuilt from its history alone (no worker, no query): each
    model call's input, fed in history order with what its model and tool activities
    returned, as a worker that ran them all would have assembled them."""

    def __init__(self) -> None:
        self._cache = MessageCache()
        self.last: list[Message] = []
        """The last request's own messages (its base aside)."""

    async def request(self, call: ModelCallInput) -> None:
        own = call.model_copy(update={"base": None})
        self.last = await self._cache.fetch("run", own, _unreadable)

    def answered(self, message: Message) -> None:
        self._cache.keep(message.content)
        self._cache.answered("run", message)

    def called(self, call: ToolCall, outcome: ToolOutcome) -> None:
        self._cache.keep(outcome.content)
        self._cache.called("run", call, outcome)


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
        self.base_queries = 0
        """Query pages asked of conversation workflows for bases."""
        # Per run: its last request's messages, their digest chain, and the run's own stamps.
        self._runs: OrderedDict[str, tuple[list[Message], list[str], Stamps | None]] = OrderedDict()
        self._bases: OrderedDict[str, tuple[list[Message], list[str]]] = OrderedDict()
        self._contents: OrderedDict[str, str] = OrderedDict()
        # Per run: the last answer this worker's model call returned, and the outcomes of
        # the calls it asked for that this worker's tool activities returned.
        self._answers: OrderedDict[str, tuple[Message, dict[str, ToolOutcome]]] = OrderedDict()

    def keep(self, content: str) -> None:
        """Remember a content an activity on this worker returned (the next model call of
        its run names it by reference)."""
        if len(content) >= REF_BYTES:
            key = content_digest(content)
            self._contents[key] = content
            self._contents.move_to_end(key)
            while len(self._contents) > self.max_runs * 16:
                self._contents.popitem(last=False)

    def answered(self, run: str, message: Message) -> None:
        """Remember the answer a model call of ``run`` returned on this worker."""
        self._answers.pop(run, None)
        self._answers[run] = (message, {})
        while len(self._answers) > self.max_runs:
            self._answers.popitem(last=False)

    def called(self, run: str, call: ToolCall, outcome: ToolOutcome) -> None:
        """Remember the outcome of a call of ``run``'s last answer, run on this worker."""
        answer = self._answers.get(run)
        if answer is not None and any(c.id == call.id for c in answer[0].tool_calls):
            answer[1][call.id] = outcome

    def _derive(self, run: str, stamps: Stamps) -> list[Message] | None:
        """The answer and its calls' tool messages, or None if this worker lacks one."""
        answer = self._answers.get(run)
        return derived(*answer, stamps) if answer is not None else None

    async def fetch(
        self, run: str, call: ModelCallInput, pager: Pager, base_pager: Pager | None = None
    ) -> list[Message]:
        """The request's messages for ``run``: its own ``call.upto`` (``pager`` asks the run's
        workflow), after ``call.base`` when it has one (``base_pager`` asks the conversation)."""
        own = await self._own(run, call, pager)
        if call.base is None:
            return own
        if base_pager is None:
            raise ShippingError(f"run {run}: its history is by reference and nothing can read it")
        return with_base(await self._base(call.base, base_pager), own)

    async def _base(self, base: HistoryBase, pager: Pager) -> list[Message]:
        """A conversation's first ``base.count`` messages: cached per conversation and
        extended by what it appended since; a cache whose prefix no longer matches (the
        transcript was rewritten, which only a repairing by-value turn does) reads anew."""
        messages, digests = self._bases.pop(base.conversation, ([], [""]))
        if len(messages) < base.count:
            added = await read_pages(self._counting(pager, base=True), len(messages), base.count)
            messages.extend(added)
            digests.extend(chain_all(added, digests[-1])[1:])
        if digests[base.count] != base.digest:
            if len(digests) > 1:
                self.refetches += 1
            messages = await read_pages(self._counting(pager, base=True), 0, base.count)
            digests = chain_all(messages)
            if len(messages) != base.count or digests[-1] != base.digest:
                raise ShippingError(
                    f"conversation {base.conversation}: its first {base.count} messages do not "
                    f"match the digest its run was given ({digests[-1]} != {base.digest})"
                )
        self._bases[base.conversation] = (messages, digests)
        while len(self._bases) > self.max_runs:
            self._bases.popitem(last=False)
        return messages[: base.count]

    async def _own(self, run: str, call: ModelCallInput, pager: Pager) -> list[Message]:
        cached = self._runs.pop(run, ([], [""], None))
        messages, digests, stamps = await self._assemble(run, call, pager, *cached)
        if digests[-1] != call.digest and (cached[0] or call.messages or call.derived):
            # What this worker held or was sent did not add up (a stale list of the same
            # length, another run's stamps): read the whole request anew.
            self.refetches += 1
            messages, digests, stamps = await self._assemble(run, call, pager, [], [""], None)
        if len(messages) != call.upto or digests[-1] != call.digest:
            raise ShippingError(
                f"run {run}: the {len(messages)} messages assembled for turn {call.turn} "
                f"do not match the {call.upto} the workflow sent (digest {digests[-1]} "
                f"!= {call.digest})"
            )
        self._runs[run] = (messages, digests, stamps)
        while len(self._runs) > self.max_runs:
            self._runs.popitem(last=False)
        return list(messages)

    async def _assemble(
        self,
        run: str,
        call: ModelCallInput,
        pager: Pager,
        messages: list[Message],
        digests: list[str],
        stamps: Stamps | None,
    ) -> tuple[list[Message], list[str], Stamps | None]:
        """The request's messages from a cached list (kept up to ``call.since`` when it
        matches), the call's inline messages, or the workflow's query."""
        # No prefix on a call that extends its previous request: a list of that length will do
        # (the final digest still decides).
        if call.prefix or call.since == 0:
            fits = len(digests) > call.since and digests[call.since] == call.prefix
        else:
            fits = len(digests) == call.since + 1
        if fits:
            messages, digests = messages[: call.since], digests[: call.since + 1]
        else:
            if len(digests) > 1:
                self.refetches += 1
            messages, digests, stamps = [], [""], None
        stamps = call.stamps or stamps
        added: list[Message] | None = None
        if call.derived and len(messages) == call.since and stamps is not None:
            added = self._derive(run, stamps)
        if call.messages and len(messages) == call.since:
            try:
                added = filled(list(call.messages), call.refs, self._contents)
            except KeyError:
                added = None  # another worker ran that activity: read by query
            if added is not None and call.unstamped:
                # No stamps known (this worker missed the run's first call): read by query.
                added = None if stamps is None else [m.stamped(*stamps) for m in added]
        if added is None:
            added = await read_pages(self._counting(pager), len(messages), call.upto)
            # The new messages are the run's own: learn its stamps.
            if (call.unstamped or call.derived) and added:
                stamps = (added[-1].run_id, added[-1].conversation_id)
        for message in added:
            digests.append(chain(digests[-1], message))
        return [*messages, *added], digests, stamps

    def _counting(self, pager: Pager, base: bool = False) -> Pager:
        async def ask(query: MessagesQuery) -> MessagesPage:
            if base:
                self.base_queries += 1
            else:
                self.queries += 1
            return await pager(query)

        return ask
