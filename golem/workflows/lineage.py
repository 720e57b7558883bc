"""How runs and conversations are found in the Temporal UI: search attributes and summaries.

Shared by the client (standalone runs) and by workflows that start runs as children
(conversations, ``run_agent``), so every run carries the same lineage however it started.
"""

from __future__ import annotations

from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

__all__ = [
    "AGENT",
    "CONVERSATION_ID",
    "OWNER",
    "PARENT_RUN_ID",
    "SEARCH_ATTRIBUTES",
    "run_search_attributes",
    "summary",
]

CONVERSATION_ID = SearchAttributeKey.for_keyword("GolemConversationId")
AGENT = SearchAttributeKey.for_keyword("GolemAgent")
PARENT_RUN_ID = SearchAttributeKey.for_keyword("GolemParentRunId")
#: Who owns a conversation started by ``golem serve`` with auth (the token's subject).
OWNER = SearchAttributeKey.for_keyword("GolemOwner")
#: Register these on a cluster once (``golem setup``); the dev server gets them from ``golem dev``.
SEARCH_ATTRIBUTES = (CONVERSATION_ID, AGENT, PARENT_RUN_ID, OWNER)


def run_search_attributes(
    conversation_id: str, agent: str, parent_run_id: str = "", owner: str = ""
) -> TypedSearchAttributes:
    """The lineage every run (and conversation workflow) carries; ``owner`` for a
    conversation someone owns."""
    pairs = [
        SearchAttributePair(CONVERSATION_ID, conversation_id),
        SearchAttributePair(AGENT, agent),
    ]
    if parent_run_id:
        pairs.append(SearchAttributePair(PARENT_RUN_ID, parent_run_id))
    if owner:
        pairs.append(SearchAttributePair(OWNER, owner))
    return TypedSearchAttributes(pairs)


def summary(agent: str, prompt: str | None) -> str:
    """The UI's one-line summary of a run: the agent and the prompt's first line."""
    text = (prompt or "").strip()
    first = text.splitlines()[0] if text else "(no prompt)"
    return f"{agent}: {first[:120]}"
