"""The one error a handler raises to answer a request with a status and a reason."""

from __future__ import annotations

from golem.errors import ConversationClosedError, WorkflowTaskFailing

#: Server-sent events end their lines with LF alone: some clients (AG-UI's) split on it.
SEP = "\n"


class NoWorker(Exception):
    """No worker polls the agent's task queue: the turn was sent (durably) and is queued."""


class Problem(Exception):
    """Answer with HTTP ``status`` and ``{"error": reason}`` (a protocol's own error event
    where the response is already a stream). ``code`` names it for machines."""

    def __init__(self, status: int, reason: str, code: str = "", **more: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.code = code or _CODES.get(status, "bad_request")
        self.more = more
        """Fields the body carries beside ``error`` and ``code`` (a queued turn's run id)."""


_CODES = {
    400: "bad_request",
    401: "unauthenticated",
    403: "forbidden",
    404: "not_found",
    409: "conflict",
    413: "too_large",
    422: "unprocessable",
    503: "unavailable",
}


def ended_code(error: Exception) -> str:
    """The code of the error a streamed turn ended with, as its protocol's error event names
    it: the stage a run failed at, ``closed`` (as REST's 409), ``stuck`` (no worker can
    run it), ``no_worker`` (none polls: the turn is queued), else ``refused``."""
    if isinstance(error, ConversationClosedError):
        return "closed"
    if isinstance(error, WorkflowTaskFailing):
        return "stuck"
    if isinstance(error, NoWorker):
        return "no_worker"
    return str(getattr(error, "stage", "") or "refused")
