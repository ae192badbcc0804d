"""designer/breakeven.py: the break-even price search. From issue 20's checklist
(reproduction 16)."""

from __future__ import annotations

from helpers import one_line, run_main


def test_breakeven_with_no_plan_on_either_side_exits_1(capsys):
    """Reproduction 16: neither GPU has a plan at any price searched; the contract's exit 1."""
    args = ["breakeven", "--model", "llama3-405b", "--budget", "10K", "--gpu", "h200"]
    code, _, err = run_main(capsys, [*args, "--against", "h100-sxm"])
    assert code == 1
    assert one_line(err).startswith("designer: infeasible: neither h200")
