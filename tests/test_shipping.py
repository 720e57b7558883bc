"""Message shipping without a server: the workflow's Shipper and the workers' MessageCache,
with every input and page round-tripped through golem's data converter as Temporal would."""

from __future__ import annotations

from typing import Any, TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from golem.messages import Message, Part, ToolCall
from golem.tools import ToolOutcome, tool_message
from golem.wire import (
    ByQuery,
    Compact,
    Derived,
    HistoryBase,
    Inline,
    MessagesPage,
    MessagesQuery,
    ModelCall,
    Pager,
    ShippingError,
    Stamps,
    chain_all,
    compact,
    content_digest,
    expand,
)
from golem.wire.cache import MessageCache
from golem.wire.converter import golem_data_converter
from golem.workflows.shipper import Shipper

T = TypeVar("T")
OWN = Stamps(run_id="run", conversation_id="conv")
CONVERTER = golem_data_converter.payload_converter


def wire(value: Any, kind: type[T]) -> T:
    """The value as the other side of Temporal receives it."""
    result: T = CONVERTER.from_payloads(CONVERTER.to_payloads([value]), [kind])[0]
    return result


def pager_of(shipper: Shipper, served: list[MessagesQuery] | None = None) -> Pager:
    async def page(query: MessagesQuery) -> MessagesPage:
        if served is not None:
            served.append(query)
        return wire(shipper.page(wire(query, MessagesQuery)), MessagesPage)

    return page


def turn(n: int, result: str = "") -> list[Message]:
    return [
        Message.assistant("", [ToolCall(id=f"c{n}", name="fetch", args=f'{{"n": {n}}}')]),
        Message.tool(f"c{n}", "fetch", result or f"page {n}"),
    ]


def call_of(shipper: Shipper, n: int, request: list[Message], stamps: Stamps = OWN) -> ModelCall:
    return wire(shipper.model_call("agent", n, request, stamps, False), ModelCall)


async def ship(
    shipper: Shipper, cache: MessageCache, request: list[Message], n: int
) -> list[Message]:
    return await cache.fetch("run-1", call_of(shipper, n, request), pager_of(shipper))


# -- the two layers ---------------------------------------------------------------------

_texts = st.text(max_size=300)
_messages = st.lists(
    st.builds(
        lambda role, text, own: (Message.user(text) if role else Message.assistant(text)).stamped(
            *(("run", "conv") if own else ("", ""))
        ),
        st.booleans(),
        _texts,
        st.booleans(),
    ),
    max_size=8,
)


@settings(max_examples=200, deadline=None)
@given(_messages, st.booleans())
def test_compacting_then_expanding_gives_the_messages_back(
    messages: list[Message], by_reference: bool
) -> None:
    recorded = {content_digest(m.content) for m in messages} if by_reference else set()
    contents = {content_digest(m.content): m.content for m in messages}
    shaped = wire(compact(messages, OWN, recorded), Compact)
    assert expand(shaped, OWN, contents) == messages
    # Only the trailing run of the run's own messages leaves its stamps out.
    trailing = 0
    for message in reversed(messages):
        if (message.run_id, message.conversation_id) != ("run", "conv"):
            break
        trailing += 1
    assert shaped.stamped == trailing


def test_an_expansion_missing_a_content_names_its_digest() -> None:
    shaped = compact([Message.user("x" * 300)], None, {content_digest("x" * 300)})
    with pytest.raises(KeyError, match=content_digest("x" * 300)):
        expand(shaped, None, {})


# -- model calls --------------------------------------------------------------------------


async def test_small_new_messages_extend_the_cache_without_a_query() -> None:
    shipper, cache = Shipper(inline_bytes=4096), MessageCache()
    request = [Message.system("be brief"), Message.user("go")]
    for n in range(4):
        assert await ship(shipper, cache, request, n + 1) == request
        request = [Message.system("be brief"), *request[1:], *turn(n)]
    assert cache.queries == 0 and cache.refetches == 0


