"""Run agents durably from a Temporal client.

    client = await Client.connect("localhost:7233", plugins=[GolemPlugin(agent)])
    durable = DurableAgent(client, agent, task_queue="golem")
    result = await durable.run("Plan my trip", history=previous.messages)

``DurableAgent.run`` mirrors ``Agent.run``: same ``Result``, same ``golem.RunError``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, Generic, TypeVar

from pydantic import TypeAdapter
from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from golem.agent import Agent
from golem.approvals import DecisionInput
from golem.client.conversations import DurableConversation, start_conversation
from golem.client.inputs import check_not_waiting, check_size, checked
from golem.client.listing import start_listed
from golem.client.lookups import inline_not_a_conversation, inline_turn_conversation
from golem.client.records import fetch_run, run_input
from golem.client.recovery import RECOVERY_TIMEOUT
from golem.client.runs import DurableRun
from golem.delegation import inline_problem, inline_refusal
from golem.errors import RunIdInUseError
from golem.external import run_tools, with_results
from golem.ids import new_id
from golem.messages import HistoryItem, Part
from golem.models.base import ToolDefinition
from golem.phases.prepare import checked_approvals
from golem.results import PartialResult, Result, RunError
from golem.run_state import RunInput, resolve_conversation_id
from golem.streaming import DurableRunStream
from golem.tools import Tool
from golem.wire import AgentRunInput, ConversationInput
from golem.wire.lineage import CONVERSATION_ID, details, run_search_attributes, summary
from golem.workflows.agent_run import AgentRunWorkflow

OutputT = TypeVar("OutputT")


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
        self.tools: dict[str, Tool] = {} if isinstance(agent, str) else dict(agent.tools)
        """The agent's tools (known when built with the ``Agent``): edits and results are
        checked against them before anything is sent."""
        # Only a run that may wait for approvals needs the outcome update's round trip.
        self.may_pause = isinstance(agent, str) or agent.may_pause
        self.inline_problem = "" if isinstance(agent, str) else inline_problem(agent)
        """Why its conversations' turns cannot run inline ("": they can, or it is known by
        name only and each send asks its worker)."""

    def _never_pauses(self) -> None:
        """The worker says this agent has no tool that needs approval: later runs skip the
        outcome update."""
        self.may_pause = False

    async def start(
        self,
        prompt: str | None = None,
        *,
        history: Sequence[HistoryItem] | None = None,
        parts: Sequence[Part] = (),
        deps: Any = None,
        run_id: str | None = None,
        conversation_id: str | None = None,
        approvals: Mapping[str, DecisionInput] | None = None,
        tool_results: Mapping[str, object] | None = None,
        parent_run_id: str | None = None,
        stream: bool = False,
        external_tools: Sequence[ToolDefinition] = (),
    ) -> DurableRun[OutputT]:
        """Start a run and return at once. The run id is minted here, so it is the
        workflow id before the run starts. ``history`` holds ``Message``s or dicts of them
        (as ``dump_messages`` writes them). ``external_tools``: as ``Agent.run``'s."""
        sent = checked(prompt, parts=parts, deps=deps, history=history)
        tools = run_tools(self.agent_name, self.tools, external_tools)
        history = sent.history
        run_id = run_id or new_id()
        conversation_id = resolve_conversation_id(history, conversation_id) or new_id()
        parent = parent_run_id or next((m.run_id for m in reversed(history) if m.run_id), "")
        run = RunInput.of(
            prompt,
            parts=sent.parts,
            history=history,
            deps=deps,
            run_id=run_id,
            conversation_id=conversation_id,
            approvals=checked_approvals(
                tools, history, with_results(tools, history, approvals, tool_results)
            ),
            external_tools=list(external_tools),
        )
        payload = AgentRunInput(agent=self.agent_name, run=run, parent_run_id=parent, stream=stream)
        check_size(payload, self.client.data_converter)
        await check_not_waiting(self.client, history)
        try:
            handle = await self._start(payload, run_id, parent, prompt)
        except WorkflowAlreadyStartedError:
            raise RunIdInUseError(
                f"run id {run_id!r} is taken: a run by that id exists already (running or "
                "closed); pass a new run id, or none to get one"
            ) from None
        return DurableRun(
            run_id,
            conversation_id,
            handle,
            history,
            self.output_adapter,
            self.may_pause or bool(external_tools),
            self.client.data_converter,
            self._never_pauses,
            agent=self.agent_name,
            tools=tools,
            client=self.client,
        )

    async def _start(
        self, payload: AgentRunInput, run_id: str, parent: str, prompt: str | None
    ) -> WorkflowHandle[Any, Any]:
        title = summary(self.agent_name, prompt)
        start = lambda listing: self._start_as(  # noqa: E731
            payload, run_id, parent, title, listing.summary, listing.waiting
        )
        return await start_listed(self.client, start, title)

    async def _start_as(
        self,
        payload: AgentRunInput,
        run_id: str,
        parent: str,
        title: str,
        listed: str | None,
        waiting: bool,
    ) -> WorkflowHandle[Any, Any]:
        return await self.client.start_workflow(
            AgentRunWorkflow.run,
            payload,
            id=run_id,
            task_queue=self.task_queue,
            search_attributes=run_search_attributes(
                payload.run.conversation_id,
                self.agent_name,
                parent,
                summary=listed,
                waiting=waiting,
            ),
            static_summary=title,
            static_details=details(run_id, payload.run.conversation_id, self.agent_name),
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
        )

    async def run(
        self,
        prompt: str | None = None,
        *,
        history: Sequence[HistoryItem] | None = None,
        parts: Sequence[Part] = (),
        deps: Any = None,
        run_id: str | None = None,
        conversation_id: str | None = None,
        approvals: Mapping[str, DecisionInput] | None = None,
        tool_results: Mapping[str, object] | None = None,
        external_tools: Sequence[ToolDefinition] = (),
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
            tool_results=tool_results,
            external_tools=external_tools,
        )
        return await started.result()

    def run_stream(
        self,
        prompt: str | None = None,
        *,
        history: Sequence[HistoryItem] | None = None,
        parts: Sequence[Part] = (),
        deps: Any = None,
        run_id: str | None = None,
        conversation_id: str | None = None,
        approvals: Mapping[str, DecisionInput] | None = None,
        tool_results: Mapping[str, object] | None = None,
        external_tools: Sequence[ToolDefinition] = (),
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
                tool_results=tool_results,
                stream=True,
                external_tools=external_tools,
            )
        )

    async def attach(self, run_id: str) -> DurableRun[OutputT]:
        """A handle on a run started earlier, e.g. by a client that has since restarted."""
        handle = self.client.get_workflow_handle(run_id)
        description = await handle.describe()
        conversation_id = description.typed_search_attributes.get(CONVERSATION_ID) or ""
        history, based = await run_input(self.client, handle)
        return DurableRun(
            run_id,
            conversation_id,
            handle,
            history,
            self.output_adapter,
            self.may_pause,
            self.client.data_converter,
            self._never_pauses,
            based,
            client=self.client,
            agent=self.agent_name,
            tools=self.tools,
        )

    async def conversation(
        self,
        conversation_id: str | None = None,
        *,
        history: Sequence[HistoryItem] | None = None,
        parent_run_id: str = "",
        idle_timeout: timedelta | None = None,
        owner: str = "",
        recovery_timeout: timedelta = RECOVERY_TIMEOUT,
        inline_turns: bool = False,
    ) -> DurableConversation[OutputT]:
        """A durable conversation (a ``ConversationWorkflow``): started when absent, attached
        when it runs already. ``history`` and ``idle_timeout`` shape a new conversation only:
        after ``idle_timeout`` without a turn it rests (its workflow closes, the transcript
        readable) and its next ``send`` reopens it; ``None`` keeps it open until ``close()``.
        ``owner`` names who owns a new conversation (``GolemOwner``: ``golem serve``'s auth).
        ``recovery_timeout`` bounds how long each send may take to get its turn taken (through
        continue-as-new, a reopen, no worker up): then it raises ``TurnNotTaken``, naming the
        conversation and the turn; the turn's own run is not bounded. ``inline_turns`` runs a
        new conversation's turns in its own workflow, not as child runs (about half the
        worker CPU and history per turn; docs/adr/0050-turns-inline.md): for now only for
        agents whose loop does not need the whole history (a history processor). A
        ``conversation_id`` given is looked up among inline turns' run ids first (one
        visibility query): an inline turn's id names its conversation, as a child turn's does."""
        seed = checked(history=history).history
        await check_not_waiting(self.client, seed)
        if conversation_id and (
            turn := await inline_turn_conversation(self.client, conversation_id)
        ):
            # A child turn's id fails the start (a workflow holds it); an inline turn's would not.
            raise ValueError(inline_not_a_conversation(conversation_id, turn[0]))
        conversation_id = conversation_id or resolve_conversation_id(seed, None) or new_id()
        parent = parent_run_id or next((m.run_id for m in reversed(seed) if m.run_id), "")
        idle = idle_timeout.total_seconds() if idle_timeout is not None else None
        if idle is not None and idle <= 0:
            raise ValueError(f"idle_timeout must be positive, not {idle_timeout}")
        if inline_turns and self.inline_problem:
            raise ValueError(inline_refusal(f"serve {self.inline_problem}"))
        input = ConversationInput(
            agent=self.agent_name,
            messages=seed,
            parent_run_id=parent,
            idle_timeout=idle,
            inline_turns=inline_turns,
        )
        return await start_conversation(self, conversation_id, input, owner, recovery_timeout)

    async def resume(
        self,
        failed: RunError | PartialResult | str,
        prompt: str | None = "continue",
        *,
        deps: Any = None,
        run_id: str | None = None,
    ) -> Result[OutputT]:
        """Continue a failed run in its conversation: from its ``RunError``, its
        ``PartialResult``, or its run id (the partial evidence is read from Temporal).
        ``run_id`` names the new run, as for ``run``."""
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
                run_id=run_id,
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
