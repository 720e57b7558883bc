"""What a workflow gives the runs it starts as children (a conversation's turns,
``run_agent``'s child), beyond the lineage every run carries (golem.wire.lineage).

    details = child_details(run_id, conversation_id, agent)
    attributes = run_search_attributes(..., summary=listed_summary(text))
"""

from __future__ import annotations

from temporalio import workflow

from golem.wire.lineage import SUMMARY, details
from golem.workflows.patches import CHILD_DETAILS, patched

__all__ = ["child_details", "listed_summary"]


def child_details(run_id: str, conversation_id: str, agent: str) -> str | None:
    """In a workflow: a child run's static details (``None`` replaying a history recorded
    before children had them)."""
    return details(run_id, conversation_id, agent) if patched(CHILD_DETAILS) else None


def listed_summary(text: str) -> str | None:
    """In a workflow: ``text`` for a child's ``GolemSummary`` when this workflow has one (so
    the namespace has the attribute), else ``None``."""
    return text if workflow.info().typed_search_attributes.get(SUMMARY) is not None else None
