"""No import cycles in catalog/, models/, solvers/, designer/ and calibration/ (issue 32).

The module import graph is built statically with ``ast``: module-level imports and
imports inside functions count (those under ``if TYPE_CHECKING:``, read by the type
checker only, do not: annotations may name a type of a higher floor), and ``from pkg import name`` points
at the submodule ``pkg.name`` when there is one (else at ``pkg``'s ``__init__``). Importing
``pkg.sub`` runs ``pkg/__init__.py`` first, but that implicit edge is not drawn: a package's
``__init__`` that re-exports its modules would otherwise close a loop with every module in it.
tests/test_layers.py checks the direction between packages; this file checks every cycle,
inside a package as well as between them, and prints the modules of the first one found.

A function-local import is allowed only where it keeps the solver stack (OR-Tools, pandas,
numpy) out of commands that never solve; such an import carries the comment ``# lazy:``
on its line or the line above, saying so.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("catalog", "models", "solvers", "designer", "calibration")
LAZY_MARK = "# lazy:"
# the packages whose function-local imports must say why (designer/'s ~60, most of them the
# CLI's per-command imports, are not reviewed yet: issue 32)
LAZY_CHECKED = PACKAGES
# the most import floors solvers/ may have (issue 32; 14 before the CP-SAT build's parts
# became siblings and Shape/Config/Plan moved to solvers/decisions.py)
SOLVER_FLOORS = 7


def module_name(path: Path, root: Path = ROOT) -> str:
    """``solvers/families/base.py`` -> ``solvers.families.base``; ``pkg/__init__.py`` -> ``pkg``."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules(root: Path = ROOT, packages: Iterable[str] = PACKAGES) -> dict[str, Path]:
    """Every module of the project's packages by dotted name."""
    found: dict[str, Path] = {}
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            if "__pycache__" not in path.parts:
                found[module_name(path, root)] = path
    return found


def _resolve_relative(current: str, is_package: bool, level: int, module: str | None) -> str:
    """The absolute name a relative ``from ...module import`` in ``current`` refers to."""
    base = current.split(".")
    if not is_package:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def _target(name: str, known: set[str]) -> str | None:
    """The longest project module that ``name`` (a dotted import path) lies in."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in known:
            return candidate
        parts.pop()
    return None


def _is_type_checking(test: ast.expr) -> bool:
    """``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``): imports for annotations only."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(
    current: str, source: str, known: set[str], is_package: bool = False
) -> list[tuple[str, int, bool]]:
    """(imported project module, line, inside a function) for each import in ``source``."""
    tree = ast.parse(source)
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            local = in_function or isinstance(
                child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
            )
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                visit_else(child, in_function)
                continue
            if isinstance(child, ast.Import):
                for alias in child.names:
                    target = _target(alias.name, known)
                    if target:
                        found.append((target, child.lineno, in_function))
            elif isinstance(child, ast.ImportFrom):
                base = (
                    _resolve_relative(current, is_package, child.level, child.module)
                    if child.level
                    else child.module or ""
                )
                for alias in child.names:
                    sub = f"{base}.{alias.name}"
                    target = sub if sub in known else _target(base, known)
                    if target:
                        found.append((target, child.lineno, in_function))
            visit(child, local)

    def visit_else(node: ast.If, in_function: bool) -> None:
        for child in node.orelse:
            visit(ast.Module(body=[child], type_ignores=[]), in_function)

    visit(tree, False)
    return found


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the project modules it imports (self-imports dropped). A package whose
    ``__init__`` discovers its modules (``pkgutil.iter_modules(__path__)``, the family
    registry) imports each of them."""
    known = set(modules)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        source = path.read_text(encoding="utf-8")
        edges = imports_of(name, source, known, path.stem == "__init__")
        graph[name] = {target for target, _, _ in edges if target != name}
        if path.stem == "__init__" and "iter_modules(__path__)" in source:
            graph[name] |= {m for m in known if m.rpartition(".")[0] == name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as ``[a, b, ..., a]``, or None (iterative depth-first search)."""
    state: dict[str, int] = {}  # 1 on the current path, 2 finished
    for start in sorted(graph):
        if state.get(start):
            continue
        path: list[str] = [start]
        stack = [iter(sorted(graph[start]))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
                continue
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if not state.get(nxt) and nxt in graph:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph[nxt])))
    return None


def module_floors(graph: dict[str, set[str]], prefix: str) -> dict[str, int]:
    """Each module's floor in its package: 1 + the highest floor of the package's modules it
    imports (a module importing nothing of the package is floor 1). Needs a DAG."""
    mine = {m for m in graph if m == prefix or m.startswith(prefix + ".")}
    inside = {m: graph[m] & mine for m in mine}
    depth: dict[str, int] = {}

    def level(mod: str) -> int:
        if mod not in depth:
            depth[mod] = 1 + max((level(t) for t in inside.get(mod, ())), default=0)
        return depth[mod]

    return {m: level(m) for m in sorted(inside)}


