"""golem's activities: a model request, a tool call, and the once-per-run user functions.

The model-request activity does not receive the conversation: its worker's
``MessageCache`` (golem.wire.cache) extends what it has with the input's new
messages, or reads them from the running workflow through the ``golem.messages`` query,
and a conversation turn's history from the conversation workflow's
``golem.conversation`` query.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError, SchemaSerializer
from pydantic_core.core_schema import any_schema
from temporalio import activity
from temporalio.exceptions import ApplicationError

from golem.activities.delegation import ActivityDelegator
from golem.activities.streams import request_or_stream
from golem.activities.toolsets import ToolLists
from golem.agent import Agent
from golem.messages import Decision, Message
from golem.models.base import ModelError, ModelRequest, ModelResponse, ToolDefinition
from golem.models.fallback import chain, falls_over, stamp
from golem.policies import evaluate
from golem.tools import RunContext, ToolOutcome, validation_problems
from golem.user_functions import (
    UserCodeError,
    call_instructions_function,
    call_user_function,
    describe,
)
from golem.wire import (
    EvaluationInput,
    MessagesPage,
    MessagesQuery,
    ModelCall,
    ModelFailure,
    PrepareInput,
    ShippingError,
    ToolCallInput,
    names,
)
from golem.wire.cache import MessageCache
from golem.wire.transcript import HistoryReader, with_segments
from golem.workflows import registry

T = TypeVar("T")

#: Largest activity result golem hands Temporal (its blob limit is 2 MB per payload).
PAYLOAD_LIMIT = 2_000_000 - 16_384
_JSON = SchemaSerializer(any_schema())


def _agent(name: str) -> Agent[Any, Any]:
    try:
        return registry.lookup(activity.info().task_queue, name)
    except LookupError as exc:
        raise ApplicationError(str(exc), type=names.UNKNOWN_AGENT, non_retryable=True) from None


def _run_key() -> str:
    """The key a worker's cache files the calling workflow run's messages under."""
    info = activity.info()
    return f"{info.workflow_id}/{info.workflow_run_id}"


def _deps(agent: Agent[Any, Any], deps: Any) -> Any:
    if agent.deps_type is None or deps is None:
        return deps
    return TypeAdapter(agent.deps_type).validate_python(deps)


def _failure(what: str, exc: Exception) -> str:
    """``<what> raised KeyError: ...``, or the ``UserCodeError`` text that names its culprit."""
    return (
        str(exc) if isinstance(exc, UserCodeError) else f"{what} raised {type(exc).__name__}: {exc}"
    )


async def _contained(work: Awaitable[T], what: str) -> T:
    """Await ``work``; a ``BaseException`` that is not a cancellation becomes ``UserCodeError``
    (user code called through ``call_user_function`` is converted already; a provider is not)."""
    try:
        return await work
    except (Exception, asyncio.CancelledError):
        raise
    except BaseException as exc:  # SystemExit, KeyboardInterrupt, GeneratorExit, ...
        raise UserCodeError(f"{what} raised {type(exc).__name__}: {exc}") from exc


async def _heartbeating(work: Awaitable[T], what: str) -> T:
    """Await ``work`` while heartbeating, so a dead worker is noticed and cancellation arrives.

    The work runs in its own task (sync user code in a thread, see ``call_user_function``),
    so heartbeats keep going while it runs; what it raises never reaches the event loop."""
    task = asyncio.ensure_future(_contained(work, what))
    info = activity.info()
    every = (info.heartbeat_timeout or registry.HEARTBEAT_TIMEOUT).total_seconds() / 3
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=every)
            if done:
                break
            activity.heartbeat()
    finally:
        if not task.done():
            task.cancel()
    if task.cancelled():
        # Nobody cancelled this activity (that would have raised above): the work itself did.
        raise UserCodeError(f"{what} raised asyncio.CancelledError")
    return task.result()


def _checked(value: T, kind: Any, what: str) -> T:
    """Fail clearly, once, if ``value`` would not reach the workflow: too large for one
    payload, not serializable, or not decodable as ``kind`` (the workflow would otherwise
    fail its task on it, and retry that forever)."""
    try:
        data = _JSON.to_json(value, by_alias=True, exclude_defaults=True)
    except PydanticSerializationError as exc:
        raise _bad_result(f"{what} returned a value that cannot be serialized: {exc}") from None
    check_size(len(data), what)
    try:
        _adapter(kind).validate_json(data)
    except ValidationError as exc:
        raise _bad_result(f"{what} returned an invalid value: {validation_problems(exc)}") from None
    return value


def _bad_result(message: str) -> ApplicationError:
    return ApplicationError(message, type=names.BAD_RESULT, non_retryable=True)


def check_size(size: int, what: str) -> None:
    """Fail clearly, once, when a result of ``size`` bytes is over Temporal's payload limit
    and this worker stores no payloads (Temporal would fail it with a bare TMPRL1103)."""
    if size > PAYLOAD_LIMIT and not _stores_payloads():
        raise ApplicationError(
            f"{what} produced {size} bytes, over Temporal's payload limit of {PAYLOAD_LIMIT} "
            "bytes; return a reference (a URL or an id) instead of the content, or turn on "
            "external storage (GolemPlugin(external_storage=...) or GOLEM_STORAGE_DIR)",
            type=names.PAYLOAD_TOO_LARGE,
            non_retryable=True,
        )


def _stores_payloads() -> bool:
    """Whether this worker's payloads go to external storage past its threshold (which
    ``golem_converter`` keeps under the limit): then the store takes any size."""
    try:
        return activity.client().data_converter.external_storage is not None
    except RuntimeError:  # no client: an activity environment of a test
        return False


@functools.cache
def _adapter(kind: Any) -> TypeAdapter[Any]:
    return TypeAdapter(kind)


class ModelActivity:
    """The model-request and tool activities, bound to their worker's ``MessageCache`` (a
    tool's or a model's content is kept there: the next model call names it by digest)."""

    def __init__(self, cache: MessageCache) -> None:
        self.cache = cache
        self.histories: HistoryReader | None = None  # conversations' earlier workflow runs
        self.tool_lists = ToolLists()  # runs' toolset tools, by digest

    @activity.defn(name=names.MODEL_REQUEST)
    async def model_request(self, input: ModelCall) -> ModelResponse:
        """Send one request to the agent's model; provider retries are the activity's."""
        agent = _agent(input.agent)
        links = chain(agent.model, agent.model_retry)
        if not 0 <= input.model_index < len(links):
            raise ApplicationError(
                f"agent {agent.name!r} has no model {input.model_index} (it has {len(links)})",
                non_retryable=True,
            )
        model, policy = links[input.model_index]
        what = f"model {model.model_name}"
        # Heartbeating: a query waits out a dead worker's workflow task (up to 10 s), longer
        # than a short heartbeat timeout, which would time the retry out and call again.
        messages, tools = await _heartbeating(self._request_parts(input), what)
        request = ModelRequest.model_construct(
            messages=messages,
            tools=[*agent.tool_definitions, *tools],
            output_schema=agent.output_schema,
            settings=agent.model_settings,
        )
        try:
            response = await _heartbeating(request_or_stream(model, request, input), what)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # Only a ModelError the policy retries may help; anything else is a bug, not a blip.
            retryable = isinstance(exc, ModelError) and policy.retryable(exc)
            after = exc.retry_after if isinstance(exc, ModelError) else None
            verdict = ModelFailure(
                falls_over=falls_over(agent.model, input.model_index, exc), error=str(exc)
            )
            raise ApplicationError(
                f"{what}: {exc}" if isinstance(exc, ModelError) else _failure(what, exc),
                verdict,
                type=type(exc).__name__,
                non_retryable=not retryable,
                next_retry_delay=timedelta(seconds=after)
                if retryable and after is not None
                else None,
            ) from exc
        response = stamp(response, model)
        checked = _checked(response, ModelResponse, f"{what} (turn {input.turn})")
        self.cache.answered(_run_key(), checked.message)  # the next call names it, or derives
        return checked

    @activity.defn(name=names.TOOL)
    async def call_tool(self, input: ToolCallInput) -> ToolOutcome:
        """Execute one tool call; its worker keeps the content for the next model call."""
        outcome = await _call_tool(input)
        self.cache.called(_run_key(), input.call, outcome)
        return outcome

    async def _request_parts(self, input: ModelCall) -> tuple[list[Message], list[ToolDefinition]]:
        """The request's messages and its toolsets' tools (each may be read by query)."""
        return await self._messages(input), await self._toolset_tools(input)

    async def _toolset_tools(self, input: ModelCall) -> list[ToolDefinition]:
        """The tools the run's toolsets offer (golem.workflows.mcp), known by digest."""
        info = activity.info()
        handle = activity.client().get_workflow_handle(
            info.workflow_id or "", run_id=info.workflow_run_id
        )

        async def ask() -> list[ToolDefinition]:
            tools: list[ToolDefinition] = await handle.query(
                names.TOOLS, result_type=list[ToolDefinition]
            )
            return tools

        try:
            return await self.tool_lists.get(input.tools, ask)
        except LookupError as exc:
            raise ApplicationError(
                str(exc), type=names.SHIPPING_ERROR, non_retryable=True
            ) from None

    async def _messages(self, input: ModelCall) -> list[Message]:
        """The request's messages: the cache extended by the input, or read by query."""
        info = activity.info()
        handle = activity.client().get_workflow_handle(
            info.workflow_id or "", run_id=info.workflow_run_id
        )

        async def pager(query: MessagesQuery) -> MessagesPage:
            page: MessagesPage = await handle.query(names.MESSAGES, query, result_type=MessagesPage)
            return page

        # No run id: the conversation's current run answers, across continue-as-new.
        client = activity.client()
        conversation = client.get_workflow_handle(input.base.conversation if input.base else "")

        async def base_query(query: MessagesQuery) -> MessagesPage:
            page: MessagesPage = await conversation.query(
                names.CONVERSATION, query, result_type=MessagesPage
            )
            return page

        if self.histories is None:
            self.histories = HistoryReader(
                lambda workflow_id, run_id: client.get_workflow_handle(
                    workflow_id, run_id=run_id or None
                ).fetch_history_events(),
                client.data_converter,
            )
        # What earlier workflow runs of the conversation hold is read from their histories.
        base_pager = with_segments(base_query, self.histories.segment)

        try:
            if input.base is None:
                return await self.cache.fetch(_run_key(), input, pager)
            return await self.cache.fetch(_run_key(), input, pager, base_pager)
        except ShippingError as exc:
            raise ApplicationError(
                str(exc), type=names.SHIPPING_ERROR, non_retryable=True
            ) from None
        except LookupError as exc:
            # The workflow served fewer messages than it announced; a retry reads anew.
            raise ApplicationError(str(exc), type=names.SHIPPING_ERROR) from None


