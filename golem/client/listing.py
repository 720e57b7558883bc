"""Starting a workflow with the search attributes that list it, where the namespace has
them: ``GolemSummary``, which the Temporal UI's workflow list shows as a column
(docs/adr/0034), and ``GolemWaiting``, which the pending inbox filters on (docs/adr/0047).

    handle = await start_listed(client, lambda summary, waiting: client.start_workflow(...), text)
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable
from typing import TypeVar

from temporalio.client import Client
from temporalio.service import RPCError

from golem.wire.lineage import SUMMARY, WAITING

T = TypeVar("T")

#: Clients whose namespace lacks an optional attribute (set up by an older golem), by
#: attribute: asked once each.
_LACKING: dict[str, weakref.WeakSet[Client]] = {
    SUMMARY.name: weakref.WeakSet(),
    WAITING.name: weakref.WeakSet(),
}


def _has(client: Client, name: str) -> bool:
    return client not in _LACKING[name]


def listed(client: Client, text: str) -> tuple[str | None, bool]:
    """What ``start_listed`` passes its start first: the summary (``None`` for an encrypting
    client, or a namespace without ``GolemSummary``) and whether ``GolemWaiting`` is set."""
    summary = text if client.data_converter.payload_codec is None else None
    return (summary if _has(client, SUMMARY.name) else None), _has(client, WAITING.name)


async def start_listed(
    client: Client, start: Callable[[str | None, bool], Awaitable[T]], text: str
) -> T:
    """``start(text, True)``, which starts a workflow whose ``GolemSummary`` is ``text`` and
    whose ``GolemWaiting`` is 0; for an attribute the namespace lacks (``golem setup`` adds
    it) ``None`` or ``False`` instead. An encrypting client sets no summary: search
    attributes are never encrypted, a prompt must not leak."""
    while True:
        summary, waiting = listed(client, text)
        try:
            return await start(summary, waiting)
        except RPCError as exc:
            given = [SUMMARY.name] * (summary is not None) + [WAITING.name] * waiting
            lacking = [name for name in given if name in exc.message]
            if not lacking:
                raise
            _LACKING[lacking[0]].add(client)
