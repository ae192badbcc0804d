"""Shared test helpers."""

from __future__ import annotations

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
