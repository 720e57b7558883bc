"""The ``Executor`` protocol: everything with an effect that a run needs.

See docs/adr/0004-one-loop-two-executors.md. ``LocalExecutor`` (golem.local) runs the
effects in process; ``TemporalExecutor`` (golem.workflows) runs each as an activity.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from golem.events import RunEvent
from golem.messages import Decision, Message, ToolCall
from golem.models.base import ModelRequest, ModelResponse
from golem.policies import Evaluated
from golem.results import Result
from golem.run_state import DeltaSink
from golem.tools import RunContext, ToolOutcome
from golem.toolsets import Toolset, ToolsetTool

if TYPE_CHECKING:
    from golem.delegation import Delegation


class Executor(Protocol):
    """Everything with an effect that a run needs."""

    def new_id(self) -> str:
        """Mint a run or conversation id."""
        ...

    async def process_history(self, ctx: RunContext[Any], history: list[Message]) -> list[Message]:
        """Apply the agent's history processor, once."""
        ...

    async def resolve_instructions(self, ctx: RunContext[Any]) -> str:
        """Evaluate the agent's dynamic instructions, once."""
        ...

    async def request(
        self, request: ModelRequest, ctx: RunContext[Any], on_delta: DeltaSink | None
    ) -> ModelResponse:
        """Send one request to the model (``ctx.turn`` is the turn it will complete)."""
        ...

    async def await_approvals(
        self, pending: list[ToolCall], ctx: RunContext[Any]
    ) -> Mapping[str, Decision | None] | None:
        """Wait for a person's decisions on ``pending`` (``{call_id: decision}``; ``None`` for
        a call no decision arrived for in time). ``None``: the run pauses instead and
        returns a ``Result`` with ``pending_approvals`` (in process, continued by a new run
        with ``approvals=``)."""
        ...

    async def evaluate_approvals(
        self, waiting: list[ToolCall], evaluated: Evaluated, asked: str = ""
    ) -> Mapping[str, Decision | None]:
        """Ask the agent's approval policy's evaluator about each call of ``evaluated``
        (durably each in an activity): the decisions it made; a call it left to a person
        (it asked, raised, timed out or answered something else) is not in the answer.
        ``asked``: the run's last user message. A durable run (on its own, a conversation's
        turn or a delegated run) waits for a person on every call of ``waiting`` while its
        evaluations run, whoever answers a call first decides it (a person's answer cancels
        that call's evaluation at once); then every call of ``waiting`` is in the answer
        (``None``: no decision came in time)."""
        ...

    async def toolset_tools(self, toolset: Toolset, ctx: RunContext[Any]) -> list[ToolsetTool]:
        """The tools ``toolset`` offers this run: its server asked once (durably in one
        activity, recorded); ``call_tool`` runs them. Raises when the server cannot be asked,
        ``ValueError`` when the toolset's rules name a tool the server lacks."""
        ...

    async def call_tool(self, call: ToolCall, ctx: RunContext[Any]) -> ToolOutcome:
        """Execute one call whose arguments the loop validated (``ctx.tool_args`` holds them
        in process). Raise ``ToolOutcomeUnknown`` when the call started and its outcome is
        lost; any other exception fails the run at stage ``tool``."""
        ...

    async def delegate(
        self, child: Delegation, ctx: RunContext[Any], emit: Callable[[RunEvent], None] | None
    ) -> Result[Any]:
        """Run ``child`` (a delegation or a handoff) as a child run of this one and return
        its ``Result``, raising its ``RunError``; ``emit`` takes its events (in process).
        ``UnknownAgent`` when nobody serves the agent."""
        ...
