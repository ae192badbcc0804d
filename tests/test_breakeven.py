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


def test_an_unknown_rival_is_blamed_on_against_and_an_unknown_candidate_on_gpu(capsys):
    """Both names are checked as one question's --gpu list; the error names the option the
    user typed the bad name into."""
    args = ["breakeven", "--model", "llama2-7b", "--tokens", "100B", "--budget", "2M"]
    code, _, err = run_main(capsys, [*args, "--gpu", "h200", "--against", "h100"])
    assert code == 2 and one_line(err).startswith("designer: error: --against: unknown GPU 'h100'")
    code, _, err = run_main(capsys, [*args, "--gpu", "h20", "--against", "h100-sxm"])
    assert code == 2 and one_line(err).startswith("designer: error: --gpu: unknown GPU 'h20'")
    # the rival among the suggestions for an unknown candidate is still --gpu's error
    code, _, err = run_main(capsys, [*args, "--gpu", "h100", "--against", "h100-sxm"])
    assert code == 2 and one_line(err).startswith("designer: error: --gpu: unknown GPU 'h100'")
