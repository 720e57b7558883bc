"""Roll out new agent code: a Worker Deployment's versions, as golem uses them.

    deployment = WorkerDeployment(client, "support")
    await deployment.set_current("v2")        # new runs on v2; conversations follow between turns
    await deployment.set_ramping("v2", 50)    # or half of them first (set_ramping(None) stops)
    for version in await deployment.status(): # each version: its state, what still runs on it
        print(version.build_id, version.state, version.runs, version.conversations)
    await deployment.wait_drained("v1")       # nothing left on v1: its workers can stop

Workers join a version with ``golem worker --deployment support --build-id v2`` (or
``GolemPlugin(agent, deployment=("support", "v2"))``). A run finishes on the version it
started on; a conversation continues as new onto its target version between turns, and
``set_current`` / ``set_ramping`` wake the idle ones (``move_conversations``) so an old
version drains. See docs/adr/0020-versioned-deploys.md.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from temporalio.api.deployment.v1 import WorkerDeploymentVersion as VersionProto
from temporalio.api.enums.v1 import (
    RoutingConfigUpdateState,
    VersionDrainageStatus,
    WorkerDeploymentVersionStatus,
)
from temporalio.api.workflowservice.v1 import (
    DescribeWorkerDeploymentRequest,
    DescribeWorkerDeploymentResponse,
    DescribeWorkerDeploymentVersionRequest,
    SetWorkerDeploymentCurrentVersionRequest,
    SetWorkerDeploymentRampingVersionRequest,
)
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from golem.wire import names

T = TypeVar("T")
_STATES = {
    WorkerDeploymentVersionStatus.WORKER_DEPLOYMENT_VERSION_STATUS_INACTIVE: "inactive",
    WorkerDeploymentVersionStatus.WORKER_DEPLOYMENT_VERSION_STATUS_CURRENT: "current",
    WorkerDeploymentVersionStatus.WORKER_DEPLOYMENT_VERSION_STATUS_RAMPING: "ramping",
    WorkerDeploymentVersionStatus.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINING: "draining",
    WorkerDeploymentVersionStatus.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINED: "drained",
}
_RUN, _CONVERSATION = names.AGENT_RUN_WORKFLOW, names.CONVERSATION_WORKFLOW
#: Signals sent at once when waking idle conversations.
_AT_ONCE = 20


@dataclass(frozen=True)
class VersionStatus:
    """One version of a deployment and the workflows still open on it."""

    build_id: str
    state: str
    """``current``, ``ramping``, ``draining`` (workflows still pinned to it), ``drained``
    (its workers can stop) or ``inactive`` (never current)."""
    percentage: float | None = None
    """The share of new workflows it gets while ``ramping``."""
    runs: list[str] = field(default_factory=list)
    """Open agent runs (their run ids) on this version."""
    conversations: list[str] = field(default_factory=list)
    """Open conversations (their ids) whose current workflow run is on this version."""
    others: list[str] = field(default_factory=list)
    """Open workflows of other types (yours) on this version."""


#: What a busy server answers a request it could not serve in time: the same one, asked
#: again (with a conflict token read anew), is safe.
_BUSY = frozenset(
    {RPCStatusCode.CANCELLED, RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.UNAVAILABLE}
)


def _busy(exc: RPCError) -> bool:
    return exc.status in _BUSY


def _settling(exc: RPCError) -> bool:
    """The server learns of a version and its task queues from its workers' first polls:
    until then it answers that it has no such version, or that the version lacks one of the
    current version's task queues; a busy one may cancel the request meanwhile."""
    if exc.status == RPCStatusCode.NOT_FOUND or exc.status in _BUSY:
        return True
    return exc.status == RPCStatusCode.FAILED_PRECONDITION and "missing" in exc.message


