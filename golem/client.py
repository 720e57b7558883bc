"""Run agents durably from a Temporal client.

    client = await Client.connect("localhost:7233", plugins=[GolemPlugin(agent)])
    durable = DurableAgent(client, agent, task_queue="golem")
    result = await durable.run("Plan my trip", history=previous.messages)

``DurableAgent.run`` mirrors ``Agent.run``: same ``Result``, same ``golem.RunError``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import TypeAdapter
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
)
from temporalio.common import (
    SearchAttributeKey,
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import ApplicationError, CancelledError, FailureError

from golem.agent import Agent
from golem.ids import new_id
from golem.loop import RunInput, resolve_conversation_id
from golem.messages import HistoryError, Message, Part, validate_history
from golem.results import PartialResult, Result, RunError
from golem.streaming import DurableRunStream
from golem.worker.converter import golem_data_converter
from golem.workflows.agent_run import FAILURE_MEMO, AgentRunWorkflow
from golem.workflows.registry import UNKNOWN_AGENT
from golem.workflows.types import (
    AgentRunInput,
    AgentRunOutput,
    FailureDetails,
    MessagesPage,
    MessagesQuery,
    RunSnapshot,
)

__all__ = [
    "AGENT",
    "CONVERSATION_ID",
    "PARENT_RUN_ID",
    "SEARCH_ATTRIBUTES",
    "DurableAgent",
    "DurableRun",
    "DurableRunStream",
    "RunRecord",
    "UnknownAgentError",
    "fetch_run",
]

OutputT = TypeVar("OutputT")

CONVERSATION_ID = SearchAttributeKey.for_keyword("GolemConversationId")
AGENT = SearchAttributeKey.for_keyword("GolemAgent")
PARENT_RUN_ID = SearchAttributeKey.for_keyword("GolemParentRunId")
#: Register these on a cluster once (``golem setup``); the dev server gets them from ``golem dev``.
SEARCH_ATTRIBUTES = (CONVERSATION_ID, AGENT, PARENT_RUN_ID)
#: Largest history a run may start with (the workflow input is one Temporal payload).
MAX_INPUT_BYTES = 2_000_000 - 65_536


class UnknownAgentError(LookupError):
    """The worker serves no agent by that name (the message lists the ones it has)."""


@dataclass
class DurableRun(Generic[OutputT]):
    """A started run: its ids at once, its ``Result`` (or ``RunError``) when it ends."""

    run_id: str
    conversation_id: str
    handle: WorkflowHandle[Any, Any]
    history: list[Message] = field(repr=False)
    output_adapter: TypeAdapter[Any] | None = field(default=None, repr=False)

    async def result(self) -> Result[OutputT]:
        try:
            output = await self.handle.result()
        except WorkflowFailureError as exc:
            raise await _run_error(exc, self.handle, self.history) from exc
        run_output = AgentRunOutput.model_validate(output)
        value = run_output.output
        if self.output_adapter is not None and value is not None:
            value = self.output_adapter.validate_python(value)
        messages = await _conversation(self.handle, run_output.snapshot, self.history)
        return run_output.to_result(messages, value)

    async def cancel(self) -> None:
        """Ask the run to stop; ``result()`` then raises a ``RunError`` (stage ``canceled``)."""
        await self.handle.cancel()

    def stream(self, from_offset: int = 0) -> DurableRunStream[OutputT]:
        """The run's events from ``from_offset`` (live, or replayed once it has ended)."""
        return DurableRunStream(self, from_offset)


