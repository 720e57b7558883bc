"""A rollout under load, as an operator runs one: benchmarks/deploy_rollout.py with fewer
conversations and runs (the script's own defaults are 20 of each). v1 and v2 workers are
``golem worker --deployment ... --build-id ...`` processes; see that script's docstring for
every step and check."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from temporalio.client import Client

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from deploy_rollout import rollout


async def golem(client: Client, *argv: str) -> str:
    """Run the installed ``golem`` command against ``client``'s server; its output."""
    proc = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "golem"),
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "TEMPORAL_ADDRESS": client.service_client.config.target_host},
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def test_a_switch_to_v2_under_load_finishes_v1s_runs_on_v1_and_moves_every_conversation(
    temporal_client: Client,
) -> None:
    report = await rollout(temporal_client, conversations=6, runs=4)
    assert report.problems == []
    assert report.figures["v1 drained, s after the switch"] > 0  # v1 drained; its workers stopped

    # What an operator reads afterwards: v2 current, nothing left on v1.
    status = await golem(
        temporal_client, "deploy", "status", "--deployment", report.deployment, "--json"
    )
    versions = {v["build_id"]: v for v in json.loads(status)}
    assert versions["v2"]["state"] == "current" and len(versions["v2"]["conversations"]) == 6
    assert versions["v1"]["state"] == "drained"
    assert (versions["v1"]["runs"], versions["v1"]["conversations"]) == ([], [])


async def test_a_ramp_moves_conversations_by_id_a_rollback_brings_them_back_then_v1_drains(
    temporal_client: Client,
) -> None:
    report = await rollout(temporal_client, conversations=6, runs=2, ramp=True)
    assert report.problems == []
    assert sum(report.ramp_split.values()) == 6 and set(report.ramp_split) <= {"v1", "v2"}
