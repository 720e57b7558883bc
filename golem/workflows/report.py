"""How a run reports itself: its outcome payloads (golem.wire.runs), its memo and the
details the Temporal UI shows, running and closed.

    report = Reporter(given=run.history, readable=info.parent is None)
    return report.completed(result, output, shipper)    # the workflow's result
    raise report.failure(error)                         # fails the workflow, for good

Workflow code, but deterministic by construction: it only shapes what the loop gave it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from temporalio import workflow
from temporalio.exceptions import CancelledError

with workflow.unsafe.imports_passed_through():
    from golem.messages import Message, ToolCall
    from golem.results import PartialResult, Result, RunError
    from golem.run_state import RunState
    from golem.wire import (
        PAGE_BYTES,
        Carried,
        Completed,
        Failed,
        InHistory,
        OutcomeMemo,
        Paged,
        Paused,
        RunMessages,
        RunReport,
        Stamps,
        common_prefix,
        compact,
        message_bytes,
        message_size,
        names,
    )
    from golem.wire.failures import failure_error
    from golem.workflows.patches import UTF8_PAGES, patched


@dataclass
class Progress:
    """What the UI shows of a running run's tools: those in flight, and those that finished
    (a failed one included: it ran)."""

    in_flight: list[str] = field(default_factory=list)
    finished: int = 0


def report_messages(
    messages: list[Message],
    given: list[Message],
    stamps: Stamps,
    recorded: Collection[str] = (),
    logged: int = 0,
    page_bytes: int | None = PAGE_BYTES,
) -> RunMessages:
    """Where a run's conversation ``messages`` travel: after the first ``logged`` (which
    the run's history holds) or after what they share with the ``given`` history; long
    contents whose digest is in ``recorded`` by reference; paged past ``page_bytes``
    (``None``: never, external storage takes a payload of any size)."""
    if logged:
        variant: Carried | InHistory = InHistory(
            count=logged, added=compact(messages[logged:], stamps, recorded)
        )
    else:
        keep = common_prefix(given, messages)
        variant = Carried(keep=keep, added=compact(messages[keep:], stamps, recorded))
    if page_bytes is not None and _over(variant.added.messages, page_bytes):
        return Paged(count=len(messages))
    return variant


def _over(messages: list[Message], page_bytes: int) -> bool:
    """More than a page of messages: counted in characters, then, for non-ASCII text, in
    bytes (up to four a character), where a payload carrying them by value would pass
    Temporal's limit and fail its workflow task for ever. A history recorded counting
    characters alone goes on doing so (the patch is asked only where the two differ)."""
    if sum(map(message_size, messages)) > page_bytes:
        return True
    if sum(map(message_bytes, messages)) <= page_bytes:
        return False
    return not workflow.in_workflow() or patched(UTF8_PAGES)


def _stamps(evidence: Result[Any] | PartialResult) -> Stamps:
    return Stamps(run_id=evidence.run_id, conversation_id=evidence.conversation_id)


def _counts(evidence: Result[Any] | PartialResult) -> dict[str, Any]:
    return {
        "run_id": evidence.run_id,
        "conversation_id": evidence.conversation_id,
        "usage": evidence.usage,
        "requests": evidence.requests,
        "tool_calls": evidence.tool_calls,
        "agent": evidence.agent if isinstance(evidence, Result) else "",
        "sub_runs": list(evidence.sub_runs),
        "descendants": evidence.descendants,
    }


class Reporter:
    """One run's outcome payloads. ``given`` is the history it was given by value;
    ``readable``: whoever reads the result can read the run's history (a client, not a
    parent workflow), so the result may leave to it what the history holds; ``stored``:
    external storage takes a payload of any size, so nothing is paged."""

    def __init__(self, given: list[Message], readable: bool, stored: bool = False) -> None:
        self.given = given
        self.readable = readable
        self.page_bytes = None if stored else PAGE_BYTES

    def completed(
        self, result: Result[Any], output: Any, recorded: Collection[str] = (), logged: int = 0
    ) -> Completed:
        """The workflow's result: ``recorded`` names the long contents the run's activities
        returned, ``logged`` how many leading messages its model calls hold (both left to
        the run's history when its reader can read it)."""
        if not self.readable:
            recorded, logged = (), 0
        messages = report_messages(
            result.messages, self.given, _stamps(result), recorded, logged, self.page_bytes
        )
        return Completed(output=output, messages=messages, **_counts(result))

    def paused(self, result: Result[Any]) -> Paused:
        messages = report_messages(
            result.messages, self.given, _stamps(result), page_bytes=self.page_bytes
        )
        below = {c: r for c, r in result.pending_runs.items() if r != result.run_id}
        return Paused(
            pending_approvals=[*result.pending_approvals, *result.pending_calls],
            external=[c.id for c in result.pending_calls],
            pending_runs=below,
            messages=messages,
            **_counts(result),
        )

    def failed(self, error: RunError) -> Failed:
        evidence = error.partial
        if evidence is None:
            return Failed(stage=error.stage, message=error.detail)
        messages = report_messages(
            evidence.messages, self.given, _stamps(evidence), page_bytes=self.page_bytes
        )
        return Failed(
            stage=error.stage,
            message=error.detail,
            evidence=RunReport(messages=messages, **_counts(evidence)),
        )

    def failure(self, error: RunError) -> tuple[BaseException, dict[str, Any]]:
        """What the workflow raises for ``error`` and what its memo holds besides: a cancel
        (its evidence in the memo, as a cancel carries no details) or a non-retryable
        ``GolemRunError``."""
        details = self.failed(error)
        if isinstance(error.__cause__, asyncio.CancelledError):
            return CancelledError(str(error)), {names.FAILURE_MEMO: details}
        return failure_error(error, details), {}


def memo(state: RunState, progress: Progress, stop_reason: str, output: Any = None) -> Any:
    """A closed run at a glance, for the UI's memo (every count shown, zeros included)."""
    text = output if isinstance(output, str) else "" if output is None else json.dumps(output)
    return OutcomeMemo(
        stop_reason=stop_reason,
        output=text if len(text) <= 200 else text[:197] + "...",
        turns=state.turn,
        requests=state.requests,
        tool_calls=max(state.tool_calls, progress.finished),
        input_tokens=state.usage.input_tokens,
        output_tokens=state.usage.output_tokens,
    ).model_dump(by_alias=True)


def details(
    state: RunState,
    turn: int,
    progress: Progress,
    outcome: str = "",
    pending: list[ToolCall] | None = None,
) -> str:
    """What the UI's Current Details show: how the run ended once it has, or the calls it
    waits for, first; then the counts (a tool call that ran and failed counts: it ran)."""
    usage = state.usage
    lines = [f"**{outcome}**"] if outcome else []
    if pending and not outcome:
        calls = ", ".join(f"{c.name} ({c.id})" for c in pending)
        lines.append(f"**waiting for approval** {calls}")
    lines.append(
        f"**turn** {turn} · **requests** {state.requests} · **tool calls** "
        f"{max(state.tool_calls, progress.finished)}"
    )
    lines.append(f"**tokens** {usage.input_tokens} in / {usage.output_tokens} out")
    lines.append(f"**tools in flight** {', '.join(progress.in_flight) or 'none'}")
    return "\n\n".join(lines)
