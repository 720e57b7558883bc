"""``GolemPlugin(sandboxed=False)`` runs workflows without Temporal's sandbox, by explicit
choice (docs/adr/0038-the-sandbox-off.md); the default keeps it. The replay corpus replays
under both (tests/test_replay.py)."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from agents import ask, call, scripted
from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.converter import PayloadCodec, SerializationContext, WithSerializationContext
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import _runner as sandbox_runner

from golem.client import DurableAgent
from golem.messages import Message
from golem.worker import GolemPlugin, golem_converter
from golem.worker.codec import EncryptionCodec
from golem.worker.runner import contexts_unused


@workflow.defn
class InSandbox:
    """Says whether its own code runs in the sandbox."""

    @workflow.run
    async def run(self) -> bool:
        return workflow.unsafe.in_sandbox()


@pytest.mark.parametrize("sandboxed", [True, False])
async def test_the_plugin_runs_workflows_sandboxed_unless_told_not_to(
    temporal_env: WorkflowEnvironment, sandboxed: bool
) -> None:
    agent, _ = scripted(
        [ask(call("c1", "look", key="k")), Message.assistant("found"), Message.assistant("again")]
    )

    @agent.tool
    def look(key: str) -> str:
        return f"value of {key}"

    client = temporal_env.client
    queue = f"sandbox-{uuid.uuid4().hex[:8]}"
    plugin = GolemPlugin(agent, sandboxed=sandboxed)
    async with Worker(client, task_queue=queue, workflows=[InSandbox], plugins=[plugin]):
        inside = await client.execute_workflow(
            InSandbox.run, id=f"in-sandbox-{uuid.uuid4()}", task_queue=queue
        )
        durable = DurableAgent(client, agent, task_queue=queue)
        result = await durable.run("go")
        conversation = await durable.conversation()
        turn = await conversation.send("again")

    assert inside is sandboxed
    assert result.output == "found"
    assert turn.output == "again"


def test_the_default_is_the_sandbox() -> None:
    assert GolemPlugin().sandboxed is True


class _ContextCodec(PayloadCodec, WithSerializationContext):
    """A codec that reads the serialization context (and so needs it computed)."""

    def with_context(self, context: SerializationContext) -> _ContextCodec:
        return _ContextCodec()

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return list(payloads)

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return list(payloads)


@pytest.mark.parametrize("reads_contexts", [False, True])
async def test_the_sandbox_is_entered_for_a_payloads_context_only_when_the_converter_reads_it(
    temporal_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch, reads_contexts: bool
) -> None:
    # The SDK enters the sandbox twice per payload to compute contexts (issue 34): golem's
    # own converter reads none, so its runner answers them outside.
    entered: list[str] = []
    for name in ("get_serialization_context", "get_external_store_context"):
        original = getattr(sandbox_runner._Instance, name)

        def counted(self: Any, info: Any, original: Any = original, name: str = name) -> Any:
            entered.append(name)
            return original(self, info)

        monkeypatch.setattr(sandbox_runner._Instance, name, counted)
    agent, _ = scripted([ask(call("c1", "look", key="k")), Message.assistant("found")])

    @agent.tool
    def look(key: str) -> str:
        return f"value of {key}"

    converter = golem_converter()
    if reads_contexts:
        converter = dataclasses.replace(converter, payload_codec=_ContextCodec())
    client = Client(temporal_env.client.service_client, data_converter=converter)
    queue = f"sandbox-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue, plugins=[GolemPlugin(agent)]):
        result = await DurableAgent(client, agent, task_queue=queue).run("go")

    assert result.output == "found"
    assert bool(entered) is reads_contexts


def test_contexts_are_unused_by_golems_converter_encrypted_or_not() -> None:
    assert contexts_unused(golem_converter())
    assert contexts_unused(golem_converter(encryption_key=EncryptionCodec.new_key()))
    with_codec = dataclasses.replace(golem_converter(), payload_codec=_ContextCodec())
    assert not contexts_unused(with_codec)
