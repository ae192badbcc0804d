"""The package layers import only downwards: catalog -> models -> solvers -> designer.

catalog imports none of models/solvers/designer; models none of solvers/designer;
solvers not designer. calibration/ (published runs and the vTrain set, for bench/ and the
tests) stands beside the chain: it imports catalog and models only, and no layer imports it.
Checked statically with ast, so imports inside functions and under TYPE_CHECKING count too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("catalog", "models", "solvers", "designer")
RANK = {name: i for i, name in enumerate(LAYERS)}
# what each package may import: its own layer and those below; calibration/ what models/ may
ALLOWED = {name: set(LAYERS[: i + 1]) for i, name in enumerate(LAYERS)}
ALLOWED["calibration"] = {"catalog", "models", "calibration"}
PACKAGES = (*LAYERS, "calibration")


def imported_packages(source: str, filename: str = "<string>") -> set[str]:
    """Top-level names of the project's packages that ``source`` imports (absolute imports)."""
    tree = ast.parse(source, filename=filename)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative import: stays inside its own package
                continue
            names = [node.module or ""]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top in ALLOWED:
                found.add(top)
    return found


def layer_violations(package: str, source: str, filename: str = "<string>") -> list[str]:
    """Imports of ``package``'s file that reach into a higher layer (or into calibration/)."""
    return sorted(p for p in imported_packages(source, filename) if p not in ALLOWED[package])


def package_files(package: str) -> list[Path]:
    root = ROOT / package
    if not root.is_dir():
        return []
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


ALL_FILES = [(pkg, path) for pkg in PACKAGES for path in package_files(pkg)]


def test_every_layer_is_present():
    """Each layer has files, so test_imports_flow_downwards checks all four (solvers importing
    designer included): an empty or renamed layer fails here instead of checking nothing."""
    for pkg in PACKAGES:
        assert package_files(pkg), f"{pkg}/ has no Python files"


@pytest.mark.parametrize(
    "package,path", ALL_FILES, ids=[str(path.relative_to(ROOT)) for _, path in ALL_FILES]
)
def test_imports_flow_downwards(package, path):
    source = path.read_text(encoding="utf-8")
    bad = layer_violations(package, source, str(path))
    assert not bad, (
        f"{path.relative_to(ROOT)} ({package}) imports higher layer(s): {', '.join(bad)}"
    )


# --- the checker itself ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "package,source,expected",
    [
        ("catalog", "import models\n", ["models"]),
        ("catalog", "from designer.cli import main\n", ["designer"]),
        ("models", "from solvers import cpsat\n", ["solvers"]),
        ("models", "def f():\n    import designer.numbers\n", ["designer"]),
        (
            "models",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from solvers import x\n",
            ["solvers"],
        ),
        ("solvers", "import designer\n", ["designer"]),
        ("models", "from catalog.specs import GPUSpec\nimport yaml\n", []),
        ("solvers", "from models import evaluate\nfrom catalog import load_catalog\n", []),
        ("designer", "import catalog, models, solvers\n", []),
        ("models", "from . import comm\nfrom .spec import TransformerSpec\n", []),
        ("catalog", "import modelsx\nimport designer_extra\n", []),
        ("calibration", "from models.evaluate import x\nfrom catalog import y\n", []),
        ("calibration", "from solvers import Scenario\n", ["solvers"]),
        ("models", "from calibration.published import read_runs\n", ["calibration"]),
        ("designer", "from calibration import vtrain\n", ["calibration"]),
    ],
)
def test_checker_detects_upward_imports(package, source, expected):
    assert layer_violations(package, source) == expected


# --- folders inside the packages (issue 32 item 3) ------------------------------------------

