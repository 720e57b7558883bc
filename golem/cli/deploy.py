"""``golem deploy``: roll out a new version of your agents (docs/adr/0020-versioned-deploys.md).

    golem worker --agent app:support --deployment support --build-id v2   # v2's workers first
    golem deploy current --deployment support --build-id v2          # v2 takes new work
    golem deploy ramp --deployment support --build-id v2 --percentage 50   # or half of it
    golem deploy ramp --deployment support --stop                     # roll the ramp back
    golem deploy status --deployment support                          # what still runs where
    golem deploy drained --deployment support --build-id v1           # wait: v1 can stop

``current`` and ``ramp`` wait for the version's workers to be seen and for every task queue
to route by the change, then wake the idle conversations that may have to move.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from golem.cli.connect import CliError, connect_args
from golem.client.deployments import VersionStatus, WorkerDeployment

#: Ids listed per version before "and N more".
SHOWN = 5


def add_parser(
    commands: Any,
    parents: Sequence[argparse.ArgumentParser],
    formatter: type[argparse.HelpFormatter],
) -> None:
    """The ``deploy`` command and its actions; each action takes the ``parents``' options
    (``--address``, ``--namespace``, ``--debug``), after its name as everywhere else."""
    help = "roll out a new version of your agents' workers"
    deploy = commands.add_parser("deploy", help=help, description=help, formatter_class=formatter)
    actions = deploy.add_subparsers(dest="action", required=True, metavar="ACTION")

    def action(name: str, help: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = actions.add_parser(
            name, help=help, description=help, parents=list(parents), formatter_class=formatter
        )
        parser.add_argument("--deployment", required=True, help="the Worker Deployment's name")
        return parser

    current = action("current", "make a version current: it takes new runs and conversations")
    current.add_argument("--build-id", required=True, help="the version (its workers' build id)")
    ramp = action("ramp", "send a share of new runs and conversations to a version")
    ramp.add_argument("--build-id", help="the version to ramp to")
    ramp.add_argument("--percentage", type=float, help="its share, 0-100")
    ramp.add_argument("--stop", action="store_true", help="stop ramping (roll the ramp back)")
    for changes in (current, ramp):
        changes.add_argument(
            "--timeout", type=float, default=60.0, help="seconds to wait for its workers"
        )
    status = action("status", "each version's state and the runs and conversations on it")
    status.add_argument("--json", action="store_true", help="print the versions as JSON")
    drained = action("drained", "wait until nothing runs on a version: its workers can stop")
    drained.add_argument("--build-id", required=True, help="the version")
    drained.add_argument("--timeout", type=float, help="give up after this many seconds")
    action("move", "wake idle conversations on other versions to move (current/ramp do it)")


def describe_versions(versions: Sequence[VersionStatus]) -> list[str]:
    """One line per version, then the ids still open on it (a few of each kind)."""
    lines = []
    for v in versions:
        share = f" {v.percentage:g}%" if v.percentage is not None else ""
        lines.append(
            f"{v.build_id:<20} {v.state + share:<14} {len(v.runs)} runs, "
            f"{len(v.conversations)} conversations, {len(v.others)} other workflows"
        )
        for kind, ids in (("runs", v.runs), ("conversations", v.conversations)):
            if ids:
                more = f" and {len(ids) - SHOWN} more" if len(ids) > SHOWN else ""
                lines.append(f"    {kind}: {', '.join(ids[:SHOWN])}{more}")
    return lines


async def cmd_deploy(args: argparse.Namespace) -> int:
    client = await connect_args(args)
    try:
        deployment = WorkerDeployment(client, args.deployment)
    except ValueError as exc:
        raise CliError(f"--deployment: {exc}") from None
    where = f"{args.deployment}.{getattr(args, 'build_id', '') or ''}"
    if args.action == "current":
        moved = await deployment.set_current(args.build_id, timeout=args.timeout)
        print(f"{where} is current; {_woken(moved)}")
    elif args.action == "ramp":
        print(_woken(await _ramp(deployment, args)))
    elif args.action == "status":
        versions = await deployment.status()
        if args.json:
            print(json.dumps([dataclasses.asdict(v) for v in versions]))
        elif not versions:
            print(f"{args.deployment}: no versions")
        else:
            print("\n".join(describe_versions(versions)))
    elif args.action == "drained":
        await deployment.wait_drained(args.build_id, timeout=args.timeout)
        print(f"{where} is drained: its workers can stop")
    else:
        print(_woken(await deployment.move_conversations()))
    return 0


def _woken(ids: list[str]) -> str:
    return f"{len(ids)} idle conversation{'' if len(ids) == 1 else 's'} woken to move"


async def _ramp(deployment: WorkerDeployment, args: argparse.Namespace) -> list[str]:
    if args.stop:
        if args.build_id or args.percentage is not None:
            raise CliError("ramp --stop takes no --build-id or --percentage")
        result: list[str] = await deployment.set_ramping(None, timeout=args.timeout)
        print(f"{args.deployment}: ramping stopped")
        return result
    if not args.build_id or args.percentage is None:
        raise CliError("ramp needs --build-id and --percentage (or --stop)")
    try:
        result = await deployment.set_ramping(args.build_id, args.percentage, timeout=args.timeout)
    except ValueError as exc:  # names the culprit: the percentage or the build id
        raise CliError(str(exc)) from None
    print(f"{args.deployment}.{args.build_id} ramps at {args.percentage:g}%")
    return result
