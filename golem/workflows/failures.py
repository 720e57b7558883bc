"""One table from a Temporal failure to golem's exception, for everyone who reads one.

    error = await golem_error(exc.cause, run_id, evidence)   # None: not a failure golem set
    if error is not None:
        raise error from None

``FAILURES`` maps the ``ApplicationError`` types golem's workflows and converter set to the
exception a caller gets; a failed run's ``GolemRunError`` (and a cancelled run's memo)
becomes its ``RunError``, with the evidence the reader can rebuild. Three readers share it:
the client's runs (``DurableRun``, ``fetch_run``), a conversation's turns and updates
(``DurableConversation``) and ``run_agent``'s child runs (workflow code: this module imports
no client). What golem did not set (a termination, a timeout, an update refused by a
validator without a type) is the reader's to word, for it knows what failed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from temporalio.exceptions import ApplicationError, CancelledError, TerminatedError

from golem.errors import ConversationClosedError, RunIdInUseError, UnknownAgentError
from golem.messages import Message
from golem.results import RunError
from golem.wire import Failed, RunReport
from golem.worker.converter import BAD_PAYLOAD, DECRYPTION_ERROR, STORAGE_ERROR, UNREADABLE
from golem.workflows.approvals import CANNOT_PAUSE, INVALID_DECISION, NOT_PAUSED
from golem.workflows.registry import UNKNOWN_AGENT
from golem.workflows.report import run_failure
from golem.workflows.turn_runs import (
    CLOSED,
    CONTINUING,
    RECORDED,
    RUN_ID_IN_USE,
    TURN_DIFFERS,
    WAITING,
)

__all__ = [
    "FAILURES",
    "NOT_PAUSED",
    "CannotPause",
    "ConversationClosedError",
    "Evidence",
    "RunIdInUseError",
    "TurnContinuing",
    "TurnRecorded",
    "UnknownAgentError",
    "golem_error",
]


class CannotPause(Exception):
    """The worker refused ``golem.outcome``: the run's agent never pauses."""


class TurnContinuing(Exception):
    """The conversation drains its turns before it continues as new: send the turn again."""


class TurnRecorded(Exception):
    """A turn by that run id ran already (a send retried after continue-as-new)."""


def _plain(kind: Callable[[str], Exception]) -> Callable[[str, str], Exception]:
    return lambda message, _run_id: kind(message)


#: ``ApplicationError.type`` -> golem's exception, given the failure's message and run id.
FAILURES: dict[str, Callable[[str, str], Exception]] = {
    UNKNOWN_AGENT: _plain(UnknownAgentError),
    BAD_PAYLOAD: lambda message, run_id: RunError(
        "history", f"run {run_id} could not read its input: {message}"
    ),
    DECRYPTION_ERROR: lambda message, run_id: RunError(
        "codec", f"run {run_id} could not be read by its worker: {message}"
    ),
    STORAGE_ERROR: lambda message, run_id: RunError(
        "storage", f"run {run_id} could not be read by its worker: {message}"
    ),
    CLOSED: _plain(ConversationClosedError),
    WAITING: _plain(ValueError),
    NOT_PAUSED: _plain(ValueError),
    INVALID_DECISION: _plain(ValueError),
    CANNOT_PAUSE: _plain(CannotPause),
    CONTINUING: _plain(TurnContinuing),
    RECORDED: _plain(TurnRecorded),
    RUN_ID_IN_USE: _plain(RunIdInUseError),
    TURN_DIFFERS: _plain(ValueError),
}

#: Rebuilds a failed run's evidence (its messages) from what its failure carries, as far as
#: the reader can (``None``: it cannot, e.g. the evidence is paged and no query reaches it).
Evidence = Callable[[RunReport], Awaitable[list[Message] | None]]


async def golem_error(
    cause: BaseException | None,
    run_id: str = "",
    evidence: Evidence | None = None,
    memo: Callable[[], Awaitable[Any]] | None = None,
) -> Exception | None:
    """golem's exception for ``cause`` (a ``WorkflowFailureError``'s, a
    ``ChildWorkflowError``'s or a ``WorkflowUpdateFailedError``'s), or ``None`` when golem
    did not set it. ``memo`` reads a cancelled run's failure memo, where the client can."""
    if isinstance(cause, CancelledError):
        raw = await memo() if memo is not None else None
        if raw is None:
            when = " before it started" if memo is not None else ""
            return RunError("canceled", f"run {run_id} was cancelled{when}")
        return await _run_error(Failed.model_validate(raw), evidence)
    details = run_failure(cause)
    if details is not None:
        return await _run_error(details, evidence)
    if isinstance(cause, ApplicationError) and cause.type in FAILURES:
        return FAILURES[cause.type](cause.message, run_id)
    if (ended := _ended_unreadable(cause)) is not None:
        return FAILURES[ended[0]](ended[1], run_id)
    return None


def _ended_unreadable(cause: BaseException | None) -> tuple[str, str] | None:
    """``(type, message)`` of a run a worker terminated because it could not read it
    mid-replay (golem.worker.unreadable puts golem's failure in the details)."""
    if not isinstance(cause, TerminatedError) or not cause.details:
        return None
    found = cause.details[0]
    failure = found.get("golemFailure") if isinstance(found, dict) else None
    if not isinstance(failure, dict) or failure.get("type") not in UNREADABLE:
        return None
    return str(failure["type"]), str(failure.get("message", ""))


async def _run_error(details: Failed, evidence: Evidence | None) -> RunError:
    report = details.evidence
    messages = await evidence(report) if report and evidence else None
    partial = report.partial(messages) if report and messages is not None else None
    return RunError(details.stage, details.message, partial)
