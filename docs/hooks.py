"""MkDocs hooks: pages written from the code and the repository, so they are never stale.

``<!-- golem-cli-help -->`` becomes the ``--help`` of ``golem`` and of every command and
sub-command, as the installed code prints it; ``<!-- golem-adr-index -->`` a link to each
record in docs/adr/, with its title.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

MARKER = "<!-- golem-cli-help -->"
ADR_MARKER = "<!-- golem-adr-index -->"
ADRS = Path(__file__).parent / "adr"


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _sections(parser: argparse.ArgumentParser, words: list[str]) -> list[str]:
    title = " ".join(words)
    out = [f"### `{title}`", "", "```text", parser.format_help().rstrip(), "```", ""]
    for name, sub in _subcommands(parser).items():
        out += _sections(sub, [*words, name])
    return out


def cli_reference() -> str:
    """Every golem command's help, as markdown."""
    from golem.cli.app import parser

    root = parser()
    root.prog = "golem"
    return "\n".join(_sections(root, ["golem"]))


def adr_index() -> str:
    """A markdown list linking every ADR by its title (its first line)."""
    lines = []
    for adr in sorted(ADRS.glob("[0-9]*.md")):
        title = adr.read_text().splitlines()[0].lstrip("# ").strip()
        lines.append(f"- [{title}](../adr/{adr.name})")
    return "\n".join(lines)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, cli_reference())
    if ADR_MARKER in markdown:
        markdown = markdown.replace(ADR_MARKER, adr_index())
    return markdown
