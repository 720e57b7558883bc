"""Workflow code: the one place (with activities/ and worker/) that knows Temporal."""

from golem.workflows.agent_run import RUN_ERROR, AgentRunWorkflow, TemporalExecutor

__all__ = ["RUN_ERROR", "AgentRunWorkflow", "TemporalExecutor"]
