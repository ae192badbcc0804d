"""bench/agreement.py --full's limits: CP-SAT stops at a deterministic effort (the same
answer whatever the machine's load), and the wall clock is only a backstop whose questions
count as not proved."""

from __future__ import annotations

from helpers import load_bench

agreement = load_bench("agreement.py", "bench_agreement_limits")

SEED = 1  # full-size, accepted by the CLI, top 2: proved in about a second alone


def test_the_effort_limits_cpsat_not_the_wall_clock():
    starved = agreement.run_full(SEED, effort=1e-4, exhaustive=False)
    assert starved["status"] == "unknown" and not starved["proved"]
    assert not starved["wall"]  # the effort stopped it, long before the backstop
    full = agreement.run_full(SEED, exhaustive=False)
    assert full["status"] == "optimal" and full["proved"] and not full["wall"]


def test_a_question_at_the_wall_backstop_is_not_proved():
    row = agreement.run_full(SEED, wall_s=0.0, exhaustive=False)
    assert row["wall"] and not row["proved"]
    assert "NOT PROVED (wall)" in agreement._proof(row)
