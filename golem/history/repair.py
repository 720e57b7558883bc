"""Repair call/result pairing so every provider accepts the conversation.

    history, repair = normalize_history(stored)
    if repair.changed:
        log.info("repaired %s", repair)

Rules, applied by call id:

- A call with no result gets a synthesized :data:`INTERRUPTED_RESULT` result. Every
  call of an assistant turn is answered before the next non-tool message: results
  that follow the turn stay where they are, and the missing ones are appended to
  that block of results, in call order.
- A result placed after an intervening user, assistant or system message is still
  paired (never dropped): it moves up into its call's block, in call order, and is
  named in ``relocated``. Providers want results right after the requesting turn.
- A result whose call is absent (unknown id, or placed before its call) is dropped;
  so is every result after the first for one call.
- Calls without an id cannot be paired and pass through unrepaired.
- Call ids are assumed unique within one assistant message; a repeated id there is
  one call. An id requested again by a later turn opens a new call.
- Arguments that are not a JSON object are reported in ``truncated``, never rewritten.

Repair only ever synthesizes :data:`INTERRUPTED_RESULT`: it cannot know whether a call
started. :data:`OUTCOME_UNKNOWN_RESULT` is written by the run that saw the call start, and
repair treats it like any other result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from golem.messages import Message
from golem.strict_json import is_json_object

INTERRUPTED_RESULT = "interrupted before execution; no result was produced"
"""The neutral text of a synthesized result: the absence of an outcome, not a failure."""

OUTCOME_UNKNOWN_RESULT = (
    "interrupted while running; the outcome is unknown and it may have taken effect: "
    "check before repeating this call"
)
"""The neutral text closing a call that had started when its run stopped (a worker died
mid-call, or the run ended while it ran): unlike :data:`INTERRUPTED_RESULT` it does not
claim the call never ran, so the model checks before repeating an effect."""


@dataclass(frozen=True)
class HistoryRepair:
    """What :func:`normalize_history` changed (and detected), as lists of call ids."""

    synthesized: list[str] = field(default_factory=list)
    """Calls that had no result and received :data:`INTERRUPTED_RESULT`, in history order."""
    dropped: list[str] = field(default_factory=list)
    """Results removed: orphans (no call before them) and duplicates, in history order."""
    truncated: list[str] = field(default_factory=list)
    """Calls whose arguments are not a valid JSON object; detection only, bytes kept verbatim."""
    relocated: list[str] = field(default_factory=list)
    """Results moved up to their call's block because another message came between."""

    @property
    def changed(self) -> bool:
        """True when the returned history differs from the input."""
        return bool(self.synthesized or self.dropped or self.relocated)


def normalize_history(history: Sequence[Message]) -> tuple[list[Message], HistoryRepair]:
    """Return the history with call/result pairing repaired, and a report of what changed.

    Deterministic and idempotent; the input is never mutated. A history that needs no
    repair comes back as a new list holding the very same message objects.
    """
    blocks = _Blocks(history)
    if blocks.clean:
        return list(history), HistoryRepair(truncated=blocks.truncated)
    return blocks.repair()


_Missing = dict[str, "str | Message"]
"""One turn's calls its block lacks, in call order: the tool name while no result has come,
the result itself once a late one has (it moves up). An answered call leaves the dict."""


class _Blocks:
    """The history read once as blocks: each turn's calls, and every result's fate.

    This is the only place the rules live. A result stays where it is when the block
    it sits in (the tool messages right after a turn) still misses its id. Otherwise it
    leaves its place: it moves up (relocated) to the closed turn that still misses the
    id, or it is dropped, since no turn requested the id before it or the call already
    has its result. Clean means nothing leaves its place and no block closes with a call
    missing: there is nothing to drop, move or synthesize.
    """

    def __init__(self, history: Sequence[Message]) -> None:
        self.history = history
        self.truncated: list[str] = []
        self.dropped: list[str] = []
        self.relocated: list[str] = []
        self.leaving: set[int] = set()
        """Indexes of results that leave their place: dropped or relocated."""
        self.unfinished: dict[int, _Missing] = {}
        """Turns whose block closed with calls missing, by the turn's index."""
        waiting: dict[str, _Missing] = {}  # call id -> the closed turn still missing it
        block: _Missing | None = None  # the current block's turn, while results follow it
        turn_index = -1  # pragma: no mutate (never read before a turn sets it)
        for index, message in enumerate(history):
            role = message.role
            if role == "tool":
                call_id = message.tool_call_id
                if block is not None and call_id in block:
                    del block[call_id]
                # A result without an id cannot be paired: it passes through, like an id-less call.
                elif call_id:
                    self._leave(index, message, waiting.pop(call_id, None))
                continue
            if block:
                self._close(turn_index, block, waiting)
            block = None
            if role == "assistant" and message.tool_calls:
                block = self._open(message, waiting)
                turn_index = index
        if block:
            self._close(turn_index, block, waiting)
        self.clean = not self.leaving and not self.unfinished

    def _open(self, message: Message, waiting: dict[str, _Missing]) -> _Missing:
        """A turn's block: all its id'd calls missing until their results come."""
        block: _Missing = {}
        for call in message.tool_calls:
            call_id = call.id
            if call_id:
                if call_id not in block:  # a repeated id in one turn is one call
                    block[call_id] = call.name
                if call.args and not is_json_object(call.args):
                    self.truncated.append(call_id)
        if waiting:
            # An id requested again opens a new call: later results answer this turn.
            for call_id in block:
                waiting.pop(call_id, None)
        return block

    def _close(self, turn_index: int, block: _Missing, waiting: dict[str, _Missing]) -> None:
        """A block ended with calls missing: later results for them move up to it."""
        self.unfinished[turn_index] = block
        waiting.update(dict.fromkeys(block, block))

    def _leave(self, index: int, result: Message, turn: _Missing | None) -> None:
        """A result outside its call's block: moved up to the turn, or dropped if none."""
        self.leaving.add(index)
        call_id = result.tool_call_id
        if turn is None:
            self.dropped.append(call_id)  # no call before it, or the call has its result
        else:
            turn[call_id] = result
            self.relocated.append(call_id)

    def repair(self) -> tuple[list[Message], HistoryRepair]:
        """Apply the blocks: the history with every block whole, and the report."""
        repaired: list[Message] = []
        synthesized: list[str] = []
        pending: _Missing | None = None  # the turn whose block still needs results appended
        for index, message in enumerate(self.history):
            if message.role != "tool":
                if pending is not None:
                    _complete(pending, repaired, synthesized)
                pending = self.unfinished.get(index)
            if index not in self.leaving:
                repaired.append(message)
        if pending is not None:
            _complete(pending, repaired, synthesized)
        report = HistoryRepair(synthesized, self.dropped, self.truncated, self.relocated)
        return repaired, report


def _complete(missing: _Missing, repaired: list[Message], synthesized: list[str]) -> None:
    """Append a block's missing results in call order: moved-up ones, else synthesized."""
    for call_id, found in missing.items():
        if isinstance(found, str):
            repaired.append(Message.tool(call_id, found, INTERRUPTED_RESULT))
            synthesized.append(call_id)
        else:
            repaired.append(found)
