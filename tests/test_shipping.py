"""Message shipping without a server: the workflow's Outbox and the workers' MessageCache,
with every input and page round-tripped through golem's data converter as Temporal would."""

from __future__ import annotations

from typing import Any, TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from golem.messages import Message, Part, ToolCall
from golem.worker.converter import golem_data_converter
from golem.workflows.pages import MessagesPage, MessagesQuery, Pager
from golem.workflows.shipping import (
    HistoryBase,
    MessageCache,
    ModelCallInput,
    Outbox,
    ShippingError,
    chain_all,
    content_digest,
)

T = TypeVar("T")
OWN = ("run", "conv")
CONVERTER = golem_data_converter.payload_converter


def wire(value: Any, kind: type[T]) -> T:
    """The value as the other side of Temporal receives it."""
    result: T = CONVERTER.from_payloads(CONVERTER.to_payloads([value]), [kind])[0]
    return result


def pager_of(outbox: Outbox, served: list[MessagesQuery] | None = None) -> Pager:
    async def page(query: MessagesQuery) -> MessagesPage:
        if served is not None:
            served.append(query)
        return wire(outbox.page(wire(query, MessagesQuery)), MessagesPage)

    return page


def turn(n: int, result: str = "") -> list[Message]:
    return [
        Message.assistant("", [ToolCall(id=f"c{n}", name="fetch", args=f'{{"n": {n}}}')]),
        Message.tool(f"c{n}", "fetch", result or f"page {n}"),
    ]


async def ship(
    outbox: Outbox, cache: MessageCache, request: list[Message], n: int
) -> list[Message]:
    call = wire(outbox.ship("agent", n, request), ModelCallInput)
    return await cache.fetch("run-1", call, pager_of(outbox))


async def test_small_new_messages_extend_the_cache_without_a_query() -> None:
    outbox, cache = Outbox(inline_bytes=4096), MessageCache()
    request = [Message.system("be brief"), Message.user("go")]
    for n in range(4):
        assert await ship(outbox, cache, request, n + 1) == request
        request = [Message.system("be brief"), *request[1:], *turn(n)]
    assert cache.queries == 0 and cache.refetches == 0


async def test_only_the_new_messages_ride_the_input() -> None:
    outbox = Outbox(inline_bytes=4096)
    first = [Message.user("go")]
    outbox.ship("agent", 1, first)
    call = outbox.ship("agent", 2, [*first, *turn(0)])
    assert (call.since, call.upto) == (1, 3)
    assert call.messages == turn(0)


async def test_new_messages_over_the_limit_are_read_by_query_only_from_where_they_start() -> None:
    outbox, cache = Outbox(inline_bytes=1000), MessageCache()
    served: list[MessagesQuery] = []
    request = [Message.user("go")]
    await cache.fetch("r", wire(outbox.ship("a", 1, request), ModelCallInput), pager_of(outbox))
    request = [*request, *turn(0, "x" * 5000)]
    call = wire(outbox.ship("a", 2, request), ModelCallInput)
    assert call.messages == []
    assert await cache.fetch("r", call, pager_of(outbox, served)) == request
    assert served == [MessagesQuery(since=1, upto=3)]


async def test_a_stale_list_of_the_right_length_is_refetched_not_extended() -> None:
    # Worker A saw a request of three messages; the run's turn 2 request went elsewhere and
    # differs at message 2. An append-only cache trusting lengths would extend A's list.
    cache = MessageCache()
    stale = Outbox(inline_bytes=4096)
    await ship(stale, cache, [Message.user("go"), *turn(0, "old result")], 1)
    truth = Outbox(inline_bytes=4096)
    request = [Message.user("go"), *turn(0, "new result")]
    truth.ship("agent", 1, request)
    request = [*request, *turn(1)]
    call = wire(truth.ship("agent", 2, request), ModelCallInput)
    assert call.since == 3 and call.prefix == ""  # it extends its previous request
    got = await cache.fetch("run-1", call, pager_of(truth))
    assert got == request
    assert cache.refetches == 1  # extended, found wrong by the digest, read anew


async def test_a_request_that_rewrites_its_prefix_ships_from_the_first_difference() -> None:
    outbox, cache = Outbox(inline_bytes=4096), MessageCache()
    request = [Message.system("v1"), Message.user("go"), *turn(0)]
    await ship(outbox, cache, request, 1)
    rewritten = [Message.system("v1"), Message.user("go, edited"), *turn(0), *turn(1)]
    call = outbox.ship("agent", 2, rewritten)
    assert call.since == 1 and call.messages == rewritten[1:]
    assert call.prefix == chain_all(request[:1])[-1]  # a rewrite names where it starts
    assert await cache.fetch("run-1", wire(call, ModelCallInput), pager_of(outbox)) == rewritten


