"""The exceptions a user catches (or raises in a tool), all in one place.

    from golem import RunError, ToolFailed
    try:
        result = await agent.run("Refund order 42")
    except RunError as err:
        err.stage, err.detail        # where and why: "tool", "refunds raised ..."
        err.partial                  # the evidence to resume from (None: nothing completed)

Inside a tool, ``ToolFailed`` records a failed result, ``ModelRetry`` asks the model again
and ``Canceled`` stops the run. A model adapter raises a ``ModelError`` (``ModelHTTPError``
and friends), which fails a run at stage ``model`` once its retries are spent; the durable
client raises ``UnknownAgentError``, ``RunIdInUseError``, ``ConversationClosedError`` and
``TurnNotTaken`` (a conversation did not take a turn within its recovery deadline) and
``WorkflowTaskFailing`` (what it waited on cannot go on: its workflow task fails).
``HistoryError`` (``load_messages``, ``validate_history``) and ``HistoryProcessorError`` are
the history layer's own, defined below this module and re-exported here.
Every other exception in golem is an implementation detail.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Literal, Protocol, get_args

from golem.history.processors import HistoryProcessorError
from golem.messages import HistoryError, Message, Usage
from golem.usage import Spent

__all__ = [
    "STAGES",
    "Canceled",
    "ConversationClosedError",
    "FallbackError",
    "HistoryError",
    "HistoryProcessorError",
    "ModelConnectionError",
    "ModelError",
    "ModelHTTPError",
    "ModelResponseError",
    "ModelRetry",
    "PartialResult",
    "RunError",
    "RunIdInUseError",
    "Stage",
    "ToolFailed",
    "TurnNotTaken",
    "UnknownAgentError",
    "WorkflowTaskFailing",
]

# -- a run that failed ---------------------------------------------------------------------

#: Where a run can fail. ``history`` and ``instructions`` fail before any model call;
#: ``codec``: a durable run's payloads could not be decrypted (a key is missing or wrong);
#: ``storage``: a stored payload could not be read back (missing, truncated, corrupted).
Stage = Literal[
    "history",
    "instructions",
    "model",
    "tool",
    "canceled",
    "usage",
    "loop",
    "decode",
    "codec",
    "storage",
]
STAGES: tuple[Stage, ...] = get_args(Stage)


class RunCounts(Protocol):
    """What a run counted, as its live state, its durable report and its ``Result`` hold it."""

    @property
    def run_id(self) -> str: ...
    @property
    def conversation_id(self) -> str: ...
    @property
    def usage(self) -> Usage: ...
    @property
    def requests(self) -> int: ...
    @property
    def tool_calls(self) -> int: ...
    @property
    def agent(self) -> str: ...
    @property
    def sub_runs(self) -> list[str]: ...
    @property
    def descendants(self) -> Spent: ...


@dataclass(frozen=True)
class PartialResult:
    """The evidence a failed run leaves: resume-ready history through its last completed step.

    A step is a model turn or a tool batch. A batch that failed is kept whole, every call
    answered: finished calls keep their results, the call whose tool raised gets a failed
    result naming the error, a call never started reads ``INTERRUPTED_RESULT`` and one that
    started but whose outcome was lost ``OUTCOME_UNKNOWN_RESULT``; so a resumed run needs no
    repair (docs/adr/0006-tool-batch-evidence.md). The one source the durable workflow's
    failure details are built from, too.
    """

    messages: list[Message]
    usage: Usage
    """Usage the completed model turns reported."""
    requests: int
    """Model request attempts, the failed one included."""
    tool_calls: int
    """Tool executions completed."""
    run_id: str
    conversation_id: str
    sub_runs: list[str] = field(default_factory=list)
    """Runs this run delegated or handed off to before it failed, in the order they started."""
    descendants: Spent = field(default_factory=Spent)
    """What those runs spent (counted whole: what they spent is spent)."""

    @classmethod
    def of(
        cls, run: RunCounts, messages: list[Message], usage: Usage, tool_calls: int
    ) -> PartialResult:
        """The evidence of ``run`` (its state or its report) through ``messages``."""
        return cls(
            messages=messages,
            usage=usage,
            requests=run.requests,
            tool_calls=tool_calls,
            run_id=run.run_id,
            conversation_id=run.conversation_id,
            sub_runs=list(run.sub_runs),
            descendants=run.descendants,
        )

    @property
    def total_usage(self) -> Usage:
        """Usage of this run's evidence and of every run it delegated to."""
        return self.usage + self.descendants.usage

    @property
    def spent(self) -> Spent:
        return Spent.tree(self.usage, self.requests, self.tool_calls, self.descendants)


class RunError(Exception):
    """A run failed at ``stage``; ``partial`` is ``None`` only when nothing was completed."""

    def __init__(
        self, stage: Stage, message: str, partial: PartialResult | None = None, run_id: str = ""
    ) -> None:
        self.stage: Stage = stage
        self.partial = partial
        self.detail = message
        self.run_id = partial.run_id if partial else run_id
        """The run that failed (known without evidence when it was a delegated run)."""
        super().__init__(f"run failed at stage {stage!r}: {message}")


