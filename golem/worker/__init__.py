"""The worker side: ``GolemPlugin`` registers golem's workflows and activities.

plugin = GolemPlugin(support_agent, research_agent)
client = await Client.connect("localhost:7233", plugins=[plugin])
worker = Worker(client, task_queue="golem")   # the plugin reaches the worker too
await worker.run()

``encryption_key=`` (or ``GOLEM_ENCRYPTION_KEY``) encrypts every payload (golem.worker.codec);
``external_storage=`` (or ``GOLEM_STORAGE_DIR``) stores large ones outside history (golem.storage);
``tracing=True`` (or ``GOLEM_TRACING=1``, or a replay-safe tracer provider already set)
traces runs (golem.worker.tracing). Both need the plugin on the Client.
``deployment=("support", "v2")`` makes the worker that version of a Worker Deployment
(golem.worker.deployment, docs/adr/0020-versioned-deploys.md).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from temporalio.converter import DataConverter, ExternalStorage, PayloadCodec
from temporalio.plugin import SimplePlugin
from temporalio.worker import (
    Interceptor,
    ReplayerConfig,
    UnsandboxedWorkflowRunner,
    Worker,
    WorkerConfig,
)
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from golem.activities import PAYLOAD_LIMIT, activities
from golem.agent import Agent
from golem.delegation import reachable
from golem.messages import HistoryError
from golem.results import RunError
from golem.storage import storage_from_env
from golem.wire.cache import MessageCache
from golem.wire.converter import GolemEncodedFailureConverter, golem_data_converter
from golem.worker import deployment as deployments
from golem.worker.logs import RunLogInterceptor, install_activity_failure_filter
from golem.worker.runner import ContextsRead, GolemRunner
from golem.worker.watchdog import worker_watchdog
from golem.workflows import registry
from golem.workflows.agent_run import AgentRunWorkflow
from golem.workflows.conversation import ConversationWorkflow

__all__ = ["PASSTHROUGH_MODULES", "Deployment", "EncryptionKey", "GolemPlugin", "golem_converter"]

Deployment = deployments.Deployment

#: Raw 32 bytes, ``"id:base64[,id:base64...]"`` (first encrypts), or a codec of your own.
EncryptionKey = bytes | str | PayloadCodec


def golem_converter(
    encryption_key: EncryptionKey | None = None, external_storage: ExternalStorage | None = None
) -> DataConverter:
    """golem's data converter; encrypting when a key is given or ``GOLEM_ENCRYPTION_KEY`` is set,
    storing large payloads when ``external_storage`` is given or ``GOLEM_STORAGE_DIR`` is set
    (encrypted first: the store holds ciphertext).

    Encrypted, failures carry their message and stack trace as an encrypted payload too."""
    codec = _codec(encryption_key)
    storage = external_storage if external_storage is not None else storage_from_env()
    if storage is not None and storage.payload_size_threshold > PAYLOAD_LIMIT:
        raise ValueError(
            f"ExternalStorage(payload_size_threshold={storage.payload_size_threshold}) is over "
            f"Temporal's payload limit ({PAYLOAD_LIMIT} bytes): payloads between would fail"
        )
    if codec is None:
        return dataclasses.replace(golem_data_converter, external_storage=storage)
    return dataclasses.replace(
        golem_data_converter,
        payload_codec=codec,
        failure_converter_class=GolemEncodedFailureConverter,
        external_storage=storage,
    )


def _codec(encryption_key: EncryptionKey | None) -> PayloadCodec | None:
    if isinstance(encryption_key, PayloadCodec):
        return encryption_key
    if encryption_key is None and not os.environ.get("GOLEM_ENCRYPTION_KEY", "").strip():
        return None
    try:
        from golem.worker.codec import EncryptionCodec
    except ImportError as exc:
        raise ImportError(
            f"encryption needs the cryptography package: pip install 'golem-temporal[encryption]' "
            f"({exc})"
        ) from None
    if encryption_key is None:
        return EncryptionCodec.from_env()
    return EncryptionCodec.parse(encryption_key)


def _tracing_interceptors(setting: bool | None, serves_agents: bool) -> list[Any]:
    if setting is False:
        return []
    try:
        from golem.worker import tracing
    except ImportError as exc:
        wanted = os.environ.get("GOLEM_TRACING", "").strip().lower()
        if setting or wanted in ("1", "true", "yes", "on"):
            raise ImportError(
                f"tracing needs OpenTelemetry: pip install 'golem-temporal[tracing]' ({exc})"
            ) from None
        return []
    if not tracing.tracing_wanted(setting):
        return []
    tracing.ensure_tracer_provider(
        tracing.WORKER_SERVICE if serves_agents else tracing.CLIENT_SERVICE
    )
    return tracing.interceptors()


#: Imported once, outside the workflow sandbox: golem's loop is deterministic by design
#: and the agents a worker serves must be the very objects the plugin was given.
PASSTHROUGH_MODULES = ("golem", "pydantic", "pydantic_core", "annotated_types", "httpx", "uuid6")

#: Temporal's ``nonsticky_to_sticky_poll_ratio``, and the one a golem worker polls with
#: unless its Worker is given another (docs/adr/0049-polling-new-runs.md).
SDK_POLL_RATIO = 0.2
POLL_RATIO = 0.5


class GolemPlugin(SimplePlugin):
    """Serve ``agents`` durably, and every agent they delegate or hand off to (nested). Put
    it on the Client (it reaches the Worker) or the Worker.

    ``heartbeat_timeout`` bounds how long a crashed worker's model or tool call goes
    unnoticed; ``sticky_schedule_to_start_timeout`` how long a workflow waits for a
    crashed worker's sticky queue before another worker takes it; new messages up to
    ``inline_messages_bytes`` ride a model call's input, larger ones are read through a
    query so history grows with content only once (0: always query). ``message_cache``
    is the worker's cache of those messages (its own new one unless given). The worker
    gives its task queue, where each turn's new run starts, 2 of its 5 workflow pollers
    and its sticky queue 3 (``nonsticky_to_sticky_poll_ratio`` 0.5; Temporal's 0.2 gives
    1 and 4) unless the Worker is given another ratio.

    ``encryption_key`` encrypts every payload with AES-256-GCM (``None``: from
    ``GOLEM_ENCRYPTION_KEY``, off when unset); ``external_storage`` puts payloads over its
    threshold in a store, history keeping a reference (``None``: a ``LocalDirectory`` at
    ``GOLEM_STORAGE_DIR``, off when unset); ``tracing`` adds OpenTelemetry spans
    (``None``: from ``GOLEM_TRACING``, else on when a replay-safe provider is set).

    ``deployment`` (``(deployment name, build id)``) makes each worker that version of a
    Worker Deployment, golem's workflows PINNED to it (a ``deployment_config`` given to the
    Worker does the same); each version's workers belong in their own process.

    ``sandboxed=False`` runs every workflow of the worker without Temporal's sandbox: less
    worker CPU per workflow task (``benchmarks/sandbox.py``), and no guard against
    non-deterministic workflow code. golem's own workflow code is deterministic by design
    and user code runs in activities, but a workflow of your own on the same worker loses
    the guard too (docs/adr/0038-the-sandbox-off.md).
    """

    def __init__(
        self,
        *agents: Agent[Any, Any],
        heartbeat_timeout: timedelta = registry.HEARTBEAT_TIMEOUT,
        sticky_schedule_to_start_timeout: timedelta = timedelta(seconds=1),
        inline_messages_bytes: int = registry.INLINE_MESSAGES_BYTES,
        message_cache: MessageCache | None = None,
        encryption_key: EncryptionKey | None = None,
        tracing: bool | None = None,
        external_storage: ExternalStorage | None = None,
        deployment: Deployment | None = None,
        sandboxed: bool = True,
    ) -> None:
        names = [a.name for a in agents]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"GolemPlugin: two agents share the name(s) {duplicates}")
        self.agents = reachable(agents)  # and every agent they delegate or hand off to
        self.settings = registry.WorkerSettings(heartbeat_timeout, inline_messages_bytes)
        #: The Worker Deployment version each worker is, unless its own config says one.
        self.deployment = None if deployment is None else deployments.deployment_version(deployment)
        self.sticky_schedule_to_start_timeout = sticky_schedule_to_start_timeout
        #: This worker's own cache of running workflows' model-request messages.
        self.message_cache = message_cache if message_cache is not None else MessageCache()
        self.converter = golem_converter(encryption_key, external_storage)
        tracing_interceptors = _tracing_interceptors(tracing, bool(agents))
        self.tracing = bool(tracing_interceptors)
        self.sandboxed = sandboxed
        """Whether workflows run in Temporal's sandbox (the default; ``False`` by choice)."""
        passthrough = (
            (*PASSTHROUGH_MODULES, "opentelemetry") if self.tracing else PASSTHROUGH_MODULES
        )
        install_activity_failure_filter()  # a failed tool call is one log line, not a stack dump
        self.mcp, mcp_interceptors = _mcp(self.agents, self.message_cache)
        super().__init__(
            "golem",
            data_converter=self.converter,
            interceptors=[RunLogInterceptor(), *tracing_interceptors, *mcp_interceptors],
            activities=activities(self.message_cache),
            workflows=[AgentRunWorkflow, ConversationWorkflow],
            # A run this worker cannot read ends, even mid-replay; a stopped worker's cached
            # runs are evicted on their own loops (golem.worker.runner).
            workflow_runner=lambda existing: GolemRunner(
                _sandbox(existing, passthrough) if sandboxed else UnsandboxedWorkflowRunner()
            ),
            # A bad input or a run's own failure must fail the workflow, not retry its task.
            workflow_failure_exception_types=[RunError, HistoryError, LookupError],
            run_context=worker_watchdog,  # one warning naming a tool that blocks the loop
        )

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        config = super().configure_worker(config)
        if self.converter.payload_codec and not config["client"].data_converter.payload_codec:
            # A worker writes with its client's converter: on the Worker alone nothing is sealed.
            raise ValueError(
                "GolemPlugin(encryption_key=...) must be on the Client (Client.connect(..., "
                "plugins=[plugin])): a worker writes payloads with its client's data converter"
            )
        if self.converter.external_storage and not config["client"].data_converter.external_storage:
            raise ValueError(
                "GolemPlugin(external_storage=...) must be on the Client, as encryption: a "
                "worker writes payloads with its client's data converter"
            )
        if isinstance(runner := config.get("workflow_runner"), GolemRunner):
            runner.client = config["client"]
            runner.reads = ContextsRead.of(config["client"].data_converter)
        config = deployments.configure(config, self.deployment)
        registry.register(config["task_queue"], self.agents, _stored(self.settings, config))
        config["sticky_queue_schedule_to_start_timeout"] = self.sticky_schedule_to_start_timeout
        # Each turn is a new run whose first task waits on the task queue, which the SDK's
        # ratio gives 1 poller of 5: the turns' tail (ADR 0049). A ratio given is kept.
        if config.get("nonsticky_to_sticky_poll_ratio", SDK_POLL_RATIO) == SDK_POLL_RATIO:
            config["nonsticky_to_sticky_poll_ratio"] = POLL_RATIO
        return self.mcp.configure_worker(config) if self.mcp else config

    async def run_worker(self, worker: Worker, next: Callable[[Worker], Awaitable[None]]) -> None:
        try:
            with deployments.serving(worker.task_queue):
                if self.mcp is None:
                    return await super().run_worker(worker, next)
                # The MCP servers this worker started are closed when it stops.
                own = super().run_worker
                await self.mcp.run_worker(worker, lambda w: own(w, next))
        finally:
            if isinstance(
                runner := worker.config(active_config=True).get("workflow_runner"), GolemRunner
            ):
                await runner.evict_remaining()  # the SDK leaves idle cached runs unevicted

    def configure_replayer(self, config: ReplayerConfig) -> ReplayerConfig:
        config = super().configure_replayer(config)
        if isinstance(runner := config.get("workflow_runner"), GolemRunner):
            runner.reads = ContextsRead.of(config["data_converter"])
        registry.register(registry.ANY_TASK_QUEUE, self.agents, _stored(self.settings, config))
        return self.mcp.configure_replayer(config) if self.mcp else config


