"""Starting a workflow with its ``GolemSummary`` search attribute, where the namespace has
it: the Temporal UI's workflow list shows it as a column (docs/adr/0034).

    handle = await start_listed(client, lambda summary: client.start_workflow(...), text)
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable
from typing import TypeVar

from temporalio.client import Client
from temporalio.service import RPCError

from golem.wire.lineage import SUMMARY

__all__ = ["start_listed"]

T = TypeVar("T")

#: Clients whose namespace lacks GolemSummary (set up by golem 0.2.0): asked once each.
_UNLISTED: weakref.WeakSet[Client] = weakref.WeakSet()


async def start_listed(client: Client, start: Callable[[str | None], Awaitable[T]], text: str) -> T:
    """``start(text)``, which starts a workflow whose ``GolemSummary`` is ``text``; where the
    namespace has no such attribute (``golem setup`` adds it), ``start(None)`` instead, and
    for an encrypting client: search attributes are never encrypted, a prompt must not leak."""
    if client.data_converter.payload_codec is not None:
        return await start(None)
    if client not in _UNLISTED:
        try:
            return await start(text)
        except RPCError as exc:
            if SUMMARY.name not in exc.message:
                raise
            _UNLISTED.add(client)
    return await start(None)
