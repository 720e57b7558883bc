"""How big golem's public surface is, read from the source (nothing is imported).

    .venv/bin/python benchmarks/public_names.py [GOLEM_DIR ...]

For each tree given (default: this checkout's golem/), side by side:
- public names: the union of ``__all__`` of ``golem`` and its public subpackages (what a
  user writes ``from golem... import``; the goal is at most 200);
- ``__all__`` names in all: the sum over every module that has one (issue 33 counted 665);
- modules with an ``__all__``: a re-exporting package has one, an implementation module none;
- exception modules: modules that define an exception class (a base named ``*Error``,
  ``*Exception`` or one of golem's own exceptions).

Compare main with a branch: ``benchmarks/public_names.py /work/main/golem golem``.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

#: The packages and modules whose ``__all__`` is what a user writes (DESIGN.md's Public API).
PUBLIC = (
    "golem",
    "golem.errors",
    "golem.models",
    "golem.history",
    "golem.history.tokens",
    "golem.mcp",
    "golem.client",
    "golem.worker",
    "golem.workflows",
    "golem.serve",
    "golem.storage",
    "golem.testing",
    "golem.wire",
)


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_names(tree: ast.Module) -> list[str] | None:
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            value = node.value
            if isinstance(value, ast.List | ast.Tuple):
                return [e.value for e in value.elts if isinstance(e, ast.Constant)]
    return None


def defines_exception(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
                if name.endswith(("Error", "Exception")) or name in ("ToolFailed", "Canceled"):
                    return True
    return False


def measure(root: Path) -> dict[str, int]:
    public: set[str] = set()
    total = with_all = exception_modules = 0
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        names = all_names(tree)
        if names is not None:
            with_all += 1
            total += len(names)
            if module_name(root, path) in PUBLIC:
                public.update(names)
        exception_modules += defines_exception(tree)
    return {
        "public names (union of public packages' __all__)": len(public),
        "__all__ names in all modules": total,
        "modules with an __all__": with_all,
        "modules defining an exception": exception_modules,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = Path(__file__).resolve().parent.parent / "golem"
    parser.add_argument("roots", nargs="*", type=Path, default=[default])
    roots = [r.resolve() for r in parser.parse_args().roots]
    figures = [measure(r) for r in roots]
    width = max(len(k) for k in figures[0])
    print(f"{'':{width}}  " + "  ".join(f"{r!s:>24}" for r in roots))
    for key in figures[0]:
        print(f"{key:{width}}  " + "  ".join(f"{f[key]:>24}" for f in figures))


if __name__ == "__main__":
    main()
