"""What an agent run writes to its history: its input, its activities' inputs, and its
outcome.

A closed run's result is what a person reads in the Temporal UI's Result panel: its
``output``, ``usage`` and counts, its ids, and where its conversation is
(``messages``, one variant each, decoded in one place):

- ``Carried``: in the result: the given history's first ``keep`` messages, then ``added``;
- ``InHistory``: the run's history holds it: the last model request's own messages
  (instructions aside), rebuilt from the model calls' inputs and their activities'
  results, then ``added``;
- ``Paged``: too long for one payload: read with the run's ``golem.conversation`` query;
- ``InTranscript``: a conversation's turn: the conversation's transcript holds it.

A run that got its history by reference (a conversation's turn) reports only its own
messages; its reader puts the base first.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from golem.delegation import Handoff
from golem.messages import Decision, Message, ToolCall, Usage
from golem.results import PartialResult, Result, Stage
from golem.run_state import RunInput
from golem.usage import Budget, Spent
from golem.wire.base import Stamps, Tagged, Wire
from golem.wire.pages import Pager, read_pages
from golem.wire.shipping import Compact, HistoryBase, expand


class AgentRunInput(Wire):
    """Input of ``AgentRunWorkflow``."""

    agent: str
    run: RunInput
    parent_run_id: str = ""
    stream: bool = False
    """The model activity publishes deltas to the run's stream (``run_stream``)."""
    notify_parent: bool = False
    """Signal the parent workflow (a conversation) when the run waits for approvals."""
    base: HistoryBase | None = None
    """The history by reference (``run.history`` is then empty): a conversation's turn."""
    caller: str = ""
    """A delegated run: the run that delegated to it, told (by signal) whenever this run, or
    one below it, starts or stops waiting for approvals."""
    hand_back: bool = False
    """A conversation's turn: a handoff ends the run, naming its target, and the
    conversation continues the turn (otherwise the run does, as its own child run)."""


class ToolCallInput(Wire):
    """Input of the tool activity."""

    agent: str
    call: ToolCall
    deps: Any = None
    run_id: str = ""
    """Empty when it is the calling workflow's id (every run but an inline one)."""
    conversation_id: str
    turn: int = 0
    usage: Usage = Field(default_factory=Usage)
    retries: dict[str, int] = Field(default_factory=dict)
    budget: Budget | None = None
    """What the runs the tool starts with ``ctx.delegate`` may spend."""
    stream: bool = False
    """The calling run streams: so do those runs, their events in its stream."""


class EvaluationInput(ToolCallInput):
    """Input of the approval evaluator's activity: a tool call's, and what an evaluator
    agent reads beside the call."""

    asked: str = ""
    """The run's last user message."""


class ModelFailure(Wire):
    """Details of a model activity's failure: whether the request moves on to the next model
    of a ``FallbackModel`` (the model's ``fallback_on`` decided), and the model's own error."""

    falls_over: bool = False
    error: str = ""


class RunOfCall(Wire):
    """What an MCP server whose headers are made per run learns of the run (the
    ``factory_argument`` in a ``temporalio.mcp`` activity's input; the headers themselves
    are made on the worker, so credentials never enter history)."""

    agent: str
    run_id: str
    conversation_id: str
    deps: Any = None


class PrepareInput(Wire):
    """Input of the activities that run a user's history processor or instructions function."""

    agent: str
    deps: Any = None
    run_id: str
    conversation_id: str
    history: list[Message] = Field(default_factory=list)


# -- where a run's conversation is ------------------------------------------------------


@dataclass
class Sources:
    """What a reader has at hand to rebuild a run's conversation; loaders are called only
    by the variants that need them."""

    given: list[Message] = field(default_factory=list)
    """The history the run was given by value."""
    lead: list[Message] = field(default_factory=list)
    """The history it got by reference (a conversation's turn): it comes first."""
    contents: Callable[[], Awaitable[Mapping[str, str]]] | None = None
    """Loads the contents the run's activities returned, by digest."""
    log: Callable[[], Awaitable[list[Message]]] | None = None
    """Loads the run's last model request's own messages, rebuilt from its history."""
    pages: Pager | None = None
    """The run's ``golem.conversation`` query."""
    transcript: Pager | None = None
    """The conversation's transcript (for ``InTranscript``)."""


async def _expand(added: Compact, sources: Sources, stamps: Stamps) -> list[Message]:
    contents = await sources.contents() if added.refs and sources.contents else None
    try:
        return expand(added, stamps, contents)
    except KeyError as exc:
        raise LookupError(
            f"run {stamps.run_id}: no activity of it returned content {exc}"
        ) from None


class Carried(Tagged):
    """In the payload: the given history's first ``keep`` messages, then ``added``."""

    kind: Literal["carried"] = "carried"
    keep: int = 0
    added: Compact = Field(default_factory=Compact)

    async def read(self, sources: Sources, stamps: Stamps) -> list[Message]:
        return [*sources.given[: self.keep], *await _expand(self.added, sources, stamps)]

    def after(self, given: list[Message], stamps: Stamps) -> list[Message]:
        """The conversation, for a reader that holds no contents (a workflow): ``given``
        is the history the run was given."""
        return [*given[: self.keep], *expand(self.added, stamps)]


class InHistory(Tagged):
    """In the run's history: its last model request's first ``count`` own messages, then
    ``added``."""

    kind: Literal["history"] = "history"
    count: int
    added: Compact = Field(default_factory=Compact)

    async def read(self, sources: Sources, stamps: Stamps) -> list[Message]:
        run_id = stamps.run_id
        if sources.log is None:
            raise ValueError(f"run {run_id}: its conversation is in its history; nothing reads it")
        log = await sources.log()
        if len(log) < self.count:
            raise LookupError(
                f"run {run_id}: its history holds {len(log)} messages, not the {self.count} "
                "its result names"
            )
        return [*log[: self.count], *await _expand(self.added, sources, stamps)]


