"""A run's outcome without a server: what the workflow reports (golem.workflows.report) is
round-tripped through golem's data and failure converters, then decoded as the client does
(golem.client), one variant of where the conversation is at a time."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from temporalio.api.failure.v1 import Failure
from temporalio.exceptions import ApplicationError, CancelledError, TerminatedError

from golem.messages import Message, ToolCall, Usage
from golem.results import PartialResult, Result, RunError
from golem.wire import (
    Carried,
    Completed,
    InHistory,
    MessagesPage,
    MessagesQuery,
    Paged,
    Pager,
    Sources,
    content_digest,
    names,
)
from golem.wire.converter import golem_data_converter
from golem.wire.failures import UnknownAgentError, failure_error
from golem.wire.run_history import decode_result, failure_of
from golem.workflows.report import Reporter

CONVERTER = golem_data_converter.payload_converter
RUN = "run-2"


def over_the_wire(exc: BaseException) -> BaseException:
    """The exception the client's ``WorkflowFailureError.cause`` holds."""
    proto = Failure()
    golem_data_converter.failure_converter.to_failure(exc, CONVERTER, proto)
    proto = Failure.FromString(proto.SerializeToString())
    return golem_data_converter.failure_converter.from_failure(proto, CONVERTER)


def raw(value: Any) -> Any:
    """A payload as the client reads it with no type hint (a memo value, a result)."""
    return CONVERTER.from_payloads(CONVERTER.to_payloads([value]))[0]


def pager_over(conversation: list[Message], asked: list[MessagesQuery]) -> Pager:
    async def page(query: MessagesQuery) -> MessagesPage:
        asked.append(query)
        return MessagesPage.of(conversation, query)

    return page


async def no_memo() -> Any:
    return None


HISTORY = [
    Message.user("hi").stamped("run-1", "conv"),
    Message.assistant("hello").stamped("run-1", "conv"),
]


def evidence(messages: list[Message]) -> PartialResult:
    return PartialResult(
        messages=messages,
        usage=Usage(input_tokens=11, output_tokens=7),
        requests=3,
        tool_calls=2,
        run_id=RUN,
        conversation_id="conv",
    )


def added(n: int, size: int = 10) -> list[Message]:
    return [
        Message.user("next").stamped(RUN, "conv"),
        *(
            m.stamped(RUN, "conv")
            for i in range(n)
            for m in (
                Message.assistant("", [ToolCall(id=f"c{i}", name="fetch", args="{}")]),
                Message.tool(f"c{i}", "fetch", "r" * size),
            )
        ),
    ]


async def decode_failure(
    cause: BaseException | None, sources: Sources, run_id: str, memo: Any
) -> Exception:
    return await failure_of(cause, run_id, sources, memo)


def sources(given: list[Message], pages: Pager | None = None, **loaders: Any) -> Sources:
    return Sources(given=given, pages=pages or pager_over([], []), **loaders)


async def roundtrip_failure(error: RunError, history: list[Message]) -> tuple[Exception, int]:
    conversation = error.partial.messages if error.partial else []
    asked: list[MessagesQuery] = []
    cause = over_the_wire(failure_error(error, Reporter(history, True).failed(error)))
    back = await decode_failure(
        cause, sources(history, pager_over(conversation, asked)), RUN, no_memo
    )
    return back, len(asked)


def same_error(back: Exception, error: RunError) -> None:
    assert isinstance(back, RunError)
    assert (back.stage, back.detail, back.partial) == (error.stage, error.detail, error.partial)


async def test_a_failure_with_its_evidence_round_trips_without_a_query() -> None:
    error = RunError("tool", "tool 'fetch' raised", evidence([*HISTORY, *added(2)]))
    back, queries = await roundtrip_failure(error, HISTORY)
    same_error(back, error)
    assert queries == 0


async def test_a_failure_whose_history_was_rewritten_carries_the_rewritten_base() -> None:
    trimmed = HISTORY[1:]  # a history processor dropped the first message
    error = RunError("model", "HTTP 500", evidence([*trimmed, *added(1)]))
    details = Reporter(HISTORY, True).failed(error)
    assert details.evidence is not None
    assert details.evidence.messages == Carried(keep=0, added=details.evidence.messages.added)
    back, _ = await roundtrip_failure(error, HISTORY)
    same_error(back, error)


async def test_a_continuation_does_not_send_the_history_back() -> None:
    error = RunError("usage", "over budget", evidence([*HISTORY, *added(1)]))
    details = Reporter(HISTORY, True).failed(error)
    assert details.evidence is not None
    assert details.evidence.messages.kind == "carried"
    assert details.evidence.messages.keep == len(HISTORY)  # type: ignore[union-attr]
    assert len(CONVERTER.to_payloads([details])[0].data) < 1000