async def test_a_workflow_serving_other_messages_is_refused_not_sent_to_the_model() -> None:
    outbox, cache = Outbox(inline_bytes=0), MessageCache()
    call = outbox.ship("agent", 1, [Message.user("go")])

    async def liar(query: MessagesQuery) -> MessagesPage:
        return MessagesPage(messages=[Message.user("something else")], next=1)

    with pytest.raises(ShippingError, match="do not match"):
        await cache.fetch("run-1", call, liar)


async def test_digests_survive_the_wire_with_every_kind_of_field() -> None:
    outbox, cache = Outbox(inline_bytes=1_000_000), MessageCache()
    request = [
        Message.user("look", [Part(kind="image", data=b"\x00\x01\xff", media_type="image/png")]),
        Message.assistant("é ✓", [ToolCall(id="1", name="f", args='{"a": [1, 2.5, null]}')]),
        Message.tool("1", "f", "", failed=True),
    ]
    assert await ship(outbox, cache, request, 1) == request


async def test_the_cache_keeps_only_its_most_recent_runs() -> None:
    outbox, cache = Outbox(inline_bytes=4096), MessageCache(max_runs=2)
    for run in ("a", "b", "c"):
        call = outbox.ship("agent", 1, [Message.user(run)])
        outbox = Outbox(inline_bytes=4096)
        await cache.fetch(run, wire(call, ModelCallInput), pager_of(outbox))
    assert list(cache._runs) == ["b", "c"]