class Paged(Tagged):
    """Too long for one payload: ``count`` messages, read with ``golem.conversation``."""

    kind: Literal["paged"] = "paged"
    count: int

    async def read(self, sources: Sources, stamps: Stamps) -> list[Message]:
        if sources.pages is None:
            raise ValueError(f"run {stamps.run_id}: its conversation is paged; nothing reads it")
        return await read_pages(sources.pages, 0, self.count)


class InTranscript(Tagged):
    """A conversation's turn: the transcript's messages ``[start, start + count)``."""

    kind: Literal["transcript"] = "transcript"
    start: int
    count: int

    async def read(self, sources: Sources, stamps: Stamps) -> list[Message]:
        if sources.transcript is None:
            raise ValueError(
                f"run {stamps.run_id}: its messages are its conversation's; none given"
            )
        return await read_pages(sources.transcript, self.start, self.start + self.count)


RunMessages = Annotated[Carried | InHistory | Paged | InTranscript, Field(discriminator="kind")]


# -- outcomes ---------------------------------------------------------------------------


class RunReport(Tagged):
    """What every outcome says: the run's ids and counts, and where its conversation is."""

    kind: str = "evidence"
    run_id: str = ""
    conversation_id: str = ""
    usage: Usage = Field(default_factory=Usage)
    requests: int = 0
    """Model request attempts, a failed one included."""
    tool_calls: int = 0
    """Tool executions completed."""
    agent: str = ""
    """The agent that answered (after handoffs)."""
    sub_runs: list[str] = Field(default_factory=list)
    """Runs it delegated or handed off to, in the order they started."""
    descendants: Spent = Field(default_factory=Spent)
    """What those runs spent."""
    messages: RunMessages = Field(default_factory=Carried)
    decided: dict[str, Decision] = Field(default_factory=dict)
    """By call id: in a ``golem.approve`` update's answer the decisions it recorded; in a
    ``golem.paused`` report what the approval evaluator decided."""

    async def conversation(self, sources: Sources) -> list[Message]:
        """The whole conversation: what came by reference, then what the run holds."""
        return [*sources.lead, *await self.messages.read(sources, self.stamps)]

    @property
    def stamps(self) -> Stamps:
        """The run's stamps: what its own messages carry (left out of ``messages``)."""
        return Stamps(run_id=self.run_id, conversation_id=self.conversation_id)

    def partial(self, messages: list[Message]) -> PartialResult:
        return PartialResult.of(self, messages, self.usage, self.tool_calls)


class Completed(RunReport):
    """Result of ``AgentRunWorkflow``: the run answered."""

    kind: Literal["completed"] = "completed"
    first_keys: ClassVar[tuple[str, ...]] = ("output", "decided")
    output: Any = None
    handoff: Handoff | None = None
    """A conversation's turn that ended by handing over: who continues it, as which run."""

    def result(self, messages: list[Message], output: Any) -> Result[Any]:
        """The ``Result`` this stands for, given its conversation and its typed output."""
        return Result.of(self, output, messages)

    @property
    def spent(self) -> Spent:
        return Spent.tree(self.usage, self.requests, self.tool_calls, self.descendants)

    def handed_over(self, target: Completed) -> Completed:
        """This turn's outcome once ``target``, the run it handed over to, ended (as
        ``golem.delegation.handed_over`` does for a ``Result``)."""
        return self.model_copy(
            update={
                "output": target.output,
                "handoff": None,
                "agent": target.agent,
                "sub_runs": [*self.sub_runs, target.run_id],
                "descendants": self.descendants + target.spent,
            }
        )


class Paused(RunReport):
    """A run that waits for a person's decisions (an update's answer, a parent's signal)."""

    kind: Literal["paused"] = "paused"
    first_keys: ClassVar[tuple[str, ...]] = ("pendingApprovals", "decided")
    pending_approvals: list[ToolCall] = Field(default_factory=list)
    approval_timeout: float | None = None
    """Seconds the run waits for decisions (its agent's ``approval_timeout``)."""
    external_timeout: float | None = None
    """Seconds it waits for a client-run tool's result (its agent's ``external_timeout``)."""
    pending_runs: dict[str, str] = Field(default_factory=dict)
    """Call id -> the run that waits for it, for the calls of runs this run delegated to
    (the others are its own)."""
    external: list[str] = Field(default_factory=list)
    """Which of ``pending_approvals`` are client-run tools' calls, waiting for the
    application's result rather than a person."""
    evaluating: list[str] = Field(default_factory=list)
    """Which of ``pending_approvals`` an approval evaluator still decides (a person may
    answer them first); a run reports again as each evaluation ends."""

    def result(self, messages: list[Message]) -> Result[Any]:
        """The ``Result`` this stands for: no output yet, the calls that wait."""
        waiting, external = self.pending_approvals, self.external
        return Result.of(
            self,
            None,
            messages,
            pending_approvals=[c for c in waiting if c.id not in external],
            pending_calls=[c for c in waiting if c.id in external],
            pending_runs=self.pending_runs,
        )


class Failed(Wire):
    """Details of a failed run's ``ApplicationError`` (type ``GolemRunError``), or of a
    cancelled run's memo: the ``RunError`` rebuilt."""

    stage: Stage
    message: str
    evidence: RunReport | None = None
    """The partial evidence (``None``: the run completed nothing)."""


class OutcomeMemo(Wire):
    """A closed run at a glance, in its memo (the UI shows it with no worker)."""

    stop_reason: str
    output: str = ""
    turns: int = 0
    requests: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
