"""Tools from MCP servers, through both executors: real servers written with the mcp SDK
(tests/mcp_servers: one over stdio, one over streamable HTTP on a local port)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agents import FAST_RETRY, NO_SUCH_TOOL, Deps, ask, call, scripted
from mcp_servers.common import PICTURE
from mcp_support import HTTPServer, Log, alive, files_server, http_server, lines
from runners import Runner
from waiting import eventually

from golem.agent import Agent
from golem.history.repair import OUTCOME_UNKNOWN_RESULT
from golem.mcp import MCPServer
from golem.messages import Message, Part
from golem.models.base import ToolDefinition
from golem.models.function import FunctionModel
from golem.results import RunError


@pytest.fixture(scope="module")
async def docs(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[HTTPServer]:
    """One HTTP server for the module's tests (each reads only its own part of the log)."""
    async with http_server(tmp_path_factory.mktemp("docs")) as server:
        yield server


@pytest.fixture
def log(docs: HTTPServer) -> Log:
    return Log(docs.log)


@pytest.fixture
async def lost(tmp_path: Path) -> AsyncIterator[HTTPServer]:
    """An HTTP server of the test's own, which it kills and starts again."""
    async with http_server(tmp_path) as server:
        yield server


def tool_results(messages: list[Message]) -> list[tuple[str, str, bool]]:
    return [(m.tool_name, m.content, m.failed) for m in messages if m.role == "tool"]


def server_for(transport: str, tmp_path: Path, docs: HTTPServer) -> MCPServer:
    """The same tools over stdio (a server the run or worker starts) or streamable HTTP."""
    return files_server(tmp_path) if transport == "stdio" else docs.toolset()


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_call_and_its_result_are_in_the_transcript(
    runner: Runner, tmp_path: Path, docs: HTTPServer, log: Log, transport: str
) -> None:
    server = files_server(tmp_path) if transport == "stdio" else docs.toolset()
    agent, model = scripted(
        [ask(call("c1", "read", path="a.txt")), Message.assistant("done")], toolsets=[server]
    )

    result = await runner(agent, "read a.txt")

    assert result.output == "done"
    assert tool_results(result.messages) == [("read", "contents of a.txt", False)]
    assert (lines(tmp_path) if transport == "stdio" else log()) == ["read"]
    read = next(t for t in model.requests[0].tools if t.name == "read")
    assert read.description.startswith("Read a file.")
    assert read.parameters["properties"]["path"]["type"] == "string"  # the server's schema
    assert read.parameters["required"] == ["path"]


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_an_is_error_result_is_failed_the_model_sees_it_and_the_run_goes_on(
    runner: Runner, tmp_path: Path, docs: HTTPServer, transport: str
) -> None:
    agent, model = scripted(
        [ask(call("c1", "broken", why="disk full")), Message.assistant("sorry")],
        toolsets=[server_for(transport, tmp_path, docs)],
    )

    result = await runner(agent, "go")

    assert result.output == "sorry"
    assert tool_results(result.messages) == [
        ("broken", "Error executing tool broken: disk full", True)
    ]
    assert model.requests[1].messages[-1].failed


async def test_a_tool_the_toolset_does_not_offer_is_unknown_to_the_model(
    runner: Runner, docs: HTTPServer, log: Log
) -> None:
    agent, _ = scripted(
        [ask(call("c1", "delete", path="a")), Message.assistant("ok")],
        toolsets=[docs.toolset().filtered(["read"])],
    )

    result = await runner(agent, "go")

    assert tool_results(result.messages) == [
        ("delete", NO_SUCH_TOOL.format(name="delete", tools="read"), True)
    ]
    assert log() == []  # never sent to the server


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_invalid_arguments_are_a_failed_result_naming_the_problem(
    runner: Runner, tmp_path: Path, docs: HTTPServer, transport: str
) -> None:
    agent, _ = scripted(
        [
            ask(call("c1", "strict", count=-1)),
            ask(call("c2", "strict", count=3)),
            Message.assistant("counted"),
        ],
        toolsets=[server_for(transport, tmp_path, docs)],
    )

    result = await runner(agent, "count")

    assert tool_results(result.messages) == [
        ("strict", "the server rejected the call: count must be >= 0, got -1", True),
        ("strict", "counted 3", False),
    ]


