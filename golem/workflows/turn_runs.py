"""A conversation turn's run, the workflow side: its payloads, its input built from the
transcript, and its outcome taken into the transcript.

    turn = TurnInput(run_id=new_id(), prompt="Hello")   # the golem.send update's argument
    run, start = child_input(transcript, agent, turn, by_reference)
    out = turn_outcome(transcript, child, start)        # TurnOutput, or the ApplicationError

``ConversationWorkflow`` (golem.workflows.conversation) starts and watches the runs; each
step here is deterministic.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError, ChildWorkflowError, WorkflowAlreadyStartedError

with workflow.unsafe.imports_passed_through():
    from golem.agent import Agent
    from golem.delegation import Handoff, inline_refusal, reachable
    from golem.errors import Stage, run_id_taken
    from golem.loop import RunLoop
    from golem.messages import Decision, Message
    from golem.policies import StoredRule
    from golem.results import RunError
    from golem.run_state import RunInput
    from golem.wire import (
        PAGE_BYTES,
        AgentRunInput,
        Completed,
        Failed,
        HistoryBase,
        InTranscript,
        Paused,
        TurnEnded,
        TurnInput,
        TurnOutput,
        names,
    )
    from golem.wire.failures import failure_error, run_failure
    from golem.wire.transcript import Transcript
    from golem.workflows import registry
    from golem.workflows.agent_run import run_gate, setup
    from golem.workflows.approvals import ApprovalGate
    from golem.workflows.executor import TemporalExecutor
    from golem.workflows.report import Reporter
    from golem.workflows.streams import TurnStreams
    from golem.workflows.turns import Refusal

_TYPES: dict[str, str | None] = {
    "closed": names.CONVERSATION_CLOSED,
    "waiting": names.APPROVALS_WAITING,
    "approvals": names.APPROVALS_WAITING,
    "continuing": names.CONVERSATION_CONTINUING,
    "recorded": names.TURN_RECORDED,
    "differs": names.TURN_DIFFERS,
    "taken": names.RUN_ID_IN_USE,
    "failed": None,
}


def refused(refusal: Refusal) -> ApplicationError:
    """The machine's refusal as the error an update fails with."""
    return ApplicationError(refusal.message, type=_TYPES[refusal.kind], non_retryable=True)


def child_input(
    transcript: Transcript,
    agent: str,
    turn: TurnInput,
    by_reference: bool,
    standing: dict[str, Decision],
    rules: list[StoredRule] | None = None,
    handed: tuple[str, str] | None = None,
) -> tuple[AgentRunInput, int]:
    """The turn's run input and where its messages begin in the transcript; the turn
    joins the transcript's run list (a by-reference turn continues it repaired;
    ``handed``: this run is the one a run of the turn handed over to, the turn's first run
    and this run's agent) and gets the conversation's standing approvals."""
    conversation_id = workflow.info().workflow_id
    parent = transcript.last_run
    transcript.begin(turn.run_id, by_reference, handed)
    start = transcript.length
    base = None
    history: list[Message] = []
    if by_reference:
        base = HistoryBase(
            conversation=conversation_id, count=start, digest=transcript.digest, after=parent
        )
    else:
        history = transcript.messages()
    run = RunInput.of(
        turn.prompt,
        parts=turn.parts,
        history=history,
        deps=turn.deps,
        run_id=turn.run_id,
        conversation_id=conversation_id,
        standing=standing,
        rules=rules,
    )
    child = AgentRunInput(
        agent=agent,
        run=run,
        parent_run_id=parent,
        notify_parent=True,
        stream=turn.stream,
        base=base,
        hand_back=True,  # a handoff: this conversation starts the target's run
    )
    return child, start


def turn_outcome(
    transcript: Transcript, child: workflow.ChildWorkflowHandle[Any, Any], start: int
) -> TurnOutput | ApplicationError:
    """The ended run's messages join the transcript; its output, or its error."""
    try:
        output = Completed.model_validate(child.result())
    except ChildWorkflowError as exc:
        return _failed(transcript, exc.cause, exc)
    return _taken(transcript, output, start, child.id)


