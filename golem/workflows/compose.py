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

with workflow.unsafe.imports_passed_through():
    from golem.loop import RunLoop
    from golem.messages import HistoryError, Message, Part, validate_history
    from golem.results import Result, RunError
    from golem.run_state import RunInput, resolve_conversation_id
    from golem.wire import (
        AgentRunInput,
        MessagesPage,
        MessagesQuery,
        names,
    )
    from golem.workflows import children, registry
    from golem.workflows.executor import TemporalExecutor


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
    run = RunInput.of(
        prompt,
        parts=parts or (),
        history=messages,
        deps=deps,
        run_id=run_id or str(workflow.uuid7()),
        conversation_id=resolve_conversation_id(messages, conversation_id) or str(workflow.uuid7()),
        approvals=approvals,
    )
    if inline:
        return await _inline(agent_name, run)
    return await _child(agent_name, run)


async def _child(agent_name: str, run: RunInput) -> Result[Any]:
    parent = next((m.run_id for m in reversed(run.history) if m.run_id), "")
    return await children.child_run(AgentRunInput(agent=agent_name, run=run, parent_run_id=parent))


async def _inline(agent_name: str, run: RunInput) -> Result[Any]:
    agent = children.served(agent_name)
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
    workflow.set_query_handler(names.MESSAGES, messages)
    try:
        return await RunLoop(agent, executor, run).run()
    finally:
        workflow.set_query_handler(names.MESSAGES, None)
        instance._golem_inline_run = None
