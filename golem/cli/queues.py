"""Who serves a task queue: the workers polling it, the agents each announces, its versions
(docs/adr/0028-agents-workers-and-queues.md).

    identity = worker_identity(["travel", "refunds"])    # `golem worker` polls as this
    queue = await describe_queue(client, "golem")        # the live pollers and the routing
    problem = queue.not_current()                        # "served only by support.v1, ..."
    problem = queue.lacks_agent("travle")                # "no worker ... serves 'travle'"
    problem = queue.conflict(["refunds"], None)          # a second worker with other agents

``golem worker`` announces the agents it serves in its worker identity, so the CLI can know
before it starts a run whether a worker will take it; a worker started otherwise announces
nothing, and nothing is concluded from it.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from temporalio.api.enums.v1 import TaskQueueType, WorkerVersioningMode
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

#: Marks the agents in a ``golem worker``'s identity: ``1234@host golem[travel,refunds]``.
ANNOUNCE = " golem["
#: A live worker polls at least this often (a long poll lasts about a minute): a poller the
#: server saw longer ago than this has stopped.
LIVE_WITHIN = 90.0


def worker_identity(agents: Iterable[str]) -> str:
    """The identity a ``golem worker`` polls with: Temporal's usual ``pid@host`` and the
    agents it serves."""
    return f"{os.getpid()}@{socket.gethostname()}{ANNOUNCE}{','.join(sorted(agents))}]"


@dataclass(frozen=True)
class Poller:
    """One worker polling the queue for workflow tasks."""

    identity: str
    agents: frozenset[str] | None
    """The agents it announces, ``None`` when it announces none (not ``golem worker``)."""
    version: str
    """``deployment.build_id`` of a versioned worker, ``""`` for an unversioned one."""

    @property
    def who(self) -> str:
        return self.identity.partition(ANNOUNCE)[0]

    def serves(self) -> str:
        return ", ".join(sorted(self.agents or ())) or "nothing"


@dataclass(frozen=True)
class QueueState:
    """A task queue's live workflow pollers and where new work goes."""

    name: str
    pollers: list[Poller]
    current: str
    """``deployment.build_id`` new work goes to, ``""`` when the queue has no current version."""
    ramping: str

    def taking(self) -> list[Poller]:
        """The pollers new runs go to: the current (and ramping) version's, or without one
        the unversioned workers."""
        targets = {self.current, self.ramping} - {""} or {""}
        return [p for p in self.pollers if p.version in targets]

    def not_current(self) -> str | None:
        """Why no worker takes new runs though versioned ones poll: none of their versions is
        current. ``None`` when some worker takes them (or none polls at all)."""
        if not self.pollers or self.taking():
            return None
        versions = sorted({p.version for p in self.pollers})
        deployment, _, build_id = versions[-1].partition(".")
        named = " or ".join(
            f"deployment {v.partition('.')[0]} build {v.partition('.')[2]}" for v in versions
        )
        current = f"current is {self.current}" if self.current else "none is current"
        return (
            f"task queue {self.name!r} is served only by {named}, which is not current "
            f"({current}): make it current with `golem deploy current --deployment "
            f"{deployment} --build-id {build_id}`"
        )

    def lacks_agent(self, agent: str) -> str | None:
        """Why no worker taking new runs would run ``agent``, when every one says what it
        serves; ``None`` when one serves it or it cannot be known."""
        taking = self.taking()
        if not taking or any(p.agents is None or agent in p.agents for p in taking):
            return None
        served = sorted({a for p in taking for a in p.agents or ()})
        return (
            f"unknown agent {agent!r}: the workers on task queue {self.name!r} serve "
            f"{', '.join(served) or 'no agent'}; fix --agent, or start a worker that serves it "
            f"(golem worker --agent module:attribute --task-queue {self.name})"
        )

    def conflict(self, agents: Sequence[str], version: str) -> str | None:
        """Why a worker serving ``agents`` as ``version`` must not join: a worker of the same
        version polls the queue with other agents, so runs would reach one without theirs."""
        mine = frozenset(agents)
        for other in self.pollers:
            if other.version == version and other.agents is not None and other.agents != mine:
                return (
                    f"task queue {self.name!r} is served by worker {other.who} with agents "
                    f"{other.serves()}; this worker serves {', '.join(sorted(mine))}: a run "
                    "would reach a worker without its agent. Serve the same agents on every "
                    "worker of a task queue (repeat --agent), or give this one its own "
                    "--task-queue"
                )
        return None


def _version(poller: object) -> str:
    options = poller.deployment_options  # type: ignore[attr-defined]
    versioned = WorkerVersioningMode.WORKER_VERSIONING_MODE_VERSIONED
    if not options.deployment_name or options.worker_versioning_mode != versioned:
        return ""
    return f"{options.deployment_name}.{options.build_id}"


def _agents(identity: str) -> frozenset[str] | None:
    _, marker, rest = identity.partition(ANNOUNCE)
    if not marker or not rest.endswith("]"):
        return None
    return frozenset(a for a in rest[:-1].split(",") if a)


def _stopped(identity: str, seen_at: float) -> bool:
    """A poller of a process that ended (on this machine) or that has not polled lately."""
    if time.time() - seen_at > LIVE_WITHIN:
        return True
    pid, at, host = identity.partition(" ")[0].partition("@")
    if at and host == socket.gethostname() and pid.isdigit():
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
    return False


async def describe_queue(client: Client, task_queue: str) -> QueueState:
    """``task_queue``'s live workflow pollers, each with its agents and version, and the
    versions new work goes to."""
    response = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    pollers = [
        Poller(p.identity, _agents(p.identity), _version(p))
        for p in response.pollers
        if not _stopped(p.identity, p.last_access_time.ToSeconds())
    ]
    routing = response.versioning_info
    current, ramping = routing.current_deployment_version, routing.ramping_deployment_version
    return QueueState(
        task_queue,
        pollers,
        f"{current.deployment_name}.{current.build_id}" if current.build_id else "",
        f"{ramping.deployment_name}.{ramping.build_id}" if ramping.build_id else "",
    )
