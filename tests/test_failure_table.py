"""The one table from a Temporal failure to golem's exception (golem.wire.failures),
read without a server: each failure crosses golem's failure converter first, as it reaches
a client, a conversation handle or ``run_agent``."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.api.failure.v1 import Failure
from temporalio.exceptions import ApplicationError, CancelledError, TerminatedError

from golem.messages import Message, Usage
from golem.results import PartialResult, RunError
from golem.wire import RunReport, Sources, names
from golem.wire.converter import golem_data_converter
from golem.wire.failures import (
    FAILURES,
    CannotPause,
    ConversationClosedError,
    RunIdInUseError,
    TurnContinuing,
    TurnRecorded,
    UnknownAgentError,
    failure_error,
    golem_error,
)
from golem.workflows.report import Reporter

CONVERTER = golem_data_converter.payload_converter
HISTORY = [Message.user("hi").stamped("run-1", "conv")]
EVIDENCE = [*HISTORY, Message.assistant("half an answer").stamped("run-2", "conv")]


def over_the_wire(exc: BaseException) -> BaseException:
    """The exception a client's (or a parent workflow's) failure holds."""
    proto = Failure()
    golem_data_converter.failure_converter.to_failure(exc, CONVERTER, proto)
    proto = Failure.FromString(proto.SerializeToString())
    return golem_data_converter.failure_converter.from_failure(proto, CONVERTER)


def failed_run() -> RunError:
    partial = PartialResult(
        messages=EVIDENCE,
        usage=Usage(input_tokens=5, output_tokens=3),
        requests=1,
        tool_calls=0,
        run_id="run-2",
        conversation_id="conv",
    )
    return RunError("model", "HTTP 500", partial)


async def rebuilt(report: RunReport) -> list[Message]:
    return await report.conversation(Sources(given=HISTORY))


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        (names.UNKNOWN_AGENT, UnknownAgentError),
        (names.BAD_PAYLOAD, RunError),
        (names.CONVERSATION_CLOSED, ConversationClosedError),
        (names.APPROVALS_WAITING, ValueError),
        (names.NOT_PAUSED, ValueError),
        (names.INVALID_DECISION, ValueError),
        (names.CANNOT_PAUSE, CannotPause),
        (names.CONVERSATION_CONTINUING, TurnContinuing),
        (names.TURN_RECORDED, TurnRecorded),
        (names.RUN_ID_IN_USE, RunIdInUseError),
        (names.TURN_DIFFERS, ValueError),
    ],
)
async def test_each_type_golem_sets_becomes_its_exception_with_the_message(
    kind: str, expected: type[Exception]
) -> None:
    cause = over_the_wire(ApplicationError("the reason", type=kind, non_retryable=True))
    error = await golem_error(cause, "run-2")
    assert type(error) is expected
    assert "the reason" in str(error)


def test_every_type_in_the_table_is_pinned_above() -> None:
    pinned = {
        names.UNKNOWN_AGENT,
        names.BAD_PAYLOAD,
        names.CONVERSATION_CLOSED,
        names.APPROVALS_WAITING,
        names.NOT_PAUSED,
        names.INVALID_DECISION,
        names.CANNOT_PAUSE,
    }
    conversations = {
        names.CONVERSATION_CONTINUING,
        names.TURN_RECORDED,
        names.RUN_ID_IN_USE,
        names.TURN_DIFFERS,
    }
    assert set(FAILURES) == pinned | conversations | {names.DECRYPTION_ERROR, names.STORAGE_ERROR}


async def test_a_payload_that_cannot_be_decrypted_is_a_codec_error() -> None:
    cause = over_the_wire(ApplicationError("key id 'k1' is not here", type=names.DECRYPTION_ERROR))
    error = await golem_error(cause, "run-2")
    assert isinstance(error, RunError) and error.stage == "codec"
    assert "key id 'k1'" in error.detail


async def test_a_blob_that_cannot_be_read_is_a_storage_error_naming_it() -> None:
    cause = over_the_wire(
        ApplicationError("ns-default/wf-r/abc is missing", type=names.STORAGE_ERROR)
    )
    error = await golem_error(cause, "run-2")
    assert isinstance(error, RunError) and error.stage == "storage"
    assert (
        error.detail == "run run-2 could not be read by its worker: ns-default/wf-r/abc is missing"
    )


@pytest.mark.parametrize(
    ("kind", "stage"), [(names.DECRYPTION_ERROR, "codec"), (names.STORAGE_ERROR, "storage")]
)
async def test_a_run_a_worker_ended_because_it_could_not_read_it_is_that_stage(
    kind: str, stage: str
) -> None:
    details = {"golemFailure": {"type": kind, "message": "the reason"}}
    error = await golem_error(TerminatedError("the reason", details), "run-2")
    assert isinstance(error, RunError) and error.stage == stage
    assert error.detail == "run run-2 could not be read by its worker: the reason"
    assert await golem_error(TerminatedError("by hand"), "run-2") is None  # not golem's


async def test_a_payload_that_does_not_decode_is_a_history_error_naming_the_run() -> None:
    cause = over_the_wire(ApplicationError("not an AgentRunInput", type=names.BAD_PAYLOAD))
    error = await golem_error(cause, "run-2")
    assert isinstance(error, RunError) and error.stage == "history"
    assert error.detail == "run run-2 could not read its input: not an AgentRunInput"


async def test_a_failed_run_carries_the_evidence_its_reader_rebuilds() -> None:
    sent = failed_run()
    cause = over_the_wire(failure_error(sent, Reporter(HISTORY, True).failed(sent)))
    error = await golem_error(cause, "run-2", rebuilt)
    assert isinstance(error, RunError)
    assert (error.stage, error.detail, error.partial) == (sent.stage, sent.detail, sent.partial)


async def test_evidence_the_reader_cannot_rebuild_leaves_the_error_without_partial() -> None:
    sent = failed_run()
    cause = over_the_wire(failure_error(sent, Reporter(HISTORY, True).failed(sent)))

    async def unreachable(report: RunReport) -> list[Message] | None:
        return None

    for evidence in (unreachable, None):
        error = await golem_error(cause, "run-2", evidence)
        assert isinstance(error, RunError) and error.partial is None
        assert (error.stage, error.detail) == ("model", "HTTP 500")


async def test_a_cancelled_run_reads_its_memo_or_says_it_never_started() -> None:
    sent = RunError("canceled", "the run was cancelled by its caller", failed_run().partial)
    memo = {names.FAILURE_MEMO: Reporter(HISTORY, True).failed(sent)}
    stored = CONVERTER.from_payloads(CONVERTER.to_payloads(list(memo.values())))[0]
    cause = over_the_wire(CancelledError("cancelled"))

    async def read(value: Any) -> Any:
        return value

    error = await golem_error(cause, "run-2", rebuilt, lambda: read(stored))
    assert isinstance(error, RunError) and error.partial == sent.partial
    never = await golem_error(cause, "run-2", rebuilt, lambda: read(None))
    assert isinstance(never, RunError) and never.partial is None
    assert never.detail == "run run-2 was cancelled before it started"
    # A workflow reading its child cannot read a memo: it says only what it knows.
    blind = await golem_error(cause, "run-2", rebuilt)
    assert isinstance(blind, RunError) and blind.detail == "run run-2 was cancelled"


@pytest.mark.parametrize(
    "cause",
    [
        TerminatedError("by an operator"),
        ApplicationError("a turn needs a prompt or parts"),
        ApplicationError("boom", type="SomethingElse"),
        None,
    ],
    ids=["terminated", "untyped", "foreign-type", "none"],
)
async def test_what_golem_did_not_set_is_left_to_the_reader(cause: Exception | None) -> None:
    arrived = over_the_wire(cause) if cause is not None else None
    assert await golem_error(arrived, "run-2", rebuilt) is None