@activity.defn(name=names.TOOL)
async def call_tool(input: ToolCallInput) -> ToolOutcome:
    """Execute one tool call."""
    return await _call_tool(input)


async def _call_tool(input: ToolCallInput) -> ToolOutcome:
    agent = _agent(input.agent)
    call = input.call
    tool = agent.tools.get(call.name)
    if tool is None:
        raise ApplicationError(
            f"agent {agent.name!r} has no tool {call.name!r}", non_retryable=True
        )
    ctx = RunContext(
        deps=_deps(agent, input.deps),
        run_id=input.run_id or activity.info().workflow_id or "",
        conversation_id=input.conversation_id,
        agent_name=agent.name,
        usage=input.usage,
        retries=dict(input.retries),
        turn=input.turn,
        tool_call_id=call.id,
        tool_name=call.name,
        delegator=(delegator := ActivityDelegator(input)),  # ctx.delegate: runs of their own
    )
    try:
        outcome = await _heartbeating(tool.execute(ctx, call.args), f"tool {call.name!r}")
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        raise ApplicationError(
            f"{_failure(f'tool {call.name!r}', exc)} (call {call.id})",
            # The error alone, as details: the run's loop names the tool and the call itself.
            str(exc) if isinstance(exc, UserCodeError) else f"{type(exc).__name__}: {exc}",
            type=names.TOOL_ERROR,
            # The tool's policy decides, as in process (SystemExit and the like: never).
            non_retryable=not tool.retry_policy.retryable(exc),
        ) from exc
    return _checked(delegator.stamp(outcome), ToolOutcome, f"tool {call.name!r} (call {call.id})")


