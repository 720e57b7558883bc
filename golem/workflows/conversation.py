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
needs it whole). Which way turns get it is decided when the
conversation starts (and carried across continue-as-new); an agent the worker does not
serve fails the conversation at once.

Turns and approvals are a pure state machine (``golem.workflows.turns.Turns``): this
workflow only translates updates, signals, child results and timers into its transitions
and performs the effects it asks for. Turns are serialized in arrival order. The workflow
continues as new when the server suggests it (or after ``turns_per_run`` turns), once no
turn is in flight and none waits for approvals, carrying the transcript and the run list:
by value while small, else by reference to the workflow runs that hold them
(``golem.wire.transcript``, docs/adr/0012-transcript-by-reference.md). Meanwhile new
turns are refused (``CONTINUING``) and ``DurableConversation.send`` sends them again, to
the next run. A send retried after the switch is refused as ``RECORDED`` (Temporal dedups
update ids per run only) and the client answers with that turn's run; a turn whose run id
is taken by another workflow, or that reuses a run id with another prompt, is refused. It
has no execution timeout: ``close()`` ends it (denying what a waiting turn asks for). A
turn's run that hands the conversation over ends naming its target; the turn goes on as
the target's run (a child of the conversation, or run inline as the turn's were; on the
transcript), the target serves the
turns after it (``golem.current_agent``, carried across continue-as-new) and the turn
answers with the last run's output. See docs/adr/0009-conversations.md,
docs/adr/0014-turns-state-machine.md and docs/adr/0019-agents-calling-agents.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from golem.delegation import inline_problem
    from golem.ids import MAX_ID_CHARS
    from golem.messages import Decision, HistoryError, Message, ToolCall, validate_history
    from golem.policies import StoredRule
    from golem.wire import (
        AgentRunInput,
        Completed,
        ConversationInput,
        ConversationSummary,
        InTranscript,
        MessagesPage,
        MessagesQuery,
        TurnEnded,
        TurnInput,
        TurnOutput,
        lineage,
        names,
    )
    from golem.wire import Paused as PausedRun
    from golem.wire.transcript import Transcript
    from golem.workflows import children, registry
    from golem.workflows.agent_run import AgentRunWorkflow
    from golem.workflows.approvals import ApprovalGate, refuse_invalid_edits
    from golem.workflows.arity import drops_misfits, refuses_misfits
    from golem.workflows.conversation_run import IdleTimeout, carried_input, details, summary
    from golem.workflows.executor import TemporalExecutor
    from golem.workflows.listed_turns import ListedTurns
    from golem.workflows.patches import CONTINUED_SUMMARY, EXTERNAL_TIMEOUT, patched
    from golem.workflows.streams import TurnStreams
    from golem.workflows.turn_runs import (
        by_reference,
        child_input,
        inline_turn,
        loop_failure,
        not_inline,
        paused_output,
        refused,
        start_refusal,
        turn_ended,
        turn_outcome,
    )
    from golem.workflows.turns import (
        Answer,
        ArmTimer,
        Closed,
        Decide,
        Effect,
        Ended,
        Outcome,
        Paused,
        Refusal,
        StartChild,
        Turns,
        Verdict,
    )


def _now() -> float:
    return workflow.now().timestamp()


def _version_changed() -> bool:
    """A versioned worker's deployment now targets another version for this workflow (its
    runs are pinned: it moves by continuing as new, between turns)."""
    return workflow.info().is_target_worker_deployment_version_changed()


def _switch_suggested() -> bool:
    """Continue as new: the server suggests it, or the deployment's version changed."""
    return workflow.info().is_continue_as_new_suggested() or _version_changed()


