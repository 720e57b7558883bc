"""One workflow run of a conversation, around its turns: the idle timeout that rests it,
what it carries to the next run (by continue-as-new, or to reopen after a rest), its summary
when it ends, and what the UI shows of it.

    following = carried_input(settings, transcript, turns.known)   # the next run's input
    return summary(transcript, reopen=following)                   # a rest's result

The turns themselves are golem.workflows.turns (the state machine) and
golem.workflows.turn_runs (a turn's run built from the transcript and taken back).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from golem.wire import ConversationInput, ConversationSummary
    from golem.wire.transcript import RECENT_RUNS, Transcript
    from golem.workflows.patches import HANDED_RUNS, patched
    from golem.workflows.turns import Turns


class IdleTimeout:
    """A conversation's idle timeout (``seconds``; ``None``: none), restarted by every
    transition of its turns."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self._changes = 0

    def restart(self) -> None:
        self._changes += 1

    async def wait(self, turns: Turns, done: Callable[[], bool]) -> bool:
        """Wait until ``done()`` or a transition (``False``), or until the timeout runs out
        while no turn is in flight (``True``: the conversation rests)."""
        changes = self._changes
        idle = self.seconds if turns.phase == "idle" else None
        try:
            await workflow.wait_condition(
                lambda: done() or (self.seconds is not None and self._changes != changes),
                timeout=None if idle is None else timedelta(seconds=idle),
                # The UI's name for it, where it would say "4 (10m)".
                timeout_summary=None
                if idle is None
                else f"idle: rests after {idle:g} s without a turn",
            )
        except TimeoutError:
            return True
        return False


def carried_input(
    following: ConversationInput, transcript: Transcript, known: dict[str, str]
) -> ConversationInput:
    """``following`` (the settings a conversation keeps) with what this workflow run carries
    to the next, by continue-as-new or when a rested conversation reopens: the transcript
    by value while small, else by reference (runs recorded before the transcript could go
    by reference carry it by value), and the fingerprints of its latest turns."""
    info = workflow.info()
    carried = transcript.carry(info.workflow_id, info.run_id, bool(following.by_reference))
    if "handed" in carried and not patched(HANDED_RUNS):
        del carried["handed"]  # a history recorded without the count continues without it
    recent = [*carried.get("recent", []), *carried.get("runs", [])][-RECENT_RUNS:]
    fingerprints = {r: known[r] for r in recent if known.get(r)}
    return ConversationInput(
        **{
            **dict(following),
            "parent_run_id": transcript.parent_run_id,
            "fingerprints": fingerprints,
            **carried,
        }
    )


def summary(transcript: Transcript, reopen: ConversationInput | None = None) -> ConversationSummary:
    """A closed conversation's result (``reopen``: it rested, and reopens from that input)."""
    return ConversationSummary(
        turns=transcript.person_turns,
        messages=transcript.length,
        last_run=transcript.last_run,
        reopen=reopen,
    )


def details(transcript: Transcript, turns: Turns, rested_after: float | None) -> str:
    """What the UI shows for a conversation; one that rests (idle ``rested_after`` seconds)
    says so first."""
    waiting = turns.waiting
    calls = turns.report.pending_approvals if turns.report is not None else []
    pending = ", ".join(f"{c.name} ({c.id})" for c in calls if c.id in waiting) or "none"
    rest = (
        f"**resting** after {rested_after:g} s without a turn: its next turn reopens it\n\n"
        if rested_after is not None
        else ""
    )
    return (
        f"{rest}**turns** {transcript.person_turns} · **messages** {transcript.length}\n\n"
        f"**last run** {transcript.last_run or 'none'}\n\n"
        f"**waiting for approval** {pending}"
    )