async def _once(what: str, fn: Any, *args: Any) -> Any:
    """Run a once-per-run user function: its own failure is final (non-retryable), so only a
    worker that dies mid-call (a heartbeat or start-to-close timeout) runs it again."""
    try:
        return await _heartbeating(call_user_function(fn, *args, what=what), what)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        raise ApplicationError(
            _failure(what, exc), type=names.USER_ERROR, non_retryable=True
        ) from exc


@activity.defn(name=names.PROCESS_HISTORY)
async def process_history(input: PrepareInput) -> list[Message]:
    """Run the agent's history processor once; its output is recorded for replay."""
    agent = _agent(input.agent)
    fn = agent.history_processor
    what = f"history processor {describe(fn)} of agent {agent.name!r}"
    result = await _once(what, fn, list(input.history))
    if not isinstance(result, list | tuple):
        raise ApplicationError(
            f"{what} returned {type(result).__name__}, not a list of Message",
            type=names.BAD_RESULT,
            non_retryable=True,
        )
    return _checked(list(result), list[Message], what)


def _run_context(agent: Agent[Any, Any], input: PrepareInput | ToolCallInput) -> RunContext[Any]:
    """The context a user function of the run gets in an activity: its deps and ids."""
    return RunContext(
        deps=_deps(agent, input.deps),
        run_id=input.run_id,
        conversation_id=input.conversation_id,
        agent_name=agent.name,
    )


