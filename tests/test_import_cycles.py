"""No import circles inside golem/, read from the source with ``ast``.

Every import counts: module-level, inside a function (a lazy import still closes a circle
when it runs), and under ``TYPE_CHECKING`` too (a circle there is the same tangle for a
reader and for mypy, only hidden from the interpreter). Layers (which package may import
which) are the import-linter contract's job; this file checks circles only.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

GOLEM = Path(__file__).resolve().parent.parent / "golem"

#: The durable packages, which the loop, its phases and the executor never reach.
DURABLE = ("golem.workflows", "golem.activities", "golem.worker", "golem.client", "golem.wire")


def module_names() -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for path in GOLEM.rglob("*.py"):
        parts = list(path.relative_to(GOLEM.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def imported(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The golem modules ``module`` imports anywhere in its source."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package[: len(package) - node.level + 1], *filter(None, [base])])
            # ``from golem.models import base`` imports the module golem.models.base.
            for alias in node.names:
                names.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
    found = set()
    for name in names:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name and name != module:
            found.add(name)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = module_names()
    return {name: imported(name, path, modules) for name, path in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each set of modules that import one another in a circle (Tarjan's strongly connected
    components of more than one module), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component: list[str] = []
            while not component or component[-1] != node:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def reaches(graph: dict[str, set[str]], start: str) -> Iterator[str]:
    seen = {start}
    todo = [start]
    while todo:
        for target in graph[todo.pop()] - seen:
            seen.add(target)
            todo.append(target)
            yield target


def durable(module: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in DURABLE)


def test_the_graph_sees_lazy_and_type_checking_imports() -> None:
    graph = import_graph()
    # golem.agent imports infer_model inside a property; golem.executor names
    # Delegation under TYPE_CHECKING only.
    assert "golem.models.infer" in graph["golem.agent"]
    assert "golem.delegation" in graph["golem.executor"]
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_circle_anywhere_in_golem() -> None:
    # The durable packages included: the last circle there (a conversation importing its
    # agent under TYPE_CHECKING) went with ServedAgent.
    assert circles(import_graph()) == []


@pytest.mark.parametrize("lower", ["golem.loop", "golem.phases", "golem.executor"])
def test_the_loop_its_phases_and_the_executor_protocol_never_reach_the_agent(lower: str) -> None:
    graph = import_graph()
    starts = [m for m in graph if m == lower or m.startswith(lower + ".")]
    for start in starts:
        reached = set(reaches(graph, start))
        assert {"golem.agent", "golem.local"} & reached == set(), start
        assert not any(durable(m) for m in reached), start


@pytest.mark.parametrize("phase", ["prepare", "turn", "batch", "finish"])
def test_phases_never_reach_the_loop(phase: str) -> None:
    assert "golem.loop" not in set(reaches(import_graph(), f"golem.phases.{phase}"))


def test_every_module_imports_on_its_own() -> None:
    """Each golem module imported first, in a fresh interpreter state for golem: a circle
    through a package's ``__init__`` (which the graph above does not draw) fails here."""
    script = (
        "import importlib, sys\n"
        "failed = []\n"
        "for name in sys.argv[1:]:\n"
        "    for loaded in [m for m in sys.modules if m == 'golem' or m.startswith('golem.')]:\n"
        "        del sys.modules[loaded]\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ImportError as exc:\n"
        "        failed.append(f'{name}: {exc}')\n"
        "print('\\n'.join(failed))\n"
    )
    names = sorted(n for n in module_names() if not n.endswith("__main__"))
    done = subprocess.run(
        [sys.executable, "-c", script, *names], capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""