def _reference(input: ConversationInput) -> tuple[bool, ApplicationError | None]:
    """Whether turns take the transcript by reference, decided when the conversation
    starts and carried from then on; or why this worker cannot serve its agent."""
    if input.by_reference is not None:
        return input.by_reference, None
    try:
        agent = registry.lookup(workflow.info().task_queue, input.agent)
    except LookupError as exc:
        return False, ApplicationError(str(exc), type=names.UNKNOWN_AGENT, non_retryable=True)
    return by_reference(agent), None


@workflow.defn(name=names.CONVERSATION_WORKFLOW)
class ConversationWorkflow:
    """A durable conversation. Workflow id = conversation id."""

    @workflow.init
    def __init__(self, input: ConversationInput) -> None:
        self._agent = input.agent
        self._transcript = Transcript(input)
        self._turns_per_run = input.turns_per_run
        known = {run: input.fingerprints.get(run, "") for run in [*input.recent, *input.runs]}
        self._turns = Turns(input.turns_per_run, known, input.current_agent or input.agent)
        self._reference, self._unknown = _reference(input)
        self._inline = input.inline_turns
        # The prompts of the turns in flight or queued, by run id (``turn_prompt``).
        self._prompts: dict[str, str] = {}
        self._executor: TemporalExecutor | None = None  # an inline turn's, while it runs
        self._gate: ApprovalGate | None = None  # likewise
        self._inline_task: asyncio.Task[None] | None = None  # the inline turn's, the latest
        # Only inline conversations host a stream: a child turn's run hosts its own.
        self._streams = TurnStreams(input.stream) if input.inline_turns else None
        self._listed = ListedTurns() if input.inline_turns else None  # GolemTurnRuns
        self._tickets = 0
        self._answers: dict[int, TurnOutput | ConversationSummary | ApplicationError] = {}
        self._tasks: set[asyncio.Task[None]] = set()  # held: the loop keeps weak references
        self._idle = IdleTimeout(input.idle_timeout)
        self._standing: dict[str, Decision] = dict(input.standing)  # tools approved always
        self._rules = input.rules  # approval rules set at run time

    @workflow.run
    async def run(self, input: ConversationInput) -> ConversationSummary:
        if self._unknown:
            raise self._unknown
        turns = self._turns
        self._details()  # a run continued as new (a version move) has them from its start
        try:
            while not turns.over:
                # Without the machine's due flag, sends from several clients, each arriving
                # while another's turn runs, would put the switch off forever.
                due = lambda: turns.over or (not turns.due and _switch_suggested())  # noqa: E731
                if await self._idle.wait(turns, due):
                    await self._perform(turns.rest())
                elif not turns.over and not turns.due and _switch_suggested():
                    await self._perform(turns.suggest())
        except asyncio.CancelledError:
            await self._stop_inline_turn()
            raise
        if self._streams is not None:
            self._streams.detach()  # its readers' polls go on in the next run
        # Every update admitted before the switch is answered in this run.
        await workflow.wait_condition(workflow.all_handlers_finished)
        if turns.phase == "closed":
            return summary(self._transcript)
        following = ConversationInput(
            agent=self._agent,
            turns_per_run=self._turns_per_run,
            by_reference=self._reference,
            current_agent=self._turns.handoffs.current,
            idle_timeout=self._idle.seconds,
            standing=self._standing,
            rules=self._rules,
            inline_turns=self._inline,
            stream=self._streams.carried() if self._streams is not None else None,
        )
        following = carried_input(following, self._transcript, turns.known)
        if turns.phase == "resting":  # closed until its next send reopens it from here
            return summary(self._transcript, reopen=following)
        workflow.continue_as_new(
            following,
            memo=self._continued_memo(),
            # This run's GolemTurnRuns stays on it (visibility finds its turns there).
            search_attributes=self._listed.following() if self._listed is not None else None,
            # Onto the deployment's target version: unversioned workers ignore it.
            initial_versioning_behavior=workflow.ContinueAsNewVersioningBehavior.AUTO_UPGRADE,
        )

    # -- updates and signals: each one transition ----------------------------------------

    @workflow.update(name=names.SEND)
    async def send(self, turn: TurnInput) -> TurnOutput:
        if _version_changed():  # refused as continuing: sent again, it runs on the new version
            await self._perform(self._turns.suggest())
        fingerprint = turn.fingerprint()
        live = self._live_runs()
        self._prompts = {run: text for run, text in self._prompts.items() if run in live}
        self._prompts[turn.run_id] = turn.prompt or ""
        answer = await self._ask(
            lambda ticket: self._turns.send(ticket, turn.run_id, fingerprint, turn)
        )
        assert isinstance(answer, TurnOutput)
        return answer

    @send.validator
    @refuses_misfits(names.SEND)
    def _validate_send(self, turn: TurnInput) -> None:
        if self._unknown:
            raise self._unknown
        # Checked per send, never at start: a start that failed on worker code would replay
        # into a failure once the agent changed.
        if self._inline:
            try:
                agent = registry.lookup(workflow.info().task_queue, self._turns.handoffs.current)
            except LookupError:
                agent = None  # the turn reports an unknown agent itself
            if agent is not None and (problem := inline_problem(agent)):
                raise not_inline(f"serve {problem}")
        if not turn.run_id:
            raise ApplicationError("a turn needs a run id", non_retryable=True)
        if len(turn.run_id) > MAX_ID_CHARS:
            # A child turn's start would fail its workflow task for ever; inline, alike.
            raise ApplicationError(
                f"a run id of {len(turn.run_id)} characters, over Temporal's limit of "
                f"{MAX_ID_CHARS} (a turn's run id is its workflow's id)",
                non_retryable=True,
            )
        if self._inline and turn.run_id == workflow.info().workflow_id:
            # A child turn's start finds it taken; an inline turn's items would name no turn.
            why = "it is this conversation's own id; pass a new run id, or none to get one"
            raise refused(Refusal("taken", f"run id {turn.run_id!r} is taken: {why}"))
        refusal = self._turns.check_send(turn.run_id, turn.fingerprint())
        if refusal is not None:
            raise refused(refusal)
        if not (turn.prompt or "").strip() and not turn.parts:
            raise ApplicationError("a turn needs a prompt or parts", non_retryable=True)
        try:
            validate_history([Message.user(turn.prompt or "", turn.parts)])
        except HistoryError as exc:
            raise ApplicationError(f"the turn is malformed: {exc}", non_retryable=True) from None

    @workflow.update(name=names.APPROVE)
    async def approve(self, decisions: dict[str, Verdict]) -> TurnOutput:
        """Answer the turn that waits for approvals: returns at once with the calls still
        pending after a partial approval, else once the turn ends or waits again."""
        self._stand_by(decisions)
        answer = await self._ask(lambda ticket: self._turns.approve(ticket, decisions, _now()))
        assert isinstance(answer, TurnOutput)
        return answer

    def _stand_by(self, decisions: dict[str, Verdict]) -> None:
        """Tools approved ``always`` run without asking from the conversation's next turn
        (the turn in flight applies them itself)."""
        report = self._turns.report
        tools = {c.id: c.name for c in report.pending_approvals} if report else {}
        for call_id, decision in decisions.items():
            always = isinstance(decision, Decision) and decision.approved and decision.always
            if always and call_id in tools:
                self._standing.setdefault(tools[call_id], decision)  # type: ignore[arg-type]

    @workflow.query(name=names.APPROVALS_POLICY)
    def approvals_policy(self) -> dict[str, Decision]:
        """The tools approved ``always`` in this conversation: the decision that did it."""
        return dict(self._standing)

    @workflow.update(name=names.SET_APPROVAL_POLICY)
    def set_approval_policy(self, rules: list[StoredRule]) -> None:
        """Approval rules tried before the agent's own, from the next turn on (carried
        across continue-as-new)."""
        self._rules = list(rules)

    @set_approval_policy.validator
    @refuses_misfits(names.SET_APPROVAL_POLICY)
    def _validate_set_approval_policy(self, rules: list[StoredRule]) -> None:
        """Any rules that decode are taken: only a call of the wrong arity is refused."""

    @workflow.update(name=names.REVOKE)
    def revoke(self, tool: str) -> dict[str, Decision]:
        """Take back ``tool``'s standing approval: from the next turn its calls ask again.
        Returns the standing approvals left."""
        self._standing.pop(tool)
        return dict(self._standing)

    @revoke.validator
    @refuses_misfits(names.REVOKE)
    def _validate_revoke(self, tool: str) -> None:
        if tool not in self._standing:
            raise ApplicationError(
                f"tool {tool!r} has no standing approval in this conversation; standing: "
                f"{sorted(self._standing)}",
                type=names.INVALID_DECISION,
                non_retryable=True,
            )

    @approve.validator
    @refuses_misfits(names.APPROVE)
    def _validate_approve(self, decisions: dict[str, Verdict]) -> None:
        refusal = self._turns.check_approve(decisions, _now())
        if refusal is not None:
            raise refused(refusal)
        report = self._turns.report
        if report is not None:
            try:
                tools = registry.lookup(
                    workflow.info().task_queue, self._turns.handoffs.current
                ).tools
            except LookupError:
                return  # the turn's run reports an unknown agent itself
            validators = {n: t.validate_args for n, t in tools.items()}
            calls = list(report.pending_approvals)
            where = f"conversation {workflow.info().workflow_id}"
            refuse_invalid_edits(where, validators, calls, decisions)

    @workflow.update(name=names.CLOSE)
    async def close(self) -> ConversationSummary:
        """Close once the turn in flight ends (a waiting turn's calls are denied)."""
        answer = await self._ask(self._turns.close)
        assert isinstance(answer, ConversationSummary)
        return answer

    @workflow.signal(name=names.UPGRADE)
    def _upgrade(self) -> None:
        """Nothing to do here: the workflow task that brings it says whether to move."""

    @workflow.signal(name=names.PAUSED)
    @drops_misfits(names.PAUSED)  # it failed the workflow task: no history holds one
    async def _on_paused(self, paused: PausedRun) -> None:
        if self._inline:  # a delegation of the inline turn: its gate counts what waits there
            if self._gate is not None:
                await self._gate.reported(paused)
            return
        await self._turn_paused(paused)

    async def _turn_paused(self, paused: PausedRun) -> None:
        """The turn's run waits for the calls ``paused`` names now (or for none)."""
        calls = [c.id for c in paused.pending_approvals]
        bounds, external = None, set(paused.external)
        # Client-run calls keep the external timeout here too (taken only by such a wait).
        if external and patched(EXTERNAL_TIMEOUT):
            bounds = {
                c: paused.external_timeout if c in external else paused.approval_timeout
                for c in calls
            }
        timeout = paused.approval_timeout
        given = (paused.evaluating, paused.decided)
        await self._perform(
            self._turns.paused(
                paused.run_id, calls, _now(), timeout, paused, bounds, external, *given
            )
        )

    async def _ask(self, event: Callable[[int], list[Effect]]) -> TurnOutput | ConversationSummary:
        """Feed one update's transition; its answer once the machine gives it."""
        self._tickets += 1
        ticket = self._tickets
        await self._perform(event(ticket))
        await workflow.wait_condition(lambda: ticket in self._answers)
        answer = self._answers.pop(ticket)
        if isinstance(answer, ApplicationError):
            raise answer
        return answer

    # -- effects -------------------------------------------------------------------------

    async def _perform(self, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, Answer):
                self._answers[effect.ticket] = self._answer(effect.outcome)
            elif isinstance(effect, StartChild):
                await self._start_turn(effect.run_id)
            elif isinstance(effect, Decide) and self._inline:
                if self._gate is not None:  # a turn that ended meanwhile settles it anyway
                    await self._gate.decide(effect.decisions)
            elif isinstance(effect, Decide):
                # A run that ended meanwhile takes no signal: its end settles the turn anyway.
                handle = workflow.get_external_workflow_handle(effect.run_id)
                try:
                    await handle.signal(names.DECIDE, dict(effect.decisions))
                except Exception:
                    workflow.logger.info("turn %s ended before its decisions", effect.run_id)
            elif isinstance(effect, ArmTimer):
                self._spawn(self._expire_after(effect))
        self._idle.restart()
        self._details()

    def _answer(self, outcome: Outcome) -> TurnOutput | ConversationSummary | ApplicationError:
        if isinstance(outcome, Refusal):
            return refused(outcome)
        if isinstance(outcome, Closed):
            return summary(self._transcript)
        if isinstance(outcome, Ended):
            assert isinstance(outcome.answer, TurnOutput | ApplicationError)
            return outcome.answer
        report = self._turns.report
        assert isinstance(outcome, Paused) and report is not None
        return paused_output(report, outcome.pending, self._turns.run_start, self._transcript.based)

    def _spawn(self, work: Any) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _expire_after(self, arm: ArmTimer) -> None:
        turns = self._turns
        try:
            await workflow.wait_condition(
                lambda: turns.pauses != arm.pause or turns.phase != "waiting",
                timeout=timedelta(seconds=arm.seconds),
                timeout_summary=f"approvals due: run {arm.run_id}'s waiting calls time out",
            )
        except TimeoutError:
            await self._perform(turns.expire(arm.run_id, arm.pause, _now()))

    async def _start_turn(self, run_id: str) -> None:
        turn = self._turns.take_input(run_id)
        transcript = self._transcript
        parent = transcript.last_run
        agent = self._turns.handoffs.current
        # Once earlier workflow runs hold the transcript's start, every turn takes it by
        # reference (an agent that needs it by value fails in its run, saying so).
        reference = transcript.offset > 0 or self._reference
        handoffs = self._turns.handoffs
        # A run of the turn handed over: this one goes on as the turn (its first run's).
        first = handoffs.turn.run_id if handoffs.turn is not None else turn.run_id
        handed = (first, agent) if handoffs.handed is not None else None
        payload, start = child_input(
            transcript, agent, turn, reference, self._standing, self._rules, handed
        )
        self._turns.run_begins(start)
        self._turns.handoffs.begin(turn, start)
        if self._inline:
            if self._listed is not None:  # in the task that starts the turn: no task more
                self._listed.take(run_id)
            self._inline_task = self._spawn(self._run_inline(payload, start))
            return
        title = lineage.summary(agent, turn.prompt or "(handed over)")
        try:
            child = await workflow.start_child_workflow(
                AgentRunWorkflow.run,
                payload,
                id=run_id,
                search_attributes=lineage.run_search_attributes(
                    workflow.info().workflow_id,
                    agent,
                    parent,
                    summary=children.listed_summary(title),
                    waiting=children.listed_waiting(),
                ),
                static_summary=title,
                static_details=children.child_details(run_id, workflow.info().workflow_id, agent),
                # Closing (or terminating) the conversation stops its turn with evidence.
                parent_close_policy=workflow.ParentClosePolicy.REQUEST_CANCEL,
                # A run id names one run, ever: a closed workflow's id is not reused either.
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            transcript.never_started(run_id)
            await self._perform(self._turns.start_failed(run_id, start_refusal(run_id, exc)))
            return
        self._spawn(self._watch(child))

    async def _watch(self, child: workflow.ChildWorkflowHandle[Any, Any]) -> None:
        await workflow.wait_condition(child.done)
        outcome = turn_outcome(self._transcript, child, self._turns.run_start)
        run = outcome.run if isinstance(outcome, TurnOutput) else None
        if isinstance(run, Completed) and run.handoff is not None:
            await self._hand_off(child.id, run)
            return
        answer = self._turns.handoffs.ended(outcome, self._transcript.length)
        await self._perform(self._turns.ended(child.id, answer))

    async def _hand_off(self, run_id: str, run: Completed) -> None:
        """Run ``run_id`` handed over: the turn goes on as the target's run (a child run,
        or inline, as the conversation runs its turns)."""
        turn = self._turns.handoffs.hand_off(run)
        await self._perform(self._turns.handed_off(run_id, turn.run_id, turn))

    async def _stop_inline_turn(self) -> None:
        """The conversation is cancelled: an inline turn in flight stops at stage
        ``canceled`` with its evidence recorded, as a child run would in its own history,
        and the sends queued behind it are refused as at a close."""
        task = self._inline_task
        if task is None or task.done():
            return
        self._tickets += 1
        await self._perform(self._turns.close(self._tickets, settle=False))
        task.cancel()
        await workflow.wait_condition(task.done)
        current = self._turns.current
        if task.cancelled() and current is not None:
            # Cancelled before its first step (a run handed over to, started as the cancel
            # came): nothing else answers its send, which would wait for ever.
            message = f"turn {current.run_id} was cancelled before its run started"
            await self._perform(
                self._turns.ended(current.run_id, loop_failure(message, "canceled"))
            )
            if self._streams is not None:
                self._streams.end(current.run_id)
        if self._streams is not None:
            self._streams.detach()
        await workflow.wait_condition(workflow.all_handlers_finished)

    async def _run_inline(self, payload: AgentRunInput, start: int) -> None:
        run_id = payload.run.run_id
        continues = self._turns.handoffs.handed is not None
        try:
            outcome = await inline_turn(
                self._transcript,
                payload,
                start,
                self._hosting,
                self._turn_paused,
                self._streams,
                continues=continues,
            )
        except Exception as exc:
            # A bug outside the loop: the turn fails naming it, where a spawned task's error
            # would leave its send unanswered and the conversation stuck.
            outcome = loop_failure(f"turn {run_id} failed in golem's code: {exc!r}")
        run = outcome.run if isinstance(outcome, TurnOutput) else None
        handoff = run.handoff if isinstance(run, Completed) else None
        kept = run is not None and not isinstance(run.messages, InTranscript)
        if handoff is not None or (continues and kept):
            # No update answers this run's end, or its answer leaves its messages to a
            # history that cannot rebuild them: its history records them here.
            assert isinstance(outcome, TurnOutput)
            workflow.upsert_memo({names.HANDED_RUN_MEMO: TurnEnded(run_id=run_id, output=outcome)})
        if handoff is not None:
            assert isinstance(run, Completed)
            await self._hand_off(run_id, run)
            return
        answer = self._turns.handoffs.ended(outcome, self._transcript.length)
        effects = self._turns.ended(payload.run.run_id, answer)
        if not any(isinstance(e, Answer) and isinstance(e.outcome, Ended) for e in effects):
            # It paused, and no update answers its end (a timeout, a close ended it): its
            # history records the end where the conversation's reader finds it.
            workflow.upsert_memo({names.TURN_ENDED_MEMO: turn_ended(payload.run.run_id, answer)})
        await self._perform(effects)

    def _hosting(self, executor: TemporalExecutor | None, gate: ApprovalGate | None) -> None:
        self._executor, self._gate = executor, gate

    def _continued_memo(self) -> dict[str, Any] | None:
        """The next run's memo (``None``: this one's, as 0.2.0 left it): this one's with the
        summary, which the UI shows with no worker, as continue-as-new takes no static one."""
        if not patched(CONTINUED_SUMMARY):
            return None
        text = f"{self._agent}: conversation (continued as new)"
        # A paused inline turn's recorded end is this run's history's, not the next run's.
        ended = (names.TURN_ENDED_MEMO, names.HANDED_RUN_MEMO)
        kept = {k: v for k, v in workflow.memo().items() if k not in ended}
        return {**kept, names.SUMMARY_MEMO: text}

    def _details(self) -> None:
        rested = self._idle.seconds if self._turns.phase == "resting" else None
        shown = details(self._transcript, self._turns, rested)
        if workflow.info().continued_run_id:  # continue-as-new carries no static summary
            shown = f"**{self._agent}: conversation** (continued as new)\n\n{shown}"
        workflow.set_current_details(shown)

    # -- reading -------------------------------------------------------------------------

    @workflow.query(name=names.CONVERSATION)
    def conversation(self, query: MessagesQuery) -> MessagesPage:
        """The transcript ``[since, upto)``: one page, or the earlier workflow runs that
        hold its start (``MessagesPage.held``)."""
        return self._transcript.page(query)

    @workflow.query(name=names.MESSAGES)
    def messages(self, query: MessagesQuery) -> MessagesPage:
        """The inline turn's current model request ``[since, upto)``, one page: what its
        model activity reads on a worker that lacks it (empty between turns)."""
        if self._executor is None:
            return MessagesPage.of([], query)
        return self._executor.shipper.page(query)

    @workflow.query(name=names.PENDING)
    def pending(self) -> list[ToolCall] | None:
        """An inline turn's calls waiting for a person now (its delegations' included);
        ``None``: this conversation's turns are child runs, each asked itself."""
        if not self._inline:
            return None
        return list(self._gate.waiting) if self._gate is not None else []

    @workflow.query(name=names.CURRENT_AGENT)
    def current_agent(self) -> str:
        """The agent serving the next turn (a handoff moves the conversation to another)."""
        return self._turns.handoffs.current

    @workflow.query(name=names.TURN_STREAM_HELD)
    def turn_stream_held(self, run_id: str) -> bool:
        """Whether this conversation's stream holds turn ``run_id``'s items, or will once it
        runs: ``False`` once they were dropped (two streamed turns ran since) or it ran
        unstreamed, so its reader stops rather than wait among later turns' items."""
        if self._streams is None or run_id in self._streams.held:
            return True
        queued = {r for _, r in self._turns.queue}
        return run_id not in self._turns.known or run_id in queued

    @workflow.query(name=names.TURN_IN_FLIGHT)
    def turn_in_flight(self, run_id: str) -> bool:
        """Whether turn ``run_id`` (or the run it went on as) is queued, or runs and does not
        wait for a person: its history records no answer newer than what it had."""
        turns = self._turns
        if any(queued == run_id for _, queued in turns.queue):
            return True
        current, first = turns.current, turns.handoffs.turn
        if current is None or turns.phase not in ("running", "settling"):
            return False
        return run_id in (current.run_id, first.run_id if first is not None else "")

    @workflow.query(name=names.TURN_PROMPT)
    def turn_prompt(self, run_id: str) -> str | None:
        """The prompt of turn ``run_id`` while it is queued, runs or waits (a page opened
        then shows the question the transcript does not hold yet); ``None`` otherwise."""
        if run_id not in self._live_runs():
            return None
        first = self._turns.handoffs.turn  # a run handed over to: the turn's first run's
        return self._prompts.get(run_id, self._prompts.get(first.run_id if first else ""))

    def _live_runs(self) -> set[str]:
        """The first runs of the turns queued, and of the turn in flight or waiting."""
        turns = self._turns
        live = {queued for _, queued in turns.queue}
        if turns.current is not None:
            first = turns.handoffs.turn
            live |= {turns.current.run_id, first.run_id if first is not None else ""}
        return live

    @workflow.query(name=names.RUNS)
    def runs(self) -> list[str]:
        """Run ids of the turns this workflow run holds (all of them until the transcript
        crosses continue-as-new by reference; ``DurableConversation.runs`` reads them all)."""
        return list(self._transcript.runs)
