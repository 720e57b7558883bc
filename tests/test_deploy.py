"""Versioned workers (docs/adr/0020-versioned-deploys.md): what a worker registers, what the
operator's commands check, and what a new version of an agent means for a conversation's
next turn. The rollout under load is tests/test_deploy_rollout.py."""

from __future__ import annotations

import re
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar, cast

import pytest
from pydantic import BaseModel
from temporalio.api.enums.v1 import RoutingConfigUpdateState, VersionDrainageStatus
from temporalio.api.workflowservice.v1 import (
    DescribeWorkerDeploymentResponse,
    DescribeWorkerDeploymentVersionResponse,
    SetWorkerDeploymentCurrentVersionResponse,
)
from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker, WorkerDeploymentConfig

from golem import Agent, Message, ToolCall
from golem import cli as golem_cli
from golem.cli.deploy import describe_versions
from golem.client import DurableAgent
from golem.client.deployments import VersionStatus, WorkerDeployment, _settling
from golem.models import FunctionModel
from golem.worker import GolemPlugin
from golem.worker.deployment import deployment_version
from golem.workflows import AgentRunWorkflow, ConversationWorkflow
from golem.workflows.versioning import PinnedAgentRunWorkflow, PinnedConversationWorkflow

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from _deploy_agents import answer, v1, v2
from compose_workflows import CatchingWorkflow

T = TypeVar("T")


def queue() -> str:
    return f"deploy-{uuid.uuid4().hex[:8]}"


def workflows(worker: Worker) -> list[type]:
    return list(worker.config(active_config=True).get("workflows", []))


@pytest.mark.parametrize(
    ("given", "named"),
    [
        (("", "v1"), "deployment name ''"),
        (("support.eu", "v1"), "deployment name 'support.eu'"),
        (("support", " "), "build id ' ' of deployment 'support'"),
        (("support",), "give (deployment name, build id)"),
        ("support.v1", "give (deployment name, build id)"),
    ],
)
def test_a_deployment_is_a_name_without_dots_and_a_build_id(given: Any, named: str) -> None:
    with pytest.raises(ValueError, match=re.escape(named)):
        GolemPlugin(v1, deployment=given)
    assert deployment_version(("support", "v1")) == WorkerDeploymentVersion("support", "v1")


async def test_a_versioned_worker_registers_golems_workflows_pinned_an_unversioned_one_as_they_are(
    temporal_client: Client,
) -> None:
    versioned = Worker(
        temporal_client, task_queue=queue(), plugins=[GolemPlugin(v1, deployment=("sup", "v1"))]
    )
    config = versioned.config(active_config=True)["deployment_config"]
    assert config.version == WorkerDeploymentVersion("sup", "v1") and config.use_worker_versioning
    assert {PinnedAgentRunWorkflow, PinnedConversationWorkflow} <= set(workflows(versioned))
    assert not {AgentRunWorkflow, ConversationWorkflow} & set(workflows(versioned))
    plain = Worker(temporal_client, task_queue=queue(), plugins=[GolemPlugin(v1)])
    assert {AgentRunWorkflow, ConversationWorkflow} <= set(workflows(plain))


async def test_a_workers_own_deployment_config_versions_golems_workflows_and_must_agree(
    temporal_client: Client,
) -> None:
    own = WorkerDeploymentConfig(WorkerDeploymentVersion("sup", "v1"), use_worker_versioning=True)
    worker = Worker(
        temporal_client, task_queue=queue(), deployment_config=own, plugins=[GolemPlugin(v1)]
    )
    assert PinnedAgentRunWorkflow in workflows(worker)
    with pytest.raises(
        ValueError, match=re.escape("GolemPlugin(deployment='sup.v2') on a Worker whose")
    ):
        Worker(
            temporal_client,
            task_queue=queue(),
            deployment_config=own,
            plugins=[GolemPlugin(v1, deployment=("sup", "v2"))],
        )


