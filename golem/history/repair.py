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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from golem.messages import Message
from golem.strict_json import is_json_object

__all__ = ["INTERRUPTED_RESULT", "OUTCOME_UNKNOWN_RESULT", "HistoryRepair", "normalize_history"]

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
    truncated: list[str] = []
    if _is_clean(history, truncated):
        return list(history), HistoryRepair(truncated=truncated)
    return _repair(history, truncated)


def _is_clean(history: Sequence[Message], truncated: list[str]) -> bool:
    """One pass: fill ``truncated`` and say whether pairing is already right.

    Clean means each turn's block answers exactly that turn's calls, each once, so the
    check needs only the current turn's open ids: no history-wide dicts on this path.
    """
    waiting: set[str] | None = None  # ids of the current turn's calls still unanswered
    clean = True
    for message in history:
        role = message.role
        if role == "tool":
            call_id = message.tool_call_id
            # A result without an id cannot be paired: it passes through, like an id-less call.
            if call_id and clean:
                if waiting is None or call_id not in waiting:
                    clean = False
                else:
                    waiting.remove(call_id)
            continue
        if waiting:
            clean = False
        waiting = None
        if role == "assistant" and message.tool_calls:
            waiting = set()
            for call in message.tool_calls:
                call_id = call.id
                if call_id:
                    waiting.add(call_id)
                    args = call.args
                    if args and not is_json_object(args):
                        truncated.append(call_id)
    return clean and not waiting


def _repair(
    history: Sequence[Message], truncated: list[str]
) -> tuple[list[Message], HistoryRepair]:
    owner: dict[str, int] = {}
    calls_of: dict[int, list[tuple[str, str]]] = {}  # assistant index -> its (id, name) calls
    answered: set[tuple[int, str]] = set()
    late: dict[tuple[int, str], Message] = {}  # (requester, id) -> result moved up
    skip: set[int] = set()
    dropped: list[str] = []
    relocated: list[str] = []
    block = -1
    for index, message in enumerate(history):
        role = message.role
        if role == "tool":
            call_id = message.tool_call_id
            if not call_id:
                continue
            requester = owner.get(call_id)
            if requester is None or (requester, call_id) in answered:
                skip.add(index)
                dropped.append(call_id)
                continue
            answered.add((requester, call_id))
            if requester != block:
                skip.add(index)
                late[(requester, call_id)] = message
                relocated.append(call_id)
        elif role == "assistant":
            block = index
            calls: list[tuple[str, str]] = []
            for call in message.tool_calls:
                if call.id and owner.get(call.id) != index:
                    owner[call.id] = index
                    calls.append((call.id, call.name))
            if calls:
                calls_of[index] = calls
        else:
            block = -1

    repaired: list[Message] = []
    synthesized: list[str] = []
    pending = -1  # assistant index whose block still needs its missing results appended

    def close_block() -> None:
        for call_id, name in calls_of[pending]:
            key = (pending, call_id)
            moved = late.get(key)
            if moved is not None:
                repaired.append(moved)
            elif key not in answered:
                repaired.append(Message.tool(call_id, name, INTERRUPTED_RESULT))
                synthesized.append(call_id)

    for index, message in enumerate(history):
        if message.role != "tool" and pending >= 0:
            close_block()
            pending = -1
        if message.role == "assistant" and index in calls_of:
            pending = index
        if index not in skip:
            repaired.append(message)
    if pending >= 0:
        close_block()
    return repaired, HistoryRepair(synthesized, dropped, truncated, relocated)
