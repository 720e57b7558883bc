"""Delegations and handoffs of a durable run, the workflow side: each a child run.

    result = await run_child(child, ctx, stream=executor.stream, on_start=stream_host.child)

``TemporalExecutor.delegate`` calls this for a ``delegates=`` tool, a ``ctx.delegate`` in
the run's own workflow code, and a standalone run's handoff: the calling run's workflow
starts the child ``AgentRunWorkflow`` itself (Temporal's parent link, ``GolemParentRunId``,
its run id minted replay-safely by the caller's loop), so no activity stands in between and
a worker crash neither loses nor repeats a child. The child names its caller
(``AgentRunInput.caller``), which it tells whenever it waits for approvals
(golem.workflows.approvals), and gets what its caller's usage limits leave
(``RunInput.budget``). A child's failure comes back as its ``RunError``; its partial
evidence stays with its own run. See docs/adr/0019-agents-calling-agents.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from golem.delegation import Delegation, UnknownAgent
    from golem.results import Result
    from golem.tools import RunContext
    from golem.wire import AgentRunInput, lineage
    from golem.workflows import registry
    from golem.workflows.children import child_run


async def run_child(
    child: Delegation,
    ctx: RunContext[Any],
    *,
    stream: bool,
    on_start: Callable[[str, str], None],
    caller: str = "",
) -> Result[Any]:
    """Run ``child`` as a child workflow of the calling run (``ctx.run_id``); ``on_start``
    learns its run id and agent as it starts (the caller's stream names it); ``caller``: the
    workflow the child tells when it waits (default: the calling run's)."""
    try:
        registry.lookup(workflow.info().task_queue, child.agent)
    except LookupError as exc:
        raise UnknownAgent(
            f"{exc} (agent {ctx.agent_name!r} delegates or hands off to it: give it to "
            "GolemPlugin, which serves every agent reachable from the ones it is given)"
        ) from None
    run = child.run
    payload = AgentRunInput(
        agent=child.agent,
        run=run,
        parent_run_id=ctx.run_id,
        stream=stream,
        caller=caller or ctx.run_id,  # an inline turn's: its conversation hears the child
    )
    how = f"handed over by {ctx.agent_name}" if child.handoff else (run.prompt or "")
    on_start(run.run_id, child.agent)
    work = asyncio.ensure_future(child_run(payload, summary=lineage.summary(child.agent, how)))
    try:
        # Shielded: a cancel of the caller reaches the child through ``work``, and the
        # caller still learns it was cancelled itself (a child's own cancel is its failure).
        return await asyncio.shield(work)
    except asyncio.CancelledError:
        work.cancel()
        await asyncio.wait([work])
        raise
