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


def test_the_secondary_key_is_compared_where_the_objectives_tie():
    """bench/agreement.py compares the tie rule's other key (solvers/tie_rule.py) where two
    plans tie on the objective, and only there: CP-SAT's cost questions returned plans as
    cheap as the reference's but up to 2.5x slower, and the objectives alone agreed."""
    from types import SimpleNamespace

    def plan(objective: float, days: float, cost: float) -> SimpleNamespace:
        ev = SimpleNamespace(time_to_train_days=days)
        return SimpleNamespace(objective=objective, cost_usd=cost, evaluation=ev, num_gpus=8)

    cheap_slow, cheap_fast = plan(297_538, 188.73, 297_538), plan(297_538, 74.27, 297_538)
    assert not agreement.secondary_agree([cheap_slow], [cheap_fast], "cost")
    assert agreement.secondary_agree([cheap_fast], [cheap_fast], "cost")
    dearer = plan(300_000, 50.0, 300_000)  # no tie: the objectives' comparison decides
    assert agreement.secondary_agree([dearer], [cheap_fast], "cost")
    fast_dear, fast_cheap = plan(74.27, 74.27, 310_000), plan(74.27, 74.27, 297_538)
    assert not agreement.secondary_agree([fast_dear], [fast_cheap], "time")
