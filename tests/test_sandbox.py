"""``GolemPlugin(sandboxed=False)`` runs workflows without Temporal's sandbox, by explicit
choice (docs/adr/0038-the-sandbox-off.md); the default keeps it. The replay corpus replays
under both (tests/test_replay.py)."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from agents import ask, call, scripted
from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.converter import (
    DataConverter,
    ExternalStorage,
    PayloadCodec,
    SerializationContext,
    WithSerializationContext,
)
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import _runner as sandbox_runner

from golem.client import DurableAgent
from golem.messages import Message
from golem.storage import LocalDirectory
from golem.worker import GolemPlugin, golem_converter
from golem.worker.codec import EncryptionCodec
from golem.worker.runner import ContextsRead


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


def _converter(kind: str, tmp_path: Path) -> DataConverter:
    if kind == "storing":
        return golem_converter(external_storage=ExternalStorage(drivers=[LocalDirectory(tmp_path)]))
    converter = golem_converter()
    if kind == "reading contexts":
        return dataclasses.replace(converter, payload_codec=_ContextCodec())
    return converter


@pytest.mark.parametrize("kind", ["golem's", "reading contexts", "storing"])
async def test_the_sandbox_is_entered_for_a_payloads_context_only_when_the_converter_reads_it(
    temporal_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, kind: str
) -> None:
    # The SDK enters the sandbox per payload to compute its contexts (issue 34): golem's
    # runner answers outside those the worker's converter does not read.
    entered: set[str] = set()
    for name in ("get_serialization_context", "get_external_store_context"):
        original = getattr(sandbox_runner._Instance, name)

        def counted(self: Any, info: Any, original: Any = original, name: str = name) -> Any:
            entered.add(name)
            return original(self, info)

        monkeypatch.setattr(sandbox_runner._Instance, name, counted)
    agent, _ = scripted([ask(call("c1", "look", key="k")), Message.assistant("found")])

    @agent.tool
    def look(key: str) -> str:
        return f"value of {key}"

    client = Client(temporal_env.client.service_client, data_converter=_converter(kind, tmp_path))
    queue = f"sandbox-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue, plugins=[GolemPlugin(agent)]):
        result = await DurableAgent(client, agent, task_queue=queue).run("go")

    assert result.output == "found"
    assert (
        entered
        == {
            "golem's": set(),
            "reading contexts": {"get_serialization_context"},
            "storing": {"get_external_store_context"},
        }[kind]
    )


@pytest.mark.parametrize("kind", ["golem's", "reading contexts", "storing"])
def test_which_contexts_a_converter_reads(tmp_path: Path, kind: str) -> None:
    reads = ContextsRead.of(_converter(kind, tmp_path))

    assert (reads.serialization, reads.store) == {
        "golem's": (False, False),
        "reading contexts": (True, False),
        "storing": (False, True),
    }[kind]
    encrypted = golem_converter(encryption_key=EncryptionCodec.new_key())
    assert ContextsRead.of(encrypted) == ContextsRead(serialization=False, store=False)