async def test_rejected_arguments_past_max_retries_end_the_run_at_stage_tool(
    runner: Runner, docs: HTTPServer, log: Log
) -> None:
    agent, _ = scripted(
        [ask(call("c1", "strict", count=-1)), ask(call("c2", "strict", count=-2))],
        toolsets=[docs.toolset(max_retries=1)],
    )

    with pytest.raises(RunError) as caught:
        await runner(agent, "count")

    assert caught.value.stage == "tool"
    assert "over the limit of 1" in str(caught.value)
    assert caught.value.partial is not None
    assert tool_results(caught.value.partial.messages)[-1] == (
        "strict",
        "the server rejected the call: count must be >= 0, got -2",
        True,
    )


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_images_and_embedded_resources_are_parts_of_the_tool_message(
    runner: Runner, tmp_path: Path, docs: HTTPServer, transport: str
) -> None:
    agent, _ = scripted(
        [ask(call("c1", "picture"), call("c2", "attachment")), Message.assistant("seen")],
        toolsets=[server_for(transport, tmp_path, docs)],
    )

    result = await runner(agent, "show me")

    picture, attachment = [m for m in result.messages if m.role == "tool"]
    assert (picture.content, picture.parts) == (
        "",
        [Part(kind="image", data=PICTURE, media_type="image/png")],
    )
    assert (attachment.content, attachment.parts) == (
        "see the note",
        [Part(kind="document", data=b"a note", media_type="text/plain")],
    )


async def test_a_long_tool_list_is_read_page_by_page_once_per_run(
    runner: Runner, tmp_path: Path
) -> None:
    server = files_server(tmp_path, "--tools", "60", "--page-size", "7")
    agent, model = scripted(
        [ask(call("c1", "tool_059")), ask(call("c2", "read", path="x")), Message.assistant("ok")],
        toolsets=[server],
    )

    result = await runner(agent, "go")

    assert tool_results(result.messages)[0] == ("tool_059", "numbered 59", False)
    assert len(lines(tmp_path, "lists")) == 10  # 68 tools (60 numbered), 7 a page: one listing
    assert [len(r.tools) for r in model.requests] == [68, 68, 68]


async def test_an_mcp_tool_needing_approval_pauses_and_runs_once_approved(
    runner: Runner, docs: HTTPServer, log: Log
) -> None:
    agent, _ = scripted(
        [
            ask(call("c1", "delete", path="a"), call("c2", "read", path="b")),
            Message.assistant("ok"),
        ],
        toolsets=[docs.toolset(requires_approval={"delete"})],
    )

    paused = await runner(agent, "clean up")

    assert paused.pending_approvals == [call("c1", "delete", path="a")]
    assert log() == []
    result = await runner(agent, history=paused.messages, approvals={"c1": True})
    assert tool_results(result.messages) == [
        ("delete", "deleted a", False),
        ("read", "contents of b", False),
    ]
    assert sorted(log()) == ["delete", "read"]


async def test_an_mcp_call_predicate_decides_on_the_arguments_which_calls_wait(
    runner: Runner, docs: HTTPServer, log: Log
) -> None:
    agent, _ = scripted(
        [
            ask(call("c1", "delete", path="keep"), call("c2", "delete", path="tmp")),
            Message.assistant("ok"),
        ],
        toolsets=[docs.toolset(requires_approval=lambda ctx, args: args["path"] != "tmp")],
    )

    paused = await runner(agent, "clean up")

    assert paused.pending_approvals == [call("c1", "delete", path="keep")]
    assert log() == []


async def test_a_prefix_names_the_tools_and_the_server_gets_its_own_names(
    runner: Runner, docs: HTTPServer, log: Log
) -> None:
    agent, model = scripted(
        [ask(call("c1", "fs_read", path="a")), Message.assistant("ok")],
        toolsets=[docs.toolset(prefix="fs").filtered(["read"])],
    )

    result = await runner(agent, "go")

    assert [t.name for t in model.requests[0].tools] == ["fs_read"]
    assert tool_results(result.messages) == [("fs_read", "contents of a", False)]
    assert log() == ["read"]


