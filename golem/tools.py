"""Tools: plain functions whose signature and docstring become the model-visible schema.

    @agent.tool
    async def weather(ctx: RunContext[Deps], city: str) -> str:
        '''Current weather for a city.

        Args:
            city: The city name, e.g. "Paris".
        '''

Inside a tool, ``raise ToolFailed("why")`` records a failed result and the run
goes on; ``raise ModelRetry("why")`` sends "why" back to the model as a retry prompt
(counted against the tool's ``max_retries``); ``raise Canceled("why")`` stops the run
deliberately; ``await ctx.delegate(agent, prompt)`` runs another agent as a child run
and returns its ``Result`` (golem.delegation).

A sync tool runs in a worker thread (it never blocks the event loop); an async tool runs
on the loop.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import re
import typing
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Generic, Literal, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, create_model
from pydantic.alias_generators import to_camel

# Released import paths (0.2.0): the errors live in golem.errors.
from golem.errors import Canceled as Canceled
from golem.errors import ModelRetry as ModelRetry
from golem.errors import ToolFailed as ToolFailed
from golem.messages import Message, Part, ToolCall, Usage
from golem.models.base import ToolDefinition
from golem.results import Result
from golem.retry import TOOL_RETRY, Retry
from golem.strict_json import TooDeep, loads_strict
from golem.usage import Spent
from golem.user_functions import call_user_function

DepsT = TypeVar("DepsT")


class ToolOutcomeUnknown(Exception):
    """Raised by an executor's ``call_tool`` when the call had started but its outcome cannot
    be known (its worker died mid-call, or it timed out): the run stops at stage ``tool`` and
    the call is closed with ``OUTCOME_UNKNOWN_RESULT``, never with "interrupted before
    execution"."""


def raised(error: Exception) -> str:
    """How a tool call that raised reads to the model and in the run's error, the same in
    both executors: the exception's type and text (``RuntimeError: boom``), as the durable
    tool activity reports it; golem's own errors (an executor's report of the call, a lost
    MCP server, a user function's culprit) read as they are written."""
    if type(error).__module__.partition(".")[0] == "golem":
        return str(error)
    return f"{type(error).__name__}: {error}"


@dataclass(frozen=True)
class Asked:
    """What a tool asks another agent (``RunContext.delegate``): the child run's prompt, its
    deps and the history it is given."""

    prompt: str | None
    deps: Any = None
    history: Sequence[Message] | None = None


class Delegator(Protocol):
    """Runs another agent for a tool (``RunContext.delegate``); each executor gives its own."""

    def delegate(self, ctx: RunContext[Any], agent: Any, asked: Asked) -> Awaitable[Result[Any]]:
        """Start ``agent``'s child run now (its id fixed in call order) and await its end."""
        ...


@dataclass
class RunContext(Generic[DepsT]):
    """What a tool, an instructions function or a history processor learns about its run."""

    deps: DepsT
    run_id: str
    conversation_id: str
    agent_name: str = "agent"
    usage: Usage = field(default_factory=Usage)
    """Usage of the run so far."""
    retries: dict[str, int] = field(default_factory=dict)
    """Failed attempts so far, per tool name."""
    turn: int = 0
    """Model turns completed so far."""
    tool_call_id: str = ""
    """Inside a tool: the id of the call being executed."""
    tool_name: str = ""
    tool_args: BaseModel | None = None
    """In process, for the executor: the call's arguments as the loop validated them, so
    they are validated once per call."""
    delegator: Delegator | None = field(default=None, repr=False, compare=False)
    """Inside a tool: what ``delegate`` runs other agents with."""

    def delegate(
        self,
        agent: Any,
        prompt: str | None = None,
        *,
        deps: Any = None,
        history: Sequence[Message] | None = None,
    ) -> Awaitable[Result[Any]]:
        """Run ``agent`` (an ``Agent``, or the name of one its worker serves) as a child run
        of this one and return its ``Result`` (``RunError`` when it fails). The child sees
        only ``prompt`` and ``history``, never this run's conversation; it joins this run's
        conversation unless ``history`` names another. In process a nested run; durably a
        run of its own, whose id is derived from this tool call, so a retried call finds
        it again instead of starting another. Await several at once to run them in
        parallel."""
        if self.delegator is None:
            raise RuntimeError("ctx.delegate works only inside a tool of a running agent")
        return self.delegator.delegate(self, agent, Asked(prompt, deps, history))


class ToolOutcome(BaseModel):
    """What executing one call produced; the loop turns it into a tool message."""

    # camelCase on the wire, like every payload in a durable run's history.
    model_config = ConfigDict(frozen=True, alias_generator=to_camel, populate_by_name=True)

    status: Literal["ok", "failed", "retry", "canceled"] = "ok"
    """``retry``: the tool raised ``ModelRetry`` (a failed result that counts as a retry)."""
    content: str = ""
    # Factories, not ``[]``: pydantic deep-copies a mutable default for every outcome.
    parts: list[Part] = Field(default_factory=list)
    sub_runs: list[str] = Field(default_factory=list)
    """Runs the tool started with ``ctx.delegate`` where it ran (an activity), in order."""
    spent: Spent | None = None
    """What those runs spent, all together."""


