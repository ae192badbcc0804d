"""solvers/cpsat.py: the CP-SAT driver (its top-K cutoff; issue 20's checklist)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import OPTIMIZE_SLOW


@pytest.mark.slow
def test_a_wide_top_k_question_builds_a_valid_model():
    """``--top 20`` on this question ended in "internal error: invalid CP-SAT model (The sum of
    all variable domains do not fit on an int64_t)": the top-K cutoff was a variable of domain
    [0, 2^61]. It is now a linear constraint's bound: twenty plans, proved."""
    cmd = [sys.executable, "-m", "designer", *OPTIMIZE_SLOW, "--time-limit", "120", "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    assert answer["status"] == "optimal"
    assert len(answer["plans"]) == 20
