"""Workflow code: the one place (with activities/ and worker/) that knows Temporal.

``run_agent`` runs an agent from inside any workflow (a child run, or inline)."""

from golem.wire.names import RUN_ERROR
from golem.workflows.agent_run import AgentRunWorkflow
from golem.workflows.compose import run_agent
from golem.workflows.conversation import ConversationWorkflow
from golem.workflows.executor import TemporalExecutor

__all__ = ["RUN_ERROR", "AgentRunWorkflow", "ConversationWorkflow", "TemporalExecutor", "run_agent"]
