"""Every name golem's durable sides share: workflow types, update, signal and query names,
activity names, the stream topic, search attribute and memo keys, and the
``ApplicationError.type`` of every failure golem raises or matches.

    from golem.wire import names
    @workflow.update(name=names.APPROVE)
    await handle.query(names.PENDING, result_type=list[ToolCall])

These strings are written into histories (0.2.0's included): a value never changes; a new
name is a new line here. No other module in ``golem/`` spells one (tests/test_layers.py).
This module imports nothing, so anything may import it.
"""

from __future__ import annotations

from typing import Final

# Workflow types.
AGENT_RUN_WORKFLOW: Final = "AgentRunWorkflow"
CONVERSATION_WORKFLOW: Final = "ConversationWorkflow"

# Updates.
#: A run's outcome, answered as soon as it finishes or pauses for approvals.
OUTCOME: Final = "golem.outcome"
#: Decisions for the calls a run (or a conversation's turn) waits on.
APPROVE: Final = "golem.approve"
#: One conversation turn.
SEND: Final = "golem.send"
SET_APPROVAL_POLICY: Final = "golem.set_approval_policy"
REVOKE: Final = "golem.revoke"
CLOSE: Final = "golem.close"

# Signals.
#: Decisions a conversation hands to its waiting child run.
DECIDE: Final = "golem.decide"
#: A child run tells its parent that it waits for approvals.
PAUSED: Final = "golem.paused"
#: Tells a conversation to move to the current worker deployment version between turns.
UPGRADE: Final = "golem.upgrade"

# Queries.
PENDING: Final = "golem.pending"
MESSAGES: Final = "golem.messages"
CONVERSATION: Final = "golem.conversation"
APPROVALS_POLICY: Final = "golem.approvals_policy"
CURRENT_AGENT: Final = "golem.current_agent"
RUNS: Final = "golem.runs"
#: Whether an inline conversation's stream holds a turn's items, or will (docs/adr/0050).
TURN_STREAM_HELD: Final = "golem.turn_stream_held"
#: Whether an inline conversation's turn is queued or runs: its history has no new answer.
TURN_IN_FLIGHT: Final = "golem.turn_in_flight"
TURN_PROMPT: Final = "golem.turn_prompt"
#: The MCP and per-run external tool definitions a run holds (its activities read them back).
TOOLS: Final = "golem.tools"

# Activities.
MODEL_REQUEST: Final = "golem.model_request"
TOOL: Final = "golem.tool"
PROCESS_HISTORY: Final = "golem.process_history"
RESOLVE_INSTRUCTIONS: Final = "golem.resolve_instructions"
EVALUATE_APPROVAL: Final = "golem.evaluate_approval"
#: Every golem activity's name starts so.
ACTIVITY_NAMESPACE: Final = "golem."
#: temporalio.contrib's MCP activities (one per server operation) start so.
MCP_ACTIVITY_PREFIX: Final = "temporalio.mcp."

# The stream.
#: The one topic of a run's stream.
TOPIC: Final = "golem.events"
#: temporalio.contrib.workflow_streams' poll, an update (a long poll) and a query (a closed
#: run's items) by one name: golem's reader sends it itself (golem.streaming).
STREAM_POLL: Final = "__temporal_workflow_stream_poll"
#: The contrib's refusals of a poll: an offset its log no longer holds, a run that hands
#: its stream over to the next (continue-as-new).
STREAM_TRUNCATED: Final = "TruncatedOffset"
STREAM_DRAINING: Final = "StreamDraining"

# Search attributes (Keyword unless said).
CONVERSATION_ID_ATTRIBUTE: Final = "GolemConversationId"
AGENT_ATTRIBUTE: Final = "GolemAgent"
PARENT_RUN_ID_ATTRIBUTE: Final = "GolemParentRunId"
OWNER_ATTRIBUTE: Final = "GolemOwner"
SUMMARY_ATTRIBUTE: Final = "GolemSummary"
#: (Int) How many calls a run waits for now: the pending inbox's filter.
WAITING_ATTRIBUTE: Final = "GolemWaiting"
#: (KeywordList) The run ids of the inline turns a conversation's workflow run took: an
#: inline turn's run id finds its conversation (docs/adr/0050-turns-inline.md).
TURN_RUNS_ATTRIBUTE: Final = "GolemTurnRuns"

# Memo keys.
#: A cancelled run's ``Failed`` (a cancel carries no details).
FAILURE_MEMO: Final = "golemFailure"
#: A closed run's ``OutcomeMemo``, so the UI shows it without a worker.
OUTCOME_MEMO: Final = "golemOutcome"
#: A waiting run's ``Waiting``: each call it waits for (the pending inbox reads it).
WAITING_MEMO: Final = "golemWaiting"
#: Memo key of a continued conversation's summary: Temporal keeps no static summary across
#: continue-as-new, and the UI shows a memo with no worker answering.
SUMMARY_MEMO: Final = "golemSummary"
#: An inline turn that paused and ended with no update answering: its ``TurnEnded``.
TURN_ENDED_MEMO: Final = "golemTurnEnded"
#: An inline turn's run that handed over (or a handed-over run whose messages its history
#: cannot rebuild) ended: its messages, by value, for the conversation's history reader.
HANDED_RUN_MEMO: Final = "golemHandedRun"
#: Memo key of a conversation whose turns run inline (set at its start): its turns'
#: streams are its own stream's, not child runs' (docs/adr/0050-turns-inline.md).
INLINE_MEMO: Final = "golemInlineTurns"
#: Memo key of an inline conversation started where the namespace has ``GolemTurnRuns``
#: (its start carried it): it lists its turns' run ids there.
TURN_RUNS_MEMO: Final = "golemTurnRuns"

# ApplicationError types.
#: A failed run; its details are a ``Failed``.
RUN_ERROR: Final = "GolemRunError"
UNKNOWN_AGENT: Final = "GolemUnknownAgent"
CANNOT_PAUSE: Final = "GolemCannotPause"
NOT_PAUSED: Final = "GolemNotPaused"
INVALID_DECISION: Final = "GolemInvalidDecision"
CONVERSATION_CLOSED: Final = "GolemConversationClosed"
CONVERSATION_CONTINUING: Final = "GolemConversationContinuing"
TURN_RECORDED: Final = "GolemTurnRecorded"
APPROVALS_WAITING: Final = "GolemApprovalsWaiting"
RUN_ID_IN_USE: Final = "GolemRunIdInUse"
TURN_DIFFERS: Final = "GolemTurnDiffers"
PAYLOAD_TOO_LARGE: Final = "GolemPayloadTooLarge"
#: A conversation whose turns run inline was asked what such turns cannot do yet.
NOT_INLINE: Final = "GolemNotInline"
SHIPPING_ERROR: Final = "GolemShippingError"
TOOL_ERROR: Final = "GolemToolError"
USER_ERROR: Final = "GolemUserFunctionError"
BAD_RESULT: Final = "GolemBadResult"
BAD_PAYLOAD: Final = "GolemBadPayload"
DECRYPTION_ERROR: Final = "GolemDecryptionError"
STORAGE_ERROR: Final = "GolemStoredPayloadUnreadable"
#: temporalio.contrib's MCP activities fail so on a protocol error.
MCP_PROTOCOL_ERROR: Final = "MCPProtocolError"


def spelled() -> dict[str, str]:
    """Every name above by its value (the value -> the constant's name)."""
    return {
        value: key
        for key, value in globals().items()
        if key.isupper() and isinstance(value, str) and key != "ACTIVITY_NAMESPACE"
    }
