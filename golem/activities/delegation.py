"""``ctx.delegate`` in a tool that runs as an activity: each delegation a run of its own.

    delegator = ActivityDelegator(input)          # the tool's RunContext gets it
    outcome = await tool.execute(ctx, args)       # ctx.delegate starts runs through it
    outcome = delegator.stamp(outcome)            # the calling workflow counts them

The tool body runs where the tool runs (an activity), so the sub-run cannot be a child
workflow: it is started as a workflow of its own, on the same task queue, linked to the
calling run by ``GolemParentRunId`` and ``AgentRunInput.caller`` (which it tells when it
waits for approvals). Its id is derived from the calling tool call and the delegation's
place in it, so a retried activity attaches to the same sub-run (running, or closed with
its outcome) instead of starting another. Cancelling the activity (its run was cancelled)
cancels the sub-run. See docs/adr/0019-agents-calling-agents.md.
"""

from __future__ import annotations

import asyncio
import uuid
import weakref
from collections.abc import Awaitable
from typing import Any

from temporalio import activity
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from golem.delegation import UnknownAgent
from golem.messages import Message, validate_history
from golem.results import Result, RunError
from golem.run_state import RunInput, resolve_conversation_id
from golem.tools import Asked, RunContext, ToolOutcome
from golem.usage import Spent
from golem.wire import AgentRunInput, StreamEvent, ToolCallInput, lineage, names
from golem.wire.run_history import decode_result, lazy_sources, run_error
from golem.workflows import registry

#: Clients whose namespace has no GolemWaiting (set up by an older golem): asked once each.
_LACKS_WAITING: weakref.WeakSet[Client] = weakref.WeakSet()

_IDS = uuid.UUID("6f1c2a4e-9d0b-4c55-8e1f-2b7d3a9c6e01")  # namespace of derived run ids


def sub_run_id(workflow_id: str, run: str, activity_id: str, index: int) -> str:
    """The run id of the ``index``-th delegation (0-based) of one tool activity: the same
    on every attempt of that activity, another for any other call."""
    return str(uuid.uuid5(_IDS, f"{workflow_id}/{run}/{activity_id}/{index}"))


class ActivityDelegator:
    """The ``ctx.delegate`` of one attempt of a tool activity."""

    def __init__(self, input: ToolCallInput) -> None:
        self.input = input
        self.sub_runs: list[str] = []
        self.spent = Spent()

    def delegate(self, ctx: RunContext[Any], agent: Any, asked: Asked) -> Awaitable[Result[Any]]:
        info = activity.info()
        name = agent if isinstance(agent, str) else agent.name
        run_id = sub_run_id(
            info.workflow_id or "", info.workflow_run_id or "", info.activity_id, len(self.sub_runs)
        )
        self.sub_runs.append(run_id)  # in call order: the id is fixed before any await
        return self._run(ctx, name, run_id, asked.prompt, asked.deps, list(asked.history or ()))

    async def _run(
        self,
        ctx: RunContext[Any],
        name: str,
        run_id: str,
        prompt: str | None,
        deps: Any,
        history: list[Message],
    ) -> Result[Any]:
        info = activity.info()
        try:
            target = registry.lookup(info.task_queue, name)
        except LookupError as exc:
            raise UnknownAgent(
                f"{exc} (tool {ctx.tool_name!r} delegates to it: give it to GolemPlugin)"
            ) from None
        validate_history(history)
        conversation = resolve_conversation_id(history, None) or ctx.conversation_id
        run = RunInput.of(
            prompt,
            history=history,
            deps=deps,
            run_id=run_id,
            conversation_id=conversation,
            budget=self.input.budget,
        )
        payload = AgentRunInput(
            agent=name,
            run=run,
            parent_run_id=ctx.run_id,
            stream=self.input.stream,
            caller=ctx.run_id,
        )
        client = activity.client()

        async def start(waiting: bool) -> WorkflowHandle[Any, Any]:
            return await client.start_workflow(
                names.AGENT_RUN_WORKFLOW,
                payload,
                id=run_id,
                task_queue=info.task_queue,
                search_attributes=lineage.run_search_attributes(
                    conversation, name, ctx.run_id, waiting=waiting
                ),
                static_summary=lineage.summary(name, prompt),
                static_details=lineage.details(run_id, conversation, name),
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,  # a retry attaches
                # Its first workflow task comes back with the start, to this worker (which
                # serves it): no trip through the task queue (a busy worker declines it).
                # A versioned worker leaves the version to the deployment's routing.
                request_eager_start=not registry.settings(info.task_queue).versioned,
            )

        try:
            try:
                handle = await start(client not in _LACKS_WAITING)
            except RPCError as exc:
                # A namespace set up before the pending inbox: its runs go unlisted.
                if lineage.WAITING.name not in exc.message:
                    raise
                _LACKS_WAITING.add(client)
                handle = await start(False)
        except WorkflowAlreadyStartedError:
            handle = client.get_workflow_handle(run_id)  # closed: a retry reads its outcome
        if self.input.stream:
            await _announce(run_id, name)
        converter = client.data_converter
        sources = lazy_sources(converter, handle, history, False)
        try:
            raw = await handle.result()
        except WorkflowFailureError as exc:
            error = await run_error(exc, handle, sources, converter)
            if isinstance(error, RunError) and error.partial is not None:
                self.spent += error.partial.spent
            raise error from exc
        except asyncio.CancelledError:
            await handle.cancel()  # the calling run was cancelled: so is what it started
            raise
        adapter = target.output_adapter
        validate = adapter.validate_python if adapter is not None else None
        result = await decode_result(raw, sources, validate)
        self.spent += result.spent
        return result

    def stamp(self, outcome: ToolOutcome) -> ToolOutcome:
        """``outcome`` naming the runs the tool started and what they spent."""
        if not self.sub_runs:
            return outcome
        return outcome.model_copy(update={"sub_runs": list(self.sub_runs), "spent": self.spent})


async def _announce(run_id: str, agent: str) -> None:
    """Name the sub-run in the calling run's stream, whose reader then follows it."""
    client = WorkflowStreamClient.from_within_activity()
    client.topic(names.TOPIC, type=StreamEvent).publish(
        StreamEvent(kind="child", run_id=run_id, agent=agent)
    )
    await client.flush()
