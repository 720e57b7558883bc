"""Client-run tools' results, as every protocol of ``golem serve`` sends them.

    {"results": {"<call id>": {"result": "2026-12-24"}}}   # REST: any JSON; a str as it is
    {"results": {"<call id>": {"error": "the user closed the calendar"}}}   # a failed result
    AG-UI: the input's trailing tool messages (``content``; ``error`` when the tool failed)

A client-run tool (``agent.external_tool``) is run by the application, so its calls wait
for a result, not for a person. :func:`check_answers` is the one place that tells the two
apart in a request: a result for a call that waits for a person, a decision for a call that
waits for a result, a result for a call that does not wait, or one over ``MAX_RESULT_BYTES``
is refused (4xx, naming the call) before anything reaches Temporal.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping

from golem.approvals import MAX_REASON_CHARS
from golem.serve.errors import Problem
from golem.serve.threads import Waiting
from golem.tools import ToolFailed

#: The largest result one call takes: the update that carries a batch is one Temporal payload.
MAX_RESULT_BYTES = 512 * 1024


def tool_result(call_id: str, given: object) -> object:
    """A REST entry (``{"result": ...}`` or ``{"error": "why"}``) as what the client's
    ``complete`` takes: the value, or ``ToolFailed``; 400 naming the call otherwise."""
    shape = '{"result": <any JSON>} or {"error": "why it failed"}'
    if not isinstance(given, Mapping) or len(given) != 1 or not {"result", "error"} & set(given):
        raise Problem(400, f"the result for call {call_id!r} must be {shape}, not {given!r}")
    if "error" not in given:
        return given["result"]
    error = given["error"]
    if not isinstance(error, str) or not error.strip():
        raise Problem(400, f'"error" of the result for call {call_id!r} must be a non-empty string')
    return ToolFailed(error)


def check_answers(
    waiting: Waiting | None,
    where: str,
    decisions: Collection[str] = (),
    results: Mapping[str, object] | None = None,
) -> Waiting:
    """The turn that waits, once ``decisions`` (call ids) and ``results`` each answer a
    call that waits for them; 409 naming the call (and what waits) otherwise, 413 for a
    result over ``MAX_RESULT_BYTES`` (a failure's reason over ``MAX_REASON_CHARS``)."""
    approvals = {c.id for c in waiting.approvals} if waiting is not None else set()
    external = {c.id for c in waiting.client_calls} if waiting is not None else set()
    waits = ", ".join(sorted(approvals | external)) or "nothing"
    for call_id in decisions:
        if call_id in external:
            raise Problem(
                409,
                f"call {call_id!r} is a client-run tool's: it waits for the application's "
                "result (tool-results), not a decision",
                "waits_for_result",
            )
        if call_id not in approvals:
            raise Problem(
                409, f"{where} does not wait for {call_id}: it waits for {waits}", "not_waiting"
            )
    for call_id, value in (results or {}).items():
        if call_id in approvals:
            raise Problem(
                409,
                f"call {call_id!r} waits for a person's decision, not a result",
                "waits_for_decision",
            )
        if call_id not in external:
            raise Problem(
                409,
                f"{where} does not wait for a result of {call_id}: it waits for {waits}",
                "not_waiting",
            )
        _check_size(call_id, value)
    if waiting is None:
        raise Problem(409, f"{where} waits for nothing", "not_waiting")
    return waiting


def _check_size(call_id: str, value: object) -> None:
    if isinstance(value, ToolFailed):
        if len(str(value)) > MAX_REASON_CHARS:
            raise Problem(
                413,
                f"the error for call {call_id!r} is {len(str(value))} characters: "
                f"at most {MAX_REASON_CHARS}",
                "too_large",
            )
        return
    size = len(value.encode() if isinstance(value, str) else json.dumps(value).encode())
    if size > MAX_RESULT_BYTES:
        raise Problem(
            413,
            f"the result for call {call_id!r} is {size} bytes: at most {MAX_RESULT_BYTES}",
            "too_large",
        )
