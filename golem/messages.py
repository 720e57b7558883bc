"""The durable message contract.

A conversation is a plain ``list[Message]``. Its JSON form is additive-only:
field names and shapes only ever gain fields. Unknown fields are kept and
written back unchanged, so an older worker in a mixed-version fleet never erases
what a newer one added. Empty fields are omitted from JSON.

    data = dump_messages(result.messages)      # bytes, store anywhere
    history = load_messages(data)              # the same list again
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    ValidationError,
    model_serializer,
)
from pydantic.alias_generators import to_camel

from golem.strict_json import TooDeep, check_depth

Role = Literal["system", "user", "assistant", "tool"]
PART_KINDS = frozenset({"image", "document", "audio", "video"})


class _Wire(BaseModel):
    """Shared JSON shape: camelCase names, unknown fields kept, immutable values."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        frozen=True,
        ser_json_bytes="base64",
        val_json_bytes="base64",
    )


class HistoryError(ValueError):
    """A history that is not a valid conversation.

    ``index`` is the position of the offending message (``None`` when the
    document as a whole is unreadable) and ``problem`` says what is wrong.
    """

    def __init__(self, problem: str, index: int | None = None) -> None:
        self.index = index
        self.problem = problem
        where = "history" if index is None else f"message {index}"
        super().__init__(f"{where}: {problem}")


class Part(_Wire):
    """A media attachment on a user or tool message: exactly one of ``url`` or ``data``."""

    kind: str
    """One of image, document, audio, video."""
    url: str = ""
    """Where the media lives (http or https for anything untrusted)."""
    data: bytes = b""
    """Inline bytes; standard base64 (with padding) in JSON."""
    media_type: str = ""
    """MIME type; required with ``data``."""

    @model_serializer(mode="wrap", when_used="json")
    def _standard_base64(self, handler: SerializerFunctionWrapHandler) -> Any:
        # pydantic's "base64" is the URL-safe alphabet; every other reader expects the standard one.
        fields = handler(self)
        if isinstance(fields, dict) and "data" in fields:
            fields["data"] = base64.b64encode(self.data).decode("ascii")
        return fields


class ToolCall(_Wire):
    """A tool call requested by the model."""

    id: str = ""
    """Provider call id; results pair with their call by it. Empty when the provider gave none."""
    name: str
    """The tool's name."""
    args: str = ""
    """The arguments exactly as the model produced them, kept byte for byte even when not JSON."""
    signature: str = ""
    """Opaque provider signature to replay unchanged (Gemini thought signatures)."""


class ThinkingBlock(_Wire):
    """Model reasoning on an assistant message: exactly one of ``text`` or ``redacted``."""

    text: str = ""
    """Readable reasoning (or its summary)."""
    signature: str = ""
    """Opaque provider signature proving ``text``; only beside text."""
    redacted: str = ""
    """Opaque encrypted reasoning the provider wants replayed as-is."""
    provider: str = ""
    """Which provider produced the block, so another provider is never sent its signature."""
    id: str = ""
    """The provider's id of the reasoning item the block belongs to (OpenAI Responses
    ``rs_...``); blocks sharing it are replayed as that one item."""


class Usage(_Wire):
    """Token counts reported by the provider (zero where not reported)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    """Input tokens served from the provider's prompt cache (part of ``input_tokens``)."""
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    """Output tokens spent on reasoning (part of ``output_tokens``)."""

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )


class Decision(_Wire):
    """A person's (or a policy's) decision on a call that waited, as the transcript keeps it
    on the call's tool message."""

    approved: bool
    """The call ran (``False``: it was denied and not executed)."""
    args: str | None = None
    """The arguments the decider approved in place of the model's (JSON text); ``None``: the
    call ran as the model asked (its own arguments stay on the assistant message's call)."""
    reason: str = ""
    """A denial's reason: what the model read as the call's result."""
    always: bool = False
    """Later calls of this tool in the same conversation run without asking."""
    result: str | None = None
    """A client-run tool's result, as the application gave it (``complete``)."""
    by: str = ""
    """Who decided (``approve(..., by=...)``; the CLI's default is the OS user)."""
    at: str = ""
    """When the decision was given (ISO 8601, UTC)."""


