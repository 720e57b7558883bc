"""golem's workflow runner: the SDK's (sandboxed) runner with three duties added.

    runner = GolemRunner(SandboxedWorkflowRunner(...))   # GolemPlugin does this
    runner.client = client                               # its worker's client
    runner.reads = ContextsRead.of(client.data_converter)
    await runner.evict_remaining()                       # once its worker has stopped

- A run this worker cannot read ends at once, named, even mid-replay
  (``golem.worker.unreadable``, docs/adr/0022-unreadable-runs-end.md).
- A worker that stops evicts every run still in its cache, each on its own event loop.
  temporalio 1.35 leaves idle cached runs unevicted at shutdown (temporalio/sdk-python#1849):
  Python's garbage collector then closed their suspended coroutines on whatever thread
  collected them, so a run's ``finally`` (a waiting run clears its inbox listing there)
  issued its commands inside another workflow's activation, a nondeterminism error on that
  workflow's next replay (docs/adr/0036-evicted-at-shutdown.md).
- A payload's serialization or storage context is computed in the sandbox only when the
  worker's converter reads it: the SDK asks for both per payload of every activation, each
  an entry into the sandbox (docs/adr/0038-the-sandbox-off.md).
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from dataclasses import dataclass
from typing import Any

from temporalio.bridge.proto.workflow_activation import (
    RemoveFromCache,
    WorkflowActivation,
    WorkflowActivationJob,
)
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.client import Client
from temporalio.converter import (
    ActivitySerializationContext,
    DataConverter,
    StorageDriverStoreContext,
    WorkflowSerializationContext,
)
from temporalio.worker import WorkflowInstance, WorkflowInstanceDetails, WorkflowRunner
from temporalio.workflow import _Definition

from golem.worker.unreadable import failed_task, termination, unreadable_failure

logger = logging.getLogger("golem.worker")


class GolemRunner(WorkflowRunner):
    """A ``WorkflowRunner`` around ``inner`` whose instances end a run they cannot read
    mid-replay and which evicts, once its worker stopped, the runs its worker left cached."""

    def __init__(self, inner: WorkflowRunner) -> None:
        self.inner = inner
        self.client: Client | None = None
        """The worker's client (set by ``GolemPlugin.configure_worker``; a replayer has none)."""
        self.reads = ContextsRead()
        """The payload contexts the worker's converter reads (set with ``client``): its
        instances compute only those, each of which enters the sandbox once per payload."""
        self._ending: set[str] = set()  # run ids whose termination was sent
        self._tasks: set[asyncio.Task[None]] = set()
        #: Run id -> its instance, until evicted (weak: the SDK's cache owns the instance).
        self._live: weakref.WeakValueDictionary[str, _Instance] = weakref.WeakValueDictionary()

    def prepare_workflow(self, defn: _Definition) -> None:
        self.inner.prepare_workflow(defn)

    def set_worker_level_failure_exception_types(self, types: Any) -> None:
        self.inner.set_worker_level_failure_exception_types(types)

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        loop = asyncio.get_running_loop()  # the worker's: instances activate on threads
        instance = _Instance(self.inner.create_instance(det), self, loop)
        self._live[det.info.run_id] = instance
        return instance

    def evicted(self, run_id: str) -> None:
        self._live.pop(run_id, None)

    async def evict_remaining(self) -> None:
        """Evict every run its stopped worker left cached, as the SDK evicts one: tasks
        cancelled on the run's own loop, commands ignored (off the worker's loop, whose
        thread an instance must not run on)."""
        left = list(self._live.items())
        if left:
            await asyncio.to_thread(_evict, left)
            logger.debug("evicted %d cached run(s) of a stopped worker", len(left))

    def end(self, workflow_id: str, run_id: str, kind: str, message: str) -> None:
        """Terminate run ``run_id`` of ``workflow_id`` with golem's failure (once)."""
        if self.client is None or run_id in self._ending:
            return
        self._ending.add(run_id)
        client = self.client
        request = termination(client, workflow_id, run_id, kind, message)
        logger.error("ending run %s: %s", workflow_id, message)

        async def terminate() -> None:
            try:
                await client.workflow_service.terminate_workflow_execution(request)
            except Exception:  # it ended meanwhile, or the server is away: the task says why
                logger.exception("could not end run %s", workflow_id)
                self._ending.discard(run_id)

        task = asyncio.ensure_future(terminate())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


_NO_STORE = StorageDriverStoreContext(target=None)


@dataclass(frozen=True)
class ContextsRead:
    """Which contexts a data converter reads: the SDK computes a payload's serialization
    and storage contexts inside the sandbox, per payload of every activation."""

    serialization: bool = True
    store: bool = True

    @classmethod
    def of(cls, converter: DataConverter) -> ContextsRead:
        """Serialization contexts are read when ``with_context`` gives another converter
        (a component reads them); storage contexts when the converter stores externally."""
        samples = (
            WorkflowSerializationContext(namespace="", workflow_id=""),
            ActivitySerializationContext(
                namespace="",
                activity_id=None,
                activity_type=None,
                activity_task_queue=None,
                workflow_id=None,
                workflow_type=None,
                is_local=False,
            ),
        )
        return cls(
            serialization=any(converter.with_context(c) is not converter for c in samples),
            store=converter.external_storage is not None,
        )


def _evict(instances: list[tuple[str, _Instance]]) -> None:
    for run_id, instance in instances:
        job = WorkflowActivationJob(remove_from_cache=RemoveFromCache(message="worker stopped"))
        try:
            instance.activate(WorkflowActivation(run_id=run_id, jobs=[job]))
        except Exception:  # a run whose code refuses to end: logged, the rest still go
            logger.exception("could not evict run %s of a stopped worker", run_id)


class _Instance(WorkflowInstance):
    def __init__(
        self, inner: WorkflowInstance, runner: GolemRunner, loop: asyncio.AbstractEventLoop
    ) -> None:
        self._inner = inner
        self._runner = runner
        self._loop = loop

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        completion = self._inner.activate(act)
        if any(job.HasField("remove_from_cache") for job in act.jobs):
            self._runner.evicted(act.run_id)
        found = unreadable_failure(completion) if act.is_replaying else None
        if found is None:
            return completion
        kind, message = found
        # Failing the workflow mid-replay conflicts with the recorded history: fail the task
        # (its reason in the history, no retry loop once the run is terminated) and end it.
        info = self._inner.get_info()
        self._loop.call_soon_threadsafe(
            self._runner.end, info.workflow_id, info.run_id, kind, message
        )
        return failed_task(completion, message, kind)

    def get_serialization_context(self, command_info: Any) -> Any:
        if not self._runner.reads.serialization:
            return None  # the context-free converter: the one the context would give
        return self._inner.get_serialization_context(command_info)

    def get_external_store_context(self, command_info: Any) -> Any:
        if not self._runner.reads.store:
            return _NO_STORE  # no external storage to read it
        return self._inner.get_external_store_context(command_info)

    def get_info(self) -> Any:
        return self._inner.get_info()

    def __getattr__(self, name: str) -> Any:  # get_thread_id and the rest the worker asks
        return getattr(self._inner, name)
