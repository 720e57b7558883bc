"""The in-process executor: ``agent.run`` drives the loop through this."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from golem.ids import new_id
from golem.messages import Message, ToolCall
from golem.models.base import Model, ModelError, ModelRequest, ModelResponse, StreamDelta
from golem.retry import Retry
from golem.run_state import AgentSpec, DeltaSink
from golem.tools import RunContext, ToolOutcome, ToolOutcomeUnknown
from golem.user_functions import call_instructions_function, call_user_function, describe


class LocalAgent(AgentSpec, Protocol):
    """What the in-process executor reads of an agent (``golem.Agent`` is one)."""

    model_retry: Retry

    @property
    def model(self) -> Model: ...


__all__ = ["LocalExecutor", "call_user_function"]


class LocalExecutor:
    """Runs every effect in process; retries retryable model errors with bounded backoff."""

    def __init__(self, agent: LocalAgent) -> None:
        self.agent = agent

    def new_id(self) -> str:
        return new_id()

    async def process_history(self, ctx: RunContext[Any], history: list[Message]) -> list[Message]:
        processor = self.agent.history_processor
        result = await call_user_function(
            processor, history, what=_named("history processor", processor)
        )
        return list(result)

    async def resolve_instructions(self, ctx: RunContext[Any]) -> str:
        fn = self.agent.instructions_fn
        return await call_instructions_function(fn, ctx, what=_named("instructions function", fn))

    async def await_approvals(
        self, pending: list[ToolCall], ctx: RunContext[Any]
    ) -> dict[str, bool] | None:
        return None  # in process a run pauses: the caller answers with a new run

    async def request(
        self, request: ModelRequest, ctx: RunContext[Any], on_delta: DeltaSink | None
    ) -> ModelResponse:
        policy = self.agent.model_retry
        attempt = 1
        while True:
            try:
                return await self._request_once(request, on_delta)
            except ModelError as exc:
                if not exc.retryable or attempt >= policy.max_attempts:
                    raise
                delay = policy.delay(attempt, exc.retry_after)
                if delay > policy.max_interval:
                    raise  # the provider asks for a longer wait than this run may take
                await asyncio.sleep(delay)
                attempt += 1

    async def _request_once(
        self, request: ModelRequest, on_delta: DeltaSink | None
    ) -> ModelResponse:
        model = self.agent.model
        if on_delta is None:
            return await model.request(request)
        response: ModelResponse | None = None
        async for item in model.request_stream(request):
            if isinstance(item, StreamDelta):
                on_delta(item)
            else:
                response = item
        if response is None:
            raise ModelError(
                "the stream ended without a complete response", provider=model.model_name
            )
        return response

    async def call_tool(self, call: ToolCall, ctx: RunContext[Any]) -> ToolOutcome:
        tool = self.agent.tools[call.name]
        args = call.args if ctx.tool_args is None else ctx.tool_args  # validated once
        if tool.timeout is None:
            return await tool.execute(ctx, args)
        seconds = tool.timeout.total_seconds()
        try:
            async with asyncio.timeout(seconds) as deadline:
                return await tool.execute(ctx, args)
        except TimeoutError:
            if not deadline.expired():
                raise  # the tool's own TimeoutError
            # A sync tool's thread cannot be stopped: whether it took effect is unknown.
            raise ToolOutcomeUnknown(
                f"timed out after {seconds:g} s (the tool's timeout); its outcome is unknown"
            ) from None


def _named(role: str, fn: Any) -> str:
    return f"{role} {describe(fn)}"
