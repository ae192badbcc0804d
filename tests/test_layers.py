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
