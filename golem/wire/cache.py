"""Message shipping, the reading side: a worker's cache of its runs' model requests, which
the client's history reader also uses to rebuild a closed run's requests.

    cache = MessageCache()                                # one per worker (GolemPlugin)
    messages = await cache.fetch(run_key, call, pager, base_pager)

A model call carries only what its run's previous call did not have (golem.wire.shipping);
the cache extends what it holds with it, makes ``Derived`` messages from the answer and
outcomes its own activities returned, and reads through the run's ``golem.messages``
query whatever it lacks (another worker ran the previous call). A conversation's turn
gets its history by reference: the cache reads it through the conversation's
``golem.conversation`` query once per worker and conversation, then only what was
appended. Everything is checked against the call's digests; nothing is trusted.

No Temporal import: the activity hands the cache its queries (``Pager``).
"""

from __future__ import annotations

from collections import OrderedDict

from golem.messages import Message, ToolCall
from golem.tools import ToolOutcome
from golem.wire.base import Stamps
from golem.wire.pages import MessagesPage, MessagesQuery, Pager, read_pages
from golem.wire.shipping import (
    REF_BYTES,
    ByQuery,
    Derived,
    HistoryBase,
    Inline,
    ModelCall,
    ShippingError,
    chain,
    chain_all,
    content_digest,
    derived,
    expand,
)


def with_base(base: list[Message], own: list[Message]) -> list[Message]:
    """A based run's request: its instructions (a leading system message) first, then the
    base, then its own messages (the loop drops system messages from histories, so only
    the instructions can lead)."""
    split = 1 if own and own[0].role == "system" else 0
    return [*own[:split], *base, *own[split:]]


