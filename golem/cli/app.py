"""``golem``: the command line.

    golem dev                                   # Temporal dev server, UI on :8233, data in .golem/
    golem worker --agent myapp.agents:support   # serve agents
    golem run --agent support "Where is my order?"
    golem resume <run-id> ["try again"]         # continue a failed run in its conversation
    golem chat --agent support                  # a conversation workflow: each turn a child run
    golem conversation <conversation-id>        # the runs of a conversation, in order
    golem approve <run-id> [CALL_ID ...]        # answer a run that waits (--deny: refuse)
    golem pending [--agent A]                   # every call that waits, and how to answer it
    golem show <run-id>                         # one run's conversation (--json: a history file)
    golem setup                                 # register golem's search attributes on a cluster
    golem codec-server                          # decrypt payloads for the Temporal UI
    golem deploy current --deployment support --build-id v2   # roll out new agent code
    golem storage prune --older-than 30d        # reclaim the blobs of runs that are gone

``--agent`` is ``module:attribute`` everywhere; ``run`` and ``chat`` also take the bare
name a worker serves. Against a real cluster or Temporal Cloud, ``--address``,
``--namespace`` and the usual TEMPORAL_* settings apply; UI links go to ``--ui-url``,
TEMPORAL_UI_URL or the UI ``golem dev`` recorded. Errors are one line; ``--debug`` prints
the traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any, NoReturn

from temporalio.service import RPCError, RPCStatusCode

from golem import codec_server
from golem.cli import deploy, inbox, serve, storage
from golem.cli.approvals import WAITS_FOR_APPROVAL, cmd_approve, cmd_complete
from golem.cli.connect import (
    DEFAULT_ADDRESS,
    DEFAULT_TASK_QUEUE,
    UNSERVED,
    WORKER_HINT,
    WORKER_TIMEOUT,
    CliError,
)
from golem.cli.runs import cmd_chat, cmd_resume, cmd_run
from golem.cli.server import cmd_codec_server, cmd_dev, cmd_setup, cmd_worker
from golem.cli.show import cmd_conversation, cmd_show
from golem.cli.version import package_version
from golem.client import UnknownAgentError
from golem.messages import HistoryError
from golem.results import RunError
from golem.wire.converter import codec_problem
from golem.worker.logs import configure_logging

QUEUE_HELP = "the task queue golem workers poll"
WORKER_TIMEOUT_FLAG: dict[str, Any] = {
    "type": float,
    "default": WORKER_TIMEOUT,
    "metavar": "SECONDS",
    "help": f"stop waiting (exit {UNSERVED}, the run stays queued) when no worker polls for "
    "this long (0: wait on)",
}


def describe_error(exc: BaseException) -> str:
    """One line naming a problem and its fix."""
    if isinstance(exc, CliError):
        return str(exc)
    if (problem := codec_problem(exc)) is not None:
        return problem
    if isinstance(exc, UnknownAgentError):
        return f"{exc}; fix --agent, or start a worker that serves it ({WORKER_HINT})"
    if isinstance(exc, HistoryError):
        return f"the history is not valid: {exc}"
    if isinstance(exc, RunError):
        return f"run failed at stage {exc.stage}: {exc.detail}"
    if isinstance(exc, RPCError):
        if exc.status == RPCStatusCode.NOT_FOUND and "namespace" in exc.message.lower():
            return f"{exc.message}: pass --namespace (or TEMPORAL_NAMESPACE) naming one that exists"
        return f"Temporal answered {exc.status.name if exc.status else 'an error'}: {exc.message}"
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if isinstance(exc, ValueError) and first.startswith("GOLEM_"):
        return str(exc)  # a setting's own message, naming it and its fix (as codec-server says)
    return f"{type(exc).__name__}: {first} (--debug prints the traceback)"


# -- arguments -------------------------------------------------------------------------------


class _Help(argparse.HelpFormatter):
    """Show each option's default, when it has a meaningful one."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            "%(default)" not in text
            and default not in (None, False, argparse.SUPPRESS)
            and action.option_strings
        ):
            text += " (default: %(default)s)"
        return text


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="golem", description="Durable agents on Temporal.", formatter_class=_Help
    )
    top.add_argument("--version", action="version", version=f"golem {package_version()}")
    common = argparse.ArgumentParser(add_help=False, formatter_class=_Help)
    common.add_argument("--debug", action="store_true", help="print tracebacks and debug logs")
    server = argparse.ArgumentParser(add_help=False, formatter_class=_Help)
    server.add_argument(
        "--address",
        help=f"Temporal's host:port (default: TEMPORAL_ADDRESS, a profile's, or {DEFAULT_ADDRESS})",
    )
    server.add_argument(
        "--namespace", help="Temporal namespace (default: TEMPORAL_NAMESPACE or default)"
    )
    links = argparse.ArgumentParser(add_help=False, formatter_class=_Help)
    links.add_argument(
        "--ui-url",
        help="the Temporal UI's address, for links (default: GOLEM_UI_URL, TEMPORAL_UI_URL, "
        "the UI `golem dev` recorded in .golem/ui-url, or Temporal Cloud's)",
    )
    agent_help = "the agent: module:attribute, or the name a worker serves"
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(
        name: str, help: str, *parents: argparse.ArgumentParser, epilog: str | None = None
    ) -> Any:
        return sub.add_parser(
            name,
            help=help,
            description=help,
            epilog=epilog,
            parents=[common, *parents],
            formatter_class=_Help,
        )

    dev = command("dev", "start the Temporal dev server tuned for agents")
    dev.add_argument("--dir", default=".golem", help="where the SQLite file lives")
    dev.add_argument("--port", type=int, default=7233, help="gRPC port")
    dev.add_argument("--ui-port", type=int, help="UI port (default: --port + 1000)")
    dev.add_argument(
        "--log-level",
        default="error",
        choices=["debug", "info", "warn", "error"],
        help="the server's log level",
    )
    worker = command("worker", "run a worker serving agents", server)
    worker.add_argument(
        "--agent", action="append", required=True, help="module:attribute (repeatable)"
    )
    worker.add_argument("--task-queue", default=DEFAULT_TASK_QUEUE, help=QUEUE_HELP)
    worker.add_argument("--deployment", help="the Worker Deployment it is a version of")
    worker.add_argument("--build-id", help="its version in --deployment (`golem deploy`)")
    run = command(
        "run",
        "start a run, wait, print the answer and ids",
        server,
        links,
        epilog="A run that waits for approvals asks at a terminal; otherwise it names the "
        f"calls and exits {WAITS_FOR_APPROVAL}: answer with `golem approve RUN_ID`. Exit codes: "
        f"0 answered, 1 failed, {WAITS_FOR_APPROVAL} waits for approval, {UNSERVED} no worker "
        "takes it (the run stays queued). The run id and the answer go to stdout, everything "
        "else to stderr.",
    )
    run.add_argument("--agent", required=True, help=agent_help)
    run.add_argument("--task-queue", default=DEFAULT_TASK_QUEUE, help=QUEUE_HELP)
    run.add_argument("--history", help="a JSON history to continue (`golem show --json`)")
    run.add_argument(
        "--conversation-id", help="continue this conversation from its newest run (or start it)"
    )
    run.add_argument("--json", action="store_true", help="print the result as JSON")
    run.add_argument("--worker-timeout", **WORKER_TIMEOUT_FLAG)
    run.add_argument("prompt")
    resume = command("resume", "continue a failed run in its conversation", server, links)
    resume.add_argument("run_id", help="the failed run's id (or the UI's Run ID)")
    resume.add_argument("prompt", nargs="?", default="continue", help="the next user message")
    resume.add_argument("--task-queue", help="default: the failed run's task queue")
    resume.add_argument("--json", action="store_true", help="print the result as JSON")
    resume.add_argument("--worker-timeout", **WORKER_TIMEOUT_FLAG)
    chat = command("chat", "talk with an agent; each turn is a durable run", server)
    chat.add_argument("--agent", required=True, help=agent_help)
    chat.add_argument("--task-queue", default=DEFAULT_TASK_QUEUE, help=QUEUE_HELP)
    chat.add_argument("--history", help="a JSON history to continue (`golem show --json`)")
    chat.add_argument("--conversation-id", help="continue this conversation (or start it)")
    chat.add_argument(
        "--idle-timeout",
        type=float,
        default=600,
        metavar="SECONDS",
        help="a new conversation rests (its workflow closes) after this long without a turn; "
        "its next turn, from any client, reopens it (0: it stays open until closed)",
    )
    chat.add_argument(
        "--inline-turns",
        action="store_true",
        help="a new conversation runs its turns in its own workflow, not as child runs "
        "(about half the worker CPU per turn; deploy their workers with versioning: "
        "docs/adr/0050-turns-inline.md, 0051)",
    )
    approve = command(
        "approve", "approve (or deny) the calls a waiting run asks about", server, links
    )
    approve.add_argument(
        "run_id", help="the waiting run's id, or its conversation's (the turn in flight)"
    )
    approve.add_argument("call_id", nargs="*", help="the calls to decide (default: every one)")
    approve.add_argument("--deny", action="store_true", help="deny them: they are not executed")
    approve.add_argument("--reason", help="with --deny: what the model reads as the call's result")
    approve.add_argument(
        "--args",
        metavar="JSON",
        help="run the call with these arguments (a JSON object) in place of the model's",
    )
    approve.add_argument(
        "--always",
        action="store_true",
        help="approve, and stop asking for these tools in this conversation (across its turns "
        "and continue-as-new; `DurableConversation.revoke` takes it back)",
    )
    approve.add_argument(
        "--by", help="who decides, recorded on each call's result (default: the OS user)"
    )
    approve.add_argument("--json", action="store_true", help="print the result as JSON")
    complete = command(
        "complete", "answer a client-run tool's call a waiting run asks for", server, links
    )
    complete.add_argument("run_id", help="the waiting run's id, or its conversation's")
    complete.add_argument("call_id", help="the call to answer")
    complete.add_argument("--result", metavar="JSON", help="the call's result (JSON)")
    complete.add_argument("--error", metavar="TEXT", help="the call failed: why")
    complete.add_argument("--by", help="who answers (default: the OS user)")
    complete.add_argument("--json", action="store_true", help="print the result as JSON")
    inbox.add_arguments(
        command("pending", "list every call that waits for a person or an application", server)
    )
    show = command("show", "print one run's (or a conversation's) messages", server, links)
    show.add_argument(
        "run_id", help="golem's run id (the Workflow ID), the UI's Run ID, or a conversation id"
    )
    show.add_argument("--json", action="store_true", help="print the history as JSON")
    conversation = command("conversation", "list a conversation's runs in order", server)
    conversation.add_argument("conversation_id")
    conversation.add_argument("--json", action="store_true", help="print the runs as JSON")
    command("setup", "register golem's search attributes on the namespace", server)
    codec = command(
        "codec-server",
        "serve /encode and /decode for the Temporal UI (keys from GOLEM_ENCRYPTION_KEY, stored "
        "payloads from GOLEM_STORAGE_DIR; "
        "the UI's OIDC tokens or a bearer token from GOLEM_CODEC_TOKEN)",
    )
    codec_server.add_arguments(codec)
    serve.add_arguments(
        command("serve", "serve agents to browsers: AG-UI, AI SDK, REST", server, links)
    )
    deploy.add_parser(sub, [common, server], _Help)
    storage.add_parser(sub, [common, server], _Help)
    return top


