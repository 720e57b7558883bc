"""The tool definitions a run's toolsets offer, as its model activity learns them.

A model call names them by digest (``ModelCallInput.tools``); a worker keeps each list it
has seen by that digest, so only its first call with a new list asks the run for it
(query ``golem.tools``). The list is checked against the digest, never trusted.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable

from golem.models.base import ToolDefinition
from golem.toolsets import tools_digest

#: Asks the calling run for its toolsets' tool definitions.
Asker = Callable[[], Awaitable[list[ToolDefinition]]]


class ToolLists:
    """Per worker: toolset tool lists by digest, the most recently used ``max_lists``."""

    def __init__(self, max_lists: int = 64) -> None:
        self.max_lists = max_lists
        self.queries = 0
        """Lists asked of runs so far (for tests and tuning)."""
        self._lists: OrderedDict[str, list[ToolDefinition]] = OrderedDict()

    async def get(self, digest: str, ask: Asker) -> list[ToolDefinition]:
        """The list whose digest is ``digest`` (``[]`` for ``""``: a run without toolsets)."""
        if not digest:
            return []
        known = self._lists.pop(digest, None)
        if known is None:
            self.queries += 1
            known = await ask()
            if tools_digest(known) != digest:
                raise LookupError(
                    f"the run's toolset tools do not match the digest its model call named "
                    f"({tools_digest(known)} != {digest})"
                )
        self._lists[digest] = known
        while len(self._lists) > self.max_lists:
            self._lists.popitem(last=False)
        return known