async def test_your_workflows_keep_the_versioning_behaviour_you_chose(
    temporal_client: Client,
) -> None:
    """A workflow of yours (this one calls run_agent) and the worker's default stay as you
    set them; only golem's own workflows are pinned."""
    own = WorkerDeploymentConfig(
        WorkerDeploymentVersion("sup", "v1"),
        use_worker_versioning=True,
        default_versioning_behavior=VersioningBehavior.AUTO_UPGRADE,
    )
    worker = Worker(
        temporal_client,
        task_queue=queue(),
        workflows=[CatchingWorkflow],
        deployment_config=own,
        plugins=[GolemPlugin(v1)],
    )
    assert {CatchingWorkflow, PinnedAgentRunWorkflow} <= set(workflows(worker))
    assert worker.config(active_config=True)["deployment_config"] == own


async def test_one_process_serves_one_version_of_a_task_queue_at_a_time(
    temporal_client: Client,
) -> None:
    task_queue, name = queue(), f"one-{uuid.uuid4().hex[:6]}"
    first = GolemPlugin(v1, deployment=(name, "v1"))
    async with Worker(temporal_client, task_queue=task_queue, plugins=[first]):
        with pytest.raises(ValueError, match=f"already serves task queue '{task_queue}' as"):
            Worker(
                temporal_client,
                task_queue=task_queue,
                plugins=[GolemPlugin(v2, deployment=(name, "v2"))],
            )
    # Once v1's worker stopped, this process may serve the queue as v2.
    Worker(
        temporal_client, task_queue=task_queue, plugins=[GolemPlugin(v2, deployment=(name, "v2"))]
    )


async def test_making_a_version_current_before_its_workers_poll_times_out_naming_the_fix(
    temporal_client: Client,
) -> None:
    deployment = WorkerDeployment(temporal_client, f"nobody-{uuid.uuid4().hex[:6]}")
    with pytest.raises(TimeoutError, match="are its workers running, with --deployment nobody-"):
        await deployment.set_current("v1", timeout=0.5)
    with pytest.raises(ValueError, match="ramp percentage 150"):
        await deployment.set_ramping("v1", 150)


