"""``ConversationWorkflow``: one conversation as one long-lived workflow.

    conv = await durable.conversation()      # workflow id = conversation id
    result = await conv.send("Hello")        # one turn = one update = one child AgentRunWorkflow

The workflow holds the canonical transcript. Each turn is an update whose handler runs the
turn as a child ``AgentRunWorkflow`` (its own run id, lineage and UI page) and appends what
the run added, so the client never ships the conversation again. The run gets the
transcript by reference (``AgentRunInput.base``: this workflow's id, a count, a digest),
read by its model activity through ``golem.conversation``, so no run records it again
(a failed turn's evidence is repaired first, as the next run's loop would); a turn of an
agent with a history processor or a per-request token limit gets it by value (its loop
needs it whole). Turns are serialized in arrival order. The workflow continues as new
when the server suggests it (or after ``turns_per_run`` turns), once no turn is in flight
and none waits for approvals, carrying the transcript and the run list: by value while
small, else by reference to the workflow runs that hold them (``golem.workflows.transcript``,
docs/adr/0012-transcript-by-reference.md). Meanwhile new turns are refused (``CONTINUING``) and
``DurableConversation.send`` sends them again, to the next run. A send retried after the
switch is refused as ``RECORDED`` (Temporal dedups update ids per run only) and the client
answers with that turn's run. It has no execution timeout: ``close()`` ends it (denying
what a waiting turn asks for). See docs/adr/0009-conversations.md.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field
from temporalio import workflow
from temporalio.exceptions import ApplicationError, ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from golem.loop import RunInput
    from golem.messages import HistoryError, Message, Part, ToolCall, validate_history
    from golem.wire import (
        PAGE_BYTES,
        AgentRunInput,
        Completed,
        HistoryBase,
        InTranscript,
        MessagesPage,
        MessagesQuery,
        Paused,
    )
    from golem.workflows import lineage, registry
    from golem.workflows.agent_run import RUN_ERROR, AgentRunWorkflow
    from golem.workflows.approvals import PAUSED_SIGNAL
    from golem.workflows.report import run_failure
    from golem.workflows.transcript import ConversationInput, Transcript

__all__ = [
    "CLOSED",
    "CONTINUING",
    "RECORDED",
    "WAITING",
    "ConversationInput",
    "ConversationSummary",
    "ConversationWorkflow",
    "TurnInput",
    "TurnOutput",
]

#: ``ApplicationError.type`` of a turn refused because the conversation is closed.
CLOSED = "GolemConversationClosed"
#: ``ApplicationError.type`` of a turn refused while the conversation drains its turns in
#: flight before it continues as new; the client sends it again, to the next run.
CONTINUING = "GolemConversationContinuing"
#: ``ApplicationError.type`` of a turn whose run id is already a turn of this conversation
#: (a send retried after continue-as-new: Temporal dedups update ids per workflow run only).
RECORDED = "GolemTurnRecorded"
#: ``ApplicationError.type`` of a refusal about approvals (a turn waits, or none does).
WAITING = "GolemApprovalsWaiting"


@dataclass(frozen=True)
class _Waiting:
    """A turn whose run waits for a person's decisions."""

    run_id: str
    child: workflow.ChildWorkflowHandle[Any, Any]
    start: int
    pending: list[ToolCall]


class _Payload(BaseModel):
    model_config = ConfigDict(frozen=True)


class TurnInput(_Payload):
    """One turn: an update whose id is ``run_id``, so a retried send is one turn."""

    run_id: str
    prompt: str | None = None
    parts: list[Part] = Field(default_factory=list)
    deps: Any = None
    stream: bool = False
    """The turn's run publishes its deltas live (``DurableConversation.send_stream``)."""


class TurnOutput(_Payload):
    """What a turn returns: the run's outcome, its messages left to the transcript when it
    holds them (``InTranscript``)."""

    run: Annotated[Completed | Paused, Field(discriminator="kind")]
    start: int
    """Where the run's messages begin in the transcript (its length before the turn)."""
    based: bool = False
    """The run took the transcript by reference: its messages follow ``[0, start)``."""


class ConversationSummary(_Payload):
    """Result of a closed conversation."""

    turns: int = 0
    messages: int = 0
    last_run: str = ""


