"""Updates and signals called with the wrong number of arguments, by any client (another
SDK, ``temporal workflow update execute``): an update is refused by its validator, before
anything is recorded; a signal, which cannot be refused, is dropped and logged, as Temporal
drops one whose payload does not decode. Either would otherwise raise ``TypeError`` in the
handler: a workflow task failure Temporal retries for ever (a conversation stuck), or the
failure of a run waiting for a person (``TypeError`` is one of its failure types).

    @send.validator
    @refuses_misfits(names.SEND)
    def _validate_send(self, turn: TurnInput) -> None: ...

    @workflow.signal(name=names.PAUSED)
    @drops_misfits(names.PAUSED)
    async def _on_paused(self, paused: PausedRun) -> None: ...

The wrappers keep the handler's signature (``functools.wraps``): the SDK reads its
argument types from it, to decode the payloads.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from golem.wire import names
    from golem.workflows.patches import patched

F = TypeVar("F", bound=Callable[..., Any])


def misfit(name: str, handler: Callable[..., Any], args: tuple[Any, ...]) -> str | None:
    """Why ``args`` cannot be ``handler``'s (a method's, ``self`` left out), or ``None``."""
    params = list(inspect.signature(handler).parameters.values())[1:]
    required = [p for p in params if p.default is inspect.Parameter.empty]
    if len(required) <= len(args) <= len(params):
        return None
    count = f"{len(params)} argument{'s' * (len(params) != 1)}" if params else "no argument"
    listed = f" ({', '.join(p.name for p in params)})" if params else ""
    return f"{name} takes {count}{listed}, got {len(args)}"


def refuses_misfits(name: str) -> Callable[[F], F]:
    """An update's validator that first refuses a call of the wrong arity, naming it."""

    def decorate(validator: F) -> F:
        @functools.wraps(validator)
        def checked(self: Any, *args: Any) -> Any:
            if (problem := misfit(name, validator, args)) is not None:
                raise ApplicationError(problem, type=names.BAD_PAYLOAD, non_retryable=True)
            return validator(self, *args)

        return checked  # type: ignore[return-value]

    return decorate


def drops_misfits(name: str, patch: str | None = None) -> Callable[[F], F]:
    """An async signal handler that drops (and logs) a signal of the wrong arity. ``patch``:
    the workflow failed on one before (its histories replay that branch)."""

    def decorate(handler: F) -> F:
        @functools.wraps(handler)
        async def guarded(self: Any, *args: Any) -> Any:
            problem = misfit(name, handler, args)
            if problem is not None and (patch is None or patched(patch)):
                workflow.logger.warning("signal dropped: %s", problem)
                return None
            return await handler(self, *args)

        return guarded  # type: ignore[return-value]

    return decorate