async def inline_turn(
    transcript: Transcript,
    payload: AgentRunInput,
    start: int,
    hosting: Callable[[TemporalExecutor | None, ApprovalGate | None], None],
    tell: Callable[[Paused], Awaitable[None]],
    streams: TurnStreams | None = None,
    continues: bool = False,
) -> TurnOutput | ApplicationError:
    """The turn's loop run here, in the conversation's own workflow (ADR 0050), on the
    same activities as a turn's run; its messages join the transcript as that run's
    would. ``hosting`` learns the turn's executor and approval gate while it runs (the
    ``golem.messages`` query reads its shipper; decisions and the reports of its
    delegations reach its gate); ``tell`` hears each pause, as a turn's run's signal; a
    streamed turn's events go to the conversation's ``streams``. A run that hands over
    answers its ``Completed`` with the ``handoff`` (its messages kept: the conversation
    records them); ``continues``: this run is the one a run of the turn handed over to."""
    try:
        agent, run = setup(payload)
    except ApplicationError as exc:
        return _failed(transcript, exc, exc)
    settings = registry.settings(workflow.info().task_queue)
    report = Reporter(run.history, readable=False, stored=settings.stored_bytes is not None)
    loops: list[RunLoop] = []  # the gate's callbacks read the loop, made after it
    gate = run_gate(agent, report, lambda: loops[0] if loops else None, tell=tell)
    # Its activities share the conversation's page in the UI: each summary names the
    # person's turn (a run handed over to keeps its turn's number).
    over = f", handed over to {agent.name}" if continues else ""
    label = f" · conversation turn {transcript.person_turns}{over}, run {run.run_id}"
    streamed = streams if payload.stream else None
    if streamed is not None:
        streamed.begin(run.run_id, continues)
    executor = TemporalExecutor(
        agent,
        settings,
        gate=gate,
        base=payload.base,
        offered=run.external_tools,
        label=label,
        caller=workflow.info().workflow_id,
        stream=streamed is not None,
        on_child=streamed.children(run.run_id) if streamed is not None else _unstreamed,
    )
    emit = streamed.publisher(run.run_id) if streamed is not None else None
    loops.append(RunLoop(agent, executor, run, emit=emit, follow_handoffs=False))
    hosting(executor, gate)
    completed: Completed | None = None
    handed: Handoff | None = None  # the run the turn goes on as, once it is taken
    try:
        result = await loops[0].run()
    except RunError as exc:
        # A cancelled turn's failure carries its evidence too (a run's memo would hold it).
        return _failed(transcript, failure_error(exc, report.failed(exc)), exc)
    except Exception as exc:
        # In a child run a bug fails the run or its task; here it would leave the send
        # unanswered (a spawned task's error): the turn fails instead, naming the culprit.
        error = loop_failure(f"turn {run.run_id} failed in golem's workflow code: {exc!r}")
        return _failed(transcript, error, exc)
    else:
        output = result.output
        if agent.output_adapter is not None and output is not None:
            output = agent.output_adapter.dump_python(output, mode="json")
        shipper = executor.shipper
        logged = shipper.logged_count(result.messages)
        completed = report.completed(result, output, shipper.recorded, logged)
        handoff = loops[0].handoff
        if handoff is not None:  # the conversation runs the target's run next, as the turn
            completed = completed.model_copy(update={"handoff": handoff})
        # When the turn's activities hold every request's messages, its history reader
        # rebuilds them there (golem.wire.transcript): the outcome need not record them.
        # A turn that paused keeps them too: an update other than its send may answer its
        # end, or none (a memo records it), and the reader reads them from that answer.
        keep = not shipper.logged or gate.paused or handoff is not None
        taken = _taken(transcript, completed, start, run.run_id, keep=keep)
        if isinstance(taken, TurnOutput):  # refused (too big), the turn ends here
            handed = handoff
        return taken
    finally:
        gate.finish(completed)
        hosting(None, None)
        if streamed is not None:
            if handed is not None:  # its reader reads the target's items as the turn's
                streamed.handed(run.run_id, handed.run_id, handed.agent)
            else:
                streamed.end(run.run_id)


