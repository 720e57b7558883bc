"""What a caller sends a run or a conversation, checked once, whichever way it comes in.

    sent = checked("Plan my trip", parts=parts, deps=deps, history=history)
    await check_not_waiting(client, sent.history)   # a paused run is answered where it waits

``DurableAgent.start`` (and so ``run``, ``run_stream`` and ``resume``), a conversation's
start and each of its turns (``send``, ``send_stream``) go through here: nothing that
fails a check reaches Temporal, and each error names its culprit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError, SchemaSerializer
from pydantic_core.core_schema import any_schema
from temporalio.client import Client
from temporalio.converter import DataConverter

from golem.client.lookups import awaiting_approval, existing_run
from golem.messages import HistoryError, HistoryItem, Message, Part, validate_history
from golem.results import RunError
from golem.strict_json import loads_strict
from golem.tools import validation_problems
from golem.wire import AgentRunInput, TurnInput
from golem.wire.converter import golem_data_converter

#: Largest history a run may start with (the workflow input is one Temporal payload).
MAX_INPUT_BYTES = 2_000_000 - 65_536


_STRICT_JSON = SchemaSerializer(any_schema(), {"ser_json_inf_nan": "constants"})
_MESSAGE: TypeAdapter[Message] = TypeAdapter(Message)
_PARTS: TypeAdapter[list[Part]] = TypeAdapter(list[Part])


@dataclass(frozen=True)
class Sent:
    """What a caller sends, checked: the history as ``Message``s, the parts as ``Part``s."""

    prompt: str | None
    parts: list[Part]
    deps: Any
    history: list[Message]


def checked(
    prompt: str | None = None,
    *,
    parts: Sequence[Part] = (),
    deps: Any = None,
    history: Sequence[HistoryItem] | None = None,
) -> Sent:
    """Everything a caller sends, checked: ``ValueError`` naming the field that JSON would
    not carry unchanged (a lone surrogate, NaN or Infinity, a malformed message or part, a
    history item that is no message); ``RunError`` (stage ``history``) naming the message
    when the history breaks the message contract."""
    _sendable("prompt", prompt)
    sent_parts: list[Part] = _sendable("parts", list(parts), _PARTS)
    _sendable("deps", deps)
    messages = [_message(index, item) for index, item in enumerate(history or ())]
    try:
        validate_history(messages)
    except HistoryError as exc:
        raise RunError("history", str(exc)) from exc
    return Sent(prompt, sent_parts, deps, messages)


def check_size(
    payload: AgentRunInput | TurnInput, converter: DataConverter = golem_data_converter
) -> None:
    """``RunError`` (stage ``history``) when a run's input (or a conversation's turn, which
    becomes one) is over one Temporal payload and ``converter`` (the client's) has no
    external storage to take it."""
    if converter.external_storage is not None:
        return
    size = len(golem_data_converter.payload_converter.to_payloads([payload])[0].data)
    if size > MAX_INPUT_BYTES:
        raise RunError(
            "history",
            f"the run's input is {size} bytes, over the {MAX_INPUT_BYTES}-byte limit of "
            "one Temporal payload; trim the history (trim_history / budget_history), or turn "
            "on external storage (GolemPlugin(external_storage=...) or GOLEM_STORAGE_DIR)",
        )


async def check_not_waiting(client: Client, history: Sequence[Message]) -> None:
    """``ValueError`` when ``history`` ends with calls of a run that is still running (it
    waits for their approval, or acts on it): a new run from it would decide them a second
    time and leave that run waiting. The error says where to answer instead."""
    run_id, calls = _open_calls(history)
    if not calls:
        return
    run = await existing_run(client, run_id)
    if run is None:
        await _check_inline_turn(client, history, run_id, calls)
        return
    if run.status != "running":
        return
    where = f"run {run_id}"
    answer = f"(await durable.attach({run_id!r})).approve(decisions)"
    if run.parent_workflow_id:  # a conversation's turn: its conversation relays decisions
        where = f"run {run_id}, a turn of conversation {run.parent_workflow_id},"
        answer = f"(await durable.conversation({run.parent_workflow_id!r})).approve(decisions)"
    raise ValueError(
        f"{where} is still running the calls this history ends with ({', '.join(calls)}): "
        f"it waits for their approval (or acts on it); answer it there, `await {answer}`, "
        "or cancel it first: a new run from this history would leave it waiting"
    )


async def _check_inline_turn(
    client: Client, history: Sequence[Message], run_id: str, calls: list[str]
) -> None:
    """``check_not_waiting`` for a run that is no workflow: a turn run inline in its
    conversation's workflow (docs/adr/0050), which says whether that turn waits for them."""
    conversation_id = next((m.conversation_id for m in reversed(history) if m.run_id == run_id), "")
    if not conversation_id or conversation_id == run_id:
        return
    info = await existing_run(client, conversation_id)
    if info is None or info.status != "running":
        return
    waiting = await awaiting_approval(client, conversation_id, info=info)
    if waiting.run_id != run_id or not {c.id for c in waiting.calls} & set(calls):
        return
    answer = f"(await durable.conversation({conversation_id!r})).approve(decisions)"
    raise ValueError(
        f"run {run_id}, a turn of conversation {conversation_id} (run inline), waits for the "
        f"approval of the calls this history ends with ({', '.join(calls)}): answer it there, "
        f"`await {answer}`, or close the conversation first: a new run from this history "
        "would leave it waiting"
    )


def _open_calls(history: Sequence[Message]) -> tuple[str, list[str]]:
    """The run whose last turn ``history`` ends with, and that turn's calls no result answers."""
    answered = {m.tool_call_id for m in history if m.role == "tool"}
    last = next((m for m in reversed(history) if m.role != "tool"), None)
    if last is None or last.role != "assistant" or not last.run_id:
        return "", []
    return last.run_id, [c.id for c in last.tool_calls if c.id not in answered]


def _message(index: int, item: HistoryItem) -> Message:
    field = f"history message {index}"
    if not isinstance(item, Message | dict):
        raise ValueError(
            f"{field} is a {type(item).__name__}, not a golem Message (or a dict of one, as "
            "dump_messages writes it)"
        )
    message: Message = _sendable(field, item, _MESSAGE)
    return item if isinstance(item, Message) else message


def _sendable(field: str, value: Any, kind: TypeAdapter[Any] | None = None) -> Any:
    """``value`` (validated as ``kind`` when given), or ``ValueError`` naming ``field``
    unless it survives a JSON round trip unchanged: lone surrogates cannot be encoded, NaN
    or Infinity would silently become null, and a ``model_construct``-ed message would fail
    the run's input decoding."""
    try:
        data = _STRICT_JSON.to_json(value, by_alias=True, exclude_defaults=True)
    except PydanticSerializationError as exc:
        raise ValueError(f"{field} cannot be sent to Temporal: {exc}") from None
    try:
        loads_strict(data)
    except ValueError as exc:
        raise ValueError(
            f"{field} cannot be sent to Temporal: {exc} (JSON has no NaN or Infinity; "
            "encode such numbers yourself, e.g. as null or a string)"
        ) from None
    if kind is None:
        return value
    try:
        return kind.validate_json(data)
    except ValidationError as exc:
        raise ValueError(f"{field} is invalid: {validation_problems(exc)}") from None
