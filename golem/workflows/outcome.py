"""A run's outcome crossing Temporal: its result, its failure (an ``ApplicationError``'s
details, or a cancelled run's memo) and the conversation either carries inline or pages.

Encoding (the workflow) and decoding (the client) sit side by side so they cannot
drift; tests round-trip them through golem's data converter without a server.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from temporalio.exceptions import ApplicationError, CancelledError, FailureError

from golem.messages import Message, ToolCall, Usage
from golem.results import PartialResult, Result, RunError, Stage
from golem.workflows.pages import PAGE_BYTES, Pager, message_size, read_pages
from golem.workflows.registry import UNKNOWN_AGENT
from golem.workflows.shipping import by_reference, content_digest, filled

__all__ = [
    "FAILURE_MEMO",
    "RUN_ERROR",
    "AgentRunOutput",
    "FailureDetails",
    "Logged",
    "Recorded",
    "RunSnapshot",
    "UnknownAgentError",
    "cancel_memo",
    "content_digest",
    "conversation",
    "decode_failure",
    "decode_result",
    "encode_failure",
    "encode_result",
    "failure_error",
    "run_failure",
]

#: ``ApplicationError.type`` of a failed run; its details are a ``FailureDetails``.
RUN_ERROR = "GolemRunError"
#: Memo key holding a cancelled run's ``FailureDetails`` (a cancel carries no details).
FAILURE_MEMO = "golemFailure"


#: Loads ``{content_digest(text): text}`` of every content a run's activities recorded.
Recorded = Callable[[], Awaitable[Mapping[str, str]]]
#: Loads a run's last model request's own messages, rebuilt from its history (``RequestLog``).
Logged = Callable[[], Awaitable[list[Message]]]


class UnknownAgentError(LookupError):
    """The worker serves no agent by that name (the message lists the ones it has)."""


class _Payload(BaseModel):
    model_config = ConfigDict(frozen=True, alias_generator=to_camel, populate_by_name=True)


class RunSnapshot(_Payload):
    """A run's conversation as ``base + added``: ``base`` is ``None`` when it is exactly the
    history the run was given, so a clean continuation does not send the history back; a
    run that changed only the history's end (a repair) carries only that end (``kept``).
    What it would carry too big for one payload is ``paged``: read it with
    ``golem.conversation``."""

    base: list[Message] | None = None
    added: list[Message] = Field(default_factory=list)
    kept: int = 0
    """With ``base``: the given history's first ``kept`` messages come before it."""
    paged: int = 0
    """When non-zero: the run's conversation has this many messages, none carried here
    (with ``logged``: for readers that predate it; the others rebuild it)."""
    based: bool = False
    """The run got its history by reference (a conversation's turn): its conversation, and
    so its pages, are only its own messages, which follow that history."""
    unstamped: bool = False
    """Every message in ``added`` carried this run's ``run_id`` and ``conversation_id``;
    they are left out here and put back on reading."""
    refs: dict[int, str] = Field(default_factory=dict)
    """``added[i]``'s content is empty here: it is the content an activity of this run
    recorded (a model answer, a tool result) whose ``content_digest`` is ``refs[i]``."""
    logged: int = 0
    """When non-zero: the conversation starts with this many messages, the run's last model
    request (its instructions aside) as its history's model calls hold it; ``added``
    follows them (a based run's history comes first)."""
    usage: Usage = Field(default_factory=Usage)
    requests: int = 0
    tool_calls: int = 0
    run_id: str = ""
    conversation_id: str = ""

    @classmethod
    def of(
        cls,
        evidence: Result[Any] | PartialResult,
        history: list[Message],
        based: bool = False,
        recorded: Collection[str] = (),
        logged: int = 0,
    ) -> RunSnapshot:
        """Split the evidence's messages where the run's own stamps begin (or page them);
        contents whose digest is in ``recorded`` (the run's own activity results) are
        carried by reference; the first ``logged`` messages are left to the run's history."""
        messages = evidence.messages
        counts = {
            "usage": evidence.usage,
            "requests": evidence.requests,
            "tool_calls": evidence.tool_calls,
            "run_id": evidence.run_id,
            "conversation_id": evidence.conversation_id,
            "based": based,
        }
        run_id = evidence.run_id
        cut = next((i for i, m in enumerate(messages) if m.run_id == run_id), len(messages))
        if logged:  # the history holds the first ``logged``: only what follows is carried
            cut, counts["logged"], history = logged, logged, messages[:logged]
        base = messages[:cut]
        kept = 0
        for old, new in zip(history, base, strict=False):
            if old is not new and old != new:
                break
            kept += 1
        added, refs = by_reference(messages[cut:], recorded)
        ids = (run_id, evidence.conversation_id)
        if added and all((m.run_id, m.conversation_id) == ids for m in added):
            added = [m.stamped("", "") for m in added]
            counts["unstamped"] = True
        carried = [*base[kept:], *added]
        if sum(message_size(m) for m in carried) > PAGE_BYTES:
            counts.pop("logged", None)
            return cls(paged=len(messages), **counts)
        if kept == len(base) == len(history):
            if logged:  # a reader older than ``logged`` pages it out of the workflow instead
                counts["paged"] = len(messages)
            return cls(added=added, refs=refs, **counts)
        return cls(base=base[kept:], kept=kept, added=added, refs=refs, **counts)

    def messages(
        self,
        history: list[Message],
        recorded: Mapping[str, str] | None = None,
        logged: list[Message] | None = None,
    ) -> list[Message]:
        """The conversation when carried inline (``paged`` is 0); ``recorded`` fills the
        contents carried by reference, ``logged`` is the run's last request rebuilt."""
        added = self.added
        if self.unstamped:
            added = [m.stamped(self.run_id, self.conversation_id) for m in added]
        if self.refs:
            if recorded is None:
                raise ValueError(f"run {self.run_id}: its result names recorded contents")
            try:
                added = filled(added, self.refs, recorded)
            except KeyError as exc:
                raise LookupError(
                    f"run {self.run_id}: no activity recorded content {exc}"
                ) from None
        if self.logged:
            if logged is None:
                raise ValueError(
                    f"run {self.run_id}: its result leaves its requests to its history"
                )
            own = logged[1:] if logged and logged[0].role == "system" else logged
            if len(own) < self.logged:
                raise LookupError(
                    f"run {self.run_id}: its history holds fewer messages than its result says"
                )
            return [*(history if self.based else []), *own[: self.logged], *added]
        if self.base is None:
            return [*history, *added]
        return [*history[: self.kept], *self.base, *added]

    def to_partial(self, messages: list[Message]) -> PartialResult:
        return PartialResult(
            messages=messages,
            usage=self.usage,
            requests=self.requests,
            tool_calls=self.tool_calls,
            run_id=self.run_id,
            conversation_id=self.conversation_id,
        )