async def test_a_failure_without_evidence_round_trips() -> None:
    error = RunError("history", "message 0: bad role")
    back, _ = await roundtrip_failure(error, HISTORY)
    same_error(back, error)


async def test_large_evidence_is_paged_out_of_the_workflow() -> None:
    error = RunError("tool", "out of disk", evidence([*HISTORY, *added(2, size=900_000)]))
    details = Reporter(HISTORY, True).failed(error)
    assert details.evidence is not None and details.evidence.messages == Paged(count=2 + 5)
    back, queries = await roundtrip_failure(error, HISTORY)
    same_error(back, error)
    assert queries >= 2  # 1.8 MB does not fit one page


async def test_a_cancelled_run_rebuilds_its_error_from_the_memo() -> None:
    error = RunError("canceled", "the run was cancelled by its caller", evidence(HISTORY))
    memo = {names.FAILURE_MEMO: Reporter(HISTORY, True).failed(error)}
    stored = raw(memo[names.FAILURE_MEMO])

    async def read_memo() -> Any:
        return stored

    cause = over_the_wire(CancelledError(str(error)))
    back = await decode_failure(cause, sources(HISTORY), RUN, read_memo)
    same_error(back, error)


async def test_a_run_cancelled_before_it_started_says_so() -> None:
    cause = over_the_wire(CancelledError("cancelled"))
    back = await decode_failure(cause, sources([]), RUN, no_memo)
    assert isinstance(back, RunError) and back.stage == "canceled"
    assert str(back).endswith(f"run {RUN} was cancelled before it started")


async def test_an_unknown_agent_becomes_unknown_agent_error() -> None:
    sent = ApplicationError(
        "unknown agent 'x': has: a, b", type=names.UNKNOWN_AGENT, non_retryable=True
    )
    back = await decode_failure(over_the_wire(sent), sources([]), RUN, no_memo)
    assert isinstance(back, UnknownAgentError) and str(back) == "unknown agent 'x': has: a, b"


@pytest.mark.parametrize(
    "cause",
    [TerminatedError("by an operator"), ApplicationError("boom", type="SomethingElse")],
    ids=["terminated", "foreign-application-error"],
)
async def test_a_run_stopped_outside_the_loop_names_how(cause: Exception) -> None:
    back = await decode_failure(over_the_wire(cause), sources([]), RUN, no_memo)
    assert isinstance(back, RunError) and back.stage == "canceled" and back.partial is None
    assert "stopped outside the loop" in str(back)
    assert ("by an operator" in str(back)) or ("boom" in str(back))


def result(messages: list[Message], pending: list[ToolCall] | None = None) -> Result[Any]:
    e = evidence(messages)
    return Result(
        output={"answer": 42} if not pending else None,
        messages=messages,
        usage=e.usage,
        run_id=RUN,
        conversation_id="conv",
        requests=e.requests,
        tool_calls=e.tool_calls,
        pending_approvals=pending or [],
    )


def completed(sent: Result[Any], history: list[Message], **kwargs: Any) -> Completed:
    return Reporter(history, True).completed(sent, sent.output, **kwargs)


@pytest.mark.parametrize("size", [10, 700_000], ids=["inline", "paged"])
async def test_a_result_round_trips(size: int) -> None:
    sent = result([*HISTORY, *added(2, size=size)])
    asked: list[MessagesQuery] = []
    encoded = raw(completed(sent, HISTORY))
    back = await decode_result(encoded, sources(HISTORY, pager_over(sent.messages, asked)))
    assert back == sent
    assert (len(asked) > 0) == (size > 10)


async def test_a_paused_result_round_trips_its_pending_approvals() -> None:
    pending = [ToolCall(id="p", name="delete", args='{"all": true}')]
    sent = result([*HISTORY, Message.assistant("", pending).stamped(RUN, "conv")], pending)
    back = await decode_result(raw(Reporter(HISTORY, True).paused(sent)), sources(HISTORY))
    assert back == sent and back.paused


async def test_the_output_is_validated_by_the_callers_type() -> None:
    sent = result(HISTORY)
    back = await decode_result(raw(completed(sent, HISTORY)), sources(HISTORY), sorted)
    assert back.output == ["answer"]


def test_failure_error_is_final_and_typed() -> None:
    error = RunError("tool", "x")
    exc = failure_error(error, Reporter([], True).failed(error))
    assert exc.type == names.RUN_ERROR and exc.non_retryable and exc.message == str(error)


async def test_contents_the_activities_recorded_are_carried_by_reference() -> None:
    sent = result([*HISTORY, *added(3, size=2048)])
    tools = [m.content for m in sent.messages if m.role == "tool"]
    encoded = completed(sent, HISTORY, recorded={content_digest(t) for t in tools})
    assert isinstance(encoded.messages, Carried)
    assert sorted(encoded.messages.added.refs) == [2, 4, 6]
    assert len(CONVERTER.to_payloads([encoded])[0].data) < 2048  # not one result again
    loads: list[int] = []

    async def recorded() -> dict[str, str]:
        loads.append(1)
        return {content_digest(t): t for t in tools}

    back = await decode_result(raw(encoded), sources(HISTORY, contents=recorded))
    assert back == sent and loads == [1]
    with pytest.raises(LookupError, match="no activity of it returned content"):
        await decode_result(raw(encoded), sources(HISTORY))


