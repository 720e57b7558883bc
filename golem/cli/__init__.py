"""``golem``: the command line (re-exports only; see golem.cli.app for the commands).

    golem dev                                   # Temporal dev server, UI on :8233, data in .golem/
    golem worker --agent myapp.agents:support   # serve agents
    golem run --agent support "Where is my order?"

The parser and error printing live in app, the server, UI links and agents in connect,
what the user reads in output, and the commands by group in server (dev, worker, setup,
codec-server), runs (run, resume, chat) and show (show, conversation).
"""

from typing import TYPE_CHECKING

from golem.cli.entry import main

if TYPE_CHECKING:
    from golem.cli.app import COMMANDS, describe_error, parser, run_command
    from golem.cli.connect import CliError, agent_name, connect, load_agent, ui_link
    from golem.cli.output import format_message
    from golem.cli.show import describe_run

#: Where each name lives: loaded on first use, so ``golem --version`` imports none of them.
_HOMES = {
    "COMMANDS": "app",
    "describe_error": "app",
    "parser": "app",
    "run_command": "app",
    "CliError": "connect",
    "agent_name": "connect",
    "connect": "connect",
    "load_agent": "connect",
    "ui_link": "connect",
    "format_message": "output",
    "describe_run": "show",
}

__all__ = [
    "COMMANDS",
    "CliError",
    "agent_name",
    "connect",
    "describe_error",
    "describe_run",
    "format_message",
    "load_agent",
    "main",
    "parser",
    "run_command",
    "ui_link",
]


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module 'golem.cli' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"golem.cli.{_HOMES[name]}"), name)
