"""A golem worker as one version of a Worker Deployment (docs/adr/0020-versioned-deploys.md).

    GolemPlugin(agent, deployment=("support", "2026-12-01.1"))     # deployment name, build id
    Worker(client, task_queue="golem", deployment_config=WorkerDeploymentConfig(...),
           plugins=[GolemPlugin(agent)])                           # or your own config

A versioned worker registers golem's workflows PINNED (golem.workflows.versioning); an
unversioned one registers them as they are. Each deployment version's workers run in
their own process: golem finds an agent by its name and task queue, so two versions of
an agent in one process would be one.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from temporalio.common import WorkerDeploymentVersion
from temporalio.worker import WorkerConfig, WorkerDeploymentConfig

from golem.workflows.versioning import PINNED

#: A deployment version: Temporal's, or ``(deployment name, build id)``.
Deployment = WorkerDeploymentVersion | tuple[str, str]

#: Task queue -> (the version this process serves it as, its workers not yet stopped).
_served: dict[str, tuple[str, int]] = {}


def deployment_version(value: Deployment) -> WorkerDeploymentVersion:
    """``value`` as Temporal's version; ``ValueError`` naming what is wrong with it."""
    if isinstance(value, WorkerDeploymentVersion):
        name, build_id = value.deployment_name, value.build_id
    elif isinstance(value, tuple) and len(value) == 2:
        name, build_id = value
    else:
        raise ValueError(f"deployment={value!r}: give (deployment name, build id)")
    if not isinstance(name, str) or not name.strip() or "." in name:
        raise ValueError(
            f"deployment name {name!r}: a non-empty name without '.' (Temporal writes a "
            "version as NAME.BUILD_ID)"
        )
    if not isinstance(build_id, str) or not build_id.strip():
        raise ValueError(f"build id {build_id!r} of deployment {name!r}: a non-empty string")
    return WorkerDeploymentVersion(name, build_id)


def _label(config: WorkerDeploymentConfig | None) -> str:
    if config is None or not config.use_worker_versioning:
        return "unversioned"
    return config.version.to_canonical_string()


def configure(config: WorkerConfig, wanted: WorkerDeploymentVersion | None) -> WorkerConfig:
    """Version the worker as ``wanted`` (unless it is versioned already, as the same
    version) and register golem's workflows as a worker so versioned does."""
    given = config.get("deployment_config")
    if wanted is not None:
        if given is not None and given.version != wanted:
            raise ValueError(
                f"GolemPlugin(deployment={wanted.to_canonical_string()!r}) on a Worker whose "
                f"deployment_config is {given.version.to_canonical_string()!r}: give one"
            )
        if given is None:
            given = WorkerDeploymentConfig(version=wanted, use_worker_versioning=True)
            config["deployment_config"] = given
    label = _label(given)
    task_queue = config["task_queue"]
    other, workers = _served.get(task_queue, (label, 0))
    if other != label and workers:
        raise ValueError(
            f"this process already serves task queue {task_queue!r} as {other}; a worker of "
            f"{label} must run in another process (golem finds agents by name per task queue, "
            "so one version's runs would use the other's agents)"
        )
    _served[task_queue] = (label, workers + 1)
    if given is not None and given.use_worker_versioning:
        config["workflows"] = [PINNED.get(w, w) for w in config.get("workflows", [])]
    return config


@contextmanager
def serving(task_queue: str) -> Iterator[None]:
    """While a configured worker runs; once it stops, its version no longer holds the
    task queue in this process."""
    try:
        yield
    finally:
        label, workers = _served.get(task_queue, ("", 1))
        if workers <= 1:
            _served.pop(task_queue, None)
        else:
            _served[task_queue] = (label, workers - 1)
