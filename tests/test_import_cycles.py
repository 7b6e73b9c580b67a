"""No import cycles in ``dsh/`` and ``plugins/``, function-local imports included.

The graph is read from the source with ``ast``, not from what Python happened to
import: a cycle hidden behind an import inside a function is still a cycle (the two
modules cannot be understood, tested or loaded one without the other), so every
``import`` and ``from … import`` counts wherever it stands, relative ones (``from .
import x``) resolved against their package. Imports under ``if TYPE_CHECKING:`` count
too: they are never run, but a reader who follows a type there must understand what it
names, and a circle of types is a circle all the same (the first test checks the
graph without them as well, so a run-time cycle is told apart from a type-level one).

An edge goes to the module named, the most specific that exists: ``from dsh.session
import SessionEvent`` to ``dsh.session`` (the package's ``__init__``), ``from dsh
import kernel`` to ``dsh.kernel``. Parent packages that Python initialises on the way
are not edges of their own: every module would otherwise depend on its package.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterator, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TREES = ("dsh", "dsh_plugins")  # dsh_plugins: the checkout's symlink to plugins/


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def sources(root: Path = ROOT, trees: tuple[str, ...] = TREES) -> dict[str, tuple[str, bool]]:
    """Every module under ``trees``: its name, and its source and whether it is a
    package's ``__init__``."""
    found = {}
    for tree in trees:
        for path in sorted((root / tree).rglob("*.py")):
            found[module_name(path, root)] = (path.read_text(), path.name == "__init__.py")
    return found


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(tree: ast.AST, *, types: bool = True) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth; without ``types``, not those under ``if
    TYPE_CHECKING:`` (its ``else:`` runs, so it counts either way)."""
    for node in ast.iter_child_nodes(tree):
        if not types and isinstance(node, ast.If) and _type_checking(node.test):
            for other in node.orelse:
                yield from imports(ast.Module(body=[other], type_ignores=[]), types=types)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        yield from imports(node, types=types)


def _known(name: str, modules: Mapping[str, object]) -> str | None:
    """The most specific module of ours that ``name`` names: itself, else a parent
    (``dsh.x.Thing`` -> ``dsh.x``); None when it is not ours."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def edges(
    name: str,
    source: str,
    is_package: bool,
    modules: Mapping[str, object],
    *,
    types: bool = True,
) -> dict[str, int]:
    """The modules of ours that module ``name`` imports, each with its first line."""
    package = name if is_package else name.rpartition(".")[0]
    found: dict[str, int] = {}
    for node in imports(ast.parse(source), types=types):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                parent = ".".join(base + ([node.module] if node.module else []))
            else:
                parent = node.module or ""
            # `from p import x`: the module p.x when there is one, else a name in p.
            targets = [
                f"{parent}.{alias.name}" if f"{parent}.{alias.name}" in modules else parent
                for alias in node.names
            ]
        for target in targets:
            known = _known(target, modules)
            if known is not None and known != name:
                found.setdefault(known, node.lineno)
    return found


def import_graph(
    modules: Mapping[str, tuple[str, bool]], *, types: bool = True
) -> dict[str, dict[str, int]]:
    return {
        name: edges(name, source, is_package, modules, types=types)
        for name, (source, is_package) in modules.items()
    }


def cycles(graph: Mapping[str, Mapping[str, int]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for start in graph:
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(graph[start]))]
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
                    work.append((child, iter(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def shortest_loop(graph: Mapping[str, Mapping[str, int]], component: frozenset[str]) -> str:
    """One loop through the component, shortest from its first module, with the line
    of each import: ``a:12 -> b:3 -> a``."""
    start = min(component)
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for child in sorted(graph[node]):
            if child == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                path.reverse()
                steps = [
                    f"{a}:{graph[a][b]}" for a, b in zip(path, [*path[1:], start], strict=True)
                ]
                return " -> ".join([*steps, start])
            if child in component and child not in came_from:
                came_from[child] = node
                queue.append(child)
    raise AssertionError(f"no loop through {start}")  # a component always has one


def describe(graph: Mapping[str, Mapping[str, int]], component: frozenset[str]) -> str:
    return f"{len(component)} modules: {shortest_loop(graph, component)}"


def test_dsh_and_plugins_have_no_import_cycles() -> None:
    modules = sources()
    assert len(modules) > 100
    running = import_graph(modules, types=False)
    found = [describe(running, component) for component in cycles(running)]
    assert found == [], "import cycles (function-local imports count):\n" + "\n".join(found)
    # Each layer declares its own hooks and service keys, so no type leads back up.
    graph = import_graph(modules)
    found = [describe(graph, component) for component in cycles(graph)]
    assert found == [], "type-level import cycles (TYPE_CHECKING counts):\n" + "\n".join(found)


def test_the_checker_sees_every_kind_of_import() -> None:
    """A checker that sees nothing passes: prove it finds cycles made each way."""

    def found(files: dict[str, str], *, types: bool = False) -> list[str]:
        modules = {
            name.removesuffix(".__init__"): (source, name.endswith("__init__"))
            for name, source in files.items()
        }
        graph = import_graph(modules, types=types)
        return sorted(shortest_loop(graph, c) for c in cycles(graph))

    # Module level one way, inside a function the other.
    assert found({"p.a": "import p.b\n", "p.b": "def f():\n    from p.a import thing\n"}) == [
        "p.a:1 -> p.b:2 -> p.a"
    ]
    # `from . import x` and `from .x import y`, relative to a package and a module.
    assert found(
        {
            "p.__init__": "from . import a\n",
            "p.a": "from .b import thing\n",
            "p.b": "def f():\n    from p import a\n",
        }
    ) == ["p.a:1 -> p.b:2 -> p.a"]
    # A package re-exporting its modules, which import each other: no edge to the package.
    siblings = {"p.__init__": "from .a import x\n", "p.a": "from . import b\n", "p.b": ""}
    assert found(siblings) == []
    # Three modules, one import inside a method of a class.
    assert found(
        {
            "p.a": "from p.b import x\n",
            "p.b": "import p.c\n",
            "p.c": "class C:\n    def m(self):\n        import p.a\n",
        }
    ) == ["p.a:1 -> p.b:1 -> p.c:3 -> p.a"]
    # TYPE_CHECKING imports are no run-time dependency, but a type-level one; its else
    # branch is both.
    only_types = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from p.a import A\n"
    assert found({"p.a": "import p.b\n", "p.b": only_types}) == []
    assert found({"p.a": "import p.b\n", "p.b": only_types}, types=True) == [
        "p.a:1 -> p.b:3 -> p.a"
    ]
    otherwise = "import typing\nif typing.TYPE_CHECKING:\n    pass\nelse:\n    import p.a\n"
    assert found({"p.a": "import p.b\n", "p.b": otherwise}) == ["p.a:1 -> p.b:5 -> p.a"]
    # Modules outside the tree, and a module importing itself, make no cycle.
    assert found({"p.a": "import os\nimport p.a\nfrom p.a import x\n"}) == []