async def test_only_the_new_messages_ride_the_input() -> None:
    shipper = Shipper(inline_bytes=4096)
    first = [Message.user("go")]
    call_of(shipper, 1, first)
    call = call_of(shipper, 2, [*first, *turn(0)])
    assert (call.since, call.count, call.prefix) == (1, 3, None)  # it extends the previous
    assert isinstance(call.new, Inline) and call.new.messages.messages == turn(0)


async def test_new_messages_over_the_limit_are_read_by_query_only_from_where_they_start() -> None:
    shipper, cache = Shipper(inline_bytes=1000), MessageCache()
    served: list[MessagesQuery] = []
    request = [Message.user("go")]
    await ship(shipper, cache, request, 1)
    request = [*request, *turn(0, "x" * 5000)]
    call = call_of(shipper, 2, request)
    assert isinstance(call.new, ByQuery)
    assert await cache.fetch("run-1", call, pager_of(shipper, served)) == request
    assert served == [MessagesQuery(since=1, upto=3)]


async def test_a_stale_list_of_the_right_length_is_refetched_not_extended() -> None:
    # Worker A saw a request of three messages; the run's turn 2 request went elsewhere and
    # differs at message 2. An append-only cache trusting lengths would extend A's list.
    cache = MessageCache()
    stale = Shipper(inline_bytes=4096)
    await ship(stale, cache, [Message.user("go"), *turn(0, "old result")], 1)
    truth = Shipper(inline_bytes=4096)
    request = [Message.user("go"), *turn(0, "new result")]
    call_of(truth, 1, request)
    request = [*request, *turn(1)]
    call = call_of(truth, 2, request)
    assert call.since == 3 and call.prefix is None  # it extends its previous request
    assert await cache.fetch("run-1", call, pager_of(truth)) == request
    assert cache.refetches == 1  # extended, found wrong by the digest, read anew


async def test_a_request_that_rewrites_its_prefix_ships_from_the_first_difference() -> None:
    shipper, cache = Shipper(inline_bytes=4096), MessageCache()
    request = [Message.system("v1"), Message.user("go"), *turn(0)]
    await ship(shipper, cache, request, 1)
    rewritten = [Message.system("v1"), Message.user("go, edited"), *turn(0), *turn(1)]
    call = call_of(shipper, 2, rewritten)
    assert call.since == 1 and isinstance(call.new, Inline)
    assert call.new.messages.messages == rewritten[1:]
    assert call.prefix == chain_all(request[:1])[-1]  # a rewrite names where it starts
    assert await cache.fetch("run-1", call, pager_of(shipper)) == rewritten


async def test_a_workflow_serving_other_messages_is_refused_not_sent_to_the_model() -> None:
    shipper, cache = Shipper(inline_bytes=0), MessageCache()
    call = call_of(shipper, 1, [Message.user("go")])

    async def liar(query: MessagesQuery) -> MessagesPage:
        return MessagesPage(messages=[Message.user("something else")], next=1)

    with pytest.raises(ShippingError, match="do not match"):
        await cache.fetch("run-1", call, liar)


async def test_digests_survive_the_wire_with_every_kind_of_field() -> None:
    shipper, cache = Shipper(inline_bytes=1_000_000), MessageCache()
    request = [
        Message.user("look", [Part(kind="image", data=b"\x00\x01\xff", media_type="image/png")]),
        Message.assistant("é ✓", [ToolCall(id="1", name="f", args='{"a": [1, 2.5, null]}')]),
        Message.tool("1", "f", "", failed=True),
    ]
    assert await ship(shipper, cache, request, 1) == request


async def test_the_cache_keeps_only_its_most_recent_runs() -> None:
    cache = MessageCache(max_runs=2)
    for run in ("a", "b", "c"):
        shipper = Shipper(inline_bytes=4096)
        await cache.fetch(run, call_of(shipper, 1, [Message.user(run)]), pager_of(shipper))
    assert list(cache._runs) == ["b", "c"]