class WorkerDeployment:
    """One Worker Deployment of ``client``'s namespace: its current and ramping versions
    and what runs on each. Every method waits for what it changed to take effect."""

    def __init__(self, client: Client, name: str) -> None:
        if not name or "'" in name or "." in name:
            raise ValueError(f"deployment name {name!r}: a non-empty name without ' or .")
        self.client = client
        self.name = name

    async def set_current(
        self, build_id: str, *, wake: bool = True, timeout: float = 60.0
    ) -> list[str]:
        """Make ``build_id`` current: new runs and conversations start there, and open
        conversations move there at their next turn, the idle ones now (``wake=False``: at
        their next turn only). Waits (up to ``timeout`` seconds) for the version's workers to
        be seen; returns the conversations woken to move."""
        self._check(build_id)
        deadline = time.monotonic() + timeout
        await self._change(
            lambda token: self.client.workflow_service.set_worker_deployment_current_version(
                SetWorkerDeploymentCurrentVersionRequest(
                    namespace=self.client.namespace,
                    deployment_name=self.name,
                    build_id=build_id,
                    conflict_token=token,
                    identity=self.client.identity,
                )
            ),
            f"make {build_id!r} current",
            deadline,
        )
        return await self._move(deadline) if wake else []

    async def set_ramping(
        self,
        build_id: str | None,
        percentage: float = 0.0,
        *,
        wake: bool = True,
        timeout: float = 60.0,
    ) -> list[str]:
        """Send ``percentage`` % of new runs and conversations to ``build_id`` (each
        conversation's share decided by its id, so it does not flap); ``None`` stops ramping.
        Returns the conversations woken to move (as ``set_current``)."""
        if build_id is not None:
            self._check(build_id)
        deadline = time.monotonic() + timeout
        if not 0.0 <= percentage <= 100.0:
            raise ValueError(f"ramp percentage {percentage}: between 0 and 100")
        request = SetWorkerDeploymentRampingVersionRequest(
            namespace=self.client.namespace,
            deployment_name=self.name,
            # Stopping: no build id at 0%, which removes the ramp (checked against 1.32).
            build_id=build_id or "",
            percentage=percentage if build_id is not None else 0.0,
            identity=self.client.identity,
        )

        def ramp(token: bytes) -> Awaitable[object]:
            request.conflict_token = token
            return self.client.workflow_service.set_worker_deployment_ramping_version(request)

        await self._change(
            ramp,
            f"ramp {build_id!r} to {percentage:g}%" if build_id else "stop ramping",
            deadline,
        )
        return await self._move(deadline) if wake else []

    async def status(self, *, timeout: float = 60.0) -> list[VersionStatus]:
        """Every version of the deployment, newest first, with the workflows open on it
        (a busy server asked again for up to ``timeout`` seconds)."""
        info = (await self._describe(time.monotonic() + timeout)).worker_deployment_info
        ramping = info.routing_config.ramping_deployment_version.build_id
        percentage = info.routing_config.ramping_version_percentage
        versions = []
        for summary in sorted(info.version_summaries, key=lambda s: -s.create_time.ToNanoseconds()):
            build_id = summary.deployment_version.build_id
            open_ = await self._open_on(build_id)
            versions.append(
                VersionStatus(
                    build_id=build_id,
                    state=_STATES.get(summary.status, "unknown"),
                    percentage=percentage if build_id == ramping else None,
                    runs=open_.pop(_RUN, []),
                    conversations=open_.pop(_CONVERSATION, []),
                    others=sorted(i for ids in open_.values() for i in ids),
                )
            )
        return versions

    async def move_conversations(self, *, timeout: float = 60.0) -> list[str]:
        """Wake the open conversations that may have to move (those on neither the ramping
        version nor, without a ramp, the current one): each continues as new onto its target
        version, or stays where its target still is. Returns their ids."""
        return await self._move(time.monotonic() + timeout)

    async def wait_drained(self, build_id: str, *, timeout: float | None = None) -> None:
        """Return once no workflow is pinned to ``build_id`` (its workers can stop);
        ``TimeoutError`` naming what still runs there after ``timeout`` seconds."""
        self._check(build_id)
        deadline = None if timeout is None else time.monotonic() + timeout
        drained = VersionDrainageStatus.VERSION_DRAINAGE_STATUS_DRAINED
        request = DescribeWorkerDeploymentVersionRequest(
            namespace=self.client.namespace,
            deployment_version=VersionProto(deployment_name=self.name, build_id=build_id),
        )
        while True:
            response = await self._call(
                lambda: self.client.workflow_service.describe_worker_deployment_version(request),
                f"read whether {build_id!r} drained",
                deadline,
            )
            if response.worker_deployment_version_info.drainage_info.status == drained:
                return
            if deadline is not None and time.monotonic() > deadline:
                left = await self._open_on(build_id)
                raise TimeoutError(
                    f"{self.name}.{build_id} did not drain in {timeout:g} s; still open there: "
                    f"{dict(left) or 'nothing (the server rechecks drainage every few minutes)'}"
                )
            await asyncio.sleep(0.25)

    # -- helpers -----------------------------------------------------------------------------

    def _check(self, build_id: str) -> None:
        if not build_id or "'" in build_id:
            raise ValueError(f"build id {build_id!r}: a non-empty id without '")

    async def _call(
        self,
        call: Callable[[], Awaitable[T]],
        what: str,
        deadline: float | None,
        again: Callable[[RPCError], bool] = _busy,
        hint: str = "",
    ) -> T:
        """``call()``, asked again after a short, growing pause while the server answers
        what ``again`` allows (by default: that it is busy) until ``deadline``; any other
        error at once. ``TimeoutError`` naming the deployment and the last answer."""
        pause = 0.05
        while True:
            try:
                return await call()
            except RPCError as exc:
                if not again(exc):
                    raise
                if deadline is not None and time.monotonic() + pause > deadline:
                    raise TimeoutError(
                        f"could not {what} in deployment {self.name!r} in time: the server "
                        f"last answered {exc.status.name}: {exc.message}{hint}"
                    ) from exc
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.5)

    def _ask_describe(self) -> Awaitable[DescribeWorkerDeploymentResponse]:
        return self.client.workflow_service.describe_worker_deployment(
            DescribeWorkerDeploymentRequest(
                namespace=self.client.namespace, deployment_name=self.name
            )
        )

    async def _describe(self, deadline: float) -> DescribeWorkerDeploymentResponse:
        return await self._call(self._ask_describe, "describe it", deadline)

    async def _move(self, deadline: float) -> list[str]:
        routing = (await self._describe(deadline)).worker_deployment_info.routing_config
        stay = (
            routing.ramping_deployment_version.build_id
            or routing.current_deployment_version.build_id
        )
        query = (
            f"TemporalWorkerDeployment = '{self.name}' AND ExecutionStatus = 'Running' "
            f"AND WorkflowType = '{_CONVERSATION}'"
        )
        if stay:
            query += f" AND TemporalWorkerDeploymentVersion != '{self.name}:{stay}'"
        ids = [w.id async for w in self.client.list_workflows(query)]
        slots = asyncio.Semaphore(_AT_ONCE)

        async def wake(conversation_id: str) -> None:
            handle = self.client.get_workflow_handle(conversation_id)
            async with slots:
                try:
                    await self._call(
                        lambda: handle.signal(names.UPGRADE), f"wake {conversation_id}", deadline
                    )
                except RPCError as exc:
                    if exc.status != RPCStatusCode.NOT_FOUND:  # closed meanwhile: nothing to move
                        raise

        await asyncio.gather(*(wake(i) for i in ids))
        return ids

    async def _open_on(self, build_id: str) -> dict[str, list[str]]:
        """Workflow type -> ids of the open workflows on ``build_id``."""
        query = (
            f"TemporalWorkerDeploymentVersion = '{self.name}:{build_id}' "
            "AND ExecutionStatus = 'Running'"
        )
        found: dict[str, list[str]] = {}
        async for w in self.client.list_workflows(query):
            found.setdefault(w.workflow_type, []).append(w.id)
        return {kind: sorted(ids) for kind, ids in found.items()}

    async def _change(
        self, request: Callable[[bytes], Awaitable[T]], what: str, deadline: float
    ) -> None:
        """Send ``request`` (with the deployment's conflict token), again while the version
        is not known yet; then wait until every task queue routes by the change."""

        async def send() -> None:
            await request((await self._ask_describe()).conflict_token)

        hint = f" (are its workers running, with --deployment {self.name}?)"
        await self._call(send, what, deadline, _settling, hint)
        completed = RoutingConfigUpdateState.ROUTING_CONFIG_UPDATE_STATE_COMPLETED
        while True:
            info = (await self._describe(deadline)).worker_deployment_info
            if info.routing_config_update_state == completed:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"could not {what} in deployment {self.name!r} in time: its task queues "
                    "did not take it"
                )
            await asyncio.sleep(0.05)
