"""A run's result and failure transport without a server: what the workflow encodes is
round-tripped through golem's data and failure converters, then decoded as the client does."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.api.failure.v1 import Failure
from temporalio.exceptions import ApplicationError, CancelledError, TerminatedError

from golem.messages import Message, ToolCall, Usage
from golem.results import PartialResult, Result, RunError
from golem.worker.converter import golem_data_converter
from golem.workflows.outcome import (
    FAILURE_MEMO,
    RUN_ERROR,
    UnknownAgentError,
    cancel_memo,
    content_digest,
    decode_failure,
    decode_result,
    encode_failure,
    encode_result,
    failure_error,
)
from golem.workflows.pages import MessagesPage, MessagesQuery, Pager
from golem.workflows.registry import UNKNOWN_AGENT

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


async def roundtrip_failure(error: RunError, history: list[Message]) -> tuple[Exception, int]:
    conversation = error.partial.messages if error.partial else []
    asked: list[MessagesQuery] = []
    cause = over_the_wire(failure_error(error, encode_failure(error, history)))
    back = await decode_failure(cause, history, RUN, no_memo, pager_over(conversation, asked))
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
    details = encode_failure(error, HISTORY)
    assert details.partial is not None and details.partial.base == trimmed
    back, _ = await roundtrip_failure(error, HISTORY)
    same_error(back, error)


async def test_a_continuation_does_not_send_the_history_back() -> None:
    error = RunError("usage", "over budget", evidence([*HISTORY, *added(1)]))
    details = encode_failure(error, HISTORY)
    assert details.partial is not None and details.partial.base is None
    assert len(CONVERTER.to_payloads([details])[0].data) < 1500


async def test_a_failure_without_evidence_round_trips() -> None:
    error = RunError("history", "message 0: bad role")
    back, _ = await roundtrip_failure(error, HISTORY)
    same_error(back, error)


async def test_large_evidence_is_paged_out_of_the_workflow() -> None:
    error = RunError("tool", "out of disk", evidence([*HISTORY, *added(2, size=900_000)]))
    details = encode_failure(error, HISTORY)
    assert details.partial is not None and details.partial.paged == 2 + 5
    assert details.partial.added == [] and details.partial.base is None
    back, queries = await roundtrip_failure(error, HISTORY)
    same_error(back, error)
    assert queries >= 2  # 1.8 MB does not fit one page


async def test_a_cancelled_run_rebuilds_its_error_from_the_memo() -> None:
    error = RunError("canceled", "the run was cancelled by its caller", evidence(HISTORY))
    memo = cancel_memo(encode_failure(error, HISTORY))
    stored = raw(memo[FAILURE_MEMO])

    async def read_memo() -> Any:
        return stored

    cause = over_the_wire(CancelledError(str(error)))
    back = await decode_failure(cause, HISTORY, RUN, read_memo, pager_over([], []))
    same_error(back, error)


async def test_a_run_cancelled_before_it_started_says_so() -> None:
    cause = over_the_wire(CancelledError("cancelled"))
    back = await decode_failure(cause, [], RUN, no_memo, pager_over([], []))
    assert isinstance(back, RunError) and back.stage == "canceled"
    assert str(back).endswith(f"run {RUN} was cancelled before it started")


async def test_an_unknown_agent_becomes_unknown_agent_error() -> None:
    sent = ApplicationError("unknown agent 'x': has: a, b", type=UNKNOWN_AGENT, non_retryable=True)
    back = await decode_failure(over_the_wire(sent), [], RUN, no_memo, pager_over([], []))
    assert isinstance(back, UnknownAgentError) and str(back) == "unknown agent 'x': has: a, b"


@pytest.mark.parametrize(
    "cause",
    [TerminatedError("by an operator"), ApplicationError("boom", type="SomethingElse")],
    ids=["terminated", "foreign-application-error"],
)
async def test_a_run_stopped_outside_the_loop_names_how(cause: Exception) -> None:
    back = await decode_failure(over_the_wire(cause), [], RUN, no_memo, pager_over([], []))
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


@pytest.mark.parametrize("size", [10, 700_000], ids=["inline", "paged"])
async def test_a_result_round_trips(size: int) -> None:
    sent = result([*HISTORY, *added(2, size=size)])
    asked: list[MessagesQuery] = []
    encoded = raw(encode_result(sent, HISTORY, sent.output))
    back = await decode_result(encoded, HISTORY, pager_over(sent.messages, asked))
    assert back == sent
    assert (len(asked) > 0) == (size > 10)


async def test_a_paused_result_round_trips_its_pending_approvals() -> None:
    pending = [ToolCall(id="p", name="delete", args='{"all": true}')]
    sent = result([*HISTORY, Message.assistant("", pending).stamped(RUN, "conv")], pending)
    back = await decode_result(raw(encode_result(sent, HISTORY, None)), HISTORY, pager_over([], []))
    assert back == sent and back.paused


async def test_the_output_is_validated_by_the_callers_type() -> None:
    sent = result(HISTORY)
    encoded = raw(encode_result(sent, HISTORY, sent.output))
    back = await decode_result(encoded, HISTORY, pager_over([], []), lambda v: sorted(v))
    assert back.output == ["answer"]


def test_failure_error_is_final_and_typed() -> None:
    error = RunError("tool", "x")
    exc = failure_error(error, encode_failure(error, []))
    assert exc.type == RUN_ERROR and exc.non_retryable and exc.message == str(error)


async def test_contents_the_activities_recorded_are_carried_by_reference() -> None:
    sent = result([*HISTORY, *added(3, size=2048)])
    tools = [m.content for m in sent.messages if m.role == "tool"]
    encoded = encode_result(sent, HISTORY, sent.output, recorded={content_digest(t) for t in tools})
    assert sorted(encoded.snapshot.refs) == [2, 4, 6]
    assert len(CONVERTER.to_payloads([encoded])[0].data) < 2048  # not one result again
    loads: list[int] = []

    async def recorded() -> dict[str, str]:
        loads.append(1)
        return {content_digest(t): t for t in tools}

    back = await decode_result(raw(encoded), HISTORY, pager_over([], []), recorded=recorded)
    assert back == sent and loads == [1]
    with pytest.raises(ValueError, match="recorded contents"):
        await decode_result(raw(encoded), HISTORY, pager_over([], []))


async def test_a_repaired_history_end_is_all_a_result_carries_of_the_history() -> None:
    history = [*HISTORY, Message.assistant("", [ToolCall(id="c9", name="fetch")])]
    repaired = [*history, Message.tool("c9", "fetch", "interrupted")]
    sent = result([*repaired, *added(1)])
    encoded = encode_result(sent, history, sent.output)
    assert encoded.snapshot.kept == len(history) and encoded.snapshot.base == repaired[-1:]
    back = await decode_result(raw(encoded), history, pager_over([], []))
    assert back == sent


async def test_a_based_runs_pages_follow_the_history_it_was_given() -> None:
    own = added(2, size=700_000)
    sent = result(own)  # a conversation's turn: the loop saw only its own messages
    encoded = encode_result(sent, [], sent.output, based=True)
    assert encoded.snapshot.paged == len(own)
    back = await decode_result(raw(encoded), HISTORY, pager_over(own, []))
    assert back.messages == [*HISTORY, *own]


async def test_a_result_leaves_what_its_history_holds_to_the_history() -> None:
    sent = result([*HISTORY, *added(3)])
    last_request = [Message.system("be brief"), *sent.messages[:-1]]  # as the model saw it
    encoded = encode_result(sent, HISTORY, sent.output, logged=len(sent.messages) - 1)
    assert encoded.snapshot.added == [sent.messages[-1].stamped("", "")]  # the answer alone

    async def logged() -> list[Message]:
        return last_request

    back = await decode_result(raw(encoded), HISTORY, pager_over([], []), logged=logged)
    assert back == sent
    with pytest.raises(ValueError, match="leaves its requests to its history"):
        await decode_result(raw(encoded), HISTORY, pager_over([], []))

    older = raw(encoded)  # a reader that predates ``logged`` ignores it: it pages by query
    del older["snapshot"]["logged"]
    asked: list[MessagesQuery] = []
    assert await decode_result(older, HISTORY, pager_over(sent.messages, asked)) == sent
    assert asked

    async def short() -> list[Message]:
        return last_request[:3]

    with pytest.raises(LookupError, match="fewer messages"):
        await decode_result(raw(encoded), HISTORY, pager_over([], []), logged=short)
