"""The worker side: ``GolemPlugin`` registers golem's workflows and activities.

plugin = GolemPlugin(support_agent, research_agent)
client = await Client.connect("localhost:7233", plugins=[plugin])
worker = Worker(client, task_queue="golem")   # the plugin reaches the worker too
await worker.run()
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio.plugin import SimplePlugin
from temporalio.worker import ReplayerConfig, WorkerConfig
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from golem.activities import MessageCache, activities
from golem.agent import Agent
from golem.messages import HistoryError
from golem.results import RunError
from golem.worker.converter import golem_data_converter
from golem.workflows import registry
from golem.workflows.agent_run import AgentRunWorkflow

__all__ = ["PASSTHROUGH_MODULES", "GolemPlugin"]

#: Imported once, outside the workflow sandbox: golem's loop is deterministic by design
#: and the agents a worker serves must be the very objects the plugin was given.
PASSTHROUGH_MODULES = ("golem", "pydantic", "pydantic_core", "annotated_types", "httpx", "uuid6")


class GolemPlugin(SimplePlugin):
    """Serve ``agents`` durably. Put it on the Client (it reaches the Worker) or the Worker.

    ``heartbeat_timeout`` bounds how long a crashed worker's model or tool call goes
    unnoticed; ``sticky_schedule_to_start_timeout`` how long a workflow waits for a
    crashed worker's sticky queue before another worker takes it; new messages up to
    ``inline_messages_bytes`` ride a model call's input, larger ones are read through a
    query so history grows with content only once (0: always query). ``message_cache``
    is the worker's cache of those messages (its own new one unless given).
    """

    def __init__(
        self,
        *agents: Agent[Any, Any],
        heartbeat_timeout: timedelta = registry.HEARTBEAT_TIMEOUT,
        sticky_schedule_to_start_timeout: timedelta = timedelta(seconds=1),
        inline_messages_bytes: int = registry.INLINE_MESSAGES_BYTES,
        message_cache: MessageCache | None = None,
    ) -> None:
        names = [a.name for a in agents]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"GolemPlugin: two agents share the name(s) {duplicates}")
        self.agents = list(agents)
        self.settings = registry.WorkerSettings(heartbeat_timeout, inline_messages_bytes)
        self.sticky_schedule_to_start_timeout = sticky_schedule_to_start_timeout
        #: This worker's own cache of running workflows' model-request messages.
        self.message_cache = message_cache if message_cache is not None else MessageCache()
        super().__init__(
            "golem",
            data_converter=golem_data_converter,
            activities=activities(self.message_cache),
            workflows=[AgentRunWorkflow],
            workflow_runner=_sandbox,
            # A bad input or a run's own failure must fail the workflow, not retry its task.
            workflow_failure_exception_types=[RunError, HistoryError, LookupError],
        )

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        config = super().configure_worker(config)
        registry.register(config["task_queue"], self.agents, self.settings)
        config["sticky_queue_schedule_to_start_timeout"] = self.sticky_schedule_to_start_timeout
        return config

    def configure_replayer(self, config: ReplayerConfig) -> ReplayerConfig:
        config = super().configure_replayer(config)
        registry.register(registry.ANY_TASK_QUEUE, self.agents, self.settings)
        return config


def _sandbox(existing: Any) -> SandboxedWorkflowRunner:
    if isinstance(existing, SandboxedWorkflowRunner):
        restrictions = existing.restrictions
    else:
        restrictions = SandboxRestrictions.default
    return SandboxedWorkflowRunner(
        restrictions=restrictions.with_passthrough_modules(*PASSTHROUGH_MODULES)
    )
