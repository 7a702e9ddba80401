"""Cycles in the import graph of app/ and strategies/, at run time and counting imports made for type checking.

    python3 scripts/import_cycles.py [ROOT]        # ROOT: a checkout (default: this one)

Reads the sources (nothing is imported): every `import` and `from ... import` at module level or under `if
TYPE_CHECKING:`, resolved to the project's modules; a package's __init__ re-exporting its own modules is no cycle.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGES = ("strategies", "app")


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(root: Path) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Per module: the project modules it imports at run time, and those it imports only for type checking."""
    modules = {module_name(root, p): p for package in PACKAGES for p in (root / package).rglob("*.py")}
    runtime: dict[str, set[str]] = {m: set() for m in modules}
    typing: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]

        def visit(nodes: list[ast.stmt], type_only: bool, name: str = name, package: str = package) -> None:
            for node in nodes:
                if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                    visit(node.body, True)
                    continue
                targets: list[str] = []
                if isinstance(node, ast.ImportFrom):
                    base = node.module or ""
                    if node.level:
                        up = package.split(".")[: len(package.split(".")) - node.level + 1]
                        base = ".".join([*up, *([node.module] if node.module else [])])
                    targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
                elif isinstance(node, ast.Import):
                    targets = [alias.name for alias in node.names]
                for target in targets:
                    if target in modules and target != name and not target.startswith(name + "."):
                        (typing if type_only else runtime)[name].add(target)

        visit(ast.parse(path.read_text()).body, False)
    return runtime, typing


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
    runtime, typing = imports(root)
    both = {name: runtime[name] | typing[name] for name in runtime}
    print("cycles at run time:", cycles(runtime) or "none")
    print("cycles with imports for type checking:", cycles(both) or "none")


if __name__ == "__main__":
    main()
