"""golem's workflows as a versioned worker registers them: PINNED (docs/adr/0020).

    Worker(client, task_queue="golem", plugins=[GolemPlugin(agent, deployment=("support", "v2"))])
    # registers PinnedAgentRunWorkflow and PinnedConversationWorkflow, under the same names

A run finishes on the deployment version it started on; a conversation's workflow run
does too, and continues as new onto the deployment's target version between turns
(``ConversationWorkflow``). The behaviour cannot sit on the classes themselves: the server
refuses a workflow task that names one from an unversioned worker.
"""

from __future__ import annotations

import functools
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import VersioningBehavior

from golem.workflows.agent_run import AgentRunWorkflow
from golem.workflows.conversation import ConversationWorkflow

W = TypeVar("W")


def _pinned(base: type[W]) -> type[W]:
    """``base`` under its own workflow name, PINNED; its run method's signature (and so
    its payload types) is the base's, whatever they become."""
    defn = getattr(base, "__temporal_workflow_definition")
    name = f"Pinned{base.__name__}"
    base_run = vars(base)["run"]

    async def run(self: Any, *args: Any) -> Any:
        return await base_run(self, *args)

    functools.update_wrapper(run, base_run)  # the base's signature and type hints
    run.__module__, run.__qualname__ = __name__, f"{name}.run"  # defined on this class
    namespace = {"run": workflow.run(run), "__module__": __name__, "__qualname__": name}
    namespace["__doc__"] = f"``{defn.name}``, PINNED to the deployment version it started on."
    cls = type(name, (base,), namespace)
    return workflow.defn(
        name=defn.name,
        sandboxed=defn.sandboxed,
        failure_exception_types=defn.failure_exception_types,
        versioning_behavior=VersioningBehavior.PINNED,
    )(cls)


PinnedAgentRunWorkflow = _pinned(AgentRunWorkflow)
PinnedConversationWorkflow = _pinned(ConversationWorkflow)

#: What a versioned worker registers in place of each of golem's workflows.
PINNED: dict[type, type] = {
    AgentRunWorkflow: PinnedAgentRunWorkflow,
    ConversationWorkflow: PinnedConversationWorkflow,
}