class AgentRunOutput(_Payload):
    """Result of ``AgentRunWorkflow``."""

    output: Any = None
    snapshot: RunSnapshot
    pending_approvals: list[ToolCall] = Field(default_factory=list)

    def to_result(self, messages: list[Message], output: Any) -> Result[Any]:
        """The ``Result`` this stands for, given its conversation and its typed output."""
        s = self.snapshot
        return Result(
            output=output,
            messages=messages,
            usage=s.usage,
            run_id=s.run_id,
            conversation_id=s.conversation_id,
            requests=s.requests,
            tool_calls=s.tool_calls,
            pending_approvals=list(self.pending_approvals),
        )


class FailureDetails(_Payload):
    """Details of a failed run's ``ApplicationError`` (or memo): ``RunError`` rebuilt."""

    stage: Stage
    message: str
    partial: RunSnapshot | None = None


async def conversation(
    snapshot: RunSnapshot,
    history: list[Message],
    pager: Pager,
    recorded: Recorded | None = None,
    logged: Logged | None = None,
) -> list[Message]:
    """A snapshot's conversation: carried inline (``recorded`` reads the contents it names
    from the run's history, ``logged`` its last request), or paged out of the workflow."""
    if not snapshot.paged or snapshot.logged:
        contents = await recorded() if snapshot.refs and recorded else None
        request = await logged() if snapshot.logged and logged else None
        return snapshot.messages(history, contents, request)
    pages = await read_pages(pager, 0, snapshot.paged)
    return [*history, *pages] if snapshot.based else pages


