"""Shared test helpers."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from designer.cli import main


def run_main(capsys, args: list[str]) -> tuple[int, str, str]:
    """Call designer.cli.main like the console script; return (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as info:
        main(args)
        raise SystemExit(0)  # main returns normally on success
    code = info.value.code
    code = 0 if code is None else code
    out, err = capsys.readouterr()
    return code, out, err


def load_bench(script: str, module_name: str) -> ModuleType:
    """Import a script of bench/ (not a package) as ``module_name``."""
    path = Path(__file__).resolve().parent.parent / "bench" / script
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module