class DurableAgent(Generic[OutputT]):
    """Start runs of an agent that a golem worker serves on ``task_queue``."""

    def __init__(
        self,
        client: Client,
        agent: Agent[Any, OutputT] | str,
        *,
        task_queue: str = "golem",
        output_type: type[OutputT] | None = None,
    ) -> None:
        self.client = client
        self.agent_name = agent if isinstance(agent, str) else agent.name
        self.task_queue = task_queue
        kind = output_type or (None if isinstance(agent, str) else agent.output_type)
        self.output_adapter = None if kind in (None, str) else TypeAdapter(kind)

    async def start(
        self,
        prompt: str | None = None,
        *,
        history: Sequence[Message] | None = None,
        parts: Sequence[Part] = (),
        deps: Any = None,
        run_id: str | None = None,
        conversation_id: str | None = None,
        approvals: dict[str, bool] | None = None,
        parent_run_id: str | None = None,
        stream: bool = False,
    ) -> DurableRun[OutputT]:
        """Start a run and return at once. The run id is minted here, so it is the
        workflow id before the run starts."""
        history = list(history or ())
        try:
            validate_history(history)
        except HistoryError as exc:
            raise RunError("history", str(exc)) from exc
        run_id = run_id or new_id()
        conversation_id = resolve_conversation_id(history, conversation_id) or new_id()
        parent = parent_run_id or next((m.run_id for m in reversed(history) if m.run_id), "")
        run = RunInput(
            prompt=prompt,
            parts=list(parts),
            history=history,
            deps=deps,
            run_id=run_id,
            conversation_id=conversation_id,
            approvals=dict(approvals or {}),
        )
        payload = AgentRunInput(agent=self.agent_name, run=run, parent_run_id=parent, stream=stream)
        size = len(golem_data_converter.payload_converter.to_payloads([payload])[0].data)
        if size > MAX_INPUT_BYTES:
            raise RunError(
                "history",
                f"the run's input is {size} bytes, over the {MAX_INPUT_BYTES}-byte limit of "
                "one Temporal payload; trim the history (trim_history / budget_history)",
            )
        pairs = [
            SearchAttributePair(CONVERSATION_ID, conversation_id),
            SearchAttributePair(AGENT, self.agent_name),
        ]
        if parent:
            pairs.append(SearchAttributePair(PARENT_RUN_ID, parent))
        handle = await self.client.start_workflow(
            AgentRunWorkflow.run,
            payload,
            id=run_id,
            task_queue=self.task_queue,
            search_attributes=TypedSearchAttributes(pairs),
            static_summary=_summary(self.agent_name, prompt),
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
        )
        return DurableRun(run_id, conversation_id, handle, history, self.output_adapter)

    async def run(
        self,
        prompt: str | None = None,
        *,
        history: Sequence[Message] | None = None,
        parts: Sequence[Part] = (),
        deps: Any = None,
        run_id: str | None = None,
        conversation_id: str | None = None,
        approvals: dict[str, bool] | None = None,
    ) -> Result[OutputT]:
        """Run durably and wait: the same ``Result`` and ``RunError`` as ``Agent.run``."""
        started = await self.start(
            prompt,
            history=history,
            parts=parts,
            deps=deps,
            run_id=run_id,
            conversation_id=conversation_id,
            approvals=approvals,
        )
        return await started.result()

    def run_stream(
        self,
        prompt: str | None = None,
        *,
        history: Sequence[Message] | None = None,
        parts: Sequence[Part] = (),
        deps: Any = None,
        run_id: str | None = None,
        conversation_id: str | None = None,
        approvals: dict[str, bool] | None = None,
    ) -> DurableRunStream[OutputT]:
        """Run durably, yielding ``agent.run_stream``'s events as they happen (the run
        starts when iterated); once exhausted, ``.result`` is what ``run`` returns."""
        return DurableRunStream(
            lambda: self.start(
                prompt,
                history=history,
                parts=parts,
                deps=deps,
                run_id=run_id,
                conversation_id=conversation_id,
                approvals=approvals,
                stream=True,
            )
        )

    async def attach(self, run_id: str) -> DurableRun[OutputT]:
        """A handle on a run started earlier, e.g. by a client that has since restarted."""
        handle = self.client.get_workflow_handle(run_id)
        description = await handle.describe()
        conversation_id = description.typed_search_attributes.get(CONVERSATION_ID) or ""
        history = await _input_history(handle)
        return DurableRun(run_id, conversation_id, handle, history, self.output_adapter)

    async def resume(
        self,
        failed: RunError | PartialResult | str,
        prompt: str | None = "continue",
        *,
        deps: Any = None,
    ) -> Result[OutputT]:
        """Continue a failed run in its conversation: from its ``RunError``, its
        ``PartialResult``, or its run id (the partial evidence is read from Temporal)."""
        if isinstance(failed, str):
            failed = await self._failure_of(failed)
        partial = failed.partial if isinstance(failed, RunError) else failed
        if partial is None:
            raise ValueError("the run completed nothing, so there is nothing to resume: start anew")
        return await (
            await self.start(
                prompt,
                history=partial.messages,
                deps=deps,
                conversation_id=partial.conversation_id,
                parent_run_id=partial.run_id,
            )
        ).result()

    async def _failure_of(self, run_id: str) -> RunError:
        record = await fetch_run(self.client, run_id)
        if isinstance(record.error, RunError):
            return record.error
        if record.error is not None:
            raise record.error
        raise ValueError(f"run {run_id} did not fail ({record.status}); continue it with run()")