def _unstreamed(run_id: str, agent: str) -> None:
    """A delegation of a turn that does not stream: no reader follows it."""


def turn_ended(run_id: str, answer: TurnOutput | Exception | None) -> TurnEnded:
    """The record of a paused inline turn's end that no update answers."""
    if isinstance(answer, TurnOutput):
        return TurnEnded(run_id=run_id, output=answer)
    return TurnEnded(run_id=run_id, failure=run_failure(answer), message=str(answer or ""))


def loop_failure(message: str, stage: Stage = "loop") -> ApplicationError:
    """A turn's failure outside its loop (a bug: stage ``loop``; or ``stage``, e.g. a run
    cancelled before its first step): its send raises it as a ``RunError``."""
    return failure_error(RunError(stage, message), Failed(stage=stage, message=message))


def _failed(
    transcript: Transcript, cause: BaseException | None, exc: BaseException
) -> ApplicationError:
    """The failed turn's evidence joins the transcript (the next turn resumes it, repaired
    first); the error its send fails with."""
    transcript.failed(run_failure(cause))
    if isinstance(cause, ApplicationError):
        return ApplicationError(cause.message, *cause.details, type=cause.type, non_retryable=True)
    return ApplicationError(str(cause or exc), type=names.RUN_ERROR, non_retryable=True)


def _taken(
    transcript: Transcript, output: Completed, start: int, run_id: str, keep: bool = False
) -> TurnOutput | ApplicationError:
    """The turn's output, its messages taken into the transcript; ``keep``: the output keeps
    them too (an inline turn whose history cannot rebuild them: the conversation's history
    reader reads them there)."""
    if not transcript.ended(output):
        # Workflow code cannot read pages; one turn adding ~1 MB of messages is refused.
        return ApplicationError(
            f"turn {run_id} added more than {PAGE_BYTES} bytes of messages, too many for "
            "the conversation to take in; return references (URLs, ids) from tools, or turn on "
            "external storage (GolemPlugin(external_storage=...) or GOLEM_STORAGE_DIR)",
            non_retryable=True,
        )
    if not transcript.based or keep:
        return TurnOutput(run=output, start=start, based=transcript.based)
    # Recorded once more here they would be the turn's fourth copy (the tool's result, the
    # child's result, its completion here): the client reads them from the transcript.
    held = InTranscript(start=start, count=transcript.length - start)
    return TurnOutput(run=output.model_copy(update={"messages": held}), start=start, based=True)


def not_inline(what: str) -> ApplicationError:
    """A conversation whose turns run inline refusing ``what``, for good."""
    return ApplicationError(inline_refusal(what), type=names.NOT_INLINE, non_retryable=True)


def by_reference(agent: Agent[Any, Any]) -> bool:
    """Whether the agent's turns (and those of every agent it may hand over to) can take
    the transcript by reference: none has a history processor or per-request token limit
    (both need the whole history in the run's loop, so those turns get it by value)."""
    return all(
        a.history_processor is None and a.usage_limits.request_input_tokens_limit is None
        for a in reachable([agent])
    )


def start_refusal(run_id: str, exc: Exception) -> Refusal:
    """Why the turn's run could not start, as the send's refusal."""
    if isinstance(exc, WorkflowAlreadyStartedError):
        return Refusal("taken", run_id_taken(run_id))
    return Refusal("failed", f"turn {run_id} could not start: {exc}")


def paused_output(paused: Paused, pending: tuple[str, ...], start: int, based: bool) -> TurnOutput:
    """A waiting turn's output, with the calls still undecided."""
    calls = [c for c in paused.pending_approvals if c.id in pending]
    run = paused.model_copy(update={"pending_approvals": calls})
    return TurnOutput(run=run, start=start, based=based)
