"""OpenTelemetry traces of durable runs on the real dev server, into an in-memory exporter:
the tree of one run, both attempts of a retried model call, and no duplicates on replay."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from agents import FAST_RETRY, ask, call, reply
from crash_agents import AGENTS as CRASH_AGENTS
from crash_agents import idempotent
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from opentelemetry.util._once import Once
from pytest_httpserver import HTTPServer
from temporalio.client import Client
from temporalio.contrib.opentelemetry import create_tracer_provider
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker
from test_crash import TAKEN_OVER, assert_heartbeats, doomed_worker
from waiting import eventually, within

from golem.agent import Agent
from golem.client import DurableAgent
from golem.models import ModelHTTPError, ScriptedModel
from golem.results import RunError
from golem.worker import GolemPlugin
from golem.worker.tracing import tracing_wanted


class ScriptedOpenAI(ScriptedModel):
    """A scripted model that names its provider, as the HTTP adapters do."""

    provider = "openai"


@pytest.fixture(scope="module")
def exporter() -> Iterator[InMemorySpanExporter]:
    """A replay-safe global tracer provider exporting to memory, for this module only."""
    memory = InMemorySpanExporter()
    provider = create_tracer_provider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    previous = trace._TRACER_PROVIDER
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace.set_tracer_provider(provider)
    yield memory
    # OpenTelemetry sets its global once per process; undo it so later modules run untraced.
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = previous


@pytest.fixture
def spans(exporter: InMemorySpanExporter) -> InMemorySpanExporter:
    exporter.clear()
    return exporter


async def connect(env: WorkflowEnvironment, plugin: GolemPlugin) -> Client:
    config = env.client.service_client.config
    return await Client.connect(
        config.target_host, namespace=env.client.namespace, plugins=[plugin]
    )


@asynccontextmanager
async def traced(
    env: WorkflowEnvironment, agent: Agent[Any, Any], **worker_options: Any
) -> AsyncIterator[tuple[Client, str]]:
    client = await connect(env, GolemPlugin(agent, tracing=True))
    task_queue = f"trace-{uuid.uuid4().hex[:12]}"
    async with Worker(client, task_queue=task_queue, **worker_options):
        yield client, task_queue


def tree(spans: Sequence[ReadableSpan], keys: Sequence[str] = ()) -> list[str]:
    """Spans as indented lines, children in start order, with the chosen attributes."""
    by_parent: dict[int | None, list[ReadableSpan]] = {}
    ids = {s.context.span_id for s in spans}
    for s in spans:
        parent = s.parent.span_id if s.parent and s.parent.span_id in ids else None
        by_parent.setdefault(parent, []).append(s)
    lines: list[str] = []

    def walk(parent: int | None, depth: int) -> None:
        for s in sorted(by_parent.get(parent, []), key=lambda s: s.start_time or 0):
            attrs = s.attributes or {}
            shown = " ".join(f"{k}={attrs[k]}" for k in keys if k in attrs)
            status = " ERROR" if s.status.status_code == StatusCode.ERROR else ""
            lines.append(f"{'  ' * depth}{s.name}{status}{' [' + shown + ']' if shown else ''}")
            walk(s.context.span_id, depth + 1)

    walk(None, 0)
    return lines


def weather_agent(name: str, model: ScriptedModel) -> Agent[Any, Any]:
    agent = Agent(model, name=name, model_retry=FAST_RETRY)

    @agent.tool
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    return agent


async def test_one_durable_run_yields_the_expected_trace_tree(
    temporal_env: WorkflowEnvironment, spans: InMemorySpanExporter
) -> None:
    model = ScriptedOpenAI(
        [ask(call("c1", "weather", city="Lisbon")), reply("Sunny.", 30, 7)],
        model_name="gpt-4o-mini",
    )
    agent = weather_agent("forecaster", model)
    async with traced(temporal_env, agent) as (client, tq):
        with trace.get_tracer("test").start_as_current_span("client request") as root:
            result = await DurableAgent(client, agent, task_queue=tq).run("Weather in Lisbon?")
    finished = spans.get_finished_spans()
    lines = tree(
        finished,
        ("gen_ai.system", "gen_ai.tool.name", "gen_ai.usage.input_tokens", "golem.turn"),
    )
    print("\n" + "\n".join(lines))
    assert lines == [
        "client request",
        "  invoke_agent forecaster [gen_ai.usage.input_tokens=35]",
        "    chat gpt-4o-mini [gen_ai.system=openai gen_ai.usage.input_tokens=5 golem.turn=1]",
        "    execute_tool weather [gen_ai.tool.name=weather golem.turn=1]",
        "    chat gpt-4o-mini [gen_ai.system=openai gen_ai.usage.input_tokens=30 golem.turn=2]",
    ]
    assert {s.context.trace_id for s in finished} == {root.get_span_context().trace_id}
    by_name = {s.name: s for s in finished}
    run = by_name["invoke_agent forecaster"].attributes or {}
    assert run["golem.run_id"] == result.run_id
    assert run["golem.conversation_id"] == result.conversation_id
    assert run["gen_ai.conversation.id"] == result.conversation_id
    assert run["gen_ai.agent.name"] == "forecaster"
    assert run["gen_ai.usage.input_tokens"] == result.usage.input_tokens
    assert run["gen_ai.usage.output_tokens"] == result.usage.output_tokens
    chat = [s for s in finished if s.name == "chat gpt-4o-mini"][-1].attributes or {}
    assert chat["gen_ai.operation.name"] == "chat"
    assert chat["gen_ai.request.model"] == "gpt-4o-mini"
    assert chat["gen_ai.response.finish_reasons"] == ("stop",)
    assert chat["gen_ai.usage.output_tokens"] == 7
    assert chat["golem.run_id"] == result.run_id
    assert chat["golem.conversation_id"] == result.conversation_id
    tool = by_name["execute_tool weather"].attributes or {}
    assert tool["gen_ai.tool.call.id"] == "c1" and tool["golem.tool.status"] == "ok"
    assert tool["golem.conversation_id"] == result.conversation_id


async def test_a_retried_model_request_shows_both_attempts_in_one_trace(
    temporal_env: WorkflowEnvironment, spans: InMemorySpanExporter
) -> None:
    model = ScriptedOpenAI([ModelHTTPError(503, "overloaded", provider="openai"), reply("ok")])
    agent = weather_agent("flaky", model)
    async with traced(temporal_env, agent) as (client, tq):
        await DurableAgent(client, agent, task_queue=tq).run("hi")
    finished = spans.get_finished_spans()
    lines = tree(finished, ("golem.attempt", "error.type"))
    print("\n" + "\n".join(lines))
    assert lines == [
        "invoke_agent flaky",
        "  chat scripted ERROR [golem.attempt=1 error.type=ModelHTTPError]",
        "  chat scripted [golem.attempt=2]",
    ]
    first, second = [s for s in finished if s.name == "chat scripted"]
    assert first.status.description == "model scripted: openai: HTTP 503: overloaded"
    assert first.parent == second.parent  # the retry joins the same run span


async def test_a_failed_run_marks_its_span_and_the_failing_call(
    temporal_env: WorkflowEnvironment, spans: InMemorySpanExporter
) -> None:
    model = ScriptedOpenAI([ModelHTTPError(401, "bad key", provider="openai")])
    agent = weather_agent("denied", model)
    async with traced(temporal_env, agent) as (client, tq):
        with pytest.raises(RunError):
            await DurableAgent(client, agent, task_queue=tq).run("hi")
    assert tree(spans.get_finished_spans(), ("error.type",)) == [
        "invoke_agent denied ERROR [error.type=GolemRunError]",
        "  chat scripted ERROR [error.type=ModelHTTPError]",
    ]


async def test_replay_emits_no_duplicate_spans_and_keeps_span_ids(
    temporal_env: WorkflowEnvironment, spans: InMemorySpanExporter
) -> None:
    model = ScriptedOpenAI(
        [
            ask(call("c1", "weather", city="Oslo")),
            ask(call("c2", "weather", city="Rome")),
            reply("done"),
        ]
    )
    agent = weather_agent("replayed", model)
    # No workflow cache: every workflow task replays the run from its first event.
    async with traced(temporal_env, agent, max_cached_workflows=0) as (client, tq):
        result = await DurableAgent(client, agent, task_queue=tq).run("two cities")
    finished = spans.get_finished_spans()
    print("\n" + "\n".join(tree(finished)))
    runs = [s for s in finished if s.name.startswith("invoke_agent")]
    assert len(runs) == 1
    children = [s for s in finished if not s.name.startswith("invoke_agent")]
    assert len(children) == 5  # three model requests, two tool calls
    # The run span was re-created on every replay; its id never changed.
    assert {s.parent.span_id for s in children if s.parent} == {runs[0].context.span_id}

    spans.clear()
    history = await client.get_workflow_handle(result.run_id).fetch_history()
    replayer = Replayer(workflows=[], plugins=[GolemPlugin(agent, tracing=True)])
    replay = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert replay.replay_failure is None, replay.replay_failure
    assert spans.get_finished_spans() == ()


async def test_a_trace_continues_across_a_worker_crash(
    temporal_env: WorkflowEnvironment,
    spans: InMemorySpanExporter,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The doomed worker traces from the environment alone (its spans die with it).
    monkeypatch.setenv("GOLEM_TRACING", "1")
    monkeypatch.setenv("GOLEM_CRASH_DIR", str(tmp_path))
    monkeypatch.delenv("GOLEM_CRASH_HANG", raising=False)
    plugin = GolemPlugin(*CRASH_AGENTS, heartbeat_timeout=timedelta(seconds=2))
    client = await connect(temporal_env, plugin)
    task_queue = f"trace-crash-{uuid.uuid4().hex[:12]}"
    with trace.get_tracer("test").start_as_current_span("client request") as root:
        async with doomed_worker(temporal_env, task_queue, tmp_path) as process:
            run = await DurableAgent(client, idempotent, task_queue=task_queue).start("go")
            started = tmp_path / "started"
            await eventually(started.exists, what="the tool call to start", timeout=30)
            process.send_signal(signal.SIGKILL)
            await process.wait()
        await assert_heartbeats(run)
        async with Worker(client, task_queue=task_queue):
            await within(run.result(), what=TAKEN_OVER)
    finished = spans.get_finished_spans()
    lines = tree(finished, ("golem.attempt",))
    print("\n" + "\n".join(lines))
    # The first model call and tool attempt ran in the killed process; this one replayed
    # the run (same run span id, same trace) and retried the tool under it.
    assert lines == [
        "client request",
        "  invoke_agent idempotent",
        "    execute_tool lookup [golem.attempt=2]",
        "    chat crash-model [golem.attempt=1]",
    ]
    assert {s.context.trace_id for s in finished} == {root.get_span_context().trace_id}


async def test_tracing_and_encryption_together(
    temporal_env: WorkflowEnvironment, spans: InMemorySpanExporter
) -> None:
    agent = weather_agent(
        "sealed", ScriptedOpenAI([ask(call("c1", "weather", city="X")), reply("ok")])
    )
    plugin = GolemPlugin(agent, tracing=True, encryption_key=bytes(32))
    client = await connect(temporal_env, plugin)
    async with Worker(client, task_queue="trace-sealed"):
        with trace.get_tracer("test").start_as_current_span("client request"):
            await DurableAgent(client, agent, task_queue="trace-sealed").run("hi")
    assert tree(spans.get_finished_spans()) == [
        "client request",
        "  invoke_agent sealed",
        "    chat scripted",
        "    execute_tool weather",
        "    chat scripted",
    ]


@pytest.mark.parametrize(
    ("plugin", "environ", "service"),
    [
        ("GolemPlugin(Agent(ScriptedModel([]), name='x'))", {}, "golem-worker"),
        ("GolemPlugin()", {}, "golem-client"),
        ("GolemPlugin(Agent(ScriptedModel([]), name='x'))", {"OTEL_SERVICE_NAME": "bill"}, "bill"),
        ("GolemPlugin()", {"OTEL_RESOURCE_ATTRIBUTES": "service.name=shop,team=a"}, "shop"),
    ],
)
def test_tracing_from_the_environment_exports_to_an_otlp_collector_naming_the_service(
    httpserver: HTTPServer, plugin: str, environ: dict[str, str], service: str
) -> None:
    httpserver.expect_request("/v1/traces", method="POST").respond_with_data("")
    script = (
        "from opentelemetry import trace\n"
        "from golem import Agent\n"
        "from golem.models import ScriptedModel\n"
        "from golem.worker import GolemPlugin\n"
        f"assert {plugin}.tracing\n"
        "with trace.get_tracer('t').start_as_current_span('hello collector'):\n"
        "    pass\n"
        "assert trace.get_tracer_provider().force_flush()\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(GOLEM_TRACING="1", **environ)
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = httpserver.url_for("/").rstrip("/")
    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=120)
    request, _ = httpserver.log[0]
    exported = ExportTraceServiceRequest.FromString(request.get_data())
    names = [s.name for r in exported.resource_spans for ss in r.scope_spans for s in ss.spans]
    assert names == ["hello collector"]
    resource = {
        a.key: a.value.string_value for r in exported.resource_spans for a in r.resource.attributes
    }
    assert resource["service.name"] == service


def test_tracing_is_on_when_asked_by_argument_environment_or_provider(
    exporter: InMemorySpanExporter,
) -> None:
    assert tracing_wanted(False, {"GOLEM_TRACING": "1"}) is False
    assert tracing_wanted(None, {"GOLEM_TRACING": "off"}) is False
    assert tracing_wanted(None, {"GOLEM_TRACING": "1"}) is True
    assert tracing_wanted(None, {}) is True  # this module set a replay-safe provider
    with pytest.raises(ValueError, match="GOLEM_TRACING='maybe'"):
        tracing_wanted(None, {"GOLEM_TRACING": "maybe"})
    assert GolemPlugin(tracing=False).tracing is False
    assert GolemPlugin().tracing is True


def test_a_provider_that_is_not_replay_safe_is_refused_naming_the_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: TracerProvider())
    with pytest.raises(ValueError, match=r"create_tracer_provider\(\)"):
        GolemPlugin(tracing=True)
