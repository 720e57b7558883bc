"""A tool that raises reads the same to the model, and in the run's error, in both executors:
the exception's type and text, as the durable tool activity reports it."""

from __future__ import annotations

import pytest
from agents import FAST_RETRY, ask, call, scripted
from runners import Runner

from golem.messages import Message
from golem.results import RunError


@pytest.mark.parametrize(
    ("raised", "told"),
    [
        (RuntimeError("disk on fire"), "RuntimeError: disk on fire"),
        (KeyError("order-7"), "KeyError: 'order-7'"),
        (SystemExit("bye"), "tool 'boom' raised SystemExit: bye"),
    ],
    ids=["RuntimeError", "KeyError", "SystemExit"],
)
async def test_a_tool_that_raises_reads_the_same_to_the_model_in_both_executors(
    runner: Runner, raised: BaseException, told: str
) -> None:
    agent, _ = scripted([ask(call("c1", "boom")), Message.assistant("never")])

    @agent.tool(retry=FAST_RETRY)
    def boom() -> str:
        """Explodes."""
        raise raised

    with pytest.raises(RunError) as caught:
        await runner(agent, "go")

    error = caught.value
    assert error.partial is not None
    failed = error.partial.messages[-1]
    assert (failed.tool_call_id, failed.failed, failed.content) == (
        "c1",
        True,
        f"the tool failed: {told}",
    )
    assert error.stage == "tool"
    assert error.detail == f"tool 'boom' (call c1) failed: {told}"
