"""golem's activities: a model request, a tool call, and the once-per-run user functions.

The model-request activity does not receive the conversation: it reads the messages
from its own running workflow through the ``golem.messages`` query (queries are not
recorded in history), asking only for what it has not seen yet.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

from pydantic import TypeAdapter
from pydantic_core import SchemaSerializer
from pydantic_core.core_schema import any_schema
from temporalio import activity
from temporalio.exceptions import ApplicationError

from golem.activities.streams import request_or_stream
from golem.agent import Agent
from golem.local import call_user_function
from golem.messages import Message
from golem.models.base import ModelError, ModelRequest, ModelResponse
from golem.tools import RunContext, ToolOutcome
from golem.workflows import registry
from golem.workflows.types import (
    MessagesPage,
    MessagesQuery,
    ModelCallInput,
    PrepareInput,
    ToolCallInput,
)

__all__ = [
    "PAYLOAD_LIMIT",
    "PAYLOAD_TOO_LARGE",
    "MessageCache",
    "call_tool",
    "model_request",
    "process_history",
    "resolve_instructions",
]

T = TypeVar("T")

#: Largest activity result golem hands Temporal (its blob limit is 2 MB per payload).
PAYLOAD_LIMIT = 2_000_000 - 16_384
PAYLOAD_TOO_LARGE = "GolemPayloadTooLarge"
MODEL_ERROR = "GolemModelError"
TOOL_ERROR = "GolemToolError"
_JSON = SchemaSerializer(any_schema())


def _agent(name: str) -> Agent[Any, Any]:
    try:
        return registry.lookup(activity.info().task_queue, name)
    except LookupError as exc:
        raise ApplicationError(str(exc), type=registry.UNKNOWN_AGENT, non_retryable=True) from None


def _deps(agent: Agent[Any, Any], deps: Any) -> Any:
    if agent.deps_type is None or deps is None:
        return deps
    return TypeAdapter(agent.deps_type).validate_python(deps)


def _guard_size(value: T, what: str) -> T:
    """Fail clearly, once, instead of handing Temporal a payload it will reject."""
    size = len(_JSON.to_json(value, by_alias=True, exclude_defaults=True))
    if size > PAYLOAD_LIMIT:
        raise ApplicationError(
            f"{what} produced {size} bytes, over Temporal's payload limit of {PAYLOAD_LIMIT} "
            "bytes; return a reference (a URL or an id) instead of the content",
            type=PAYLOAD_TOO_LARGE,
            non_retryable=True,
        )
    return value


async def _heartbeating(work: Awaitable[T]) -> T:
    """Await ``work`` while heartbeating, so a dead worker is noticed and cancellation arrives."""
    task = asyncio.ensure_future(work)
    info = activity.info()
    every = (info.heartbeat_timeout or timedelta(seconds=30)).total_seconds() / 3
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=every)
            if done:
                return task.result()
            activity.heartbeat()
    finally:
        if not task.done():
            task.cancel()


class MessageCache:
    """Per-worker cache of each running workflow's request messages (append-only lists)."""

    def __init__(self, max_runs: int = 256) -> None:
        self.max_runs = max_runs
        self.queries = 0
        """Query pages asked for so far (for tests and tuning)."""
        self._runs: OrderedDict[tuple[str, str], list[Message]] = OrderedDict()

    async def fetch(
        self,
        workflow_id: str,
        run_id: str,
        upto: int,
        since: int = 0,
        new: list[Message] | None = None,
    ) -> list[Message]:
        """The first ``upto`` messages; ``new`` (when given) are ``[since, upto)``."""
        key = (workflow_id, run_id)
        have = self._runs.pop(key, [])
        if new and len(have) == since:
            have.extend(new)  # this worker saw everything before: no query needed
        if len(have) < upto:
            handle = activity.client().get_workflow_handle(workflow_id, run_id=run_id)
            while len(have) < upto:
                self.queries += 1
                page = await handle.query(
                    "golem.messages",
                    MessagesQuery(since=len(have), upto=upto),
                    result_type=MessagesPage,
                )
                if page.next <= len(have):
                    raise ApplicationError(
                        f"workflow {workflow_id} served no messages from {len(have)} to {upto}",
                        non_retryable=False,
                    )
                have.extend(page.messages)
        self._runs[key] = have
        while len(self._runs) > self.max_runs:
            self._runs.popitem(last=False)
        return have[:upto]

    def forget(self, workflow_id: str, run_id: str) -> None:
        self._runs.pop((workflow_id, run_id), None)


