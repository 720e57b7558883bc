"""``golem``: the command line (re-exports only; see golem.cli.app for the commands).

    golem dev                                   # Temporal dev server, UI on :8233, data in .golem/
    golem worker --agent myapp.agents:support   # serve agents
    golem run --agent support "Where is my order?"

The parser and error printing live in app, the server, UI links and agents in connect,
what the user reads in output, and the commands by group in server (dev, worker, setup,
codec-server), runs (run, resume, chat) and show (show, conversation).
"""

from golem.cli.app import COMMANDS, describe_error, main, parser, run_command
from golem.cli.connect import CliError, agent_name, connect, load_agent, ui_link
from golem.cli.output import format_message
from golem.cli.show import describe_run

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
