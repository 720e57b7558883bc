"""How the layers of a golem tree stand, as read from its source: the figures of
docs/adr/0043-the-wire-is-the-protocol.md, for any checkout (so before and after can be
measured side by side).

    python benchmarks/layers.py                    # this checkout
    python benchmarks/layers.py --tree /tmp/main   # another checkout (its golem/ is read)

Prints: protocol names spelled as literals outside golem/wire/names.py (the names are
this checkout's), import circles among golem's modules (strongly connected parts of the
import graph, lazy imports included, each listed; ``from pkg import sub`` is an
import of ``pkg.sub`` only, as import-linter reads it), duplicated pairs inside golem/ (the
`duplicates` tool, when it is installed), public names (the sum of ``__all__`` lengths)
and the modules that define an exception class.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent.parent
EXCEPTION_BASES = re.compile(r"(Error|Exception|Failed|Canceled|Warning)$")


def own_names() -> ModuleType:
    """This checkout's golem/wire/names.py, loaded by path (the measured tree may lack it)."""
    spec = importlib.util.spec_from_file_location("_names", HERE / "golem" / "wire" / "names.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _skipped(tree: ast.AST) -> set[int]:
    """Docstrings and ``__all__`` entries: a name there is prose or an export, not a use."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                skip.add(id(first.value))
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            skip.update(id(c) for c in ast.walk(node.value))
    return skip


def literal_names(golem: Path, values: set[str]) -> tuple[int, int]:
    """(literals, files) spelling one of ``values`` outside wire/names.py."""
    count, files = 0, set()
    for path in sorted(golem.rglob("*.py")):
        if path == golem / "wire" / "names.py":
            continue
        tree = ast.parse(path.read_text())
        skip = _skipped(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in values and id(node) not in skip:
                count += 1
                files.add(path)
    return count, len(files)


def _module_of(golem: Path, path: Path) -> str:
    parts = path.relative_to(golem.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_only(tree: ast.AST) -> set[int]:
    """ids of the nodes under ``if TYPE_CHECKING:`` (no import at run time)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                found.update(id(n) for n in ast.walk(child))
    return found


def import_graph(golem: Path, run_time_only: bool = False) -> dict[str, set[str]]:
    """Module -> the golem modules it imports (at any depth of its code; ``run_time_only``:
    not those named only for type checking)."""
    modules = {_module_of(golem, p): p for p in golem.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        tree = ast.parse(path.read_text())
        skip = _type_only(tree) if run_time_only else set()
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                # ``from pkg import sub`` names the submodule when there is one (as grimp,
                # and so import-linter, reads it), else ``pkg`` itself.
                targets = [
                    f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                    for a in node.names
                ]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != module:
                    graph[module].add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def duplicated_pairs(golem: Path) -> str:
    tool = shutil.which("duplicates")
    if tool is None:
        return "n/a (no duplicates tool)"
    out = subprocess.run(
        [tool, "--repo", str(golem), "--seconds", "120"], capture_output=True, text=True
    ).stdout
    found = re.search(r"(\d+) pairs? of places", out)
    return found.group(1) if found else ("0" if "no duplicates" in out else out.strip()[:80])


def public_names(golem: Path) -> int:
    total = 0
    for path in golem.rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
                and isinstance(node.value, ast.List | ast.Tuple)
            ):
                total += len(node.value.elts)
    return total


def exception_modules(golem: Path) -> tuple[int, int]:
    """(modules, classes): classes whose base's name reads as an exception's."""
    modules, classes = set(), 0
    for path in golem.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                EXCEPTION_BASES.search(ast.unparse(b).rpartition(".")[2]) for b in node.bases
            ):
                modules.add(path)
                classes += 1
    return len(modules), classes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=HERE, help="a golem checkout")
    golem = parser.parse_args().tree.resolve() / "golem"
    names = own_names()
    literals, files = literal_names(golem, set(names.spelled()))
    found = circles(import_graph(golem))
    run_time = circles(import_graph(golem, run_time_only=True))
    exceptions, classes = exception_modules(golem)
    print(f"tree: {golem.parent}")
    print(f"protocol names spelled outside wire/names.py: {literals} literals in {files} files")
    for label, parts in (
        ("import circles among golem modules", found),
        ("  of them at run time (TYPE_CHECKING imports left out)", run_time),
    ):
        print(f"{label}: {len(parts)}")
        for part in parts:
            print(f"    {len(part)} modules: {', '.join(m.removeprefix('golem.') for m in part)}")
    print(f"duplicated pairs inside golem/: {duplicated_pairs(golem)}")
    print(f"public names (sum of __all__ lengths): {public_names(golem)}")
    print(f"modules defining exception classes: {exceptions} ({classes} classes)")


if __name__ == "__main__":
    main()