# The result.


def encode_result(
    result: Result[Any],
    history: list[Message],
    output: Any,
    based: bool = False,
    recorded: Collection[str] = (),
    logged: int = 0,
) -> AgentRunOutput:
    """What the workflow returns; ``output`` is the result's output as JSON-able data
    (``based``: the run got its history by reference; ``recorded``: digests of contents
    its activities recorded, carried by reference; ``logged``: leading messages its
    history's model calls hold, left out)."""
    return AgentRunOutput(
        output=output,
        snapshot=RunSnapshot.of(result, history, based, recorded, logged),
        pending_approvals=result.pending_approvals,
    )


async def decode_result(
    raw: Any,
    history: list[Message],
    pager: Pager,
    output: Callable[[Any], Any] | None = None,
    recorded: Recorded | None = None,
    logged: Logged | None = None,
) -> Result[Any]:
    """The ``Result`` a workflow's return value stands for (``output`` validates the output;
    ``recorded`` reads the contents the run's activities recorded)."""
    decoded = AgentRunOutput.model_validate(raw)
    value = decoded.output
    if output is not None and value is not None:
        value = output(value)
    messages = await conversation(decoded.snapshot, history, pager, recorded, logged)
    return decoded.to_result(messages, value)


# The failure.


def encode_failure(error: RunError, history: list[Message], based: bool = False) -> FailureDetails:
    """The details a failed run carries; the evidence is the error's own ``partial``."""
    evidence = error.partial
    partial = RunSnapshot.of(evidence, history, based) if evidence is not None else None
    return FailureDetails(stage=error.stage, message=error.detail, partial=partial)


def run_failure(error: BaseException | None) -> FailureDetails | None:
    """The ``FailureDetails`` a failed run's error carries, if it is a ``RunError``'s."""
    if isinstance(error, ApplicationError) and error.type == RUN_ERROR and error.details:
        return FailureDetails.model_validate(error.details[0])
    return None


def failure_error(error: RunError | str, details: FailureDetails) -> ApplicationError:
    """The exception that fails the workflow for good."""
    return ApplicationError(str(error), details, type=RUN_ERROR, non_retryable=True)


def cancel_memo(details: FailureDetails) -> dict[str, Any]:
    """The memo a cancelled run upserts before it ends as Canceled."""
    return {FAILURE_MEMO: details}


async def decode_failure(
    cause: BaseException | None,
    history: list[Message],
    run_id: str,
    memo: Callable[[], Awaitable[Any]],
    pager: Pager,
) -> Exception:
    """The ``RunError`` (or ``UnknownAgentError``) a failed or cancelled workflow stands for.

    ``cause`` is ``WorkflowFailureError.cause``; ``memo`` reads the raw ``FAILURE_MEMO``."""
    # Imported here: golem.worker imports this module, so `import golem.workflows` first
    # (examples/support_ticket.py) would otherwise meet a half-initialized module.
    from golem.worker.converter import BAD_PAYLOAD

    if isinstance(cause, ApplicationError) and cause.type == UNKNOWN_AGENT:
        return UnknownAgentError(cause.message)
    if isinstance(cause, ApplicationError) and cause.type == BAD_PAYLOAD:
        return RunError("history", f"run {run_id} could not read its input: {cause.message}")
    raw: Any = None
    if isinstance(cause, ApplicationError) and cause.type == RUN_ERROR and cause.details:
        raw = cause.details[0]
    if isinstance(cause, CancelledError):
        raw = await memo()
        if raw is None:
            return RunError("canceled", f"run {run_id} was cancelled before it started")
    if raw is not None:
        details = FailureDetails.model_validate(raw)
        partial = None
        if details.partial:
            messages = await conversation(details.partial, history, pager)
            partial = details.partial.to_partial(messages)
        return RunError(details.stage, details.message, partial)
    # Terminated or timed out from outside: the loop never got to say why.
    message = cause.message if isinstance(cause, FailureError) else str(cause)
    kind = cause.type if isinstance(cause, ApplicationError) else type(cause).__name__
    return RunError("canceled", f"run {run_id} was stopped outside the loop ({kind}): {message}")