# A request list either grows, or is rewritten from some index (a processor, a correction).
_edits = st.lists(
    st.tuples(st.integers(0, 10), st.integers(0, 3), st.integers(0, 1), st.integers(0, 2_000)),
    min_size=1,
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(_edits, st.integers(0, 3_000))
async def test_any_sequence_of_requests_on_any_workers_gives_each_request_exactly(
    edits: list[tuple[int, int, int, int]], inline: int
) -> None:
    outbox = Outbox(inline_bytes=inline)
    workers = [MessageCache(), MessageCache()]
    request: list[Message] = []
    for n, (keep, grow, worker, size) in enumerate(edits):
        request = request[: min(keep, len(request))] if keep < 10 else request
        added = [Message.user(f"{n}.{i} " + "x" * size) for i in range(grow + 1)]
        # Mostly the run's own messages (they ride without stamps), sometimes others'.
        request = [*request, *(m.stamped(*OWN) if (n + i) % 3 else m for i, m in enumerate(added))]
        call = wire(outbox.ship("agent", n, request, stamps=OWN), ModelCallInput)
        assert await workers[worker].fetch("run", call, pager_of(outbox)) == request


def transcript_pager(transcript: list[Message], served: list[MessagesQuery]) -> Pager:
    async def page(query: MessagesQuery) -> MessagesPage:
        served.append(query)
        return wire(MessagesPage.of(transcript, wire(query, MessagesQuery)), MessagesPage)

    return page


async def test_a_base_is_read_once_per_worker_then_only_what_was_appended() -> None:
    transcript = [Message.user("hi"), Message.assistant("hello"), *turn(1, "r" * 3000)]
    cache, served = MessageCache(), []
    own = [Message.system("be brief"), Message.user("next")]
    for count in (2, 4):
        base = HistoryBase(
            conversation="conv", count=count, digest=chain_all(transcript[:count])[-1]
        )
        outbox = Outbox(inline_bytes=4096, base=base)
        call = wire(outbox.ship("agent", 1, own), ModelCallInput)
        got = await cache.fetch(
            f"run-{count}", call, pager_of(outbox), transcript_pager(transcript, served)
        )
        # The instructions lead, then the conversation, then the run's own messages.
        assert got == [own[0], *transcript[:count], own[1]]
    assert [(q.since, q.upto) for q in served] == [(0, 2), (2, 4)]


async def test_a_rewritten_base_is_read_anew_and_a_wrong_one_refused() -> None:
    transcript = [Message.user("hi"), Message.assistant("hello")]
    cache, served = MessageCache(), []
    pager = transcript_pager(transcript, served)

    def call(digest: str) -> ModelCallInput:
        base = HistoryBase(conversation="conv", count=2, digest=digest)
        return wire(Outbox(4096, base).ship("agent", 1, [Message.user("go")]), ModelCallInput)

    empty: Pager = pager_of(Outbox(4096))
    await cache.fetch("run-1", call(chain_all(transcript)[-1]), empty, pager)
    transcript[1] = Message.assistant("hello, repaired")
    fixed = await cache.fetch("run-2", call(chain_all(transcript)[-1]), empty, pager)
    assert fixed[1].content == "hello, repaired" and cache.refetches == 1
    with pytest.raises(ShippingError, match="conversation conv"):
        await cache.fetch("run-3", call("0" * 32), empty, pager)


async def test_contents_an_activity_returned_travel_by_digest_or_are_read_by_query() -> None:
    big = "r" * 5000
    request = [Message.user("go"), *turn(1, big)]
    outbox = Outbox(inline_bytes=4096)
    await ship(outbox, keeper := MessageCache(), request[:1], 1)
    other = MessageCache()
    await ship(outbox, other, request[:1], 1)
    call = wire(outbox.ship("agent", 2, request, recorded={content_digest(big)}), ModelCallInput)
    assert call.refs == {1: content_digest(big)} and call.messages[1].content == ""
    keeper.keep(big)  # this worker ran the tool
    assert await keeper.fetch("run-1", call, pager_of(outbox)) == request
    assert keeper.queries == 0
    before = other.queries
    assert await other.fetch("run-1", call, pager_of(outbox)) == request
    assert other.queries == before + 1  # another worker ran it: read by query, verified


async def test_a_runs_own_messages_ride_without_their_stamps_and_come_back_stamped() -> None:
    stamps = ("run-1", "conv-1")
    own = [m.stamped(*stamps) for m in [Message.user("go"), *turn(1), *turn(2)]]
    outbox, keeper, other = Outbox(inline_bytes=4096), MessageCache(), MessageCache()
    first = wire(outbox.ship("agent", 1, own[:1], stamps=stamps), ModelCallInput)
    assert first.unstamped and first.stamps == stamps and not first.messages[0].run_id
    assert await keeper.fetch("run-1", first, pager_of(outbox)) == own[:1]
    second = wire(outbox.ship("agent", 2, own[:3], stamps=stamps), ModelCallInput)
    assert second.unstamped and second.stamps is None  # the cache kept them
    assert await keeper.fetch("run-1", second, pager_of(outbox)) == own[:3]
    assert keeper.queries == 0
    third = wire(outbox.ship("agent", 3, own, stamps=stamps), ModelCallInput)
    assert await other.fetch("run-1", third, pager_of(outbox)) == own
    assert other.queries == 1  # a worker that never saw the stamps reads by query once
    longer = [*own, *(m.stamped(*stamps) for m in turn(3))]
    fourth = wire(outbox.ship("agent", 4, longer, stamps=stamps), ModelCallInput)
    assert fourth.unstamped and fourth.stamps is None
    assert await other.fetch("run-1", fourth, pager_of(outbox)) == longer
    assert other.queries == 1  # ... and learns them from what it read
    foreign = [*longer, Message.user("from elsewhere").stamped("run-0", "conv-1")]
    mixed = wire(outbox.ship("agent", 5, foreign, stamps=stamps), ModelCallInput)
    assert not mixed.unstamped and mixed.messages[0].run_id == "run-0"
    assert await keeper.fetch("run-1", mixed, pager_of(outbox)) == foreign


async def test_an_answer_and_its_results_are_made_by_the_worker_that_ran_them() -> None:
    from golem.tools import ToolOutcome, tool_message

    stamps = ("run-1", "conv-1")
    prompt = Message.user("go").stamped(*stamps)
    answer = Message.assistant("", [ToolCall(id="c1", name="fetch", args="{}")])
    outcome = ToolOutcome(content="r" * 5000)
    made = [answer.stamped(*stamps), tool_message(answer.tool_calls[0], outcome).stamped(*stamps)]
    outbox, keeper, half, other = Outbox(4096), MessageCache(), MessageCache(), MessageCache()
    first = wire(outbox.ship("agent", 1, [prompt], stamps=stamps), ModelCallInput)
    for cache in (keeper, half, other):
        await cache.fetch("run-1", first, pager_of(outbox))
    keeper.answered("run-1", answer)
    keeper.called("run-1", answer.tool_calls[0], outcome)
    half.answered("run-1", answer)  # the tool ran elsewhere
    request = [prompt, *made]
    call = wire(outbox.ship("agent", 2, request, stamps=stamps, derivable=made), ModelCallInput)
    assert call.derived and call.messages == [] and len(CONVERTER.to_payloads([call])[0].data) < 200
    assert await keeper.fetch("run-1", call, pager_of(outbox)) == request
    assert keeper.queries == 0
    for cache in (half, other):  # what it cannot make it reads by query, verified
        assert await cache.fetch("run-1", call, pager_of(outbox)) == request
        assert cache.queries == 1
    stale = MessageCache()  # it ran another attempt of the model call, which answered otherwise
    await stale.fetch("run-1", first, pager_of(outbox))
    stale.answered("run-1", Message.assistant("", [ToolCall(id="c1", name="fetch", args="[]")]))
    stale.called("run-1", answer.tool_calls[0], outcome)
    assert await stale.fetch("run-1", call, pager_of(outbox)) == request
    assert stale.refetches == 1  # made, refused by the digest, read anew
    wrong = wire(
        outbox.ship("agent", 3, [*request, Message.user("more")], derivable=made), ModelCallInput
    )
    assert not wrong.derived  # only what the answer and its results make rides as derived
