"""What a run is started with, what it knows while it runs, and what a phase may ask of it.

``RunInput`` is also the durable workflow's input; ``RunState`` is what the workflow serves
to queries and the UI. ``Checkpoint`` is the evidence through the last completed step: the
one thing partial evidence slices.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pydantic.alias_generators import to_camel

from golem.messages import Decision, Message, Part, Usage
from golem.models.base import ModelSettings, StreamDelta, ToolDefinition
from golem.policies import StoredRule
from golem.tools import Tool
from golem.toolsets import Toolset
from golem.usage import Budget, Spent, UsageLimits


def resolve_conversation_id(history: Sequence[Message], explicit: str | None) -> str:
    """The explicit id, else the one the newest identified message carries, else ``""``."""
    if explicit:
        return explicit
    return next((m.conversation_id for m in reversed(history) if m.conversation_id), "")


class DeltaSink(Protocol):
    """Where a streamed model call's pieces go, as they arrive."""

    def __call__(self, delta: StreamDelta) -> None: ...

    def restarted(self, attempt: int, model: str) -> None:
        """The turn starts over: attempt ``attempt`` (1-based) on ``model`` (a retry, or a
        switch to the next model of a fallback); drop what the turn streamed so far."""
        ...


class AgentSpec(Protocol):
    """What the loop reads of an agent (``golem.Agent`` is one); the loop never imports it."""

    name: str
    tools: dict[str, Tool]
    toolsets: tuple[Toolset, ...]
    retries: int
    output_retries: int
    max_iterations: int
    max_concurrent_tools: int
    usage_limits: UsageLimits
    model_settings: ModelSettings
    instructions: str | None
    instructions_fn: Any
    approval_policy: Any
    history_processor: Any

    @property
    def tool_definitions(self) -> list[ToolDefinition]: ...

    @property
    def output_adapter(self) -> TypeAdapter[Any] | None: ...

    @property
    def output_schema(self) -> dict[str, Any] | None: ...


class RunInput(BaseModel):
    """What a run is started with; also the durable workflow's input."""

    # camelCase in payloads, like the message contract; snake_case still accepted.
    model_config = ConfigDict(frozen=True, alias_generator=to_camel, populate_by_name=True)

    prompt: str | None = None
    parts: list[Part] = Field(default_factory=list)
    history: list[Message] = Field(default_factory=list)
    deps: Any = None
    run_id: str = ""
    conversation_id: str = ""
    approvals: dict[str, bool | Decision] = Field(default_factory=dict)
    """Decisions on the calls the history leaves waiting (a bare ``bool``: as 0.2.0 sent)."""
    budget: Budget | None = None
    """A delegated run: what its callers' usage limits leave it and its own delegates."""
    rules: list[StoredRule] | None = None
    """Rules a conversation was given at run time (``set_approval_policy``): tried before
    the agent's own."""
    standing: dict[str, Decision] | None = None
    """Tools approved ``always`` in this conversation, by name (the decision that did it);
    ``None``: read from the history's decisions (a conversation workflow passes its own)."""
    external_tools: list[ToolDefinition] = Field(default_factory=list)
    """Tools this run offers the model beside the agent's, run by the application
    (``run(external_tools=...)``): their calls wait like an ``agent.external_tool``'s."""

    @classmethod
    def of(
        cls,
        prompt: str | None = None,
        *,
        parts: Iterable[Part] = (),
        history: Iterable[Message] = (),
        deps: Any = None,
        run_id: str = "",
        conversation_id: str = "",
        approvals: Mapping[str, bool | Decision] | None = None,
        budget: Budget | None = None,
        rules: Iterable[StoredRule] | None = None,
        standing: Mapping[str, Decision] | None = None,
        external_tools: Iterable[ToolDefinition] = (),
    ) -> RunInput:
        """The one way a run's input is built: in process, by a client, in workflow code
        (``run_agent``, a conversation's turn) and by a delegating run. Each caller checked
        its values already, so nothing is validated again; containers are copied."""
        return cls.model_construct(
            prompt=prompt,
            parts=list(parts),
            history=list(history),
            deps=deps,
            run_id=run_id,
            conversation_id=conversation_id,
            approvals=dict(approvals or {}),
            budget=budget,
            rules=None if rules is None else list(rules),
            standing=None if standing is None else dict(standing),
            external_tools=list(external_tools),
        )


class Checkpoint(NamedTuple):
    """The evidence through the last completed step (a model turn or a closed tool batch);
    a named tuple, not a frozen dataclass: made twice a request, at half the cost."""

    upto: int = 0
    """``messages[:upto]`` is the evidence."""
    turn: int = 0
    usage: Usage = Usage()  # immutable: shared
    tool_calls: int = 0
    results: int = 0
    """Tool results this run recorded (executed, denied, refused or closed)."""

    @property
    def empty(self) -> bool:
        """Nothing completed: no model turn and no tool result recorded by this run."""
        return self.turn == 0 and self.results == 0


#: What a run that delegated nothing yet has its descendants spend (immutable: shared).
NOTHING_SPENT = Spent()


@dataclass
class RunState:
    """The live state of one run; the durable workflow serves it to queries and the UI."""

    run_id: str = ""
    conversation_id: str = ""
    instructions: str = ""
    messages: list[Message] = field(default_factory=list)
    """The conversation: repaired history (no system messages) and what this run added."""
    checkpoint: Checkpoint = field(default_factory=Checkpoint)
    """Written only by ``commit``."""
    usage: Usage = field(default_factory=Usage)
    requests: int = 0
    """Model request attempts, the failed one included."""
    tool_calls: int = 0
    """Tool executions completed."""
    tool_results: int = 0
    turn: int = 0
    tools_in_flight: list[str] = field(default_factory=list)
    agent: str = ""
    """The agent running (``Result.agent`` unless a handoff names another)."""
    sub_runs: list[str] = field(default_factory=list)
    """Runs delegated or handed off to, in the order they started."""
    descendants: Spent = NOTHING_SPENT
    """What they spent (those that ended; the whole tree below them included)."""
    budget: Budget | None = None
    _system: Message | None = field(default=None, repr=False, compare=False)
    """The instructions' system message, made once: it opens every request."""

    @property
    def tree(self) -> Spent:
        """What this run and its descendants spent so far (what usage limits bound)."""
        if self.descendants is NOTHING_SPENT:  # checked before every request: no sum to make
            return Spent(usage=self.usage, requests=self.requests, tool_calls=self.tool_calls)
        return Spent.tree(self.usage, self.requests, self.tool_calls, self.descendants)

    @property
    def tree_tool_calls(self) -> int:
        """``tree.tool_calls``, with no ``Spent`` built (checked before every tool batch)."""
        return self.tool_calls + self.descendants.tool_calls

    @property
    def completed(self) -> int:
        """``messages[:completed]`` is the evidence through the last completed step."""
        return self.checkpoint.upto

    def add(self, message: Message) -> Message:
        """Append ``message`` stamped with this run's identity; the stamped copy."""
        stamped = message.stamped(self.run_id, self.conversation_id)
        self.messages.append(stamped)
        return stamped

    def commit(self) -> None:
        """Everything so far is evidence."""
        self.checkpoint = Checkpoint(
            upto=len(self.messages),
            turn=self.turn,
            usage=self.usage,
            tool_calls=self.tool_calls,
            results=self.tool_results,
        )

    def request_messages(self) -> list[Message]:
        """What the model sees: instructions first, then the conversation (append-only)."""
        if not self.instructions:
            return list(self.messages)
        if self._system is None or self._system.content != self.instructions:
            self._system = Message.system(self.instructions)
        return [self._system, *self.messages]