class Message(_Wire):
    """One turn of a conversation."""

    role: Role
    """system, user, assistant or tool."""
    content: str = ""
    """The text of the turn (a tool message's result text)."""
    parts: list[Part] = Field(default_factory=list)
    """Media on user and tool messages."""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    """Calls an assistant message requests."""
    tool_call_id: str = ""
    """On a tool message: the id of the call it answers."""
    tool_name: str = ""
    """On a tool message: the tool that produced it."""
    failed: bool = False
    """On a tool message: the call definitively failed."""
    thinking: list[ThinkingBlock] = Field(default_factory=list)
    """Reasoning blocks on an assistant message, replayed unchanged."""
    run_id: str = ""
    """The run that added this message (empty for history it did not author)."""
    conversation_id: str = ""
    """The conversation the adding run belonged to."""
    model: str = ""
    """On an assistant message: the model that answered (its ``model_name``), e.g. the one
    of a ``FallbackModel`` that did."""
    decision: Decision | None = None
    """On a tool message answering a call that waited for approval: who decided what."""

    @classmethod
    def system(cls, text: str) -> Message:
        return cls(role="system", content=text)

    @classmethod
    def user(cls, text: str, parts: Sequence[Part] = ()) -> Message:
        return cls(role="user", content=text, parts=list(parts))

    @classmethod
    def assistant(
        cls,
        text: str = "",
        tool_calls: Sequence[ToolCall] = (),
        thinking: Sequence[ThinkingBlock] = (),
    ) -> Message:
        return cls(
            role="assistant", content=text, tool_calls=list(tool_calls), thinking=list(thinking)
        )

    @classmethod
    def tool(
        cls, call_id: str, name: str, content: str, failed: bool = False, parts: Sequence[Part] = ()
    ) -> Message:
        return cls(
            role="tool",
            tool_call_id=call_id,
            tool_name=name,
            content=content,
            failed=failed,
            parts=list(parts),
        )

    def stamped(self, run_id: str, conversation_id: str) -> Message:
        """A copy carrying the identity of the run that adds it."""
        return self.replaced(run_id=run_id, conversation_id=conversation_id)

    def replaced(self, **fields: Any) -> Message:
        """``model_copy(update=fields)`` for fields of a message, at about half its cost (a
        run copies every message it adds): the same copy, without its generic steps."""
        copy = Message.__new__(type(self))
        extra = self.__pydantic_extra__
        _set(copy, "__dict__", {**self.__dict__, **fields})
        _set(copy, "__pydantic_extra__", None if extra is None else dict(extra))
        _set(copy, "__pydantic_fields_set__", self.__pydantic_fields_set__ | fields.keys())
        _set(copy, "__pydantic_private__", None)  # a message has no private attributes
        return copy


_set = object.__setattr__  # a frozen model's attributes, as pydantic's own copy sets them


_HISTORY = TypeAdapter(list[Message])


def dump_messages(messages: Iterable[Message]) -> bytes:
    """Serialize a history to JSON bytes (camelCase, empty fields omitted, unknown fields kept)."""
    return _HISTORY.dump_json(list(messages), by_alias=True, exclude_defaults=True)


def load_messages(data: bytes | str) -> list[Message]:
    """Parse and validate a history; raise :class:`HistoryError` rather than return part of one."""
    try:
        messages = _HISTORY.validate_json(data)
    except ValidationError as exc:
        raise _history_error(exc) from None
    validate_history(messages)
    return messages


#: A history's message as callers may give it: a ``Message``, or a dict of one as
#: ``dump_messages`` writes it.
HistoryItem = Message | dict[str, Any]


def as_messages(items: Sequence[Any]) -> list[Message]:
    """A caller's history as messages: each a ``Message`` or a dict of one, as
    ``dump_messages`` writes it (the durable client takes both too); anything else is a
    :class:`HistoryError` naming its position and type."""
    messages: list[Message] = []
    for index, item in enumerate(items):
        if isinstance(item, Mapping):
            try:
                item = Message.model_validate(item)
            except ValidationError as exc:
                err = exc.errors()[0]
                field = ".".join(str(p) for p in err["loc"]) or "message"
                problem = f"{field}: {err['msg']} (in a dict given as a message)"
                raise HistoryError(problem, index) from None
        if not isinstance(item, Message):
            raise HistoryError(
                f"is a {type(item).__name__}, not a golem Message (or a dict of one, as "
                "dump_messages writes it)",
                index,
            )
        messages.append(item)
    return messages


def _history_error(exc: ValidationError) -> HistoryError:
    err = exc.errors()[0]
    loc = list(err["loc"])
    if not loc or not isinstance(loc[0], int):
        return HistoryError(f"not a JSON list of messages ({err['msg']})")
    field = ".".join(str(p) for p in loc[1:]) or "message"
    got = f" (got {err['input']!r:.60})" if len(loc) > 1 else ""
    return HistoryError(f"{field}: {err['msg']}{got}", index=loc[0])


def validate_history(history: Sequence[Message]) -> None:
    """Check the contract's structural rules (call arguments nested past golem's JSON limit
    included); raise :class:`HistoryError` naming the message."""
    for index, message in enumerate(history):
        problem = _message_problem(message)
        if problem:
            raise HistoryError(problem, index=index)


def _message_problem(message: Message) -> str:
    if message.parts and message.role not in ("user", "tool"):
        return f"parts are only allowed on user and tool messages, not on {message.role}"
    if message.thinking and message.role != "assistant":
        return f"thinking is only allowed on assistant messages, not on {message.role}"
    if message.tool_calls and message.role != "assistant":
        return f"tool calls are only allowed on assistant messages, not on {message.role}"
    for i, part in enumerate(message.parts):
        if part.kind not in PART_KINDS:
            return f"part {i}: unknown kind {part.kind!r} (expected one of {sorted(PART_KINDS)})"
        if bool(part.url) == bool(part.data):
            return f"part {i}: needs exactly one of url or data"
        if part.data and not part.media_type:
            return f"part {i}: inline data needs a media type"
    for i, call in enumerate(message.tool_calls):
        try:
            check_depth(call.args)
        except TooDeep as exc:
            return f"tool call {i} ({call.id or call.name}): its arguments are {exc}"
    for i, block in enumerate(message.thinking):
        if bool(block.text) == bool(block.redacted):
            return f"thinking {i}: needs exactly one of text or redacted"
        if block.signature and not block.text:
            return f"thinking {i}: a signature is only allowed beside text"
    return ""