def test_the_worker_command_wants_a_deployment_and_a_build_id_together(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["worker", "--agent", "cli_agents:echo", "--deployment", "support"]
    assert golem_cli.run_command(argv) == 1
    assert "--deployment and --build-id go together" in capsys.readouterr().err
    argv = ["worker", "--agent", "cli_agents:echo", "--deployment", "a.b", "--build-id", "v1"]
    assert golem_cli.run_command(argv) == 1
    assert "deployment name 'a.b'" in capsys.readouterr().err


@asynccontextmanager
async def serving(client: Client, task_queue: str, agent: Agent[Any, Any]) -> AsyncIterator[None]:
    """One version of the agent at a time on ``task_queue``, as a deploy swaps them."""
    async with Worker(client, task_queue=task_queue, plugins=[GolemPlugin(agent)]):
        yield


async def test_a_turn_on_a_version_without_the_tool_a_pending_call_names_tells_the_model(
    temporal_client: Client,
) -> None:
    """v1 left a call to legacy_refund unanswered; v2 has no such tool. The next turn's run
    repairs the call (a neutral result), and a call to it now is answered as unknown."""
    seed = [
        Message.user("call legacy_refund"),
        Message.assistant("", [ToolCall(id="legacy-1", name="legacy_refund", args="{}")]),
    ]
    task_queue = queue()
    async with serving(temporal_client, task_queue, v2):
        conv = await DurableAgent(temporal_client, v2, task_queue=task_queue).conversation(
            history=seed
        )
        first = await conv.send("hello")
        again = await conv.send("call legacy_refund")
    repaired = next(m for m in first.messages if m.tool_call_id == "legacy-1")
    assert "interrupted before execution" in repaired.content
    assert first.output == "support v2 | hello | tools order_status,track_parcel"
    refused = [m for m in again.messages if m.role == "tool"][-1]
    assert refused.failed and refused.tool_name == "legacy_refund"
    assert "unknown tool 'legacy_refund'" in refused.content
    assert "no longer, available" in refused.content  # what the model reads of a removed tool
    assert "order_status, track_parcel" in refused.content
    assert again.output.startswith("support v2 | call legacy_refund (legacy_refund: unknown tool")


class Refund(BaseModel):
    order: int
    status: str


def typed_answer(messages: list[Message], tools: Any) -> Message:
    """v3 of support answers with a Refund as JSON."""
    if messages[-1].role == "user":
        return Message.assistant('{"order": 42, "status": "refunded"}')
    return answer(messages, tools)


async def test_a_changed_output_type_governs_from_the_next_turn_and_keeps_the_transcript(
    temporal_client: Client,
) -> None:
    v3: Agent[Any, Refund] = Agent(
        FunctionModel(typed_answer), name="support", instructions="support v3", output_type=Refund
    )
    task_queue = queue()
    async with serving(temporal_client, task_queue, v1):
        conv = await DurableAgent(temporal_client, v1, task_queue=task_queue).conversation()
        before = await conv.send("hello")
    async with serving(temporal_client, task_queue, v3):
        typed = DurableAgent(temporal_client, v3, task_queue=task_queue)
        after = await (await typed.conversation(conv.id)).send("refund order 42")
    assert before.output == "support v1 | hello | tools legacy_refund,order_status"
    assert after.output == Refund(order=42, status="refunded")
    assert [m.content for m in after.messages if m.role == "user"] == ["hello", "refund order 42"]
    assert after.messages[1].content == before.output  # v1's answer stays text in the transcript


def test_every_deploy_action_takes_the_server_options_after_its_name() -> None:
    for action in (
        ["current", "--build-id", "v2"],
        ["ramp", "--stop"],
        ["status", "--json"],
        ["drained", "--build-id", "v1"],
        ["move"],
    ):
        argv = ["deploy", *action, "--deployment", "support", "--address", "h:1", "--debug"]
        args = golem_cli.parser().parse_args(argv)
        assert (args.action, args.deployment, args.address, args.debug) == (
            action[0],
            "support",
            "h:1",
            True,
        )


def test_deploy_status_reads_one_line_per_version_then_a_few_ids_of_each_kind() -> None:
    versions = [
        VersionStatus("v2", "ramping", 30.0, conversations=["c1"]),
        VersionStatus("v1", "current", runs=[f"r{i}" for i in range(7)], others=["mine"]),
    ]
    assert describe_versions(versions) == [
        "v2                   ramping 30%    0 runs, 1 conversations, 0 other workflows",
        "    conversations: c1",
        "v1                   current        7 runs, 0 conversations, 1 other workflows",
        "    runs: r0, r1, r2, r3, r4 and 2 more",
    ]


@pytest.mark.parametrize(
    ("status", "message", "again"),
    [
        (RPCStatusCode.NOT_FOUND, "no such version", True),
        (RPCStatusCode.FAILED_PRECONDITION, "task queue missing", True),
        # A loaded server cancels a request it could not answer in time: asked again.
        (RPCStatusCode.CANCELLED, "operation was canceled", True),
        (RPCStatusCode.DEADLINE_EXCEEDED, "context deadline exceeded", True),
        (RPCStatusCode.UNAVAILABLE, "connection refused", True),
        (RPCStatusCode.PERMISSION_DENIED, "not allowed", False),
        (RPCStatusCode.FAILED_PRECONDITION, "conflict token stale", False),
    ],
)
def test_a_deployment_change_is_asked_again_while_the_server_settles_or_is_busy(
    status: RPCStatusCode, message: str, again: bool
) -> None:
    assert _settling(RPCError(message, status, b"")) is again


class _LoadedServer:
    """A workflow service as a loaded dev server answers: each request (each method's every
    other call) is cancelled once before it goes through; or every call fails with ``error``."""

    def __init__(self, error: RPCError | None = None) -> None:
        self.error = error
        self.calls: list[str] = []

    def _answer(self, method: str, response: T) -> T:
        self.calls.append(method)
        if self.error is not None:
            raise self.error
        if self.calls.count(method) % 2:
            raise RPCError("operation was canceled", RPCStatusCode.CANCELLED, b"")
        return response

    async def describe_worker_deployment(self, request: Any) -> DescribeWorkerDeploymentResponse:
        response = DescribeWorkerDeploymentResponse(conflict_token=b"token")
        response.worker_deployment_info.routing_config_update_state = (
            RoutingConfigUpdateState.ROUTING_CONFIG_UPDATE_STATE_COMPLETED
        )
        response.worker_deployment_info.routing_config.current_deployment_version.build_id = "v1"
        return self._answer("describe_worker_deployment", response)

    async def set_worker_deployment_current_version(
        self, request: Any
    ) -> SetWorkerDeploymentCurrentVersionResponse:
        return self._answer(
            "set_worker_deployment_current_version", SetWorkerDeploymentCurrentVersionResponse()
        )

    async def describe_worker_deployment_version(
        self, request: Any
    ) -> DescribeWorkerDeploymentVersionResponse:
        response = DescribeWorkerDeploymentVersionResponse()
        response.worker_deployment_version_info.drainage_info.status = (
            VersionDrainageStatus.VERSION_DRAINAGE_STATUS_DRAINED
        )
        return self._answer("describe_worker_deployment_version", response)


class _Client:
    """What WorkerDeployment reads of a client, around a fake workflow service."""

    namespace = "default"
    identity = "test"

    def __init__(self, service: _LoadedServer) -> None:
        self.workflow_service = service

    async def list_workflows(self, query: str) -> AsyncIterator[Any]:
        for _ in ():  # no conversation open: nothing to wake
            yield _


def loaded(service: _LoadedServer) -> WorkerDeployment:
    return WorkerDeployment(cast(Client, _Client(service)), "support")


async def test_every_deployment_call_asks_again_when_a_loaded_server_cancels_it() -> None:
    """A fresh-clone CI run failed in set_current with 'operation was canceled' from
    describe_worker_deployment: every call of a deployment is asked again while the server
    is busy, within the caller's timeout."""
    server = _LoadedServer()
    assert await loaded(server).set_current("v1", timeout=30) == []
    assert await loaded(server).status() == []
    await loaded(server).wait_drained("v1", timeout=30)
    assert await loaded(server).move_conversations() == []
    assert set(server.calls) == {
        "describe_worker_deployment",
        "set_worker_deployment_current_version",
        "describe_worker_deployment_version",
    }


@pytest.mark.parametrize(
    "status", [RPCStatusCode.INVALID_ARGUMENT, RPCStatusCode.PERMISSION_DENIED]
)
async def test_a_deployment_call_the_server_refuses_fails_at_once(status: RPCStatusCode) -> None:
    server = _LoadedServer(RPCError("refused", status, b""))
    with pytest.raises(RPCError, match="refused"):
        await loaded(server).set_current("v1", timeout=30)
    with pytest.raises(RPCError, match="refused"):
        await loaded(server).status()
    with pytest.raises(RPCError, match="refused"):
        await loaded(server).wait_drained("v1")
    assert server.calls == [
        "describe_worker_deployment",
        "describe_worker_deployment",
        "describe_worker_deployment_version",
    ]


async def test_a_deployment_call_still_cancelled_at_the_timeout_names_the_deployment() -> None:
    cancelled = RPCError("operation was canceled", RPCStatusCode.CANCELLED, b"")
    server = _LoadedServer(cancelled)
    named = r"in deployment 'support' in time: the server last answered CANCELLED: operation was"
    with pytest.raises(TimeoutError, match=named):
        await loaded(server).status(timeout=0.2)
    with pytest.raises(TimeoutError, match=named):
        await loaded(server).set_current("v1", timeout=0.2)
    with pytest.raises(TimeoutError, match=named):
        await loaded(server).wait_drained("v1", timeout=0.2)
