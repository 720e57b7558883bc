"""A model turn: the request the model sees, its usage check, and the request itself."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from golem.executor import Executor
from golem.models.base import ModelRequest, ModelResponse, StreamDelta
from golem.phases import Stop
from golem.run_state import NOTHING_SPENT, AgentSpec, DeltaSink, RunState
from golem.tools import RunContext

_DELTA_EVENTS = {"text": "text_delta", "thinking": "thinking_delta", "tool_call": "tool_call_delta"}


def build_request(agent: AgentSpec, state: RunState) -> ModelRequest:
    """Instructions first, then the conversation, the tools and the output schema."""
    return ModelRequest.model_construct(
        messages=state.request_messages(),
        tools=agent.tool_definitions,
        output_schema=agent.output_schema,
        settings=agent.model_settings,
    )


def check_limits(agent: AgentSpec, state: RunState, request: ModelRequest) -> None:
    """Stop before a request the agent's limits forbid."""
    if state.turn >= agent.max_iterations:
        raise Stop("loop", f"no final answer after max_iterations={agent.max_iterations} turns")
    # The limits bound this run and every run it delegated to (a Spent built only then).
    tree = None if state.descendants is NOTHING_SPENT else state.tree
    requests, usage = (state.requests, state.usage) if tree is None else (tree.requests, tree.usage)
    limit = agent.usage_limits.before_request(requests, usage, request.messages)
    if not limit and state.budget is not None:
        limit = state.budget.before_request(tree or state.tree)
    if limit:
        raise Stop("usage", limit)


async def request(
    executor: Executor,
    model_request: ModelRequest,
    ctx: RunContext[Any],
    on_delta: DeltaSink | None,
    attempt: int,
) -> ModelResponse:
    """One model request; any failure (``SystemExit`` included) ends the run at stage model."""
    try:
        return await executor.request(model_request, ctx, on_delta)
    except asyncio.CancelledError:
        raise  # the caller cancelled the run (a model function's own is converted where it ran)
    except Exception as exc:
        raise Stop("model", f"model request {attempt} failed: {exc}") from exc
    except BaseException as exc:
        # Converted here: past this coroutine a task would re-raise it into the event loop.
        message = f"model request {attempt} raised {type(exc).__name__}: {exc}"
        raise Stop("model", message) from exc


class TurnDeltas:
    """A streamed turn's pieces and restarts, as run events (``emit(kind, **fields)``)."""

    def __init__(self, emit: Callable[..., None], turn: int) -> None:
        self.emit = emit
        self.turn = turn

    def __call__(self, delta: StreamDelta) -> None:
        self.emit(_DELTA_EVENTS[delta.kind], turn=self.turn, delta=delta)

    def restarted(self, attempt: int, model: str) -> None:
        self.emit("turn_restarted", turn=self.turn, attempt=attempt, model=model)
