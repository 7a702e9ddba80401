"""Cycles in the import graph of app/, strategies/ and bench/, and imports that cross a layer the wrong way.

    python3 scripts/import_cycles.py [ROOT]        # ROOT: a checkout (default: this one)

Reads the sources (nothing is imported): every `import` and `from ... import`, wherever it is (module level, inside
a function, under `if TYPE_CHECKING:`), resolved to the project's modules; a package's __init__ re-exporting its own
modules is no cycle. The layers: strategies/ imports nothing from app/ or bench/; app/ nothing from bench/ or tests/;
bench/ nothing from tests/ (tests/app/test_structure.py holds these as tests).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGES = ("strategies", "app", "bench", "tests")
# What each package may not import, at all.
FORBIDDEN = {"strategies": ("app", "bench", "tests"), "app": ("bench", "tests"), "bench": ("tests",)}


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(root: Path, path: Path) -> set[str]:
    """Every module name `path` imports, anywhere in it, absolute (relative imports resolved)."""
    name = module_name(root, path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([node.module] if node.module else [])])
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def imports(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    """Per module of `packages`: the project modules it imports, anywhere in it."""
    modules = {module_name(root, p): p for package in packages for p in (root / package).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        graph[name] = {
            target
            for target in imported(root, path)
            if target in modules and target != name and not target.startswith(name + ".")
        }
    return graph


def crossings(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(importer, imported) pairs that break FORBIDDEN."""
    return sorted(
        (name, target)
        for name, targets in graph.items()
        for target in targets
        for banned in FORBIDDEN.get(name.split(".")[0], ())
        if target == banned or target.startswith(banned + ".")
    )


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def main() -> None:
    root = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]
    graph = imports(root)
    print("import cycles (every import):", cycles(graph) or "none")
    print("imports across a layer:", crossings(graph) or "none")


if __name__ == "__main__":
    main()
