"""The exceptions a golem client raises besides ``golem.RunError``.

    try:
        await durable.start("hi", run_id=run_id)
    except RunIdInUseError:                 # that id names a run already: pick another
        ...

Each names the run or conversation and what to do instead.
"""

from __future__ import annotations

from golem.workflows.outcome import UnknownAgentError

__all__ = ["CannotPause", "ConversationClosedError", "RunIdInUseError", "UnknownAgentError"]


class RunIdInUseError(ValueError):
    """A run by that id exists already (running or closed): a run id names one run, ever."""


class CannotPause(Exception):
    """The worker refused ``golem.outcome``: the run's agent never pauses."""


class ConversationClosedError(RuntimeError):
    """The conversation was closed: nothing more can be sent to it (fork it to go on)."""