def _stored(settings: registry.WorkerSettings, config: Any) -> registry.WorkerSettings:
    """``settings`` with the threshold of the external storage the worker writes with, and
    whether the worker is a version of a Worker Deployment."""
    client = config.get("client")
    converter = client.data_converter if client else config.get("data_converter")
    storage = converter.external_storage if converter else None
    threshold = storage.payload_size_threshold if storage else None
    deployment = config.get("deployment_config")
    versioned = deployment is not None and deployment.use_worker_versioning
    return dataclasses.replace(settings, stored_bytes=threshold, versioned=versioned)


def _mcp(
    agents: list[Agent[Any, Any]], cache: MessageCache
) -> tuple[SimplePlugin | None, list[Interceptor]]:
    """``temporalio.mcp``'s plugin for the agents' MCP servers, and golem's interceptor for
    their activities; ``(None, [])`` without toolsets (the mcp SDK is then never imported)."""
    if not any(agent.toolsets for agent in agents):
        return None, []
    from golem.mcp.server import INSTALL

    try:
        from golem.worker.mcp import MCPHeartbeats, mcp_plugin, servers_of
    except ImportError as exc:
        raise ImportError(f"{INSTALL} ({exc})") from None
    return mcp_plugin(agents), [MCPHeartbeats(list(servers_of(agents)), cache)]


def _sandbox(existing: Any, passthrough: tuple[str, ...]) -> SandboxedWorkflowRunner:
    if isinstance(existing, GolemRunner):
        existing = existing.inner
    if isinstance(existing, SandboxedWorkflowRunner):
        restrictions = existing.restrictions
    else:
        restrictions = SandboxRestrictions.default
    return SandboxedWorkflowRunner(restrictions=restrictions.with_passthrough_modules(*passthrough))