def tool_message(call: ToolCall, outcome: ToolOutcome) -> Message:
    """The tool message the loop makes of a call's outcome (a retry is a failed result)."""
    failed = outcome.status in ("failed", "retry")
    return Message.tool(call.id, call.name, outcome.content, failed, outcome.parts)


def validation_problems(exc: ValidationError, whole: str = "value") -> str:
    """A pydantic error as one line: ``field: problem; other.field: problem``."""
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or whole}: {e['msg']}"
        for e in exc.errors(include_url=False)
    )


_ARG_DOC = re.compile(r"^\s*(\w+)\s*(?:\([^)]*\))?\s*:\s*(.+)$")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google/Sphinx-style docstring into (description, {param: description})."""
    description: list[str] = []
    params: dict[str, str] = {}
    section = "body"
    for raw in inspect.cleandoc(doc).splitlines():
        line = raw.strip()
        lower = line.lower()
        if lower in ("args:", "arguments:", "parameters:", "params:"):
            section = "args"
            continue
        if lower in ("returns:", "return:", "raises:", "yields:", "examples:", "example:"):
            section = "other"
            continue
        if line.startswith(":param "):
            name, _, text = line[len(":param ") :].partition(":")
            params[name.strip().split()[-1]] = text.strip()
            continue
        if section == "body":
            description.append(raw)
        elif section == "args" and (m := _ARG_DOC.match(line)):
            params[m.group(1)] = m.group(2).strip()
    return "\n".join(description).strip(), params


def _takes_context(fn: Callable[..., Any], hints: dict[str, Any]) -> bool:
    params = list(inspect.signature(fn).parameters.values())
    if not params:
        return False
    first = hints.get(params[0].name, params[0].annotation)
    origin = typing.get_origin(first) or first
    return origin is RunContext or params[0].name in ("ctx", "context")


#: ``requires_approval``'s predicate: ``(ctx, args) -> bool`` on a call's validated
#: arguments (a dict). Durably it runs in the workflow: it must be pure (no I/O, no clock).
ApprovalPredicate = Callable[["RunContext[Any]", dict[str, Any]], bool]


def _unreadable_args(exc: ValueError) -> str:
    """Why a call's arguments could not be read, and what the model should send instead."""
    if isinstance(exc, json.JSONDecodeError):
        return (
            f"arguments are not valid JSON ({exc.msg} at position {exc.pos}); "
            "they may have been cut off. Send the complete arguments as a JSON object."
        )
    if isinstance(exc, TooDeep):
        return f"arguments are {exc}: send a flatter JSON object"
    return (
        f"arguments are not valid JSON ({exc}); send numbers as finite JSON numbers "
        "and the complete arguments as a JSON object."
    )


