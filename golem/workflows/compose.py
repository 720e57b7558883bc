"""Run an agent from inside any workflow: the user's own ``@workflow.defn``.

    from golem.workflows import run_agent

    triage = await run_agent("triage", ticket.text)                 # a child AgentRunWorkflow
    reply = await run_agent("reply", "Answer the customer", history=triage.messages, inline=True)

``run_agent`` returns the same ``Result`` and raises the same ``RunError`` as ``agent.run``.
By default the run is a child ``AgentRunWorkflow``: its own workflow id (the run id), its
lineage search attributes, and the calling workflow as its parent in the UI. ``inline=True``
runs the loop in the calling workflow instead, its activities in that workflow's history.
The worker must serve the agent (``GolemPlugin(agent)``) on the calling workflow's task queue.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError, ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from golem.loop import RunInput, RunLoop, resolve_conversation_id
    from golem.messages import HistoryError, Message, Part, validate_history
    from golem.results import Result, RunError
    from golem.wire import (
        AgentRunInput,
        Carried,
        Completed,
        MessagesPage,
        MessagesQuery,
        RunReport,
    )
    from golem.workflows import lineage, registry
    from golem.workflows.agent_run import AgentRunWorkflow
    from golem.workflows.executor import TemporalExecutor

__all__ = ["child_run", "run_agent"]


async def run_agent(
    agent_name: str,
    prompt: str | None = None,
    *,
    parts: Sequence[Part] | None = None,
    history: Sequence[Message] | None = None,
    deps: Any = None,
    run_id: str | None = None,
    conversation_id: str | None = None,
    approvals: dict[str, bool] | None = None,
    inline: bool = False,
) -> Result[Any]:
    """Run the agent ``agent_name`` from workflow code; see the module docstring."""
    messages = list(history or ())
    try:
        validate_history(messages)
    except HistoryError as exc:
        raise RunError("history", str(exc)) from exc
    run = RunInput(
        prompt=prompt,
        parts=list(parts or ()),
        history=messages,
        deps=deps,
        run_id=run_id or str(workflow.uuid7()),
        conversation_id=resolve_conversation_id(messages, conversation_id) or str(workflow.uuid7()),
        approvals=dict(approvals or {}),
    )
    if inline:
        return await _inline(agent_name, run)
    return await _child(agent_name, run)


async def _child(agent_name: str, run: RunInput) -> Result[Any]:
    parent = next((m.run_id for m in reversed(run.history) if m.run_id), "")
    return await child_run(AgentRunInput(agent=agent_name, run=run, parent_run_id=parent))


async def child_run(payload: AgentRunInput, summary: str = "") -> Result[Any]:
    """Run ``payload`` as a child ``AgentRunWorkflow`` of the calling workflow (workflow id =
    its run id, its lineage, cancelled when the caller ends); its ``Result`` or ``RunError``."""
    run, agent_name = payload.run, payload.agent
    summary = summary or lineage.summary(agent_name, run.prompt)
    try:
        output: Completed = await workflow.execute_child_workflow(
            AgentRunWorkflow.run,
            payload,
            id=run.run_id,
            search_attributes=lineage.run_search_attributes(
                run.conversation_id,
                agent_name,
                payload.parent_run_id,
                summary=lineage.listed_summary(summary),
                waiting=lineage.listed_waiting(),
            ),
            static_summary=summary,
            static_details=lineage.child_details(run.run_id, run.conversation_id, agent_name),
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
    agent = _agent(agent_name)
    value = output.output
    if agent is not None and agent.output_adapter is not None and value is not None:
        value = agent.output_adapter.validate_python(value)
    return output.result(carried.after(list(run.history), output.stamps), value)


async def _inline(agent_name: str, run: RunInput) -> Result[Any]:
    agent = _agent(agent_name)
    if agent is None:
        raise RunError("history", f"unknown agent {agent_name!r} on this worker")
    instance = workflow.instance()
    if getattr(instance, "_golem_inline_run", None):
        raise RunError(
            "history",
            "another inline run is in progress in this workflow; run them one after another "
            "(or as child runs)",
        )
    executor = TemporalExecutor(agent, registry.settings(workflow.info().task_queue))

    def messages(query: MessagesQuery) -> MessagesPage:
        # The model activity reads the request through this query, as from AgentRunWorkflow.
        return executor.shipper.page(query)

    instance._golem_inline_run = run.run_id
    workflow.set_query_handler("golem.messages", messages)
    try:
        return await RunLoop(agent, executor, run).run()
    finally:
        workflow.set_query_handler("golem.messages", None)
        instance._golem_inline_run = None


def _agent(name: str) -> Any:
    try:
        return registry.lookup(workflow.info().task_queue, name)
    except LookupError:
        return None


async def _run_error(exc: ChildWorkflowError, run: RunInput) -> RunError:
    """The ``RunError`` a failed child run carries (the same one ``agent.run`` raises)."""
    # Imported here: the table imports golem.worker, which imports this package.
    from golem.workflows.failures import golem_error

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