@activity.defn(name=names.RESOLVE_INSTRUCTIONS)
async def resolve_instructions(input: PrepareInput) -> str:
    """Evaluate the agent's instructions function once; its text is recorded for replay."""
    agent = _agent(input.agent)
    ctx = _run_context(agent, input)
    fn = agent.instructions_fn
    what = f"instructions function {describe(fn)} of agent {agent.name!r}"
    text: str = await _once(what, call_instructions_function, fn, ctx, what)
    return _checked(text, str, what)


@activity.defn(name=names.EVALUATE_APPROVAL)
async def evaluate_approval(input: EvaluationInput) -> Decision | None:
    """Ask the agent's approval policy's evaluator about one call: its decision, recorded
    for replay, or ``None`` (a person decides). It never raises for the evaluator's faults:
    those send the call to a person (``golem.policies.evaluate``)."""
    agent = _agent(input.agent)
    ctx = _run_context(agent, input)
    ctx.turn, ctx.tool_call_id, ctx.tool_name = input.turn, input.call.id, input.call.name
    asking = evaluate(agent.approval_policy, ctx, input.call, input.asked)
    return await _heartbeating(asking, "evaluator")


def activities(cache: MessageCache | None = None) -> list[Callable[..., Any]]:
    """golem's activities for one worker; ``cache`` is that worker's own (a new one if None)."""
    model = ModelActivity(cache if cache is not None else MessageCache())
    return [
        model.model_request,
        model.call_tool,
        process_history,
        resolve_instructions,
        evaluate_approval,
    ]
