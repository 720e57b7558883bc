"""A small MCP server over stdio, written with the mcp SDK: notes kept in a folder.

python examples/mcp_notes_server.py [FOLDER]      (examples/mcp_tools.py starts it)
"""

from __future__ import annotations

import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

FOLDER = Path(sys.argv[1] if len(sys.argv) > 1 else ".notes")
notes = MCPServer("notes", log_level="WARNING")


@notes.tool()
def list_notes() -> list[str]:
    """The names of all notes."""
    return sorted(p.stem for p in FOLDER.glob("*.txt"))


@notes.tool()
def read_note(name: str) -> str:
    """Read a note.

    Args:
        name: The note's name, as list_notes gives it.
    """
    path = FOLDER / f"{name}.txt"
    if not path.exists():
        raise ToolError(f"there is no note named {name!r}")
    return path.read_text()


@notes.tool()
def write_note(name: str, text: str) -> str:
    """Write (or replace) a note.

    Args:
        name: The note's name.
        text: What it says.
    """
    FOLDER.mkdir(parents=True, exist_ok=True)
    (FOLDER / f"{name}.txt").write_text(text)
    return f"saved {name}"


if __name__ == "__main__":
    if "--http" in sys.argv:
        notes.run("streamable-http", host="127.0.0.1", port=int(sys.argv[-1]))
    else:
        notes.run("stdio")
