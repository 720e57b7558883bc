"""What a run gives back: ``Result``, or a ``RunError`` carrying ``PartialResult``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

# Released import paths (0.2.0): the errors live in golem.errors.
from golem.errors import STAGES as STAGES
from golem.errors import PartialResult as PartialResult
from golem.errors import RunCounts as RunCounts
from golem.errors import RunError as RunError
from golem.errors import Stage as Stage
from golem.messages import Message, ToolCall, Usage
from golem.usage import Spent

OutputT = TypeVar("OutputT")


@dataclass(frozen=True)
class Result(Generic[OutputT]):
    """A finished (or paused) run."""

    output: OutputT
    """The final answer (``None`` while approvals are pending)."""
    messages: list[Message]
    """The full normalized conversation: pass it back as ``history`` to chain runs."""
    usage: Usage
    run_id: str
    conversation_id: str
    requests: int = 0
    """Model requests made by this run."""
    tool_calls: int = 0
    """Tool executions made by this run."""
    pending_approvals: list[ToolCall] = field(default_factory=list)
    """Calls waiting for a person's decision; continue with ``run(history=..., approvals=...)``
    (durably ``approve``, which reaches the run that waits)."""
    pending_runs: dict[str, str] = field(default_factory=dict)
    """For each pending call id, the run that waits for it: this run, or one it delegated to."""
    pending_calls: list[ToolCall] = field(default_factory=list)
    """Calls of client-run tools waiting for the application's result; answer with
    ``run(history=..., tool_results=...)`` (durably ``complete``)."""
    agent: str = ""
    """The agent that produced the final answer (after handoffs, the last one handed to)."""
    sub_runs: list[str] = field(default_factory=list)
    """Ids of the runs this run delegated or handed off to, in the order they started."""
    descendants: Spent = field(default_factory=Spent)
    """What those runs (and theirs, nested) spent."""

    @classmethod
    def of(
        cls,
        run: RunCounts,
        output: Any,
        messages: Iterable[Message],
        *,
        pending_approvals: Iterable[ToolCall] = (),
        pending_calls: Iterable[ToolCall] = (),
        pending_runs: Mapping[str, str] | None = None,
        agent: str | None = None,
        sub_runs: Iterable[str] | None = None,
        descendants: Spent | None = None,
    ) -> Result[Any]:
        """The one way a ``Result`` is built: ``run``'s ids and counts (a run's live state in
        either executor, its durable report, or a caller's ``Result`` after a handoff) with
        its answer; ``agent``, ``sub_runs`` and ``descendants`` default to ``run``'s."""
        return Result(
            output=output,
            messages=list(messages),
            usage=run.usage,
            run_id=run.run_id,
            conversation_id=run.conversation_id,
            requests=run.requests,
            tool_calls=run.tool_calls,
            pending_approvals=list(pending_approvals),
            pending_runs=dict(pending_runs or {}),
            pending_calls=list(pending_calls),
            agent=run.agent if agent is None else agent,
            sub_runs=list(run.sub_runs if sub_runs is None else sub_runs),
            descendants=run.descendants if descendants is None else descendants,
        )

    def __post_init__(self) -> None:
        # A pending call no run is named for waits in this run.
        waiting = [*self.pending_approvals, *self.pending_calls]
        runs = {c.id: self.pending_runs.get(c.id, self.run_id) for c in waiting}
        object.__setattr__(self, "pending_runs", runs)

    @property
    def paused(self) -> bool:
        return bool(self.pending_approvals or self.pending_calls)

    @property
    def total_usage(self) -> Usage:
        """Usage of this run and every run it delegated or handed off to (``usage`` is this
        run's own)."""
        return self.usage + self.descendants.usage

    @property
    def spent(self) -> Spent:
        """What this run and its descendants spent, all together."""
        return Spent.tree(self.usage, self.requests, self.tool_calls, self.descendants)

    @property
    def model(self) -> str:
        """The model that gave this run's last answer (with a ``FallbackModel``, the one of
        its models that did); empty when this run made no model turn."""
        for message in reversed(self.messages):
            if message.role == "assistant" and message.run_id == self.run_id:
                return message.model
        return ""


class StreamResult(Generic[OutputT]):
    """What a run's event stream gives once exhausted: its ``result``."""

    _result: Result[OutputT] | None = None

    @property
    def result(self) -> Result[OutputT]:
        """The ``Result`` the run gave (``RuntimeError`` until the stream is exhausted)."""
        if self._result is None:
            raise RuntimeError("the run has not finished: iterate the stream to the end first")
        return self._result
