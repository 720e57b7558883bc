"""The run loop's phases, each its own unit: preparing the history (``prepare``), a model
turn (``turn``), a tool batch (``batch``) and finishing (``finish``). ``golem.loop.RunLoop``
runs them in order; each is tested alone with a fake executor (tests/test_agent_phases.py).
"""

from __future__ import annotations

from golem.errors import Stage


class Stop(Exception):
    """End the run with a ``RunError`` at ``stage``; the evidence is the state's checkpoint."""

    def __init__(self, stage: Stage, message: str) -> None:
        super().__init__(message)
        self.stage: Stage = stage
        self.message = message
