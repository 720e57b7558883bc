"""One table from a Temporal failure to golem's exception, for everyone who reads one.

    raise failure_error(error, details)                      # a workflow fails a run for good
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
from golem.wire import names
from golem.wire.runs import Failed, RunReport

#: The failures of a worker that cannot read a run's payloads (a key it lacks, a damaged blob).
UNREADABLE = (names.DECRYPTION_ERROR, names.STORAGE_ERROR)


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
    names.UNKNOWN_AGENT: _plain(UnknownAgentError),
    names.BAD_PAYLOAD: lambda message, run_id: RunError(
        "history", f"run {run_id} could not read its input: {message}"
    ),
    names.DECRYPTION_ERROR: lambda message, run_id: RunError(
        "codec", f"run {run_id} could not be read by its worker: {message}"
    ),
    names.STORAGE_ERROR: lambda message, run_id: RunError(
        "storage", f"run {run_id} could not be read by its worker: {message}"
    ),
    names.CONVERSATION_CLOSED: _plain(ConversationClosedError),
    names.APPROVALS_WAITING: _plain(ValueError),
    names.NOT_PAUSED: _plain(ValueError),
    names.INVALID_DECISION: _plain(ValueError),
    names.CANNOT_PAUSE: _plain(CannotPause),
    names.CONVERSATION_CONTINUING: _plain(TurnContinuing),
    names.TURN_RECORDED: _plain(TurnRecorded),
    names.RUN_ID_IN_USE: _plain(RunIdInUseError),
    names.TURN_DIFFERS: _plain(ValueError),
}


def failure_error(error: RunError | str, details: Failed) -> ApplicationError:
    """The exception that fails the workflow for good."""
    return ApplicationError(str(error), details, type=names.RUN_ERROR, non_retryable=True)


def run_failure(error: BaseException | None) -> Failed | None:
    """The ``Failed`` details a failed run's error carries, if it is a ``RunError``'s."""
    if isinstance(error, ApplicationError) and error.type == names.RUN_ERROR and error.details:
        return Failed.model_validate(error.details[0])
    return None


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
    failure = found.get(names.FAILURE_MEMO) if isinstance(found, dict) else None
    if not isinstance(failure, dict) or failure.get("type") not in UNREADABLE:
        return None
    return str(failure["type"]), str(failure.get("message", ""))


async def _run_error(details: Failed, evidence: Evidence | None) -> RunError:
    report = details.evidence
    messages = await evidence(report) if report and evidence else None
    partial = report.partial(messages) if report and messages is not None else None
    return RunError(details.stage, details.message, partial)
