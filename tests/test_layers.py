"""The protocol's names live in golem/wire/names.py: no other module spells one."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import get_args

from golem.events import EventKind
from golem.wire import names

GOLEM = Path(__file__).resolve().parent.parent / "golem"
CONSOLE = GOLEM / "serve" / "console" / "console.js"


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring nodes (a docstring may mention a name)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _exports(tree: ast.AST) -> set[int]:
    """ids of the string constants in ``__all__`` (a class's name, not a protocol name)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            found.update(id(c) for c in ast.walk(node.value) if isinstance(c, ast.Constant))
    return found


def spelled_outside_wire(root: Path = GOLEM) -> list[str]:
    """``path:line: value`` for every string literal under ``root`` (outside
    wire/names.py) that is one of the protocol's names."""
    known = names.spelled()
    found = []
    for path in sorted(root.rglob("*.py")):
        if path == root / "wire" / "names.py":
            continue
        tree = ast.parse(path.read_text(), str(path))
        skip = _docstrings(tree) | _exports(tree)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and node.value in known
                and id(node) not in skip
            ):
                found.append(f"{path.relative_to(root)}:{node.lineno}: {node.value!r}")
    return found


def test_no_module_but_wire_names_spells_a_protocol_name() -> None:
    assert spelled_outside_wire() == []


def test_the_checker_finds_a_spelled_name_but_not_a_docstring_or_export(tmp_path: Path) -> None:
    # The rule above is only as good as its checker: a literal it must catch, two it must not.
    (tmp_path / "wire").mkdir()
    (tmp_path / "wire" / "names.py").write_text('APPROVE = "golem.approve"\n')
    (tmp_path / "client.py").write_text(
        '"""Sends ``golem.approve``."""\n'
        '__all__ = ["AgentRunWorkflow"]\n'
        "async def approve(handle):\n"
        '    """golem.approve"""\n'
        '    await handle.execute_update("golem.approve", {})\n'
    )
    assert spelled_outside_wire(tmp_path) == ["client.py:5: 'golem.approve'"]


def test_names_are_unique_and_keep_their_recorded_values() -> None:
    spelled = names.spelled()
    constants = [k for k, v in vars(names).items() if k.isupper() and isinstance(v, str)]
    assert len(spelled) == len(constants) - 1  # ACTIVITY_NAMESPACE is a prefix, not a name
    # Values are in 0.2.0's histories: a sample pinned here, the corpus replays the rest.
    assert names.APPROVE == "golem.approve"
    assert names.SEND == "golem.send"
    assert names.MODEL_REQUEST == "golem.model_request"
    assert names.TOPIC == "golem.events"
    assert names.CONVERSATION_ID_ATTRIBUTE == "GolemConversationId"
    assert names.RUN_ERROR == "GolemRunError"


def _stream_events_serve_writes() -> set[str]:
    """The SSE event names golem serve writes: a run's event kinds and REST's closing ones."""
    kinds = set(get_args(EventKind))
    tree = ast.parse((GOLEM / "serve" / "rest.py").read_text())
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.keyword)
            and node.arg == "event"
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            kinds.add(node.value.value)
    return kinds


def test_the_console_reads_the_stream_events_serve_writes() -> None:
    # console.js keeps its own spelling of the events it reads: each must be one serve writes.
    read = set(re.findall(r'event\.event === "([a-z_]+)"', CONSOLE.read_text()))
    assert read, "the console reads no event by name: the pattern above is stale"
    assert read <= _stream_events_serve_writes(), read - _stream_events_serve_writes()