@dataclass(frozen=True)
class RunRecord:
    """What Temporal holds of one run: its status and conversation, or why it failed."""

    run_id: str
    status: str
    """running, completed, failed, canceled, terminated, timed_out, ..."""
    messages: list[Message]
    """The conversation so far, the final one, or a failed run's partial evidence."""
    output: Any = None
    error: Exception | None = None


async def fetch_run(client: Client, run_id: str) -> RunRecord:
    """Read a run from Temporal (a running one through a query, so a worker must be up)."""
    handle = client.get_workflow_handle(run_id)
    description = await handle.describe()
    status = description.status.name.lower() if description.status else "unknown"
    history = await _input_history(handle)
    if description.status == WorkflowExecutionStatus.RUNNING:
        return RunRecord(run_id, status, await _query_pages(handle, 0))
    try:
        output = AgentRunOutput.model_validate(await handle.result())
    except WorkflowFailureError as exc:
        error = await _run_error(exc, handle, history)
        partial = error.partial if isinstance(error, RunError) else None
        return RunRecord(run_id, status, partial.messages if partial else history, error=error)
    messages = await _conversation(handle, output.snapshot, history)
    return RunRecord(run_id, status, messages, output=output.output)


async def _input_history(handle: WorkflowHandle[Any, Any]) -> list[Message]:
    """The history a run was started with (its first event's input)."""
    async for event in handle.fetch_history_events():
        attrs = event.workflow_execution_started_event_attributes
        payloads = golem_data_converter.payload_converter.from_payloads(
            list(attrs.input.payloads), [AgentRunInput]
        )
        return list(payloads[0].run.history)
    return []


async def _conversation(
    handle: WorkflowHandle[Any, Any], snapshot: RunSnapshot, history: list[Message]
) -> list[Message]:
    """A snapshot's conversation: carried inline, or paged out of the workflow by query."""
    if not snapshot.paged:
        return snapshot.messages(history)
    return await _query_pages(handle, snapshot.paged)


async def _query_pages(handle: WorkflowHandle[Any, Any], upto: int) -> list[Message]:
    """``golem.conversation`` page by page (``upto`` 0: everything so far)."""
    messages: list[Message] = []
    while True:
        page = await handle.query(
            "golem.conversation",
            MessagesQuery(since=len(messages), upto=upto),
            result_type=MessagesPage,
        )
        messages.extend(page.messages)
        if not page.messages or (upto and len(messages) >= upto):
            return messages


def _summary(agent: str, prompt: str | None) -> str:
    first = (prompt or "").strip().splitlines()[0] if (prompt or "").strip() else "(no prompt)"
    return f"{agent}: {first[:120]}"


async def _run_error(
    exc: WorkflowFailureError, handle: WorkflowHandle[Any, Any], history: list[Message]
) -> Exception:
    """Rebuild the ``RunError`` a failed (or cancelled) workflow carries."""
    cause = exc.cause
    run_id = handle.id
    if isinstance(cause, ApplicationError) and cause.type == UNKNOWN_AGENT:
        return UnknownAgentError(cause.message)
    raw: Any = cause.details[0] if isinstance(cause, ApplicationError) and cause.details else None
    if isinstance(cause, CancelledError):
        raw = await (await handle.describe()).memo_value(FAILURE_MEMO, None)
        if raw is None:
            return RunError("canceled", f"run {run_id} was cancelled before it started")
    if raw is not None:
        details = FailureDetails.model_validate(raw)
        partial = None
        if details.partial:
            messages = await _conversation(handle, details.partial, history)
            partial = details.partial.to_partial(messages)
        return RunError(details.stage, details.message, partial)
    # Terminated or timed out from outside: the loop never got to say why.
    message = cause.message if isinstance(cause, FailureError) else str(exc)
    kind = cause.type if isinstance(cause, ApplicationError) else type(cause).__name__
    return RunError("canceled", f"run {run_id} was stopped outside the loop ({kind}): {message}")