async def test_a_clash_in_the_listed_tools_fails_the_run_naming_both(
    runner: Runner, docs: HTTPServer, log: Log
) -> None:
    agent, model = scripted([Message.assistant("never")], toolsets=[docs.toolset()])

    @agent.tool
    def read(path: str) -> str:
        """The agent's own read."""
        return path

    with pytest.raises(RunError) as caught:
        await runner(agent, "go")

    assert caught.value.stage == "tool"
    assert "tool 'read' of toolset 'docs' (its server's 'read') clashes with the agent's own" in (
        str(caught.value)
    )
    assert model.requests == []


async def test_a_filter_naming_a_tool_the_server_lacks_fails_the_run(
    runner: Runner, docs: HTTPServer, log: Log
) -> None:
    agent, _ = scripted([Message.assistant("never")], toolsets=[docs.toolset().filtered(["reed"])])

    with pytest.raises(RunError) as caught:
        await runner(agent, "go")

    assert caught.value.stage == "tool"
    assert "toolset 'docs': filtered names ['reed'], which its server does not offer" in str(
        caught.value
    )


@pytest.mark.parametrize("per_run", [False, True], ids=["fixed", "from-context"])
async def test_headers_reach_the_http_server(
    runner: Runner, docs: HTTPServer, per_run: bool
) -> None:
    headers: Any = (
        (lambda ctx: {"Authorization": f"Bearer {ctx.deps.name}"})
        if per_run
        else {"Authorization": "Bearer fixed"}
    )
    agent, _ = scripted(
        [ask(call("c1", "whoami")), Message.assistant("ok")],
        toolsets=[docs.toolset(headers=headers)],
        deps_type=Deps,
    )

    result = await runner(agent, "who?", deps=Deps(name="Ada"))

    expected = "Bearer Ada" if per_run else "Bearer fixed"
    assert tool_results(result.messages) == [("whoami", expected, False)]


@pytest.mark.parametrize("once", [False, True], ids=["at-least-once", "at-most-once"])
async def test_a_server_lost_mid_call_is_retried_per_policy_or_its_outcome_is_unknown(
    runner: Runner, tmp_path: Path, once: bool
) -> None:
    rule = {"crash"} if once else False
    server = files_server(tmp_path, retry=FAST_RETRY, at_most_once=rule)
    agent, _ = scripted([ask(call("c1", "crash"))], toolsets=[server])

    with pytest.raises(RunError) as caught:
        await runner(agent, "go")

    assert caught.value.stage == "tool"
    assert caught.value.partial is not None
    [closed] = [m for m in caught.value.partial.messages if m.role == "tool"]
    if once:
        assert lines(tmp_path) == ["crash"]  # never sent again
        assert closed.content == OUTCOME_UNKNOWN_RESULT
    else:
        assert lines(tmp_path) == ["crash"] * 3  # FAST_RETRY: three attempts, three servers
        assert closed.failed and closed.content.startswith("the tool failed: ")


async def test_a_lost_server_fails_the_run_at_stage_tool_and_resume_works_once_it_is_back(
    runner: Runner, lost: HTTPServer
) -> None:
    answers = iter([ask(call("c1", "read", path="a")), ask(call("c2", "read", path="b"))])

    async def model(messages: list[Message], tools: list[ToolDefinition]) -> Message:
        if len(messages) == 1:
            await lost.kill()  # after the run listed the tools, before its call
        return next(answers, Message.assistant("read it"))

    toolset = lost.toolset(retry=FAST_RETRY)
    agent = Agent(FunctionModel(model), toolsets=[toolset], model_retry=FAST_RETRY)

    with pytest.raises(RunError) as caught:
        await runner(agent, "read a")

    error = caught.value
    assert error.stage == "tool"
    assert error.partial is not None
    assert [m.role for m in error.partial.messages] == ["user", "assistant", "tool"]
    failed = error.partial.messages[-1]
    assert failed.failed and failed.content.startswith("the tool failed: ")
    await lost.start()
    resumed = await runner(agent, "try again", history=error.partial.messages)
    assert resumed.output == "read it"
    assert tool_results(resumed.messages)[-1] == ("read", "contents of b", False)


