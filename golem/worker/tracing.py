"""OpenTelemetry traces of durable runs: one span per run, per model request, per tool call.

    provider = create_tracer_provider(resource=service_resource("golem-worker"))  # replay-safe
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    client = await Client.connect("localhost:7233", plugins=[GolemPlugin(agent, tracing=True)])

Temporal's own ``OpenTelemetryInterceptor`` carries the caller's trace context from the
client into the workflow and from the workflow into every activity attempt (the context
rides the activity's headers, so a retry on another worker joins the same trace). golem's
interceptors add spans named and attributed after the OpenTelemetry GenAI semantic
conventions. The run span lives in workflow code: the replay-safe tracer provider gives it
an id from the workflow's deterministic random and drops it while history replays, so a
replayed run neither changes ids nor emits a second span.

A provider golem installs itself (``GOLEM_TRACING=1``) names its service ``golem-worker``
(a plugin that serves agents) or ``golem-client`` (``GolemPlugin()`` with none), unless
``OTEL_SERVICE_NAME`` or ``OTEL_RESOURCE_ATTRIBUTES`` names one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import opentelemetry.context
from opentelemetry import baggage, trace
from opentelemetry.sdk.resources import SERVICE_NAME, OTELResourceDetector, Resource
from opentelemetry.trace import SpanKind, Status, StatusCode
from temporalio import activity, workflow
from temporalio.contrib.opentelemetry import (
    OpenTelemetryInterceptor,
    ReplaySafeTracerProvider,
    create_tracer_provider,
)
from temporalio.exceptions import ApplicationError, FailureError
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    ExecuteWorkflowInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

from golem.wire import names
from golem.workflows import registry

#: ``1``/``true`` turns tracing on, ``0``/``false`` off; unset: on when a provider is set.
ENV_VAR = "GOLEM_TRACING"
TRACER = "golem"
#: ``service.name`` of a worker's spans (a plugin serving agents) and of a client's.
WORKER_SERVICE = "golem-worker"
CLIENT_SERVICE = "golem-client"

# GenAI semantic conventions (https://opentelemetry.io/docs/specs/semconv/gen-ai/).
OPERATION = "gen_ai.operation.name"
SYSTEM = "gen_ai.system"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
AGENT_NAME = "gen_ai.agent.name"
CONVERSATION = "gen_ai.conversation.id"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
ERROR_TYPE = "error.type"
# golem's own: the ids a client gets back, and which activity attempt a span is.
RUN_ID = "golem.run_id"
CONVERSATION_ID = "golem.conversation_id"
TURN = "golem.turn"
ATTEMPT = "golem.attempt"
TOOL_STATUS = "golem.tool.status"


def tracing_wanted(setting: bool | None, environ: Mapping[str, str] | None = None) -> bool:
    """``setting`` if given, else ``GOLEM_TRACING``, else whether a replay-safe provider is set."""
    if setting is not None:
        return setting
    value = (os.environ if environ is None else environ).get(ENV_VAR, "").strip().lower()
    if value:
        if value not in ("1", "true", "yes", "on", "0", "false", "no", "off"):
            raise ValueError(f"{ENV_VAR}={value!r}: use 1/true/on or 0/false/off")
        return value in ("1", "true", "yes", "on")
    return isinstance(trace.get_tracer_provider(), ReplaySafeTracerProvider)


def service_resource(service_name: str) -> Resource:
    """The resource of ``OTEL_RESOURCE_ATTRIBUTES`` / ``OTEL_SERVICE_NAME``; its
    ``service.name`` is ``service_name`` when neither names one."""
    if OTELResourceDetector().detect().attributes.get(SERVICE_NAME):
        return Resource.create()
    return Resource.create({SERVICE_NAME: service_name})


def ensure_tracer_provider(service_name: str = WORKER_SERVICE) -> None:
    """Make sure the global tracer provider is one Temporal workflows can use.

    None set yet: install ``create_tracer_provider()`` for ``service_resource(service_name)``,
    exporting over OTLP/HTTP when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``..._TRACES_ENDPOINT``)
    names a collector.
    """
    current = trace.get_tracer_provider()
    if isinstance(current, ReplaySafeTracerProvider):
        return
    if not isinstance(current, trace.ProxyTracerProvider):
        raise ValueError(
            f"the global tracer provider is a {type(current).__name__}; durable runs need a "
            "replay-safe one: build it with temporalio.contrib.opentelemetry."
            "create_tracer_provider() and add your span processors to it"
        )
    provider = create_tracer_provider(resource=service_resource(service_name))
    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    ):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)


def interceptors(temporal_spans: bool = False) -> list[Any]:
    """Temporal's OpenTelemetry interceptor (context propagation; its own spans when
    ``temporal_spans``), then golem's spans inside it."""
    return [OpenTelemetryInterceptor(add_temporal_spans=temporal_spans), GolemTracingInterceptor()]


def _tracer() -> trace.Tracer:
    return trace.get_tracer(TRACER)  # looked up per span: the provider may be set after import


