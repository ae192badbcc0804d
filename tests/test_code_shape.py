"""The code's shape rules (issue 19): small functions in solvers/ and designer/, and a
thin CLI. Checked statically with ast, decorators included in a function's length."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_FUNCTION_LINES = 80
MAX_CLI_LINES = 500


def long_functions(source: str, limit: int, filename: str = "<string>") -> list[str]:
    """``name (n lines)`` of every function longer than ``limit`` lines (decorators counted)."""
    out = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            lines = (node.end_lineno or node.lineno) - start + 1
            if lines > limit:
                out.append(f"{node.name} ({lines} lines)")
    return out


@pytest.mark.parametrize(
    "path",
    sorted(p for pkg in ("solvers", "designer") for p in (ROOT / pkg).rglob("*.py")),
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_no_function_over_80_lines(path):
    assert long_functions(path.read_text(encoding="utf-8"), MAX_FUNCTION_LINES, str(path)) == []


def test_the_checker_sees_a_long_function_and_its_decorators():
    body = "\n".join(f"    x{i} = {i}" for i in range(79))
    source = f"@decorator\ndef f():\n{body}\n"  # 81 lines with its decorator
    assert long_functions(source, MAX_FUNCTION_LINES) == ["f (81 lines)"]
    assert long_functions(source.removeprefix("@decorator\n"), MAX_FUNCTION_LINES) == []


def test_the_cli_module_stays_thin():
    lines = (ROOT / "designer" / "cli.py").read_text(encoding="utf-8").count("\n")
    assert lines < MAX_CLI_LINES