def test_an_agent_refuses_the_clashes_it_can_see(tmp_path: Path) -> None:
    files = files_server(tmp_path)

    def read(path: str) -> str:
        """Read."""
        return path

    with pytest.raises(ValueError, match=r"agent 'a': two toolsets are named \['files'\]"):
        Agent("openai:gpt-4o", name="a", toolsets=[files, files.prefixed("fs")])
    with pytest.raises(ValueError, match=r"tool 'read' of toolset 'files'.*clashes with the agent"):
        Agent("openai:gpt-4o", name="a", tools=[read], toolsets=[files.filtered(["read"])])
    agent = Agent("openai:gpt-4o", name="a", toolsets=[files.filtered(["read"])])
    with pytest.raises(ValueError, match="clashes with the agent's own tool 'read'"):
        agent.tool(read)
    Agent("openai:gpt-4o", tools=[read], toolsets=[files])  # unknown until a run lists it


def test_a_server_name_must_be_fit_for_an_activity_name() -> None:
    with pytest.raises(ValueError, match="MCP server name 'my files'"):
        MCPServer.stdio("my files", command="x")


def test_a_rule_given_one_name_as_a_string_is_refused() -> None:
    with pytest.raises(TypeError, match=r"at_most_once takes a set of tool names, not the string"):
        MCPServer.stdio("files", command="x", at_most_once="charge")
    with pytest.raises(
        TypeError, match=r"filtered takes a set of tool names, not the string 'read'"
    ):
        MCPServer.stdio("files", command="x").filtered("read")
    server = MCPServer.stdio("files", command="x", requires_approval=["delete"])
    assert server.requires_approval == frozenset({"delete"})


async def test_mcp_calls_stream_tool_start_and_end_events(docs: HTTPServer) -> None:
    agent, _ = scripted(
        [ask(call("c1", "read", path="a")), Message.assistant("ok")], toolsets=[docs.toolset()]
    )
    stream = agent.run_stream("go")

    events = [e async for e in stream]

    tools = [(e.kind, e.call.name if e.call else "") for e in events]
    assert [t for t in tools if t[0] in ("tool_start", "tool_end")] == [
        ("tool_start", "read"),
        ("tool_end", "read"),
    ]
    end = next(e for e in events if e.kind == "tool_end")
    assert end.message is not None and end.message.content == "contents of a"
    assert stream.result.output == "ok"


async def test_a_stdio_server_process_ends_with_its_run(tmp_path: Path) -> None:
    agent, _ = scripted(
        [ask(call("c1", "read", path="a")), Message.assistant("ok")],
        toolsets=[files_server(tmp_path)],
    )

    await agent.run("go")

    [pid] = lines(tmp_path, "pids")
    assert not alive(int(pid))


async def test_runs_inside_async_with_agent_share_one_stdio_server_started_again_if_it_dies(
    tmp_path: Path,
) -> None:
    """In process, ``async with agent:`` keeps one connection per server for every run in
    it (no server start per run); a server that died is started again by the next run."""
    answers = [
        [ask(call(f"c{i}", "read", path=p)), Message.assistant(p)] for i, p in enumerate("abc")
    ]
    agent, _ = scripted([a for pair in answers for a in pair], toolsets=[files_server(tmp_path)])

    async with agent:
        outputs = [(await agent.run("go")).output, (await agent.run("again")).output]
        [first] = lines(tmp_path, "pids")
        os.kill(int(first), signal.SIGKILL)
        await eventually(lambda: not alive(int(first)), what="the killed server gone")
        outputs.append((await agent.run("after its death")).output)
        pids = lines(tmp_path, "pids")
        running = alive(int(pids[-1]))

    assert outputs == ["a", "b", "c"]
    assert len(pids) == 2 and running  # started once for two runs, once more after it died
    assert not alive(int(pids[-1]))  # and let go when the block ends


def test_defining_mcp_servers_and_serving_agents_without_toolsets_imports_no_mcp() -> None:
    script = """
import sys
from golem import Agent
from golem.mcp import MCPServer
from golem.worker import GolemPlugin
import golem.client, golem.workflows.agent_run, golem.activities

def loaded():
    return [m for m in sys.modules if m.split(".")[0] in ("mcp", "mcp_types")]

files = MCPServer.stdio("files", command="python")
GolemPlugin(Agent("openai:gpt-4o"))
print(len(loaded()))
GolemPlugin(Agent("openai:gpt-4o", toolsets=[files]))
print(len(loaded()) > 0, "temporalio.mcp" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["0", "True True"]  # only an MCP agent's plugin does