def _fail(span: trace.Span, exc: BaseException) -> None:
    kind = exc.type if isinstance(exc, ApplicationError) and exc.type else type(exc).__name__
    message = exc.message if isinstance(exc, FailureError) else str(exc)
    span.set_attribute(ERROR_TYPE, kind)
    span.set_status(Status(StatusCode.ERROR, message))


@contextmanager
def _span(name: str, kind: SpanKind, attributes: Mapping[str, Any]) -> Iterator[trace.Span]:
    """A current span whose failure is golem's error type and message, not a stack trace."""
    with _tracer().start_as_current_span(
        name,
        kind=kind,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield span
        except BaseException as exc:
            _fail(span, exc)
            raise


class GolemTracingInterceptor(Interceptor):
    """Spans for golem's runs (in the workflow) and its model and tool activities."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _ActivitySpans(next)

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor]:
        return _RunSpan


class _RunSpan(WorkflowInboundInterceptor):
    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        info = workflow.info()
        run_input = input.args[0] if input.args else None
        run = getattr(run_input, "run", None)
        if info.workflow_type != names.AGENT_RUN_WORKFLOW or run is None:
            return await super().execute_workflow(input)
        agent: str = run_input.agent  # type: ignore[union-attr]
        run_id = run.run_id or info.workflow_id
        # Baggage carries the ids into every activity's context, through Temporal's headers.
        context = baggage.set_baggage(RUN_ID, run_id)
        context = baggage.set_baggage(CONVERSATION_ID, run.conversation_id, context)
        token = opentelemetry.context.attach(context)
        try:
            attributes = {
                OPERATION: "invoke_agent",
                AGENT_NAME: agent,
                RUN_ID: run_id,
                CONVERSATION_ID: run.conversation_id,
                CONVERSATION: run.conversation_id,
            }
            with _span(f"invoke_agent {agent}", SpanKind.INTERNAL, attributes) as span:
                try:
                    output = await super().execute_workflow(input)
                except BaseException as exc:
                    if not workflow.is_failure_exception(exc):
                        # A failed workflow task is retried: recorded, the span waits for it.
                        span.record_exception(exc)
                    raise
                usage = output.usage
                span.set_attribute(INPUT_TOKENS, usage.input_tokens)
                span.set_attribute(OUTPUT_TOKENS, usage.output_tokens)
                return output
        finally:
            opentelemetry.context.detach(token)


class _ActivitySpans(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        if info.activity_type == names.MODEL_REQUEST:
            return await self._model_request(input)
        if info.activity_type == names.TOOL:
            return await self._tool(input)
        return await super().execute_activity(input)

    def _common(self) -> dict[str, Any]:
        info = activity.info()
        conversation = str(baggage.get_baggage(CONVERSATION_ID) or "")
        return {
            RUN_ID: str(baggage.get_baggage(RUN_ID) or info.workflow_id or ""),
            CONVERSATION_ID: conversation,
            CONVERSATION: conversation,
            ATTEMPT: info.attempt,
        }

    async def _model_request(self, input: ExecuteActivityInput) -> Any:
        call = input.args[0]
        model_name = call.agent
        system = "_OTHER"
        try:
            agent = registry.lookup(activity.info().task_queue, call.agent)
            model_name = agent.model_name
            system = getattr(agent.model, "provider", "") or "_OTHER"
        except (LookupError, ValueError, TypeError):
            pass  # the activity itself reports an unknown agent or a bad model
        attributes = {
            OPERATION: "chat",
            SYSTEM: system,
            PROVIDER: system,
            REQUEST_MODEL: model_name,
            TURN: call.turn,
            **self._common(),
        }
        with _span(f"chat {model_name}", SpanKind.CLIENT, attributes) as span:
            response = await super().execute_activity(input)
            span.set_attribute(RESPONSE_MODEL, response.model_name or model_name)
            span.set_attribute(FINISH_REASONS, [response.finish_reason])
            span.set_attribute(INPUT_TOKENS, response.usage.input_tokens)
            span.set_attribute(OUTPUT_TOKENS, response.usage.output_tokens)
            return response

    async def _tool(self, input: ExecuteActivityInput) -> Any:
        call = input.args[0]
        attributes = {
            OPERATION: "execute_tool",
            TOOL_NAME: call.call.name,
            TOOL_CALL_ID: call.call.id,
            TURN: call.turn,
            **self._common(),
        }
        attributes[CONVERSATION_ID] = attributes[CONVERSATION] = call.conversation_id
        with _span(f"execute_tool {call.call.name}", SpanKind.INTERNAL, attributes) as span:
            outcome = await super().execute_activity(input)
            span.set_attribute(TOOL_STATUS, outcome.status)
            if outcome.status == "failed":
                span.set_attribute(ERROR_TYPE, "tool_failed")
                span.set_status(Status(StatusCode.ERROR, "the tool reported a failure"))
            return outcome
