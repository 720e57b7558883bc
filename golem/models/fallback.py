"""Models that fail over: when one is down, the next one answers.

    from golem.models import FallbackModel
    agent = Agent(FallbackModel("openai:gpt-4o", "anthropic:claude-sonnet-4-5"), name="resilient")
    result = await agent.run("Hello")
    result.model                  # which model answered; each assistant message says it too

Each model is first tried as its own retry policy allows (``retry=``, else the agent's
``model_retry``); only then does the next one get the request, when the error qualifies
(``fallback_on``). In process the executor does this; under Temporal every attempt on every
model is its own activity, named after its model. See docs/adr/0017-fallback-and-retry.md.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from functools import cached_property
from typing import TypeAlias

from golem.errors import FallbackError as FallbackError  # released path (0.2.0)
from golem.models import base
from golem.models.base import Model, ModelRequest, ModelResponse, StreamDelta
from golem.retry import Retry

#: What ``fallback_on`` takes: a predicate on the error, or the exception types that qualify.
FallbackOn: TypeAlias = Callable[[Exception], bool] | type[Exception] | tuple[type[Exception], ...]
#: One model of a chain and the retry policy of its own attempts.
Link: TypeAlias = tuple[Model, Retry]


def provider_unavailable(exc: Exception) -> bool:
    """The default ``fallback_on``: the provider could not answer now (connection errors,
    408, 429, 5xx), not "this request is bad" (400, 401, 404, 413, 422 stay with the run)."""
    if isinstance(exc, base.ModelConnectionError):
        return True
    return isinstance(exc, base.ModelHTTPError) and (exc.status in (408, 429) or exc.status >= 500)


class FallbackModel:
    """Tries each model in order, moving on when one fails with an error that qualifies.

    ``fallback_on`` (default: connection errors, 408, 429 and 5xx) is a predicate on the
    error or the exception types that qualify; it is asked only once a model's own retries
    are spent, or at once for an error its policy does not retry. ``retry`` is every
    model's policy, or one per model (``None`` entries: the agent's ``model_retry``).
    Outside an agent, ``request`` tries each model once.
    """

    def __init__(
        self,
        *models: Model | str,
        fallback_on: FallbackOn | None = None,
        retry: Retry | Sequence[Retry | None] | None = None,
    ) -> None:
        if not models:
            raise ValueError("FallbackModel needs at least one model")
        policies = list(retry) if isinstance(retry, Sequence) else [retry] * len(models)
        if len(policies) != len(models):
            raise ValueError(
                f"FallbackModel has {len(models)} models but {len(policies)} retry policies"
            )
        if isinstance(fallback_on, type | tuple):
            types, fallback_on = fallback_on, lambda exc: isinstance(exc, types)
        self._models = models
        self.policies: list[Retry | None] = policies
        self.fallback_on: Callable[[Exception], bool] = fallback_on or provider_unavailable

    @cached_property
    def models(self) -> list[Model]:
        """The models in the order they are tried (names resolved on first use)."""
        from golem.models.infer import infer_model

        return [infer_model(model) for model in self._models]

    @property
    def model_name(self) -> str:
        return "fallback(" + ", ".join(_name(m) for m in self._models) + ")"

    def __repr__(self) -> str:
        return f"FallbackModel({', '.join(repr(_name(m)) for m in self._models)})"

    async def request(self, request: ModelRequest) -> ModelResponse:
        failures: list[tuple[str, str]] = []
        for index, model in enumerate(self.models):
            try:
                return stamp(await model.request(request), model)
            except Exception as exc:
                move_on(failures, model.model_name, exc, self._moves_on(index, exc))
        raise AssertionError("unreachable: the last model never moves on")

    async def request_stream(
        self, request: ModelRequest
    ) -> AsyncIterator[StreamDelta | ModelResponse]:
        # Used alone, a switch cannot be announced: only an agent's executor marks restarts.
        failures: list[tuple[str, str]] = []
        for index, model in enumerate(self.models):
            try:
                async for item in model.request_stream(request):
                    yield item if isinstance(item, StreamDelta) else stamp(item, model)
                return
            except Exception as exc:
                move_on(failures, model.model_name, exc, self._moves_on(index, exc))

    def _moves_on(self, index: int, exc: Exception) -> bool:
        return index + 1 < len(self._models) and self.fallback_on(exc)


def _name(model: Model | str) -> str:
    return model if isinstance(model, str) else model.model_name


def chain(model: Model, default: Retry) -> list[Link]:
    """The models a request goes to, in order, each with its own retry policy: a plain
    model is a chain of one."""
    if isinstance(model, FallbackModel):
        return [(m, p or default) for m, p in zip(model.models, model.policies, strict=True)]
    return [(model, default)]


def plan(model: Model | str, default: Retry) -> list[tuple[str, Retry]]:
    """The name and retry policy of each model ``chain`` would give, resolving no model
    name (workflow code must not build a provider adapter: that reads the environment)."""
    if isinstance(model, FallbackModel):
        policies = [p or default for p in model.policies]
        return list(zip([_name(m) for m in model._models], policies, strict=True))
    return [(_name(model), default)]


def falls_over(model: Model, index: int, exc: Exception) -> bool:
    """Whether the request moves on to the next model of ``model``'s chain after the one at
    ``index`` failed for good with ``exc``."""
    return isinstance(model, FallbackModel) and model._moves_on(index, exc)


def move_on(
    failures: list[tuple[str, str]],
    name: str,
    error: Exception,
    moves_on: bool,
    text: str | None = None,
) -> None:
    """Record that model ``name`` failed for good with ``error`` (``text``: its message, if
    not ``str(error)``); raise unless the request ``moves_on`` to the next model: ``error``
    itself when it is the first failure, else a ``FallbackError`` naming every model's."""
    failures.append((name, str(error) if text is None else text))
    if moves_on:
        return
    if len(failures) == 1:
        raise error
    raise FallbackError(failures) from error


def stamp(response: ModelResponse, model: Model) -> ModelResponse:
    """``response`` with its message naming the model that answered (an inner fallback's
    own model kept)."""
    if response.message.model:
        return response
    message = response.message.model_copy(update={"model": model.model_name})
    return response.model_copy(update={"message": message})
