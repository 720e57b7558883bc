"""A measuring prototype for issue 34 (docs/adr/0050-turns-inline.md): golem's own loop and
executor run a conversation's turns inline, in the conversation's workflow, the way the
entity floor (benchmarks/_entity_floor.py) runs its activities. Not a product workflow: no
approvals, streams, handoffs or lineage; it prices the shape before anyone builds it.

    handle = await client.start_workflow(InlineTurns.run, "agent-name", id=..., task_queue=...)
    answer = await handle.execute_update(InlineTurns.turn, "Hello")
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from golem.agent import Agent
    from golem.loop import RunLoop
    from golem.messages import Message
    from golem.run_state import RunInput
    from golem.wire import MessagesPage, MessagesQuery, names
    from golem.workflows import registry
    from golem.workflows.executor import TemporalExecutor


@workflow.defn(name="InlineTurns")
class InlineTurns:
    """A conversation whose turns run in its own workflow: one update per turn."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.closed = False
        self.agent: Agent[Any, Any] | None = None
        # One executor for every turn: its shipper sends each model call only what the
        # last one lacked, so a turn's first call carries its prompt, not the transcript.
        self.executor: TemporalExecutor | None = None

    @workflow.run
    async def run(self, agent: str, messages: list[Message] | None = None) -> int:
        queue = workflow.info().task_queue
        self.messages = list(messages or [])
        self.agent = registry.lookup(queue, agent)
        self.executor = TemporalExecutor(self.agent, registry.settings(queue))
        await workflow.wait_condition(
            lambda: self.closed or workflow.info().is_continue_as_new_suggested()
        )
        await workflow.wait_condition(workflow.all_handlers_finished)
        if not self.closed:
            workflow.continue_as_new(args=[agent, self.messages])
        return len(self.messages)

    @workflow.update(name="turn")
    async def turn(self, prompt: str) -> str:
        await workflow.wait_condition(lambda: self.executor is not None)
        assert self.agent is not None and self.executor is not None
        run = RunInput.of(
            prompt,
            history=self.messages,
            run_id=str(workflow.uuid4()),
            conversation_id=workflow.info().workflow_id,
        )
        result = await RunLoop(self.agent, self.executor, run).run()
        self.messages = result.messages
        return str(result.output)

    @workflow.signal(name="close")
    def close(self) -> None:
        self.closed = True

    @workflow.query(name=names.MESSAGES)
    def page(self, query: MessagesQuery) -> MessagesPage:
        """What a model activity on another worker reads when its cache lacks a request."""
        assert self.executor is not None
        return self.executor.shipper.page(query)