class MessageCache:
    """Per worker: each run's last request, verified by digest, and the contents and
    answers its activities returned. Bounded to the ``max_runs`` most recently used runs."""

    def __init__(self, max_runs: int = 256) -> None:
        self.max_runs = max_runs
        self.queries = 0
        """Query pages asked of runs so far (for tests and tuning)."""
        self.refetches = 0
        """Times a cached list did not match and was read anew."""
        self.base_queries = 0
        """Query pages asked of conversation workflows for bases."""
        self._runs: OrderedDict[str, tuple[list[Message], list[str]]] = OrderedDict()
        self._stamps: dict[str, Stamps] = {}  # per run key: what its own messages carry
        self._keys: dict[str, str] = {}  # workflow id (an inline turn: run id) -> its run key
        self._bases: OrderedDict[str, tuple[list[Message], list[str]]] = OrderedDict()
        self._contents: OrderedDict[str, str] = OrderedDict()
        # Per run: the last answer a model call returned here, and its calls' outcomes.
        self._answers: OrderedDict[str, tuple[Message, dict[str, ToolOutcome]]] = OrderedDict()

    # -- what this worker's activities returned ------------------------------------------

    def keep(self, content: str) -> None:
        """Remember a long content an activity returned (the next call names it by digest)."""
        if len(content) >= REF_BYTES:
            key = content_digest(content)
            self._contents[key] = content
            self._contents.move_to_end(key)
            while len(self._contents) > self.max_runs * 16:
                self._contents.popitem(last=False)

    def answered(self, run: str, message: Message) -> None:
        """Remember the answer a model call of ``run`` returned on this worker."""
        self.keep(message.content)
        self._answers.pop(run, None)
        self._answers[run] = (message, {})
        while len(self._answers) > self.max_runs:
            self._answers.popitem(last=False)

    def called(self, run: str, call: ToolCall, outcome: ToolOutcome) -> None:
        """Remember the outcome of a call of ``run``'s last answer, run on this worker."""
        self.keep(outcome.content)
        answer = self._answers.get(run)
        if answer is not None and any(c.id == call.id for c in answer[0].tool_calls):
            answer[1][call.id] = outcome

    # -- assembling a request -------------------------------------------------------------

    async def fetch(
        self, run: str, call: ModelCall, pager: Pager, base_pager: Pager | None = None
    ) -> list[Message]:
        """The request's messages: the run's own ``call.count`` (``pager`` asks the run's
        workflow), after ``call.base`` when it has one (``base_pager`` asks the conversation)."""
        base = None
        if call.base is not None:
            if base_pager is None:
                raise ShippingError(
                    f"run {run}: its history is by reference and nothing can read it"
                )
            # The base first: an inline turn's (ADR 0050) extends what the turn before added,
            # which this workflow's entry holds until the turn's own request replaces it.
            base = await self._base(call.base, base_pager)
        own = await self._own(run, call, pager)
        if call.stamps is not None:
            held = self._stamps.get(run)
            if held is not None and held.run_id != call.stamps.run_id:
                self._keys.pop(held.run_id, None)  # the inline turn before: its base is read
            self._stamps[run] = call.stamps
            self._keys[run.split("/", 1)[0]] = run
            self._keys[call.stamps.run_id] = run  # an inline turn's run id names no workflow
        return own if base is None else with_base(base, own)

    async def _own(self, run: str, call: ModelCall, pager: Pager) -> list[Message]:
        cached = self._runs.pop(run, ([], [""]))
        messages, digests = await self._assemble(run, call, pager, *cached)
        if digests[-1] != call.digest and (cached[0] or not isinstance(call.new, ByQuery)):
            # What this worker held or was sent did not add up (a stale list of the same
            # length): read the whole request anew.
            self.refetches += 1
            messages, digests = await self._assemble(run, call, pager, [], [""])
        if len(messages) != call.count or digests[-1] != call.digest:
            raise ShippingError(
                f"run {run}: the {len(messages)} messages assembled for turn {call.turn} "
                f"do not match the {call.count} the workflow sent (digest {digests[-1]} "
                f"!= {call.digest})"
            )
        self._runs[run] = (messages, digests)
        while len(self._runs) > self.max_runs:
            old, _ = self._runs.popitem(last=False)
            stamps = self._stamps.pop(old, None)
            self._keys.pop(old.split("/", 1)[0], None)
            if stamps is not None:
                self._keys.pop(stamps.run_id, None)
        return list(messages)

    async def _assemble(
        self, run: str, call: ModelCall, pager: Pager, messages: list[Message], digests: list[str]
    ) -> tuple[list[Message], list[str]]:
        """The request from a cached list (kept up to ``call.since`` when it fits) and the
        new messages as the call ships them, or read by query."""
        since = call.since
        if call.prefix is None:
            fits = len(digests) == since + 1  # it extends the previous call: that many do
        else:
            fits = len(digests) > since and digests[since] == call.prefix
        if fits:
            messages, digests = messages[:since], digests[: since + 1]
        else:
            if len(digests) > 1:
                self.refetches += 1
            messages, digests = [], [""]
        added = self._shipped(run, call) if len(messages) == since else None
        if added is None:
            added = await read_pages(self._counting(pager), len(messages), call.count)
        for message in added:
            digests.append(chain(digests[-1], message))
        return [*messages, *added], digests

    def _shipped(self, run: str, call: ModelCall) -> list[Message] | None:
        """The new messages as the call ships them, or None when this worker lacks what
        they name (then they are read by query)."""
        new, stamps = call.new, call.stamps
        if isinstance(new, Inline):
            try:
                return expand(new.messages, stamps, self._contents)
            except KeyError:
                return None  # another worker ran that activity
        answer = self._answers.get(run)
        if isinstance(new, Derived) and answer is not None and stamps is not None:
            return derived(*answer, stamps)
        return None

    async def _base(self, base: HistoryBase, pager: Pager) -> list[Message]:
        """A conversation's first ``base.count`` messages: cached per conversation and
        extended by what it appended since; a cache whose prefix no longer matches (the
        transcript was rewritten) reads anew."""
        messages, digests = self._bases.pop(base.conversation, ([], [""]))
        if len(messages) < base.count:
            added = self._made_by(base.after)
            extended = chain_all(added or [], digests[-1])
            if len(messages) + len(extended) - 1 != base.count or extended[-1] != base.digest:
                # Not what this worker saw the turn before make: read what was appended.
                added = await read_pages(
                    self._counting(pager, base=True), len(messages), base.count
                )
                extended = chain_all(added, digests[-1])
            else:
                self._forget(base.after)  # that ended run's messages live on in the base
            messages.extend(added or [])
            digests.extend(extended[1:])
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

    def _forget(self, workflow_id: str) -> None:
        """Drop what is kept for run ``workflow_id`` (its last request, its answer)."""
        key = self._keys.pop(workflow_id, None)
        if key is not None:
            self._runs.pop(key, None)
            self._stamps.pop(key, None)
            self._answers.pop(key, None)

    def _made_by(self, workflow_id: str) -> list[Message] | None:
        """What run ``workflow_id`` added to its conversation, as this worker saw it: its last
        request (instructions aside) and the answer that ended it, stamped; ``None`` when
        this worker did not serve its last model call."""
        key = self._keys.get(workflow_id)
        cached = self._runs.get(key) if key else None
        answer = self._answers.get(key) if key else None
        stamps = self._stamps.get(key) if key else None
        if cached is None or answer is None or stamps is None:
            return None
        own = cached[0]
        own = own[1:] if own and own[0].role == "system" else own
        return [*own, answer[0].stamped(stamps.run_id, stamps.conversation_id)]

    def _counting(self, pager: Pager, base: bool = False) -> Pager:
        async def ask(query: MessagesQuery) -> MessagesPage:
            if base:
                self.base_queries += 1
            else:
                self.queries += 1
            return await pager(query)

        return ask
