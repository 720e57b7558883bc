"""A run whose payloads this worker cannot read ends at once, named, even mid-replay.

    runner = EndingUnreadableRuns(SandboxedWorkflowRunner(...))   # GolemPlugin does this
    runner.client = client                                        # its worker's client

A worker without a run's key (or with another one), or whose store cannot give back a
blob the run's history names, fails the run's workflow: golem's converter raises a
non-retryable ``GolemDecryptionError`` or ``GolemStoredPayloadUnreadable`` and the SDK
answers the task with "fail the workflow". On a run's first task that ends it. A worker
that takes a run over mid-way replays its history first, and there the same command
conflicts with what the history recorded: the SDK reports a nondeterminism error and
retries the task for ever. This runner sees that case (a replaying activation whose
answer is that failure) and instead fails the task with the plain reason, then
terminates the run through the worker's client with golem's failure as the details
(plain JSON: this worker may hold no key), which a reader turns into the same
``RunError`` (docs/adr/0022-unreadable-runs-end.md).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from temporalio.api.common.v1 import Payload, Payloads, WorkflowExecution
from temporalio.api.failure.v1 import Failure
from temporalio.api.workflowservice.v1 import TerminateWorkflowExecutionRequest
from temporalio.bridge.proto.workflow_activation import WorkflowActivation
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.client import Client
from temporalio.worker import (
    WorkflowInstance,
    WorkflowInstanceDetails,
    WorkflowRunner,
)
from temporalio.workflow import _Definition

from golem.wire import names
from golem.wire.failures import UNREADABLE

logger = logging.getLogger("golem.worker")


def unreadable_failure(completion: WorkflowActivationCompletion) -> tuple[str, str] | None:
    """``(type, message)`` when ``completion`` fails the workflow for a payload this worker
    cannot read (a key it lacks, a damaged blob)."""
    for command in completion.successful.commands:
        if command.HasField("fail_workflow_execution"):
            return _boundary(command.fail_workflow_execution.failure)
    return None


def _boundary(failure: Failure) -> tuple[str, str] | None:
    kind = failure.application_failure_info.type
    if kind not in UNREADABLE:
        return None
    message = failure.message
    if failure.HasField("encoded_attributes"):  # moved there by an encrypting converter
        attributes = json.loads(failure.encoded_attributes.data or b"{}")
        message = attributes.get("message", message) if isinstance(attributes, dict) else message
    return kind, message


class EndingUnreadableRuns(WorkflowRunner):
    """A ``WorkflowRunner`` around ``inner`` whose instances end a run they cannot read
    mid-replay (terminated, golem's failure as its details) instead of retrying its task."""

    def __init__(self, inner: WorkflowRunner) -> None:
        self.inner = inner
        self.client: Client | None = None
        """The worker's client (set by ``GolemPlugin.configure_worker``; a replayer has none)."""
        self._ending: set[str] = set()  # run ids whose termination was sent
        self._tasks: set[asyncio.Task[None]] = set()

    def prepare_workflow(self, defn: _Definition) -> None:
        self.inner.prepare_workflow(defn)

    def set_worker_level_failure_exception_types(self, types: Any) -> None:
        self.inner.set_worker_level_failure_exception_types(types)

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        loop = asyncio.get_running_loop()  # the worker's: instances activate on threads
        return _Ending(self.inner.create_instance(det), self, loop)

    def end(self, workflow_id: str, run_id: str, kind: str, message: str) -> None:
        """Terminate run ``run_id`` of ``workflow_id`` with golem's failure (once)."""
        if self.client is None or run_id in self._ending:
            return
        self._ending.add(run_id)
        client = self.client
        failure = json.dumps({names.FAILURE_MEMO: {"type": kind, "message": message}}).encode()
        # Plain JSON, never sealed: its reader may hold the key this worker lacks.
        details = Payloads(payloads=[Payload(metadata={"encoding": b"json/plain"}, data=failure)])
        request = TerminateWorkflowExecutionRequest(
            namespace=client.namespace,
            workflow_execution=WorkflowExecution(workflow_id=workflow_id, run_id=run_id),
            reason=message,
            details=details,
            identity=client.identity,
        )
        logger.error("ending run %s: %s", workflow_id, message)

        async def terminate() -> None:
            try:
                await client.workflow_service.terminate_workflow_execution(request)
            except Exception:  # it ended meanwhile, or the server is away: the task says why
                logger.exception("could not end run %s", workflow_id)
                self._ending.discard(run_id)

        task = asyncio.ensure_future(terminate())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


class _Ending(WorkflowInstance):
    def __init__(
        self, inner: WorkflowInstance, runner: EndingUnreadableRuns, loop: asyncio.AbstractEventLoop
    ) -> None:
        self._inner = inner
        self._runner = runner
        self._loop = loop

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        completion = self._inner.activate(act)
        found = unreadable_failure(completion) if act.is_replaying else None
        if found is None:
            return completion
        kind, message = found
        # Failing the workflow mid-replay conflicts with the recorded history: fail the task
        # (its reason in the history, no retry loop once the run is terminated) and end it.
        failed = WorkflowActivationCompletion(run_id=completion.run_id)
        failed.failed.failure.message = message
        failed.failed.failure.application_failure_info.type = kind
        failed.failed.failure.application_failure_info.non_retryable = True
        info = self._inner.get_info()
        self._loop.call_soon_threadsafe(
            self._runner.end, info.workflow_id, info.run_id, kind, message
        )
        return failed

    def get_serialization_context(self, command_info: Any) -> Any:
        return self._inner.get_serialization_context(command_info)

    def get_external_store_context(self, command_info: Any) -> Any:
        return self._inner.get_external_store_context(command_info)

    def get_info(self) -> Any:
        return self._inner.get_info()

    def __getattr__(self, name: str) -> Any:  # get_thread_id and the rest the worker asks
        return getattr(self._inner, name)
