"""lowp's import graph, read from the source with ast (every import, a lazy one inside a function too).

Used by tests/test_layout.py, and runnable as a script (`python tests/import_graph.py`) to print the circles and
the modules per folder. A module is a node; an edge A -> B means A's text imports B:
- `import a.b.c` and `from a.b import c` where a.b.c is a module: an edge to that module;
- `from a.b import name` where name is not a module: an edge to a.b (its __init__).
An import of a submodule runs its parents' __init__ too, but every Python module has that edge, so, like
import-linter and grimp, the graph leaves it out: a package that imports its own submodules back through a name
still shows (`from . import x` inside x's package, where x is a name defined by the __init__).
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Where each import package's folder is in the checkout (pyproject's package-dir): lowp's components sit at the
# top level but install as subpackages of lowp.
PACKAGE_DIRS = {
    "lowp": ROOT / "lowp",
    "lowp.isa_models": ROOT / "isa_models",
    "lowp.kernels": ROOT / "kernels",
    "lowp.emulator": ROOT / "emulator",
    "lowp.conformance": ROOT / "conformance",
}


def modules() -> dict[str, Path]:
    """Every lowp module by its dotted name (a package by its own name, from its __init__.py)."""
    found: dict[str, Path] = {}
    for package, folder in PACKAGE_DIRS.items():
        for path in folder.rglob("*.py"):
            relative = path.relative_to(folder).with_suffix("")
            parts = [p for p in relative.parts]
            if any(p in ("tests", "__pycache__") or p.startswith("test_") for p in parts):
                continue
            if not all((folder.joinpath(*parts[:i]) / "__init__.py").exists() for i in range(1, len(parts))):
                continue   # a folder of data (a mutation suite's models), not a package
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join([package, *parts])
            # a component folder nested in lowp/ is not the component (the checkout's lowp/ holds only the root)
            if name in found and found[name] != path:
                continue
            found[name] = path
    return found


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The lowp modules `module`'s text imports, at any depth of its code."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    found: set[str] = set()

    def nearest(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("lowp"):
                    found.add(nearest(alias.name))
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(module, is_package, node)
            if not source.startswith("lowp"):
                continue
            for alias in node.names:
                child = f"{source}.{alias.name}"
                found.add(child if child in known else nearest(source))
    found.discard(None)
    found.discard(module)
    return found


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports_of(name, path, known) for name, path in known.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
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

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(found)


def a_cycle_in(component: list[str], edges: dict[str, set[str]]) -> list[str]:
    """One closed path through a circle's modules, to name it in a failure."""
    members = set(component)
    start = component[0]
    path, seen = [start], {start}
    while True:
        nxt = sorted(t for t in edges[path[-1]] if t in members)
        back = [t for t in nxt if t in path]
        if back:
            return path[path.index(back[0]):] + [back[0]]
        step = next(t for t in nxt if t not in seen)
        path.append(step)
        seen.add(step)


def modules_per_folder() -> dict[Path, int]:
    """How many .py modules each package folder holds (its __init__ not counted)."""
    counts: dict[Path, int] = {}
    for path in modules().values():
        if path.name != "__init__.py":
            counts[path.parent] = counts.get(path.parent, 0) + 1
    return counts


if __name__ == "__main__":
    edges = graph()
    found = circles(edges)
    print(f"{len(edges)} modules, {sum(map(len, edges.values()))} imports, {len(found)} circle(s)")
    for component in found:
        print(f"- {len(component)} modules: " + " -> ".join(a_cycle_in(component, edges)))
        print("    " + ", ".join(component))
    for folder, count in sorted(modules_per_folder().items(), key=lambda kv: -kv[1]):
        print(f"{count:4d}  {folder.relative_to(ROOT)}")
