"""A run whose payloads this worker cannot read ends at once, named, even mid-replay
(golem's workflow runner, ``golem.worker.runner``, applies this to every activation).

A worker without a run's key (or with another one), or whose store cannot give back a
blob the run's history names, fails the run's workflow: golem's converter raises a
non-retryable ``GolemDecryptionError`` or ``GolemStoredPayloadUnreadable`` and the SDK
answers the task with "fail the workflow". On a run's first task that ends it. A worker
that takes a run over mid-way replays its history first, and there the same command
conflicts with what the history recorded: the SDK reports a nondeterminism error and
retries the task for ever. golem's runner sees that case (a replaying activation whose
answer is that failure) and instead fails the task with the plain reason, then
terminates the run through the worker's client with golem's failure as the details
(plain JSON: this worker may hold no key), which a reader turns into the same
``RunError`` (docs/adr/0022-unreadable-runs-end.md).
"""

from __future__ import annotations

import json

from temporalio.api.common.v1 import Payload, Payloads, WorkflowExecution
from temporalio.api.failure.v1 import Failure
from temporalio.api.workflowservice.v1 import TerminateWorkflowExecutionRequest
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.client import Client

from golem.wire import names
from golem.wire.failures import UNREADABLE


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


def failed_task(
    completion: WorkflowActivationCompletion, message: str, kind: str
) -> WorkflowActivationCompletion:
    """``completion``'s run's task failed with ``message`` (non-retryable ``kind``)."""
    failed = WorkflowActivationCompletion(run_id=completion.run_id)
    failed.failed.failure.message = message
    failed.failed.failure.application_failure_info.type = kind
    failed.failed.failure.application_failure_info.non_retryable = True
    return failed


def termination(
    client: Client, workflow_id: str, run_id: str, kind: str, message: str
) -> TerminateWorkflowExecutionRequest:
    """The request that terminates run ``run_id`` with golem's failure as its details."""
    failure = json.dumps({names.FAILURE_MEMO: {"type": kind, "message": message}}).encode()
    # Plain JSON, never sealed: its reader may hold the key this worker lacks.
    details = Payloads(payloads=[Payload(metadata={"encoding": b"json/plain"}, data=failure)])
    return TerminateWorkflowExecutionRequest(
        namespace=client.namespace,
        workflow_execution=WorkflowExecution(workflow_id=workflow_id, run_id=run_id),
        reason=message,
        details=details,
        identity=client.identity,
    )