async def test_a_parent_workflow_gets_every_content_in_the_result() -> None:
    sent = result([*HISTORY, *added(3, size=2048)])
    tools = {content_digest(m.content) for m in sent.messages if m.role == "tool"}
    encoded = Reporter(HISTORY, readable=False).completed(sent, sent.output, tools, 7)
    assert isinstance(encoded.messages, Carried) and not encoded.messages.added.refs
    assert await decode_result(raw(encoded), sources(HISTORY)) == sent


async def test_a_repaired_history_end_is_all_a_result_carries_of_the_history() -> None:
    history = [*HISTORY, Message.assistant("", [ToolCall(id="c9", name="fetch")])]
    repaired = [*history, Message.tool("c9", "fetch", "interrupted")]
    sent = result([*repaired, *added(1)])
    encoded = completed(sent, history)
    assert isinstance(encoded.messages, Carried) and encoded.messages.keep == len(history)
    assert encoded.messages.added.messages[0] == repaired[-1]
    assert await decode_result(raw(encoded), sources(history)) == sent


async def test_a_based_runs_pages_follow_the_history_it_was_given() -> None:
    own = added(2, size=700_000)
    sent = result(own)  # a conversation's turn: the loop saw only its own messages
    encoded = completed(sent, [])
    assert encoded.messages == Paged(count=len(own))
    lead = Sources(lead=HISTORY, pages=pager_over(own, []))
    back = await decode_result(raw(encoded), lead)
    assert back.messages == [*HISTORY, *own]


def test_non_ascii_messages_past_a_page_in_bytes_are_paged() -> None:
    # 400,000 characters, 1.2 MB of UTF-8: by value, with the rest of a turn, a payload near
    # Temporal's limit. ASCII text of as many characters stays by value.
    wide = [Message.user("字" * 400_000).stamped(RUN, "conv")]
    narrow = [Message.user("z" * 400_000).stamped(RUN, "conv")]
    assert completed(result(wide), []).messages == Paged(count=1)
    assert isinstance(completed(result(narrow), []).messages, Carried)


async def test_a_result_leaves_what_its_history_holds_to_the_history() -> None:
    sent = result([*HISTORY, *added(3)])
    last_request = sent.messages[:-1]  # as the model saw it, instructions aside
    encoded = completed(sent, HISTORY, logged=len(sent.messages) - 1)
    assert isinstance(encoded.messages, InHistory)
    assert encoded.messages.added.messages == [sent.messages[-1].stamped("", "")]

    async def logged() -> list[Message]:
        return last_request

    assert await decode_result(raw(encoded), sources(HISTORY, log=logged)) == sent
    with pytest.raises(ValueError, match="in its history"):
        await decode_result(raw(encoded), sources(HISTORY))

    async def short() -> list[Message]:
        return last_request[:3]

    with pytest.raises(LookupError, match="holds 3 messages"):
        await decode_result(raw(encoded), sources(HISTORY, log=short))


def test_a_completed_result_reads_as_its_output_first() -> None:
    sent = result([*HISTORY, *added(1)])
    data = CONVERTER.to_payloads([completed(sent, HISTORY)])[0].data
    assert data.startswith(b'{"kind":"completed","output":{"answer":42},"runId":')


_conversations = st.lists(
    st.tuples(st.booleans(), st.text(max_size=400), st.booleans()), min_size=0, max_size=10
)


@settings(max_examples=150, deadline=None)
@given(_conversations, st.integers(0, 4), st.booleans(), st.booleans())
async def test_any_outcome_decodes_to_what_was_reported(
    shape: list[tuple[bool, str, bool]], given_count: int, by_reference: bool, log_it: bool
) -> None:
    messages = [
        (Message.user(text) if user else Message.assistant(text)).stamped(
            *((RUN, "conv") if own else ("run-1", "conv"))
        )
        for user, text, own in shape
    ]
    history = messages[: min(given_count, len(messages))]
    sent = result(messages)
    recorded = {content_digest(m.content) for m in messages} if by_reference else set()
    logged = len(messages) - 1 if log_it and messages else 0
    encoded = raw(completed(sent, history, recorded=recorded, logged=logged))

    async def contents() -> dict[str, str]:
        return {content_digest(m.content): m.content for m in messages}

    async def log() -> list[Message]:
        return messages[:logged]

    back = await decode_result(encoded, sources(history, contents=contents, log=log))
    assert back == sent
