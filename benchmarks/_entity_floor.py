"""The entity-chat floor for benchmarks/entity_floor.py, in a module of its own so the
workflow sandbox can import it (a workflow defined in ``__main__`` cannot be)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow

RESULT_BYTES = 2048
TIMEOUT = timedelta(seconds=30)


@dataclass
class Entry:
    role: str
    text: str


@dataclass
class ChatState:
    transcript: list[Entry] = field(default_factory=list)


@activity.defn(name="floor.model")
async def floor_model(last: Entry) -> Entry:
    """The offline model: a call for a user message, an answer for a tool result."""
    if last.role == "user":
        return Entry("call", '{"n": 1}')
    return Entry("assistant", f"read page {last.text[:8]}")


@activity.defn(name="floor.tool")
async def floor_tool(args: str) -> str:
    return "00000001" + "x" * (RESULT_BYTES - 8)


@workflow.defn(name="EntityChat")
class EntityChat:
    """What a Temporal engineer writes for a chat: an entity workflow, a turn per update."""

    def __init__(self) -> None:
        self.state = ChatState()
        self.closed = False

    @workflow.run
    async def run(self, state: ChatState | None) -> int:
        self.state = state or ChatState()
        await workflow.wait_condition(
            lambda: self.closed or workflow.info().is_continue_as_new_suggested()
        )
        await workflow.wait_condition(workflow.all_handlers_finished)
        if not self.closed:
            workflow.continue_as_new(self.state)
        return len(self.state.transcript)

    @workflow.update(name="turn")
    async def turn(self, prompt: str) -> str:
        self.state.transcript.append(Entry("user", prompt))
        while True:
            reply = await workflow.execute_activity(
                floor_model, self.state.transcript[-1], start_to_close_timeout=TIMEOUT
            )
            if reply.role == "assistant":
                self.state.transcript.append(reply)
                return reply.text
            result = await workflow.execute_activity(
                floor_tool, reply.text, start_to_close_timeout=TIMEOUT
            )
            self.state.transcript += [reply, Entry("tool", result)]

    @workflow.signal(name="close")
    def close(self) -> None:
        self.closed = True


async def serve_side(target: str, task_queue: str, side: str, agent: Any, **options: Any) -> None:
    """A benchmark's worker for ``side`` ("golem": ``agent`` through GolemPlugin,
    "golem-unsandboxed": the same with ``sandboxed=False``, else the floor's workflow and activities), in this
    process, until stdin closes."""
    import asyncio
    import sys

    from temporalio.client import Client
    from temporalio.worker import Worker

    from golem.worker import GolemPlugin

    options.setdefault("max_concurrent_workflow_tasks", 400)
    if side.startswith("golem"):
        plugin = GolemPlugin(agent, sandboxed="unsandboxed" not in side)
        client = await Client.connect(target, plugins=[plugin])
        worker = Worker(client, task_queue=task_queue, **options)
    else:
        client = await Client.connect(target)
        floor = {"workflows": [EntityChat], "activities": [floor_model, floor_tool]}
        worker = Worker(client, task_queue=task_queue, **floor, **options)
    async with worker:
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
