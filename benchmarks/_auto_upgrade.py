"""The policy golem did not choose, for benchmarks/deploy_rollout.py's side-by-side figures
only: a worker whose ConversationWorkflow is AUTO_UPGRADE (it moves to the current version
at its next workflow task, replaying its history there) instead of PINNED with a move by
continue-as-new (docs/adr/0020-versioned-deploys.md).

    python -c "import _auto_upgrade; _auto_upgrade.main()" ADDRESS QUEUE DEPLOYMENT BUILD_ID
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys

from temporalio import workflow
from temporalio.client import Client
from temporalio.common import VersioningBehavior
from temporalio.plugin import SimplePlugin
from temporalio.worker import Worker

from golem.wire import ConversationInput, ConversationSummary
from golem.worker import GolemPlugin, golem_converter
from golem.workflows.conversation import ConversationWorkflow
from golem.workflows.versioning import PinnedConversationWorkflow


@workflow.defn(name="ConversationWorkflow", versioning_behavior=VersioningBehavior.AUTO_UPGRADE)
class AutoUpgradeConversationWorkflow(ConversationWorkflow):
    @workflow.run
    async def run(self, input: ConversationInput) -> ConversationSummary:
        return await super().run(input)


def _swap(workflows: object) -> list[type]:
    given = list(workflows) if isinstance(workflows, list) else []
    return [
        AutoUpgradeConversationWorkflow if w is PinnedConversationWorkflow else w for w in given
    ]


async def serve(address: str, queue: str, deployment: str, build_id: str) -> None:
    import _deploy_agents

    agent = getattr(_deploy_agents, build_id)
    client = await Client.connect(address, data_converter=golem_converter())
    plugins = [
        GolemPlugin(agent, deployment=(deployment, build_id)),
        SimplePlugin("auto", workflows=_swap),
    ]
    async with Worker(client, task_queue=queue, plugins=plugins):
        print(
            f"serving {agent.name} as {deployment}.{build_id}, conversations AUTO_UPGRADE",
            flush=True,
        )
        await asyncio.Event().wait()


def main() -> None:
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(*sys.argv[1:5]))
    sys.stdout.flush()
    os._exit(0)  # the Temporal runtime's threads can abort a normal interpreter teardown