COMMANDS = {
    "worker": cmd_worker,
    "run": cmd_run,
    "resume": cmd_resume,
    "chat": cmd_chat,
    "approve": cmd_approve,
    "complete": cmd_complete,
    "pending": inbox.cmd_pending,
    "show": cmd_show,
    "conversation": cmd_conversation,
    "setup": cmd_setup,
    "deploy": deploy.cmd_deploy,
    "serve": serve.cmd_serve,
    "storage": storage.cmd_storage,
}


def run_command(argv: Sequence[str] | None = None) -> int:
    """Run one command; return its exit code. Problems are one line on stderr."""
    args = parser().parse_args(argv)
    configure_logging(debug=args.debug)
    worker_log = logging.getLogger("golem.worker")
    if args.command != "worker":  # the command says what it cannot decrypt, once
        worker_log.addFilter(_not_decrypting)
    try:
        if args.command == "dev":
            return cmd_dev(args)
        if args.command == "codec-server":
            return cmd_codec_server(args)
        return asyncio.run(COMMANDS[args.command](args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader stopped reading (`golem show RUN | head`): nothing to say, and nowhere
        # to say it; the shell's code for SIGPIPE.
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except SystemExit as exc:
        if isinstance(exc.code, str):
            prefix = f"golem {args.command}: "
            print(prefix + exc.code.removeprefix(prefix), file=sys.stderr)  # said once
            return 2
        return exc.code or 0
    except Exception as exc:
        if args.debug:
            traceback.print_exc()
        print(f"golem {args.command}: {describe_error(exc)}", file=sys.stderr)
        return 1
    finally:
        # For this command only: a process that goes on (tests, an embedding app) logs them.
        worker_log.removeFilter(_not_decrypting)


def _not_decrypting(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith("cannot decrypt")


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """The ``golem`` entry point. It ends with ``os._exit``: the Temporal core runtime's
    threads can abort the interpreter's teardown (exit 134/139) after all work is done."""
    code = run_command(argv)
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