# each folder's modules never import these (the package docstrings say so); written as
# paths, so that /work/wt/restructure.py (which rewrites the dotted names of the old flat
# modules that are packages now) leaves them alone
_NEVER = {
    "solvers/families": (
        "solvers/cpsat",
        "solvers/screen",
        "solvers/explain",
        "solvers/exhaustive",
    ),
    "solvers/screen": ("solvers/cpsat", "solvers/exhaustive", "solvers/explain"),
    "solvers/cpsat": ("solvers/exhaustive", "solvers/explain"),
    "designer/question": ("designer/output", "designer/report", "designer/cli", "designer/options"),
    "designer/output": ("designer/report", "designer/cli", "designer/options"),
    "designer/launch": ("designer/cli", "designer/question", "designer/report"),
}
NEVER_IMPORTS = {
    k.replace("/", "."): tuple(n.replace("/", ".") for n in v) for k, v in _NEVER.items()
}
REPORT = "designer/report".replace("/", ".")


def _inside(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def folder_violations(graph: dict[str, set[str]], rules: dict[str, tuple[str, ...]]) -> list[str]:
    """``module -> target`` for each import a folder's rule forbids."""
    return sorted(
        f"{m} -> {t}"
        for m, targets in graph.items()
        for folder, never in rules.items()
        if _inside(m, folder)
        for t in targets
        if any(_inside(t, n) for n in never)
    )


def name_clashes(paths: list[Path]) -> list[str]:
    """Modules (and subpackages) of one folder whose names differ by a plural or where one
    extends the other (``report.py`` beside ``report_data.py``), and module names anywhere
    that differ by a plural (``result.py``, ``results.py``)."""
    folders: dict[Path, set[str]] = {}
    stems: set[str] = set()
    for p in paths:
        if p.stem in ("__init__", "__main__"):
            folders.setdefault(p.parent.parent, set()).add(p.parent.name)
            continue
        folders.setdefault(p.parent, set()).add(p.stem)
        stems.add(p.stem)
    found = [
        f"{folder.as_posix()}: {a}, {b}"
        for folder, names in folders.items()
        for a in sorted(names)
        for b in sorted(names)
        if a != b and (b == a + "s" or b.startswith(a + "_"))
    ]
    return sorted(found + [f"{a}.py, {a}s.py" for a in sorted(stems) if a + "s" in stems])


def test_folders_import_what_their_docstrings_allow():
    from test_import_cycles import GRAPH  # the project's import graph, built once there

    assert not folder_violations(GRAPH, NEVER_IMPORTS)
    # only the command line imports designer/report/
    importers = {m for m, ts in GRAPH.items() if any(_inside(t, REPORT) for t in ts)}
    assert {m for m in importers if not _inside(m, REPORT)} == {"designer.cli"}


def test_no_names_that_differ_by_a_plural_or_a_prefix():
    paths = [path.relative_to(ROOT) for _, path in ALL_FILES]
    assert not name_clashes(paths)


def test_every_package_says_what_it_holds_and_may_import():
    inits = [path for _, path in ALL_FILES if path.name == "__init__.py"]
    assert len(inits) >= 12
    for path in inits:
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        assert "May import" in doc, (
            f"{path.relative_to(ROOT)}'s docstring says not what it may import"
        )


def test_checkers_find_folder_and_name_problems():
    graph = {"solvers.screen.bounds": {"solvers.cpsat.model"}, "solvers.cpsat.model": set()}
    assert folder_violations(graph, NEVER_IMPORTS) == [
        "solvers.screen.bounds -> solvers.cpsat.model"
    ]
    assert not folder_violations({"solvers.cpsat.model": {"solvers.screen.bounds"}}, NEVER_IMPORTS)
    assert name_clashes([Path("d/question.py"), Path("d/questions.py")]) == [
        "d: question, questions",
        "question.py, questions.py",
    ]
    assert name_clashes([Path("d/report.py"), Path("d/report_data.py")]) == [
        "d: report, report_data"
    ]
    assert name_clashes([Path("d/report.py"), Path("d/report/__init__.py")]) == []
    assert name_clashes([Path("s/result.py"), Path("d/results.py")]) == ["result.py, results.py"]
    assert name_clashes([Path("s/cpsat/model.py"), Path("s/cpsat/solve.py")]) == []
