"""Traces a planted bug once slipped past (issue 20, "Pin first"): a tool that reports a
failure (``ToolFailed``) completes its activity, and its ``execute_tool`` span is still an
error. Same exporter and helpers as tests/test_tracing.py."""

from __future__ import annotations

from agents import ask, call, reply
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from temporalio.testing import WorkflowEnvironment
from test_tracing import ScriptedOpenAI, exporter, spans, traced, tree

from golem import Agent, ToolFailed
from golem.client import DurableAgent

__all__ = ["exporter", "spans"]  # the fixtures, shared with tests/test_tracing.py


async def test_a_tool_that_reports_a_failure_marks_its_span_as_an_error(
    temporal_env: WorkflowEnvironment, spans: InMemorySpanExporter
) -> None:
    model = ScriptedOpenAI([ask(call("c1", "charge", amount=5)), reply("Could not charge.")])
    agent: Agent[None, str] = Agent(model, name="cashier")

    @agent.tool
    def charge(amount: int) -> str:
        """Charge the card."""
        raise ToolFailed("card declined")

    async with traced(temporal_env, agent) as (client, tq):
        result = await DurableAgent(client, agent, task_queue=tq).run("Charge 5")

    assert result.output == "Could not charge."  # a failed result: the run goes on
    finished = spans.get_finished_spans()
    assert tree(finished) == [
        "invoke_agent cashier",
        "  chat scripted",
        "  execute_tool charge ERROR",
        "  chat scripted",
    ]
    [tool] = [s for s in finished if s.name == "execute_tool charge"]
    assert tool.status.status_code == StatusCode.ERROR
    assert (tool.attributes or {}).get("golem.tool.status") == "failed"
