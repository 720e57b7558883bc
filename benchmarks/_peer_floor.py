"""The floor of ``benchmarks/peers.py``: the same number of activities as an agent run,
each doing nothing. Its own module, free of golem and pydantic-ai, so the floor worker
runs in Temporal's default sandbox."""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow


def prompt(turns: int, result_bytes: int) -> str:
    return f"turns={turns} bytes={result_bytes}"


def spec(text: str) -> tuple[int, int]:
    fields = dict(item.split("=") for item in text.split())
    return int(fields["turns"]), int(fields["bytes"])


def result_text(n: int, size: int) -> str:
    return ("x" * size) if size else f"page {n}"


@activity.defn(name="peers.noop")
async def noop(n: int, size: int) -> str:
    return result_text(n, size)


@workflow.defn(name="PeerFloor")
class Floor:
    """The same number of activities in a row, each doing nothing (tool ones return the
    same bytes as the tool): what any durable framework pays at least."""

    @workflow.run
    async def run(self, text: str) -> str:
        turns, size = spec(text)
        for n in range(turns):
            await workflow.execute_activity(
                noop, args=[n, 0], start_to_close_timeout=timedelta(seconds=30)
            )
            await workflow.execute_activity(
                noop, args=[n, size], start_to_close_timeout=timedelta(seconds=30)
            )
        await workflow.execute_activity(
            noop, args=[turns, 0], start_to_close_timeout=timedelta(seconds=30)
        )
        return f"done after {turns} tools"
