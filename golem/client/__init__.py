"""Run agents durably from a Temporal client: re-exports only.

    client = await Client.connect("localhost:7233", plugins=[GolemPlugin(agent)])
    durable = DurableAgent(client, agent, task_queue="golem")
    result = await durable.run("Plan my trip", history=previous.messages)

``DurableAgent.run`` mirrors ``Agent.run``: same ``Result``, same ``golem.RunError``.
Runs (golem.client.runs), agents (agents), conversations (conversations), getting a
conversation's turn taken (recovery), reading runs back (records), finding runs by id or
conversation (lookups), the calls that wait across the namespace (inbox:
``await pending(client)``) and checking what a caller sends (inputs); golem.wire.failures
maps a Temporal failure to golem's exception, for the client and for ``run_agent`` alike.
"""

from golem.client.agents import DurableAgent
from golem.client.conversations import DurableConversation
from golem.client.inbox import PendingCall, pending
from golem.client.records import RunRecord, conversation_runs, fetch_run
from golem.client.runs import DurableRun
from golem.errors import (
    ConversationClosedError,
    RunIdInUseError,
    TurnNotTaken,
    UnknownAgentError,
    WorkflowTaskFailing,
)
from golem.streaming import DurableRunStream
from golem.wire.lineage import (
    AGENT,
    CONVERSATION_ID,
    OWNER,
    PARENT_RUN_ID,
    SEARCH_ATTRIBUTES,
    WAITING,
)

__all__ = [
    "AGENT",
    "CONVERSATION_ID",
    "OWNER",
    "PARENT_RUN_ID",
    "SEARCH_ATTRIBUTES",
    "WAITING",
    "ConversationClosedError",
    "DurableAgent",
    "DurableConversation",
    "DurableRun",
    "DurableRunStream",
    "PendingCall",
    "RunIdInUseError",
    "RunRecord",
    "TurnNotTaken",
    "UnknownAgentError",
    "WorkflowTaskFailing",
    "conversation_runs",
    "fetch_run",
    "pending",
]
