"""What a waiting run lists in its memo for the pending inbox (golem.client.inbox).

While a run waits, ``GolemWaiting`` (a search attribute) counts its waiting calls and its
memo's ``golemWaiting`` names each: a visibility query then lists every call that waits in
a namespace without asking any workflow (docs/adr/0047-pending-inbox.md). The memo goes
through the client's codec, so an encrypted run's arguments stay encrypted.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from golem.wire import names
from golem.wire.base import Wire

#: The memo key of a waiting run's calls (cleared once it waits for none).
WAITING_MEMO = names.WAITING_MEMO
#: The longest arguments a listing carries, in characters (``golem show`` has them whole).
ARGS_LISTED = 2000


class WaitingCall(Wire):
    """One call a run waits for."""

    call_id: str
    tool: str
    args: str
    """The call's arguments as the model wrote them, cut at ``ARGS_LISTED`` characters."""
    args_cut: bool = False
    """Whether ``args`` was cut."""
    kind: Literal["approval", "external"] = "approval"
    """``approval``: a person decides; ``external``: the application gives the result."""


class Waiting(Wire):
    """What a run waits for now, since when and where the answer goes."""

    since: str
    """When it began to wait (ISO 8601, the workflow's clock)."""
    answers: str
    """The workflow id an answer is addressed to: the run's, or its conversation's or
    caller's when it waits for them."""
    calls: list[WaitingCall] = Field(default_factory=list)