def floors(graph: dict[str, set[str]], prefix: str) -> int:
    """Import floors of a package: the number of modules on the longest import path among
    its own modules."""
    return max(module_floors(graph, prefix).values(), default=0)


def floors_report(graph: dict[str, set[str]], prefix: str) -> str:
    """The package's modules floor by floor, highest first, and one longest import path."""
    per = module_floors(graph, prefix)
    lines = []
    for level in sorted(set(per.values()), reverse=True):
        lines.append(f"  {level}: " + ", ".join(m for m in per if per[m] == level))
    path = [max(per, key=lambda m: (per[m], m))] if per else []
    while path and per[path[-1]] > 1:
        below = [t for t in graph[path[-1]] if per.get(t) == per[path[-1]] - 1]
        path.append(sorted(below)[0])
    return "\n".join(lines + ["  longest: " + " -> ".join(path)])


MODULES = project_modules()
GRAPH = import_graph(MODULES)


def test_every_package_is_read():
    """The graph covers every package (a renamed folder fails here, not silently)."""
    for pkg in PACKAGES:
        assert any(m == pkg or m.startswith(pkg + ".") for m in MODULES), pkg
    assert sum(len(ts) for ts in GRAPH.values()) > 100


def test_no_import_cycles():
    cycle = find_cycle(GRAPH)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def _says_lazy(lines: list[str], line: int) -> bool:
    """The import on ``line`` (1-based) carries LAZY_MARK, or the block of imports and
    comments right above it does."""
    i = line - 1
    if LAZY_MARK in lines[i]:
        return True
    while i > 0:
        i -= 1
        above = lines[i].strip()
        if LAZY_MARK in above:
            return True
        if not above.startswith(("#", "from ", "import ", ")")) and not above.endswith(","):
            return False
    return False


def test_function_local_imports_say_why():
    """Each import inside a function keeps the solver stack out of commands that never
    solve, and says so with a ``# lazy:`` comment on its line or the line above."""
    known = set(MODULES)
    unmarked = []
    for name, path in MODULES.items():
        if name.split(".")[0] not in LAZY_CHECKED:
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        source = "\n".join(lines)
        for _, line, local in imports_of(name, source, known, path.stem == "__init__"):
            if not local:
                continue
            if not _says_lazy(lines, line):
                unmarked.append(f"{path.relative_to(ROOT)}:{line}")
    assert not unmarked, "function-local imports without a '# lazy:' reason: " + ", ".join(
        sorted(set(unmarked))
    )


def test_solvers_have_at_most_seven_floors():
    """The longest import path inside solvers/ has at most 7 modules (issue 32); a failure
    prints every module's floor and the longest path."""
    found = floors(GRAPH, "solvers")
    assert found <= SOLVER_FLOORS, (
        f"solvers/ has {found} import floors, at most {SOLVER_FLOORS} allowed:\n"
        + floors_report(GRAPH, "solvers")
    )


# --- the checker itself ----------------------------------------------------------------------

KNOWN = {"p", "p.a", "p.b", "p.sub", "p.sub.c"}


@pytest.mark.parametrize(
    "current,source,is_package,expected",
    [
        ("p.a", "import p.b\n", False, [("p.b", 1, False)]),
        ("p.a", "from p import b\n", False, [("p.b", 1, False)]),
        ("p.a", "from p import not_a_module\n", False, [("p", 1, False)]),
        ("p.a", "from p.b import thing\n", False, [("p.b", 1, False)]),
        ("p.a", "from . import b\n", False, [("p.b", 1, False)]),
        ("p.sub.c", "from .. import a\n", False, [("p.a", 1, False)]),
        ("p.sub", "from . import c\n", True, [("p.sub.c", 1, False)]),
        ("p.a", "def f():\n    from p.b import x\n", False, [("p.b", 2, True)]),
        ("p.a", "import numpy\nfrom os import path\n", False, []),
    ],
)
def test_checker_reads_imports(current, source, is_package, expected):
    assert imports_of(current, source, KNOWN, is_package) == expected


def test_checker_finds_cycles_and_floors():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert floors({"p.a": {"p.b"}, "p.b": {"p.c", "q"}, "p.c": set(), "q": set()}, "p") == 3
    assert floors({"p": {"p.a"}, "p.a": set(), "pq.b": {"p"}}, "p") == 2


def test_floors_report_names_each_floor_and_the_longest_path():
    graph = {"p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": set(), "p.d": {"p.c"}}
    assert module_floors(graph, "p") == {"p.a": 3, "p.b": 2, "p.c": 1, "p.d": 2}
    assert floors_report(graph, "p").splitlines() == [
        "  3: p.a",
        "  2: p.b, p.d",
        "  1: p.c",
        "  longest: p.a -> p.b -> p.c",
    ]
