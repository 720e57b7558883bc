"""What a conversation workflow writes to its history: its input (a new conversation's
seed, or what crosses continue-as-new), each turn's update and answer, and its result.

    turn = TurnInput(run_id=new_id(), prompt="Hello")    # the golem.send update's argument
    await handle.execute_update("golem.send", turn, id=turn.update_id())
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Any

from pydantic import Field
from temporalio.contrib.workflow_streams import WorkflowStreamState

from golem.messages import Decision, Message, Part
from golem.policies import StoredRule
from golem.wire.base import Wire
from golem.wire.pages import Segment
from golem.wire.runs import Completed, Failed, Paused


class ConversationInput(Wire):
    """Input of ``ConversationWorkflow``: a new conversation's seed, or what crosses
    continue-as-new."""

    agent: str
    messages: list[Message] = Field(default_factory=list)
    """The transcript this workflow run holds by value, after what ``earlier`` holds."""
    runs: list[str] = Field(default_factory=list)
    """Run ids of the turns this workflow run holds by value, in order."""
    parent_run_id: str = ""
    """For a fork: the run of another conversation this one continues from."""
    turns_per_run: int = 500
    """golem's own continue-as-new budget, beside the server's suggestion."""
    earlier: list[Segment] = Field(default_factory=list)
    """Earlier workflow runs holding the transcript's first messages (and turns), in order."""
    turns: int = 0
    """Turns the earlier workflow runs hold."""
    handed: int = 0
    """Of the runs ``turns`` and ``runs`` count, those a run handed over to: each went on
    its turn, so the person's turns are the runs less these."""
    recent: list[str] = Field(default_factory=list)
    """Run ids of the latest of those turns."""
    by_reference: bool | None = None
    """Whether turns take the transcript by reference, decided when the conversation
    started (``None``: a new conversation, which decides)."""
    fingerprints: dict[str, str] = Field(default_factory=dict)
    """Run id -> ``TurnInput.fingerprint()`` of the latest turns: a retry must match."""
    current_agent: str = ""
    """The agent serving the next turn after a handoff (empty: ``agent``)."""
    idle_timeout: float | None = None
    """Seconds without a turn after which the conversation rests: it closes, its transcript
    readable, and its next send reopens it (``None``: it stays open until closed)."""
    rules: list[StoredRule] | None = None
    """Approval rules set at run time (``conv.set_approval_policy``), tried before the
    agent's own (``None``: none set)."""
    standing: dict[str, Decision] = Field(default_factory=dict)
    """Tools approved ``always`` in this conversation, by name: the decision that did it
    (``conv.approvals_policy()``; ``conv.revoke(tool)`` takes one back)."""
    inline_turns: bool = False
    """Turns run in this workflow, not as child runs (docs/adr/0050-turns-inline.md),
    chosen when the conversation starts and carried from then on."""
    stream: WorkflowStreamState | None = None
    """An inline conversation's stream (its streamed turns' events) as the last workflow
    run left it: its offsets go on, and the latest streamed turn's items (a reader may not
    have read them all yet) are still there."""


class TurnInput(Wire):
    """One turn: an update whose id is ``update_id()``, so a retried send is one turn."""

    run_id: str
    prompt: str | None = None
    parts: list[Part] = Field(default_factory=list)
    deps: Any = None
    stream: bool = False
    """The turn's run publishes its deltas live (``DurableConversation.send_stream``)."""

    def fingerprint(self) -> str:
        """What makes two sends the same turn: the prompt, the parts and the deps."""
        text = self.model_dump_json(include={"prompt", "parts", "deps"})
        return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()

    def update_id(self) -> str:
        """The send's update id: the same turn sent again is deduplicated by Temporal, and
        another one under the same run id reaches the workflow, which refuses it."""
        return f"{self.run_id}:{self.fingerprint()}"


class TurnOutput(Wire):
    """What a turn answers: its run's outcome, its messages left to the transcript when it
    holds them (``InTranscript``)."""

    run: Annotated[Completed | Paused, Field(discriminator="kind")]
    start: int
    """Where the run's messages begin in the transcript (its length before the turn)."""
    based: bool = False
    """The run took the transcript by reference: its messages follow ``[0, start)``."""


class TurnEnded(Wire):
    """An inline turn that paused, ended with no update answering (a timeout, a close): what
    it answered, recorded for the conversation's history reader (docs/adr/0050)."""

    run_id: str
    output: TurnOutput | None = None
    failure: Failed | None = None
    """Its failure's details (``None`` with ``output``: it completed)."""
    message: str = ""
    """Its error's message, when it failed."""


class ConversationSummary(Wire):
    """Result of a closed conversation."""

    turns: int = 0
    """The person's turns (a run handed over to goes on its turn; ``conv.runs()`` lists it)."""
    messages: int = 0
    last_run: str = ""
    reopen: ConversationInput | None = None
    """Set when it rested (closed itself after its idle timeout): the input that reopens
    it, as continue-as-new would have; ``None`` after ``close()``, which is final."""
