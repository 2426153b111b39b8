"""No import circles in codec, exporters and inspector: a module never reaches itself through its imports.

The graph is read from the sources with ``ast``, as text: every ``import`` statement counts, at module
level, inside a function (a lazy import) or under ``if TYPE_CHECKING:``, and a package's ``__init__``
importing one of its submodules is an edge like any other. A statement leads to the modules it spells:
``import a.b`` to ``a.b``; ``from a.b import c`` to ``a.b`` and, when ``c`` is a submodule, to ``a.b.c`` too.
So a submodule that takes a name or a sibling through its package (``from codec import safefile``) depends
on the package's ``__init__``, which imports the package's submodules: a module imports the module that
defines what it uses (``import codec.safefile as safefile``, ``from codec.safefile import ...``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from support.paths import ROOT

PACKAGES = ("codec", "exporters", "inspector")


def module_files(root: Path) -> dict[str, Path]:
    """Every module of PACKAGES under ``root``: dotted name -> file (a package is its ``__init__.py``; a C
    extension, such as ``codec._framing``, is its source and imports nothing of the tree)."""
    out = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")) + sorted((root / package).rglob("*.c")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def imported(node: ast.Import | ast.ImportFrom, name: str, is_package: bool, modules: dict[str, Path]) -> Iterator[str]:
    """The modules of the tree one import statement in module ``name`` names."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name
        return
    if node.level:
        base = name.split(".") if is_package else name.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    yield target
    for alias in node.names:
        if f"{target}.{alias.name}" in modules:
            yield f"{target}.{alias.name}"


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the modules of the tree it imports (anywhere in its text)."""
    modules = module_files(root)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        if path.suffix != ".py":
            graph[name] = set()
            continue
        is_package = path.name == "__init__.py"
        edges = graph.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                edges.update(t for t in imported(node, name, is_package, modules) if t in modules and t != name)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted, largest first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found, key=lambda c: (-len(c), c))


def a_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """One closed path through ``component`` (its first module back to itself), to name in a failure."""
    members = set(component)
    start = component[0]
    paths = {start: [start]}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v] & members):
            if w == start:
                return paths[v] + [start]
            if w not in paths:
                paths[w] = paths[v] + [w]
                queue.append(w)
    raise AssertionError(f"no cycle through {start}")


def test_the_graph_sees_every_kind_of_import(tmp_path: Path) -> None:
    """The reader of the graph itself: lazy, relative, TYPE_CHECKING and package imports are edges."""
    pkg = tmp_path / "codec"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from codec.a import x\n")
    (pkg / "a.py").write_text("def f():\n    from . import b\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from codec.sub import c\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "c.py").write_text("import codec\nfrom ..a import f\nfrom codec import _ext\n")
    (pkg / "_ext.c").write_text("")
    for other in PACKAGES[1:]:
        (tmp_path / other).mkdir()
    graph = import_graph(tmp_path)
    assert graph == {"codec": {"codec.a"}, "codec.a": {"codec", "codec.b"}, "codec.b": {"codec.sub.c", "codec.sub"},
                     "codec.sub": set(), "codec.sub.c": {"codec", "codec.a", "codec._ext"}, "codec._ext": set()}
    assert circles(graph) == [["codec", "codec.a", "codec.b", "codec.sub.c"]]
    assert a_cycle(graph, circles(graph)[0]) == ["codec", "codec.a", "codec"]  # `from . import b` names the package


def test_no_import_circles() -> None:
    graph = import_graph(ROOT)
    assert len(graph) > 100  # the tree was found
    found = circles(graph)
    assert not found, "import circles:\n" + "\n".join(
        f"  {len(c)} modules: {' -> '.join(a_cycle(graph, c))}" + (f"  (all: {', '.join(c)})" if len(c) > 2 else "")
        for c in found)


def top_level_names(path: Path) -> set[str] | None:
    """What ``from MODULE import NAME`` may take from a module file: its top-level definitions, assignments and
    imports (under ``if``/``try`` too); None when the module makes names at run time (``__getattr__``, ``*``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    names: set[str] = set()
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    return None
                names.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            todo.extend(node.body + getattr(node, "orelse", []) + getattr(node, "finalbody", [])
                        + [s for h in getattr(node, "handlers", []) for s in h.body])
    return None if "__getattr__" in names else names


def test_every_import_of_the_tree_names_what_is_there() -> None:
    """A lazy import (inside a function) runs only when its path does: one left naming a module that moved
    fails only there, for a user. Every import of a tree module names a module file of the tree, and every name
    it takes from one is defined there (or is a submodule, or a built extension)."""
    modules = module_files(ROOT)
    extensions = {".".join(p.relative_to(ROOT).with_suffix("").parts) for package in PACKAGES
                  for p in (ROOT / package).rglob("_*.cpp")}
    wrong = []
    for name, path in modules.items():
        if path.suffix != ".py":
            continue
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            target = next(imported(node, name, is_package, modules))
            if target.split(".")[0] not in PACKAGES:
                continue
            if target not in modules and target not in extensions:
                wrong.append(f"{path.relative_to(ROOT)}:{node.lineno}: no module {target}")
                continue
            if isinstance(node, ast.ImportFrom) and target in modules and modules[target].suffix == ".py":
                defined = top_level_names(modules[target])
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    if defined is not None and alias.name not in defined and sub not in modules \
                            and sub not in extensions:
                        wrong.append(f"{path.relative_to(ROOT)}:{node.lineno}: {target} has no {alias.name}")
    assert not wrong, "\n".join(wrong)
