"""Worker logging through standard ``logging`` (logger ``golem.worker``).

One line when a run starts and one when it ends (agent, run id, conversation id, turns,
tokens, outcome), from a workflow interceptor that ``GolemPlugin`` installs; a failed
model or tool call is one line, its traceback at DEBUG, instead of the SDK's stack dump.
"""

from __future__ import annotations

import logging
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError, CancelledError, FailureError
from temporalio.worker import (
    ExecuteWorkflowInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

from golem.wire import Completed, Failed, RunReport, names

logger = logging.getLogger("golem.worker")

_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"


def configure_logging(*, debug: bool = False) -> None:
    """The CLI's logging: golem's INFO lines (DEBUG and tracebacks with ``debug``)."""
    logging.basicConfig(format=_FORMAT, level=logging.DEBUG if debug else logging.WARNING)
    logging.getLogger("golem").setLevel(logging.DEBUG if debug else logging.INFO)


class RunLogInterceptor(Interceptor):
    """Log each agent run's start and end (never while a worker replays history)."""

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        return _RunLog


def _log(level: int, message: str) -> None:
    if not workflow.unsafe.is_replaying():
        logger.log(level, message)


def _counts(snapshot: RunReport | None) -> str:
    if snapshot is None:
        return "turns=0"
    usage = snapshot.usage
    return (
        f"turns={snapshot.requests} tool_calls={snapshot.tool_calls} "
        f"tokens={usage.input_tokens} in/{usage.output_tokens} out"
    )


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


class _RunLog(WorkflowInboundInterceptor):
    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        info = workflow.info()
        if info.workflow_type != names.AGENT_RUN_WORKFLOW or not input.args:
            return await super().execute_workflow(input)
        run_input = input.args[0]
        conversation = getattr(getattr(run_input, "run", None), "conversation_id", "") or "-"
        fields = (
            f"agent={getattr(run_input, 'agent', '?')} run={info.workflow_id} "
            f"conversation={conversation}"
        )
        _log(logging.INFO, f"run started: {fields}")
        try:
            output = await super().execute_workflow(input)
        except ApplicationError as exc:
            details = exc.details[0] if exc.details else None
            if isinstance(details, Failed):
                outcome = f"failed at {details.stage}: {_first_line(details.message)}"
                snapshot = details.evidence
            else:
                outcome, snapshot = f"failed: {_first_line(exc.message)}", None
            _log(logging.WARNING, f"run ended: {fields} outcome={outcome} {_counts(snapshot)}")
            raise
        except CancelledError:
            _log(logging.INFO, f"run ended: {fields} outcome=canceled")
            raise
        snapshot = output if isinstance(output, Completed) else None
        _log(logging.INFO, f"run ended: {fields} outcome=completed {_counts(snapshot)}")
        return output


class _OneLineActivityFailure(logging.Filter):
    """Turn the SDK's "Completing activity as failed" stack dump for golem's (and MCP) activities
    into one line; the traceback goes to ``golem.worker`` at DEBUG."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "__temporal_error_identifier", None) != "ActivityFailure":
            return True
        activity = getattr(record, "temporal_activity", None) or {}
        kind = str(activity.get("activity_type", ""))
        if not kind.startswith(("golem.", names.MCP_ACTIVITY_PREFIX)) or not record.exc_info:
            return True
        error = record.exc_info[1]
        text = error.message if isinstance(error, FailureError) else str(error)
        record.msg = (
            f"{kind} failed (run {activity.get('workflow_id')}, attempt "
            f"{activity.get('attempt')}): {_first_line(text)}"
        )
        record.args = ()
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("%s traceback", kind, exc_info=record.exc_info)
        record.exc_info = None
        record.exc_text = None
        return True


_FILTER = _OneLineActivityFailure()


def install_activity_failure_filter() -> None:
    """Idempotent: attach the one-line filter to the SDK's activity logger."""
    sdk = logging.getLogger("temporalio.activity")
    if _FILTER not in sdk.filters:
        sdk.addFilter(_FILTER)