_cache = MessageCache()


@activity.defn(name="golem.model_request")
async def model_request(input: ModelCallInput) -> ModelResponse:
    """Send one request to the agent's model; provider retries are the activity's."""
    agent = _agent(input.agent)
    info = activity.info()
    messages = await _cache.fetch(
        info.workflow_id or "", info.workflow_run_id or "", input.upto, input.since, input.messages
    )
    request = ModelRequest.model_construct(
        messages=messages,
        tools=agent.tool_definitions,
        output_schema=agent.output_schema,
        settings=agent.model_settings,
    )
    try:
        response = await _heartbeating(request_or_stream(agent.model, request, input))
    except ModelError as exc:
        delay = timedelta(seconds=exc.retry_after) if exc.retry_after is not None else None
        # A provider asking for a longer wait than the agent allows ends the run, as in process.
        too_long = exc.retry_after is not None and exc.retry_after > agent.model_retry.max_interval
        raise ApplicationError(
            f"model {agent.model_name}: {exc}",
            type=type(exc).__name__,
            non_retryable=not exc.retryable or too_long,
            next_retry_delay=None if too_long else delay,
        ) from exc
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        # Only a ModelError says a retry may help; anything else is a bug, not a blip.
        raise ApplicationError(
            f"model {agent.model_name} raised {type(exc).__name__}: {exc}",
            type=type(exc).__name__,
            non_retryable=True,
        ) from exc
    return _guard_size(response, f"model {agent.model_name} (turn {input.turn})")


@activity.defn(name="golem.tool")
async def call_tool(input: ToolCallInput) -> ToolOutcome:
    """Execute one tool call."""
    agent = _agent(input.agent)
    call = input.call
    tool = agent.tools.get(call.name)
    if tool is None:
        raise ApplicationError(
            f"agent {agent.name!r} has no tool {call.name!r}", non_retryable=True
        )
    ctx = RunContext(
        deps=_deps(agent, input.deps),
        run_id=input.run_id,
        conversation_id=input.conversation_id,
        agent_name=agent.name,
        usage=input.usage,
        retries=dict(input.retries),
        turn=input.turn,
        tool_call_id=call.id,
        tool_name=call.name,
    )
    try:
        outcome = await _heartbeating(tool.execute(ctx, call.args))
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        raise ApplicationError(
            f"tool {call.name!r} (call {call.id}) raised {type(exc).__name__}: {exc}",
            type=TOOL_ERROR,
        ) from exc
    return _guard_size(outcome, f"tool {call.name!r} (call {call.id})")


@activity.defn(name="golem.process_history")
async def process_history(input: PrepareInput) -> list[Message]:
    """Run the agent's history processor once; its output is recorded for replay."""
    agent = _agent(input.agent)
    result = list(await call_user_function(agent.history_processor, list(input.history)))
    return _guard_size(result, f"history processor of agent {agent.name!r}")


@activity.defn(name="golem.resolve_instructions")
async def resolve_instructions(input: PrepareInput) -> str:
    """Evaluate the agent's instructions function once; its text is recorded for replay."""
    agent = _agent(input.agent)
    ctx = RunContext(
        deps=_deps(agent, input.deps),
        run_id=input.run_id,
        conversation_id=input.conversation_id,
        agent_name=agent.name,
    )
    return str(await call_user_function(agent.instructions_fn, ctx) or "")


ALL: list[Callable[..., Any]] = [model_request, call_tool, process_history, resolve_instructions]