@workflow.defn(name="ConversationWorkflow")
class ConversationWorkflow:
    """A durable conversation. Workflow id = conversation id."""

    @workflow.init
    def __init__(self, input: ConversationInput) -> None:
        self._agent = input.agent
        self._transcript = Transcript(input)
        self._turns_per_run = input.turns_per_run
        self._turns = 0  # turns in this workflow run (since the last continue-as-new)
        self._closed = False
        self._draining = False  # continue-as-new is due: no new turn starts in this run
        self._lock = asyncio.Lock()  # turns run one at a time, in arrival order
        self._waiting: _Waiting | None = None  # a turn whose run waits for approvals
        self._paused: dict[str, Paused] = {}
        self._watch: asyncio.Task[None] | None = None  # settles a waiting turn nobody answers

    @workflow.run
    async def run(self, input: ConversationInput) -> ConversationSummary:
        await workflow.wait_condition(lambda: self._closed or self._should_continue())
        # Without this, sends from several clients, each arriving while another's turn runs,
        # would keep every handler busy and put the switch off forever.
        self._draining = not self._closed
        # A turn in flight finishes here (and any that arrived meanwhile), never vanishes;
        # nor does a turn that waits for approvals (its child would be lost to the next run).
        await workflow.wait_condition(
            lambda: workflow.all_handlers_finished() and (self._closed or self._waiting is None)
        )
        if self._closed:
            return self._summary()
        info = workflow.info()
        transcript = self._transcript
        # Runs recorded before the transcript could go by reference carry it by value.
        by_reference = self._by_reference()
        workflow.continue_as_new(
            ConversationInput(
                agent=self._agent,
                parent_run_id=transcript.parent_run_id,
                turns_per_run=self._turns_per_run,
                **transcript.carry(info.workflow_id, info.run_id, by_reference),
            )
        )

    def _summary(self) -> ConversationSummary:
        transcript = self._transcript
        return ConversationSummary(
            turns=transcript.turns, messages=transcript.length, last_run=transcript.last_run
        )

    def _should_continue(self) -> bool:
        if self._waiting is not None:  # its run and its approve update belong to this run
            return False
        return self._turns >= self._turns_per_run or (
            workflow.info().is_continue_as_new_suggested() and not self._lock.locked()
        )

    # -- turns ---------------------------------------------------------------------------

    @workflow.update(name="golem.send")
    async def send(self, turn: TurnInput) -> TurnOutput:
        async with self._lock:
            return await self._turn(turn)

    @send.validator
    def _validate_send(self, turn: TurnInput) -> None:
        self._check_open()
        if self._waiting is not None:
            raise ApplicationError(
                f"turn {self._waiting.run_id} waits for approvals of "
                f"{[c.id for c in self._waiting.pending]}: approve or deny them first",
                type=WAITING,
                non_retryable=True,
            )
        if self._draining:
            raise ApplicationError(
                "the conversation is continuing as new; send the turn again",
                type=CONTINUING,
                non_retryable=True,
            )
        if not (turn.prompt or "").strip() and not turn.parts:
            raise ApplicationError("a turn needs a prompt or parts", non_retryable=True)
        if not turn.run_id:
            raise ApplicationError("a turn needs a run id", non_retryable=True)
        if self._transcript.knows(turn.run_id):
            raise ApplicationError(
                f"run {turn.run_id} is already a turn of this conversation",
                type=RECORDED,
                non_retryable=True,
            )
        try:
            validate_history([Message.user(turn.prompt or "", turn.parts)])
        except HistoryError as exc:
            raise ApplicationError(f"the turn is malformed: {exc}", non_retryable=True) from None

    @workflow.update(name="golem.approve")
    async def approve(self, decisions: dict[str, bool]) -> TurnOutput:
        """Answer the turn that waits for approvals; returns it once it ends or waits again."""
        async with self._lock:
            waiting = self._waiting
            if waiting is None:  # the approval timeout decided since the validator ran
                raise ApplicationError(
                    "no turn of this conversation waits for approvals",
                    type=WAITING,
                    non_retryable=True,
                )
            self._waiting = None
            self._paused.pop(waiting.run_id, None)
            if not waiting.child.done():
                await workflow.get_external_workflow_handle(waiting.run_id).signal(
                    "golem.decide", decisions
                )
            return await self._outcome(waiting.run_id, waiting.child, waiting.start)

    @approve.validator
    def _validate_approve(self, decisions: dict[str, bool]) -> None:
        self._check_open()
        if self._waiting is None:
            raise ApplicationError(
                "no turn of this conversation waits for approvals", type=WAITING, non_retryable=True
            )
        unknown = sorted(set(decisions) - {c.id for c in self._waiting.pending})
        if unknown:
            raise ApplicationError(
                f"approvals name calls that are not pending: {unknown}", non_retryable=True
            )

    @workflow.signal(name=PAUSED_SIGNAL)
    def _on_paused(self, paused: Paused) -> None:
        self._paused[paused.run_id] = paused

    def _check_open(self) -> None:
        if self._closed:
            raise ApplicationError(
                f"conversation {workflow.info().workflow_id} is closed; fork it to go on",
                type=CLOSED,
                non_retryable=True,
            )

    def _by_reference(self) -> bool:
        """Whether the next turn can take the transcript by reference: the agent has no
        history processor or per-request token limit (both need the whole history in the
        run's loop, so those turns get it by value). A failed turn's evidence is repaired
        first, as the turn's loop would."""
        try:
            agent = registry.lookup(workflow.info().task_queue, self._agent)
        except LookupError:
            return False  # the run reports the unknown agent
        limits = agent.usage_limits
        return agent.history_processor is None and (
            limits is None or limits.request_input_tokens_limit is None
        )

    async def _turn(self, turn: TurnInput) -> TurnOutput:
        conversation_id = workflow.info().workflow_id
        transcript = self._transcript
        # Once earlier workflow runs hold its start, every turn is by reference (an agent that
        # needs the history by value fails in its run, saying so): no command depends on
        # what the worker's agent registry says.
        by_reference = transcript.offset > 0 or self._by_reference()
        parent = transcript.last_run
        transcript.begin(turn.run_id, by_reference)
        start = transcript.length
        base = None
        history: list[Message] = []
        if by_reference:
            base = HistoryBase(conversation=conversation_id, count=start, digest=transcript.digest)
        else:
            history = transcript.messages()
        run = RunInput(
            prompt=turn.prompt,
            parts=turn.parts,
            history=history,
            deps=turn.deps,
            run_id=turn.run_id,
            conversation_id=conversation_id,
        )
        self._turns += 1
        self._details()
        try:
            child = await workflow.start_child_workflow(
                AgentRunWorkflow.run,
                AgentRunInput(
                    agent=self._agent,
                    run=run,
                    parent_run_id=parent,
                    notify_parent=True,
                    stream=turn.stream,
                    base=base,
                ),
                id=turn.run_id,
                search_attributes=lineage.run_search_attributes(
                    conversation_id, self._agent, parent
                ),
                static_summary=lineage.summary(self._agent, turn.prompt),
                # Closing (or terminating) the conversation stops its turn with evidence.
                parent_close_policy=workflow.ParentClosePolicy.REQUEST_CANCEL,
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # Raised from an update handler this would fail the workflow task, and retry it.
            raise ApplicationError(
                f"turn {turn.run_id} could not start: {exc}", non_retryable=True
            ) from None
        return await self._outcome(turn.run_id, child, start)

    async def _outcome(
        self, run_id: str, child: workflow.ChildWorkflowHandle[Any, Any], start: int
    ) -> TurnOutput:
        """Wait until the turn's run ends (its messages join the transcript) or pauses."""
        await workflow.wait_condition(lambda: child.done() or run_id in self._paused)
        if not child.done():
            paused = self._paused.pop(run_id)  # a later entry is the run's next pause
            waiting = _Waiting(run_id, child, start, paused.pending_approvals)
            self._waiting = waiting
            self._details()
            # Held, so the task lives until it settles (the loop keeps only weak references).
            self._watch = asyncio.create_task(self._unanswered(waiting))
            return TurnOutput(run=paused, start=start, based=self._transcript.based)
        return self._ended(child, start)

    async def _unanswered(self, waiting: _Waiting) -> None:
        """A waiting turn that ends without an ``approve`` (the approval timeout denied it, or
        ``close`` did) still joins the transcript, and the conversation takes turns again."""
        run_id = waiting.run_id
        while True:
            await workflow.wait_condition(partial(self._settled, waiting))
            if self._waiting is not waiting:
                return  # approved: the approve update takes the turn's outcome
            if waiting.child.done():
                break
            # The run asks again after the timeout's (or close's) denials.
            pending = self._paused.pop(run_id).pending_approvals
            if self._closed:  # nobody can answer: deny that too, so the run ends
                await workflow.get_external_workflow_handle(run_id).signal(
                    "golem.decide", {c.id: False for c in pending}
                )
            else:  # it waits for these now
                waiting = _Waiting(run_id, waiting.child, waiting.start, pending)
                self._waiting = waiting
                self._details()
        self._waiting = None
        with contextlib.suppress(ApplicationError):  # a failure's evidence was appended
            self._ended(waiting.child, waiting.start)

    def _settled(self, waiting: _Waiting) -> bool:
        """The waiting turn ended, was answered, or asks again."""
        return (
            waiting.child.done() or self._waiting is not waiting or waiting.run_id in self._paused
        )

    def _ended(self, child: workflow.ChildWorkflowHandle[Any, Any], start: int) -> TurnOutput:
        """The ended run's messages join the transcript; its output, or its error raised."""
        try:
            output = Completed.model_validate(child.result())
        except ChildWorkflowError as exc:
            # The failed turn's evidence joins the transcript: the next turn resumes it,
            # repaired first.
            self._transcript.failed(run_failure(exc.cause))
            self._details()
            cause = exc.cause
            if isinstance(cause, ApplicationError):
                raise ApplicationError(
                    cause.message, *cause.details, type=cause.type, non_retryable=True
                ) from None
            raise ApplicationError(str(cause or exc), type=RUN_ERROR, non_retryable=True) from None
        if not self._transcript.ended(output):
            # Workflow code cannot read pages; one turn adding ~1 MB of messages is refused.
            raise ApplicationError(
                f"turn {child.id} added more than {PAGE_BYTES} bytes of messages, too many for "
                "the conversation to take in; return references (URLs, ids) from tools",
                non_retryable=True,
            )
        self._details()
        if not self._transcript.based:
            return TurnOutput(run=output, start=start)
        # Recorded once more here they would be the turn's fourth copy (the tool's result,
        # the child's result, its completion here): the client reads them from the transcript.
        count = self._transcript.length - start
        held = InTranscript(start=start, count=count)
        return TurnOutput(run=output.model_copy(update={"messages": held}), start=start, based=True)

    def _details(self) -> None:
        waiting = self._waiting
        pending = ", ".join(f"{c.name} ({c.id})" for c in waiting.pending) if waiting else "none"
        transcript = self._transcript
        workflow.set_current_details(
            f"**turns** {transcript.turns} · **messages** {transcript.length}\n\n"
            f"**last run** {transcript.last_run or 'none'}\n\n"
            f"**waiting for approval** {pending}"
        )

    # -- closing and reading -------------------------------------------------------------

    @workflow.update(name="golem.close")
    async def close(self) -> ConversationSummary:
        self._closed = True
        waiting = self._waiting
        if waiting is not None:
            # Nobody can approve once the conversation is closed: deny, so the run ends
            # (and joins the transcript) rather than being cancelled when this workflow ends.
            if not waiting.child.done():
                decisions = {c.id: False for c in waiting.pending}
                await workflow.get_external_workflow_handle(waiting.run_id).signal(
                    "golem.decide", decisions
                )
            await workflow.wait_condition(lambda: self._waiting is None)
        async with self._lock:  # the turn in flight finishes first
            return self._summary()

    @workflow.query(name="golem.conversation")
    def conversation(self, query: MessagesQuery) -> MessagesPage:
        """The transcript ``[since, upto)``: one page, or the earlier workflow runs that
        hold its start (``MessagesPage.held``)."""
        return self._transcript.page(query)

    @workflow.query(name="golem.runs")
    def runs(self) -> list[str]:
        """Run ids of the turns this workflow run holds (all of them until the transcript
        crosses continue-as-new by reference; ``DurableConversation.runs`` reads them all)."""
        return list(self._transcript.runs)
