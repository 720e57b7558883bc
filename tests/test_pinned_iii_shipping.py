"""Shipping and storage behaviours a planted bug once slipped past (issue 29, "Tests that
were missing"): large new messages when external storage is on, a derived request read
on a worker that did not make it, and the preview of a stored payload. Without a server:
the workflow's Shipper and the workers' MessageCache, as tests/test_shipping.py drives them."""

from __future__ import annotations

import json

from temporalio.api.common.v1 import Payload
from temporalio.converter import ExternalStorage
from test_shipping import call_of, pager_of, turn

from golem.messages import Message
from golem.storage import LocalDirectory
from golem.tools import ToolOutcome, tool_message
from golem.wire import ByQuery, Derived, MessagesQuery
from golem.wire.cache import MessageCache
from golem.worker.display import _preview, for_display
from golem.workflows.shipper import Shipper

# -- large messages with storage on --------------------------------------------------------

INLINE_BYTES, STORED_BYTES = 1_000, 10_000


def prompt_of_size(size: int) -> list[Message]:
    """A first request whose one message ``message_size`` counts as ``size`` bytes."""
    return [Message.user("x" * (size - 200))]


async def test_with_storage_on_new_messages_past_its_threshold_ride_the_input_not_a_query() -> None:
    kinds = {}
    for size in (INLINE_BYTES, INLINE_BYTES + 1, STORED_BYTES - 1, STORED_BYTES, 5 * STORED_BYTES):
        shipper = Shipper(INLINE_BYTES, stored_bytes=STORED_BYTES)
        cache, served = MessageCache(), []
        request = prompt_of_size(size)
        call = call_of(shipper, 1, request)
        assert await cache.fetch("run-1", call, pager_of(shipper, served)) == request
        kinds[size] = (type(call.new).__name__, len(served), shipper.logged)
    assert kinds == {
        INLINE_BYTES: ("Inline", 0, True),  # small
        INLINE_BYTES + 1: ("ByQuery", 1, False),  # too big to ride, too small to be stored
        STORED_BYTES - 1: ("ByQuery", 1, False),
        STORED_BYTES: ("Inline", 0, True),  # the payload goes to the store: it rides
        5 * STORED_BYTES: ("Inline", 0, True),
    }


async def test_without_storage_large_new_messages_are_read_by_query() -> None:
    shipper = Shipper(INLINE_BYTES)  # stored_bytes None: no store behind the payloads
    call = call_of(shipper, 1, prompt_of_size(5 * STORED_BYTES))
    assert isinstance(call.new, ByQuery) and not shipper.logged


# -- a derived request read on another worker ----------------------------------------------


async def test_a_derived_request_is_made_where_its_parts_ran_and_read_only_where_they_did_not() -> (
    None
):
    """Workers A and B serve one run: each model call after the first is derived (the
    answer before it and its tool results). A worker that ran both makes it; one that ran
    the answer but not the tool reads just those two messages; one whose list is stale
    reads the whole request anew, once. Every request is whole."""
    shipper, a, b = Shipper(INLINE_BYTES), MessageCache(), MessageCache()
    request = [Message.user("go").stamped("run", "conv")]
    await a.fetch("run-1", call_of(shipper, 1, request), pager_of(shipper))

    async def step(
        n: int, answered_on: MessageCache, tool_on: MessageCache, next_on: MessageCache
    ) -> list[MessagesQuery]:
        """Answer ``n`` on one worker, its tool on another (or the same), then the next
        model call on a third; what that call read by query."""
        nonlocal request
        answer = turn(n)[0]
        outcome = ToolOutcome(content=f"page {n}")
        shipper.answered(answer)
        shipper.called(f"c{n}", outcome)
        answered_on.answered("run-1", answer)
        if tool_on is not answered_on:
            tool_on.answered("run-1", answer)  # a tool's worker knows the call it runs
        tool_on.called("run-1", answer.tool_calls[0], outcome)
        made = [answer, tool_message(answer.tool_calls[0], outcome)]
        request = [*request, *(m.stamped("run", "conv") for m in made)]
        call = call_of(shipper, n + 1, request)
        served: list[MessagesQuery] = []
        assert isinstance(call.new, Derived)
        assert await next_on.fetch("run-1", call, pager_of(shipper, served)) == request
        return served

    # Turn 1 ran on A; the next call lands on B, which holds nothing of the run.
    assert await step(1, a, a, b) == [MessagesQuery(since=0, upto=3)]
    assert await step(2, b, b, b) == []  # B ran the answer and the tool: it makes them
    # B ran the answer, A the tool: B reads only the answer and the tool's message.
    assert await step(3, b, a, b) == [MessagesQuery(since=5, upto=7)]
    # A's list is of the first call: stale, so the whole request is read anew.
    assert await step(4, b, b, a) == [MessagesQuery(since=0, upto=9)]
    assert (a.refetches, b.refetches) == (1, 0)


# -- the preview of a stored payload -------------------------------------------------------


def json_payload(data: bytes) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=data)


def test_a_stored_payloads_preview_names_its_size_encoding_and_shows_its_first_bytes() -> None:
    data = json.dumps(
        {"content": "é" + "y" * 300}, ensure_ascii=False
    ).encode()  # a 2-byte character first
    preview = json.loads(_preview(json_payload(data), 16).data)
    assert preview == {
        "golemStoredPayload": {"bytes": len(data), "encoding": "json/plain", "shown": 16},
        "preview": data[:16].decode(),
    }
    cut = json.loads(_preview(json_payload(data), 14).data)["preview"]  # inside the "é"
    assert cut == data[:13].decode() + "\N{REPLACEMENT CHARACTER}"


async def test_only_a_stored_payload_over_the_preview_size_is_shown_as_a_preview(
    tmp_path: object,
) -> None:
    inline = json_payload(b'"' + b"z" * 500 + b'"')
    storage = ExternalStorage(drivers=[LocalDirectory(str(tmp_path))])
    # Not stored: shown as it is whatever its size.
    assert await for_display([inline], storage, None, preview_bytes=10) == [inline]
