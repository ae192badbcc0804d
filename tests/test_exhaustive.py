"""solvers/exhaustive.py: the exhaustive solver (the oracle the differential tests compare
CP-SAT with) keeps its time limit (issue 20's reproduction 18)."""

from __future__ import annotations

import time

from helpers import one_line, run_main


def test_the_exhaustive_solver_keeps_its_time_limit(capsys):
    """Reproduction 18: --solver exhaustive --time-limit 0.01 ran 15 s and said optimal; it
    now stops between shapes and says what it has (unknown here: exit 1, no plan)."""
    from solvers import space

    # a space kept from an earlier test would enumerate within the limit and let the first
    # shape finish (feasible): start cold, as the command does
    space._SPACES.clear()
    args = ["optimize", "--budget", "30M", "--solver", "exhaustive", "--time-limit", "0.01"]
    start = time.perf_counter()
    code, out, err = run_main(capsys, [*args, "--no-explain"])
    assert time.perf_counter() - start < 10
    assert "exhaustive: optimal" not in out and "status: optimal" not in out
    if code == 1:  # stopped before a shape finished (the usual case)
        assert "exhaustive: unknown" in out
        assert "time limit" in one_line(err)
    else:  # a warm process may finish its first shape within 0.01 s: a plan, not proved
        assert code == 0 and "exhaustive: feasible" in out, (code, out, err)