# -- inside a tool ------------------------------------------------------------------------


class ToolFailed(Exception):
    """Raise inside a tool to record a definitive failure (``failed=True``); the run goes on."""


class ModelRetry(Exception):
    """Raise inside a tool to ask the model to try again: the message goes back to it as the
    call's (failed) result. Counted against the tool's ``max_retries``; over the limit the run
    ends at stage ``tool``."""


class Canceled(Exception):
    """Raise inside a tool to stop the run deliberately (stage ``canceled``)."""


# -- models -------------------------------------------------------------------------------


class ModelError(Exception):
    """A model call failed. ``retryable`` says whether the same request may succeed later."""

    def __init__(
        self,
        message: str,
        *,
        provider: str = "",
        retryable: bool = False,
        retry_after: float | None = None,
    ) -> None:
        self.message = message
        self.provider = provider
        self.retryable = retryable
        self.retry_after = retry_after
        super().__init__(f"{provider}: {message}" if provider else message)


class ModelHTTPError(ModelError):
    """The provider answered with an HTTP error status.

    ``message`` is the provider's own; ``retry_after`` is in seconds (from
    Retry-After or the provider's hint) or ``None``.
    """

    def __init__(
        self,
        status: int,
        message: str,
        *,
        provider: str = "",
        retryable: bool | None = None,
        retry_after: float | None = None,
        body: str = "",
    ) -> None:
        self.status = status
        self.body = body
        if retryable is None:
            retryable = status in (408, 409, 429) or status >= 500
        super().__init__(
            f"HTTP {status}: {message}",
            provider=provider,
            retryable=retryable,
            retry_after=retry_after,
        )
        self.message = message


class ModelConnectionError(ModelError):
    """The provider could not be reached or the connection broke; always retryable."""

    def __init__(self, message: str, *, provider: str = "") -> None:
        super().__init__(message, provider=provider, retryable=True)


class ModelResponseError(ModelError):
    """The provider's response could not be understood (malformed, truncated, empty)."""


class FallbackError(ModelError):
    """Every model of a ``FallbackModel`` failed; ``failures`` pairs each model's name with
    its last error's text, in the order they were tried."""

    def __init__(self, failures: Sequence[tuple[str, str]]) -> None:
        self.failures = list(failures)
        told = "; ".join(f"{name}: {error}" for name, error in self.failures)
        super().__init__(f"all {len(self.failures)} models failed: {told}")


# -- histories and the durable client -----------------------------------------------------


class UnknownAgentError(LookupError):
    """The worker serves no agent by that name (the message lists the ones it has)."""


class RunIdInUseError(ValueError):
    """A run by that id exists already (running or closed): a run id names one run, ever."""


def run_id_taken(run_id: str) -> str:
    """Why a turn may not take ``run_id`` (a child turn's start and an inline turn's send)."""
    return (
        f"run id {run_id!r} is taken: a workflow by that id exists already (a run, or "
        "another conversation's turn); pass a new run id, or none to get one"
    )


class ConversationClosedError(RuntimeError):
    """The conversation was closed: nothing more can be sent to it (fork it to go on)."""


class TurnNotTaken(TimeoutError):
    """A conversation did not take a turn within the recovery deadline. The turn may still
    run: sent again with the same run id, it is the same turn. ``run_id`` empty: it did not
    take ``close()`` (e.g. a resting conversation rested again each time it was reopened)."""

    def __init__(self, conversation_id: str, run_id: str, timeout: timedelta, why: str) -> None:
        self.conversation_id = conversation_id
        self.run_id = run_id
        within = f"within {timeout.total_seconds():g} s ({why})"
        if not run_id:
            super().__init__(
                f"conversation {conversation_id} did not take its close {within}; it may "
                "still close: call close() again"
            )
            return
        super().__init__(
            f"conversation {conversation_id} did not take turn {run_id} {within}; it may still "
            f"run: send it again with run_id={run_id!r} to get its result"
        )


#: How Temporal's SDKs name a replay that no longer matches its history.
NONDETERMINISM = "Nondeterminism"


class WorkflowTaskFailing(RuntimeError):
    """A run or conversation the client waited on cannot go on: its workflow task fails on
    the worker, again and again (a bug in workflow code, or a deploy whose code no longer
    replays its history). Nothing is lost and nothing was decided by this error: the
    workflow goes on once a worker can run it, and the same call again finds it.
    ``workflow_id``: the failing workflow (a run's id, or a conversation's); ``failure``:
    the worker's message."""

    def __init__(self, workflow_id: str, failure: str) -> None:
        self.workflow_id = workflow_id
        self.failure = failure
        hint = ""
        if NONDETERMINISM in failure:
            hint = (
                "; the worker's code no longer replays its history (a deploy changed what "
                "it did): roll back, or deploy with versioning (docs/guides/deploys.md)"
            )
        super().__init__(
            f"{workflow_id} cannot go on: its workflow task fails on the worker: {failure}"
            f"{hint}; nothing is lost: it goes on once a worker can run it"
        )
