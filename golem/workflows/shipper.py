"""Message shipping, the workflow side: one run's model requests, shipped as differences.

    shipper = Shipper(inline_bytes=64 * 1024, base=input.base)
    call = shipper.model_call(agent, turn, request.messages, stamps, stream)  # a ModelCall
    shipper.answered(response.message); shipper.called(call.id, outcome)      # what came back

Each model call carries only the messages the previous call did not have: inline when
small or stored (external storage takes a payload past its threshold; long contents an
activity of this run returned travel by digest), ``Derived`` when
they are exactly the previous answer and its calls' tool messages, else ``ByQuery`` (the
``golem.messages`` query serves ``page``). See golem.wire.shipping for the wire form and
golem.wire.cache for the reading side (activities, and the client's history reader).
"""

from __future__ import annotations

from golem.messages import Message
from golem.tools import ToolOutcome
from golem.wire import (
    REF_BYTES,
    ByQuery,
    Derived,
    HistoryBase,
    Inline,
    MessagesPage,
    MessagesQuery,
    ModelCall,
    Stamps,
    chain,
    common_prefix,
    compact,
    content_digest,
    derived,
    message_size,
)


class Shipper:
    """The current request's messages, their digest chain, and what this run's activities
    returned (the next call names it instead of carrying it)."""

    def __init__(
        self, inline_bytes: int, base: HistoryBase | None = None, stored_bytes: int | None = None
    ) -> None:
        self.inline_bytes = inline_bytes
        self.stored_bytes = stored_bytes
        """Past this size the input goes to external storage: inline, however large."""
        self.base = base
        """The run's history by reference; ``messages`` are only the run's own."""
        self._later_base = base.model_copy(update={"after": ""}) if base else None
        self.messages: list[Message] = []
        """The current request's messages (served by the ``golem.messages`` query)."""
        self._chain: list[str] = [""]  # _chain[i]: digest of messages[:i]
        self.logged = True
        """Every request so far shipped its new messages inline or derived: the run's
        history holds them all (a reader rebuilds its requests from it)."""
        self.recorded: set[str] = set()
        """Digests of the long contents this run's model and tool activities returned."""
        self._answer: Message | None = None  # the last answer, and its calls' outcomes
        self._outcomes: dict[str, ToolOutcome] = {}

    def model_call(
        self, agent: str, turn: int, messages: list[Message], stamps: Stamps, stream: bool
    ) -> ModelCall:
        """The activity input for a request of ``messages``."""
        same = common_prefix(self.messages, messages)  # checked, not assumed append-only
        extends = same == len(self.messages)  # the reader that served the last call extends it
        del self._chain[same + 1 :]
        for message in messages[same:]:
            self._chain.append(chain(self._chain[-1], message))
        self.messages = list(messages)
        new = messages[same:]
        call = ModelCall(
            agent=agent,
            turn=turn,
            count=len(messages),
            digest=self._chain[-1],
            since=same,
            prefix=None if extends and same else self._chain[same],
            stamps=stamps,
            # Only the first call needs to name the turn before: its reader keeps the base.
            base=self.base if same == 0 or self.base is None else self._later_base,
            stream=stream,
        )
        made = derived(self._answer, self._outcomes, stamps) if self._answer else None
        if extends and made and new == made:
            return call.model_copy(update={"new": Derived()})
        shaped = compact(new, stamps, self.recorded)
        size = sum(map(message_size, shaped.messages))
        stored = self.stored_bytes is not None and size >= self.stored_bytes
        if size > self.inline_bytes and not stored:
            self.logged = False
            return call.model_copy(update={"new": ByQuery()})
        return call.model_copy(update={"new": Inline(messages=shaped)})

    def answered(self, message: Message) -> None:
        """A model call returned ``message``."""
        self._record(message.content)
        self._answer, self._outcomes = message, {}

    def called(self, call_id: str, outcome: ToolOutcome) -> None:
        """A tool call of the last answer returned ``outcome``."""
        self._record(outcome.content)
        self._outcomes[call_id] = outcome

    def _record(self, content: str) -> None:
        if len(content) >= REF_BYTES:
            self.recorded.add(content_digest(content))

    def logged_count(self, messages: list[Message]) -> int:
        """How many leading ``messages`` the run's history holds (its last model request,
        instructions aside), or 0 when a request's new messages were read by query."""
        request = self.messages
        if not self.logged or not request:
            return 0
        own = request[1:] if request[0].role == "system" else request
        return len(own) if messages[: len(own)] == own else 0

    def page(self, query: MessagesQuery) -> MessagesPage:
        return MessagesPage.of(self.messages, query)
