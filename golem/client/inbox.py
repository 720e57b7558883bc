"""The pending inbox: every call that waits for a person or an application, across runs
and conversations, read from Temporal visibility (no workflow is asked, no worker needed).

    for call in await pending(client, agent="refunds"):
        print(call.tool, call.args, call.since, call.command)

A run lists itself while it waits: ``GolemWaiting`` counts its waiting calls and its memo
names them (golem.wire.inbox). Runs started where the namespace lacked ``GolemWaiting``
(``golem setup`` registers it) are not listed. See docs/adr/0047-pending-inbox.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from temporalio.client import Client
from temporalio.service import RPCError

from golem.client.lookups import _quoted
from golem.wire.inbox import WAITING_MEMO, Waiting
from golem.wire.lineage import AGENT, CONVERSATION_ID, OWNER, WAITING


@dataclass(frozen=True)
class PendingCall:
    """One call that waits, and how to answer it."""

    run_id: str
    """The run that waits for it."""
    conversation_id: str
    agent: str
    call_id: str
    tool: str
    args: str
    """The arguments as the model wrote them (cut when ``args_cut``: ``golem show`` has them)."""
    args_cut: bool
    kind: Literal["approval", "external"]
    since: datetime
    """When the run began to wait for it."""
    answers: str
    """The workflow id an answer goes to (``golem approve``/``golem complete`` take it)."""
    owner: str
    """Who owns the conversation (``GolemOwner``), or ""."""

    @property
    def who(self) -> str:
        """Who may answer: a person (its owner, when it has one) or the application."""
        if self.kind == "external":
            return "the application"
        return f"a person ({self.owner})" if self.owner else "a person"

    @property
    def command(self) -> str:
        """The ``golem`` command that answers it."""
        if self.kind == "external":
            return f"golem complete {self.answers} {self.call_id} --result JSON"
        return f"golem approve {self.answers} {self.call_id}"


def inbox_query(agent: str | None = None, conversation: str | None = None) -> str:
    """The visibility query of running workflows that wait for something."""
    query = f'{WAITING.name} > 0 AND ExecutionStatus = "Running"'
    if agent is not None:
        query += f' AND {AGENT.name} = "{_quoted(agent)}"'
    if conversation is not None:
        query += f' AND {CONVERSATION_ID.name} = "{_quoted(conversation)}"'
    return query


async def pending(
    client: Client,
    *,
    agent: str | None = None,
    conversation: str | None = None,
    limit: int | None = None,
) -> list[PendingCall]:
    """Every call waiting in the namespace (of ``agent``'s runs, in ``conversation``, when
    given), oldest first; at most ``limit`` runs are read. ``LookupError`` when the
    namespace has no ``GolemWaiting`` search attribute (``golem setup`` adds it)."""
    found: list[PendingCall] = []
    try:
        async for workflow in client.list_workflows(inbox_query(agent, conversation), limit=limit):
            memo = await workflow.memo()
            if WAITING_MEMO not in memo:
                continue  # it stopped waiting between the count and the memo: gone next time
            waiting = Waiting.model_validate(memo[WAITING_MEMO])
            since = datetime.fromisoformat(waiting.since)
            attributes = workflow.typed_search_attributes
            for call in waiting.calls:
                found.append(
                    PendingCall(
                        run_id=workflow.id,
                        conversation_id=attributes.get(CONVERSATION_ID) or "",
                        agent=attributes.get(AGENT) or "",
                        call_id=call.call_id,
                        tool=call.tool,
                        args=call.args,
                        args_cut=call.args_cut,
                        kind=call.kind,
                        since=since,
                        answers=waiting.answers,
                        owner=attributes.get(OWNER) or "",
                    )
                )
    except RPCError as exc:
        if WAITING.name in exc.message:
            raise LookupError(
                f"namespace {client.namespace} has no {WAITING.name} search attribute, so "
                "nothing is listed as waiting: run `golem setup` (`golem dev` has it)"
            ) from None
        raise
    found.sort(key=lambda call: (call.since, call.run_id))
    return found
