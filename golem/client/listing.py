"""Starting a workflow with the search attributes that list it, where the namespace has
them: ``GolemSummary``, which the Temporal UI's workflow list shows as a column
(docs/adr/0034), ``GolemWaiting``, which the pending inbox filters on (docs/adr/0047), and
``GolemTurnRuns``, which finds an inline turn's conversation (docs/adr/0050).

    handle = await start_listed(client, lambda listing: client.start_workflow(...), text)
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable
from typing import NamedTuple, TypeVar

from temporalio.client import Client
from temporalio.service import RPCError

from golem.wire.lineage import SUMMARY, TURN_RUNS, WAITING

T = TypeVar("T")

#: Clients whose namespace lacks an optional attribute (set up by an older golem), by
#: attribute: asked once each.
_LACKING: dict[str, weakref.WeakSet[Client]] = {
    SUMMARY.name: weakref.WeakSet(),
    WAITING.name: weakref.WeakSet(),
    TURN_RUNS.name: weakref.WeakSet(),
}


class Listing(NamedTuple):
    """What a start sets of the optional attributes."""

    summary: str | None
    """``GolemSummary`` (``None``: an encrypting client, or a namespace without it)."""
    waiting: bool
    """``GolemWaiting`` at 0."""
    turn_runs: bool
    """``GolemTurnRuns``, empty (only an inline conversation's start gives it)."""


def has(client: Client, name: str) -> bool:
    """Whether ``client``'s namespace has the optional attribute ``name``, as far as a start
    has told."""
    return client not in _LACKING[name]


def lacking(client: Client, name: str) -> None:
    """``client``'s namespace lacks the optional attribute ``name`` (a query said so)."""
    _LACKING[name].add(client)


def listed(client: Client, text: str, turn_runs: bool = False) -> Listing:
    """What ``start_listed`` passes its start first (``turn_runs``: the workflow would list
    its inline turns)."""
    summary = text if client.data_converter.payload_codec is None else None
    return Listing(
        summary if has(client, SUMMARY.name) else None,
        has(client, WAITING.name),
        turn_runs and has(client, TURN_RUNS.name),
    )


async def start_listed(
    client: Client, start: Callable[[Listing], Awaitable[T]], text: str, turn_runs: bool = False
) -> T:
    """``start(listing)``, which starts a workflow whose ``GolemSummary`` is ``text``, whose
    ``GolemWaiting`` is 0 and (``turn_runs``) which carries ``GolemTurnRuns``; for an
    attribute the namespace lacks (``golem setup`` adds it) ``None`` or ``False`` instead.
    An encrypting client sets no summary: search attributes are never encrypted, a prompt
    must not leak."""
    while True:
        listing = listed(client, text, turn_runs)
        try:
            return await start(listing)
        except RPCError as exc:
            given = (
                [SUMMARY.name] * (listing.summary is not None)
                + [WAITING.name] * listing.waiting
                + [TURN_RUNS.name] * listing.turn_runs
            )
            said = _said(exc)
            missing = [name for name in given if name in said]
            if not missing:
                raise
            lacking(client, missing[0])


def _said(exc: BaseException) -> str:
    """Everything ``exc`` says, its causes and details included: an update-with-start's
    error names the refused attribute only in its start's own error, inside it."""
    said: list[str] = []
    seen: BaseException | None = exc
    while seen is not None and len(said) < 10:
        said.append(str(seen))
        if isinstance(seen, RPCError):
            said.append(seen.raw_grpc_status.decode("utf-8", "replace"))
        seen = seen.__cause__ or seen.__context__
    return "\n".join(said)
