"""Tools from an MCP server, in process and durably (offline).

    .venv/bin/pip install -e '.[mcp,dev-server]'
    .venv/bin/python examples/mcp_tools.py

The agent gets its tools from examples/mcp_notes_server.py, an MCP server spoken to over
stdio: their names, descriptions and JSON schemas are the server's. A stand-in model
reads the notes, asks for one that does not exist (the server's error comes back as a
failed result the model sees, and the run goes on) and writes a summary, which needs a
person's approval. The same agent then runs durably on a local Temporal dev server: the
tool list is one activity, each call another (``mcp: notes.read_note`` in the UI), the
run waits in its workflow for the approval, and the worker owns the server process.
"""

from __future__ import annotations

import sys
import tempfile
import uuid
from pathlib import Path

from temporalio.worker import Worker

from golem import Agent, Message, ToolCall
from golem.client import DurableAgent
from golem.mcp import MCPServer
from golem.models import FunctionModel, ToolDefinition
from golem.worker import GolemPlugin

if __package__ in (None, ""):  # run as a script: the examples package's parent is not on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from examples.offline import quiet_dev_server, run_then_exit

SERVER = Path(__file__).parent / "mcp_notes_server.py"


def stand_in(messages: list[Message], tools: list[ToolDefinition]) -> Message:
    """A model that follows a plan, one step per turn, reading what the tools answered."""
    done = sum(1 for m in messages if m.role == "assistant")
    plan = [
        [ToolCall(id=f"l{done}", name="list_notes")],
        [
            ToolCall(id=f"r{done}", name="read_note", args='{"name": "groceries"}'),
            ToolCall(id=f"m{done}", name="read_note", args='{"name": "missing"}'),
        ],
        [ToolCall(id=f"w{done}", name="write_note", args='{"name": "summary", "text": "milk"}')],
    ]
    if done < len(plan):
        return Message.assistant(tool_calls=plan[done])
    results = [m for m in messages if m.role == "tool"]
    return Message.assistant(f"Done; the last tool said: {results[-1].content}")


def notes_server(folder: Path) -> MCPServer:
    return MCPServer.stdio(
        "notes",
        command=sys.executable,
        args=[str(SERVER), str(folder)],
        requires_approval={"write_note"},
    )


def show(messages: list[Message]) -> None:
    for m in messages:
        calls = ", ".join(f"{c.name}({c.args})" for c in m.tool_calls)
        flag = " (failed)" if m.failed else ""
        text = (m.content or calls).replace("\n", " | ")  # list_notes answers a line a note
        print(f"    {m.role:<9} {text}{flag}")


async def main() -> None:
    folder = Path(tempfile.mkdtemp())
    (folder / "groceries.txt").write_text("milk, bread")
    agent = Agent(FunctionModel(stand_in, model_name="stand-in"), toolsets=[notes_server(folder)])

    print("In process (the run starts the server and stops it when it ends):")
    paused = await agent.run("Summarize my notes.")
    print(f"  waiting for approval of {[c.name for c in paused.pending_approvals]}")
    result = await agent.run(history=paused.messages, approvals={"w2": True})
    show(result.messages)

    print("\nDurably (the worker starts the server; every MCP call is an activity):")
    async with quiet_dev_server() as env:
        task_queue = f"mcp-example-{uuid.uuid4().hex[:6]}"
        async with Worker(env.client, task_queue=task_queue, plugins=[GolemPlugin(agent)]):
            run = await DurableAgent(env.client, agent, task_queue=task_queue).start(
                "Summarize my notes."
            )
            waiting = await run.result()
            print(
                f"  the run waits in its workflow for {[c.name for c in waiting.pending_approvals]}"
            )
            result = await run.approve({"w2": True})
        show(result.messages)
    print(f"\n  {(folder / 'summary.txt').read_text()!r} is in {folder / 'summary.txt'}")


if __name__ == "__main__":
    run_then_exit(main)