# A request list either grows (by prompts or by an answer and its tool results, which the
# run's activities returned), or is rewritten from some index (a processor, a correction).
_edits = st.lists(
    st.tuples(
        st.integers(0, 10),  # keep this many (10: keep all)
        st.integers(0, 3),  # how many messages to add
        st.integers(0, 2),  # which worker ran the activities and takes the call (2: none)
        st.integers(0, 2_000),  # content size
        st.booleans(),  # the addition is an answer with its tool results
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=80, deadline=None)
@given(_edits, st.integers(0, 3_000))
async def test_any_sequence_of_requests_on_any_workers_gives_each_request_exactly(
    edits: list[tuple[int, int, int, int, bool]], inline: int
) -> None:
    shipper = Shipper(inline_bytes=inline)
    workers = [MessageCache(), MessageCache()]
    request: list[Message] = []
    for n, (keep, grow, worker, size, answered) in enumerate(edits):
        request = request[: min(keep, len(request))] if keep < 10 else request
        if answered:
            # The previous call answered with calls; the worker that ran them keeps them.
            calls = [ToolCall(id=f"{n}.{i}", name="f", args="{}") for i in range(grow + 1)]
            answer = Message.assistant("a" * size, calls)
            outcomes = {c.id: ToolOutcome(content=f"{c.id} " + "r" * size) for c in calls}
            shipper.answered(answer)
            for c in calls:
                shipper.called(c.id, outcomes[c.id])
            if worker < 2:
                workers[worker].answered("run", answer)
                for c in calls:
                    workers[worker].called("run", c, outcomes[c.id])
            made = [answer, *(tool_message(c, outcomes[c.id]) for c in calls)]
            added = [m.stamped("run", "conv") for m in made]
        else:
            added = [Message.user(f"{n}.{i} " + "x" * size) for i in range(grow + 1)]
            # Mostly the run's own messages (they ride without stamps), sometimes others'.
            added = [m.stamped("run", "conv") if (n + i) % 3 else m for i, m in enumerate(added)]
        request = [*request, *added]
        call = call_of(shipper, n, request)
        assert await workers[worker % 2].fetch("run", call, pager_of(shipper)) == request


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
        shipper = Shipper(inline_bytes=4096, base=base)
        got = await cache.fetch(
            f"run-{count}",
            call_of(shipper, 1, own),
            pager_of(shipper),
            transcript_pager(transcript, served),
        )
        # The instructions lead, then the conversation, then the run's own messages.
        assert got == [own[0], *transcript[:count], own[1]]
    assert [(q.since, q.upto) for q in served] == [(0, 2), (2, 4)]


async def test_a_rewritten_base_is_read_anew_and_a_wrong_one_refused() -> None:
    transcript = [Message.user("hi"), Message.assistant("hello")]
    cache, served = MessageCache(), []
    pager = transcript_pager(transcript, served)

    def call(digest: str) -> ModelCall:
        base = HistoryBase(conversation="conv", count=2, digest=digest)
        return call_of(Shipper(4096, base), 1, [Message.user("go")])

    empty: Pager = pager_of(Shipper(4096))
    await cache.fetch("run-1", call(chain_all(transcript)[-1]), empty, pager)
    transcript[1] = Message.assistant("hello, repaired")
    fixed = await cache.fetch("run-2", call(chain_all(transcript)[-1]), empty, pager)
    assert fixed[1].content == "hello, repaired" and cache.refetches == 1
    with pytest.raises(ShippingError, match="conversation conv"):
        await cache.fetch("run-3", call("0" * 32), empty, pager)


async def test_contents_an_activity_returned_travel_by_digest_or_are_read_by_query() -> None:
    big = "r" * 5000
    request = [Message.user("go"), *turn(1, big)]
    shipper = Shipper(inline_bytes=4096)
    keeper, other = MessageCache(), MessageCache()
    first = call_of(shipper, 1, request[:1])
    for cache in (keeper, other):
        await cache.fetch("run-1", first, pager_of(shipper))
    shipper.called("c9", ToolOutcome(content=big))  # this run's tool returned it
    call = call_of(shipper, 2, request)
    assert isinstance(call.new, Inline)
    assert call.new.messages.refs == {1: content_digest(big)}
    assert call.new.messages.messages[1].content == ""
    keeper.keep(big)  # this worker ran the tool
    assert await keeper.fetch("run-1", call, pager_of(shipper)) == request
    assert keeper.queries == 0
    assert await other.fetch("run-1", call, pager_of(shipper)) == request
    assert other.queries == 1  # another worker ran it: read by query, verified


async def test_a_runs_own_messages_ride_without_their_stamps_and_come_back_stamped() -> None:
    own = [m.stamped("run", "conv") for m in [Message.user("go"), *turn(1), *turn(2)]]
    shipper, keeper, other = Shipper(inline_bytes=4096), MessageCache(), MessageCache()
    first = call_of(shipper, 1, own[:1])
    assert isinstance(first.new, Inline) and first.new.messages.stamped == 1
    assert not first.new.messages.messages[0].run_id and first.stamps == OWN
    assert await keeper.fetch("run-1", first, pager_of(shipper)) == own[:1]
    second = call_of(shipper, 2, own[:3])
    assert await keeper.fetch("run-1", second, pager_of(shipper)) == own[:3]
    third = call_of(shipper, 3, own)
    assert await other.fetch("run-1", third, pager_of(shipper)) == own
    assert keeper.queries == 0 and other.queries == 1  # a worker that missed calls reads once
    foreign = [*own, Message.user("from elsewhere").stamped("run-0", "conv")]
    mixed = call_of(shipper, 5, foreign)
    assert isinstance(mixed.new, Inline) and mixed.new.messages.stamped == 0
    assert mixed.new.messages.messages[0].run_id == "run-0"
    assert await keeper.fetch("run-1", mixed, pager_of(shipper)) == foreign


async def test_an_answer_and_its_results_are_made_by_the_worker_that_ran_them() -> None:
    prompt = Message.user("go").stamped("run", "conv")
    answer = Message.assistant("", [ToolCall(id="c1", name="fetch", args="{}")])
    outcome = ToolOutcome(content="r" * 5000)
    made = [answer, tool_message(answer.tool_calls[0], outcome)]
    made = [m.stamped("run", "conv") for m in made]
    shipper, keeper, half, other = Shipper(4096), MessageCache(), MessageCache(), MessageCache()
    first = call_of(shipper, 1, [prompt])
    for cache in (keeper, half, other):
        await cache.fetch("run-1", first, pager_of(shipper))
    shipper.answered(answer)
    shipper.called("c1", outcome)
    keeper.answered("run-1", answer)
    keeper.called("run-1", answer.tool_calls[0], outcome)
    half.answered("run-1", answer)  # the tool ran elsewhere
    request = [prompt, *made]
    call = call_of(shipper, 2, request)
    assert isinstance(call.new, Derived)
    assert len(CONVERTER.to_payloads([call])[0].data) < 250
    assert await keeper.fetch("run-1", call, pager_of(shipper)) == request
    assert keeper.queries == 0
    for cache in (half, other):  # what it cannot make it reads by query, verified
        assert await cache.fetch("run-1", call, pager_of(shipper)) == request
        assert cache.queries == 1
    stale = MessageCache()  # it ran another attempt of the model call, which answered otherwise
    await stale.fetch("run-1", first, pager_of(shipper))
    stale.answered("run-1", Message.assistant("", [ToolCall(id="c1", name="fetch", args="[]")]))
    stale.called("run-1", answer.tool_calls[0], outcome)
    assert await stale.fetch("run-1", call, pager_of(shipper)) == request
    assert stale.refetches == 1  # made, refused by the digest, read anew
    wrong = call_of(shipper, 3, [*request, Message.user("more")])
    assert not isinstance(wrong.new, Derived)  # only what the answer and results make
