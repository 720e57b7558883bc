"""A run started as a child of the calling workflow (``run_agent``'s, a delegate's), and
what a workflow gives the runs it starts beyond the lineage every run carries
(golem.wire.lineage).

    result = await child_run(AgentRunInput(agent=name, run=run, parent_run_id=parent))
    details = child_details(run_id, conversation_id, agent)
    attributes = run_search_attributes(..., summary=listed_summary(text))
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError, ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from golem.messages import Message
    from golem.results import Result, RunError
    from golem.run_state import RunInput
    from golem.wire import AgentRunInput, Carried, Completed, RunReport, lineage, names
    from golem.wire.failures import golem_error
    from golem.wire.lineage import SUMMARY, WAITING, details
    from golem.workflows import registry
    from golem.workflows.patches import CHILD_DETAILS, patched


def child_details(run_id: str, conversation_id: str, agent: str) -> str | None:
    """In a workflow: a child run's static details (``None`` replaying a history recorded
    before children had them)."""
    return details(run_id, conversation_id, agent) if patched(CHILD_DETAILS) else None


def listed_summary(text: str) -> str | None:
    """In a workflow: ``text`` for a child's ``GolemSummary`` when this workflow has one (so
    the namespace has the attribute), else ``None``."""
    return text if workflow.info().typed_search_attributes.get(SUMMARY) is not None else None


def listed_waiting() -> bool:
    """In a workflow: whether it carries ``GolemWaiting`` (so the namespace has it, and the
    runs it starts may carry it too)."""
    return workflow.info().typed_search_attributes.get(WAITING) is not None


async def child_run(payload: AgentRunInput, summary: str = "") -> Result[Any]:
    """Run ``payload`` as a child ``AgentRunWorkflow`` of the calling workflow (workflow id =
    its run id, its lineage, cancelled when the caller ends); its ``Result`` or ``RunError``."""
    run, agent_name = payload.run, payload.agent
    summary = summary or lineage.summary(agent_name, run.prompt)
    try:
        output: Completed = await workflow.execute_child_workflow(
            names.AGENT_RUN_WORKFLOW,  # by name: the class imports this module's users
            payload,
            result_type=Completed,
            id=run.run_id,
            search_attributes=lineage.run_search_attributes(
                run.conversation_id,
                agent_name,
                payload.parent_run_id,
                summary=listed_summary(summary),
                waiting=listed_waiting(),
            ),
            static_summary=summary,
            static_details=child_details(run.run_id, run.conversation_id, agent_name),
            # The calling workflow's end (or termination) stops its run with evidence.
            parent_close_policy=workflow.ParentClosePolicy.REQUEST_CANCEL,
        )
    except ChildWorkflowError as exc:
        raise await _run_error(exc, run) from None
    carried = output.messages
    if not isinstance(carried, Carried):
        raise RunError(
            "loop",
            f"run {run.run_id} finished, but its conversation is too big to hand back to "
            "workflow code; read it from a client (golem.client.fetch_run)",
        )
    agent = served(agent_name)
    value = output.output
    if agent is not None and agent.output_adapter is not None and value is not None:
        value = agent.output_adapter.validate_python(value)
    return output.result(carried.after(list(run.history), output.stamps), value)


def served(name: str) -> Any:
    """The agent ``name`` this worker serves on the workflow's task queue, or ``None``."""
    try:
        return registry.lookup(workflow.info().task_queue, name)
    except LookupError:
        return None


async def _run_error(exc: ChildWorkflowError, run: RunInput) -> RunError:
    """The ``RunError`` a failed child run carries (the same one ``agent.run`` raises)."""

    async def evidence(report: RunReport) -> list[Message] | None:
        # A paged conversation stays in the child: workflow code cannot query it.
        carried = report.messages
        if not isinstance(carried, Carried):
            return None
        return carried.after(list(run.history), report.stamps)

    error = await golem_error(exc.cause, run.run_id, evidence)
    if isinstance(error, RunError):
        return error
    cause = exc.cause
    message = cause.message if isinstance(cause, ApplicationError) else str(cause or exc)
    return RunError("loop", f"run {run.run_id} failed: {message}")