@dataclass
class Tool:
    """A registered tool. Build one with ``@agent.tool`` or ``Tool.from_function``."""

    function: Callable[..., Any]
    name: str
    description: str
    takes_context: bool
    args_model: type[BaseModel]
    sequential: bool = False
    """Run this tool's batches one call at a time, in call order."""
    requires_approval: bool | ApprovalPredicate = False
    """Pause the run until a person approves or denies the call: always, or when the
    predicate ``(ctx, args) -> bool`` says so of the validated arguments."""
    max_retries: int = 2
    """Retries the model gets (bad arguments, ``ModelRetry``; ``ToolFailed`` does not count)
    before the run ends at stage ``tool``."""
    timeout: timedelta | None = None
    """Longest one attempt may take (in process and as the tool activity's start-to-close
    timeout; default: none in process, five minutes under Temporal). A timed-out attempt is
    retried like a failed one; past the last, the run ends at stage ``tool`` and the call's
    outcome is unknown (a sync tool's thread cannot be stopped and runs on)."""
    retry: Retry | None = None
    """How a call that raised (or timed out) is tried again, in process and under Temporal
    alike (``None``: ``TOOL_RETRY``, three attempts)."""
    retry_attempts: int | None = None
    """Shorthand that sets only the maximum attempts."""
    at_most_once: bool = False
    """Never execute a call twice: one attempt, and under Temporal a worker that dies mid-call
    fails the run with partial evidence instead of re-running it."""
    on_loop: bool = False
    """Call a sync function on the event loop, with no thread (an async one always runs
    there): only for a quick function that never blocks (no I/O, no sleep, no lock). It
    saves the thread's round trip, most of what a quick call costs; one that blocks stalls
    every run of the process (and, durably, the worker's heartbeats and polls), and its
    ``timeout`` cannot stop it (docs/adr/0037-sync-on-the-loop.md)."""
    delegate: str = ""
    """The agent this tool runs as a child run (``Agent(delegates=[...])``): durably the
    calling workflow starts it, with no activity in between; one attempt."""
    handoff: str = ""
    """The agent this tool hands the conversation to (``Agent(handoffs=[...])``): the loop
    answers the call itself and the turn goes on with that agent."""

    @classmethod
    def from_function(
        cls, function: Callable[..., Any], *, name: str | None = None, **options: Any
    ) -> Tool:
        hints = typing.get_type_hints(function, include_extras=True)
        takes_context = _takes_context(function, hints)
        description, param_docs = _parse_docstring(function.__doc__ or "")
        fields: dict[str, Any] = {}
        params = list(inspect.signature(function).parameters.values())
        for param in params[1:] if takes_context else params:
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TypeError(f"tool {function.__name__}: *args/**kwargs cannot be described")
            annotation = hints.get(param.name, Any)
            default = ... if param.default is param.empty else param.default
            fields[param.name] = (
                annotation,
                Field(default, description=param_docs.get(param.name)),
            )
        return cls.with_fields(
            function,
            name=name or function.__name__,
            description=description,
            fields=fields,
            **options,
        )

    @classmethod
    def with_fields(
        cls,
        function: Callable[..., Any],
        *,
        name: str,
        description: str,
        fields: dict[str, Any],
        **options: Any,
    ) -> Tool:
        """A tool whose arguments are ``fields`` (``pydantic.create_model``'s field
        definitions; any other argument is refused); it takes the ``RunContext`` when the
        function's first parameter is annotated as one."""
        hints = typing.get_type_hints(function, include_extras=True)
        model = create_model(f"{name}_args", __config__=ConfigDict(extra="forbid"), **fields)
        return cls(
            function=function,
            name=name,
            description=description,
            takes_context=_takes_context(function, hints),
            args_model=model,
            **options,
        )

    @property
    def retry_policy(self) -> Retry:
        """The policy both executors apply to this tool's calls."""
        policy = self.retry or TOOL_RETRY
        if self.retry_attempts is not None:
            policy = dataclasses.replace(policy, max_attempts=self.retry_attempts)
        if self.at_most_once or self.delegate:  # a child's failure is its result: never asked again
            policy = dataclasses.replace(policy, max_attempts=1)
        return policy

    @property
    def definition(self) -> ToolDefinition:
        schema = self.args_model.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        schema.setdefault("properties", {})
        return ToolDefinition(name=self.name, description=self.description, parameters=schema)

    def validate_args(self, args: str) -> BaseModel:
        """Parse the model's verbatim arguments (strict JSON: no ``NaN``/``Infinity``);
        raise ``ValueError`` saying what is wrong."""
        text = args.strip() or "{}"
        try:
            value = loads_strict(text)
        except ValueError as exc:  # a JSONDecodeError, TooDeep, or a NaN's refusal
            raise ValueError(_unreadable_args(exc)) from None
        if not isinstance(value, dict):
            raise ValueError(f"arguments must be a JSON object, got {type(value).__name__}")
        try:
            return self.args_model.model_validate(value)
        except ValidationError as exc:
            raise ValueError(
                f"invalid arguments: {validation_problems(exc, 'arguments')}"
            ) from None

    async def execute(self, ctx: RunContext[Any], args: str | BaseModel) -> ToolOutcome:
        """Run one call: ``args`` is the model's verbatim text, or what ``validate_args``
        already returned for it (then it is not validated again). ``ToolFailed``,
        ``ModelRetry`` and ``Canceled`` become outcomes; anything else propagates (the run
        ends at stage ``tool``), ``SystemExit`` and other ``BaseException`` as
        ``UserCodeError``."""
        if isinstance(args, BaseModel):
            parsed = args
        else:
            try:
                parsed = self.validate_args(args)
            except ValueError as exc:
                return ToolOutcome(status="failed", content=str(exc))
        kwargs = dict(parsed.__dict__)  # a validated model's fields, by name
        first = (ctx,) if self.takes_context else ()
        try:
            value = await call_user_function(
                functools.partial(self.function, *first, **kwargs),
                what=f"tool {self.name!r}",
                on_loop=self.on_loop,
            )
        except ToolFailed as exc:
            return ToolOutcome(status="failed", content=str(exc) or type(exc).__name__)
        except ModelRetry as exc:
            return ToolOutcome(status="retry", content=str(exc) or "try again")
        except Canceled as exc:
            return ToolOutcome(status="canceled", content=str(exc) or "canceled")
        return tool_result_text(value)


# NaN and infinities are kept as the constants Python writes (NaN, Infinity): pydantic's
# default would silently turn a tool's NaN into null, telling the model a different value.
_ANY = TypeAdapter(Any, config=ConfigDict(ser_json_inf_nan="constants"))


def tool_result_text(value: Any) -> ToolOutcome:
    """Turn what a tool returned into result text (and media parts)."""
    if isinstance(value, ToolOutcome):
        return value
    if isinstance(value, Part):
        return ToolOutcome(parts=[value])
    if isinstance(value, list) and value and all(isinstance(v, Part | str) for v in value):
        text = "\n".join(v for v in value if isinstance(v, str))
        return ToolOutcome(content=text, parts=[v for v in value if isinstance(v, Part)])
    if isinstance(value, str):
        return ToolOutcome(content=value)
    if value is None:
        return ToolOutcome(content="")
    return ToolOutcome(content=_ANY.dump_json(value).decode())
