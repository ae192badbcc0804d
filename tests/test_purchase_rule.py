"""solvers/purchase_rule.py: nothing bought without a return (issue 31 item 3). Phase two
keeps a plan's layout and chooses its purchases again, every step of which saves more than
PURCHASE_TOLERANCE of its time; only on the time objective; ``settle`` applies it to a list
of plans in objective order."""

from __future__ import annotations

import pytest

from helpers import run_main
from solvers.purchase_rule import PURCHASE_TOLERANCE, idle_purchases, purchases_that_pay, settle


def test_the_tolerance_is_a_tenth_of_a_percent_of_the_time():
    assert PURCHASE_TOLERANCE == 1e-3  # bench/agreement.py REL_TOL: far below a spare's cost


def _405b_mi300x_plan(spares: float, storage: float):
    """The layout of the 405B $500M question's plan (issue 31) with given purchases."""
    from designer.question.build import build_scenario
    from solvers.plan import Config, build_plan
    from solvers.space import Shape

    s = build_scenario(model="llama3-405b", tokens=15e12, budget=500e6)
    shape = Shape(gpu="mi300x", tp=8, cp=1, pp=4, vp=4, micro_batch=1, recompute="none",
                  precision="bf16", split=(0, 0, True, True))  # fmt: skip
    return s, build_plan(s, Config(shape, "cx7-400g", 8, 512, 4, spares, storage))


def test_phase_two_drops_storage_that_saves_no_time_and_keeps_spares_that_pay():
    """Issue 31 item 3: 4 GB/s of storage on the 405B plan saves 0.016 of 88.6 days (under
    PURCHASE_TOLERANCE) for $18.43M: the cheapest equally fast purchases keep the 2 spares
    per 100 (3.3 days) and the facility's 1 GB/s; a plan without spares is left alone."""
    from solvers.purchase_rule import PURCHASE_TOLERANCE, idle_purchases, purchases_that_pay

    s, plan = _405b_mi300x_plan(2.0, 4.0)
    assert [what for what, _ in idle_purchases(s, plan)] == ["4 GB/s storage (against 2)"]
    settled = purchases_that_pay(s, plan)
    assert (settled.config.spares_per_100, settled.config.storage_gb_per_s) == (2.0, 1.0)
    assert settled.cost_usd == pytest.approx(plan.cost_usd - 18.432e6, rel=1e-3)
    assert settled.objective <= plan.objective * (1 + PURCHASE_TOLERANCE)
    assert not idle_purchases(s, settled)
    _, kept = _405b_mi300x_plan(2.0, 1.0)
    assert purchases_that_pay(s, kept) is kept
    _, none = _405b_mi300x_plan(0.0, 1.0)
    assert purchases_that_pay(s, none) is none and not idle_purchases(s, none)


def test_the_405b_question_buys_nothing_that_saves_no_time(capsys):
    """designer optimize --model llama3-405b --tokens 15T --budget 500M (the issue's
    example) bought $18.43M of storage "saving 0.0 days": now every purchase step of its
    plan saves more than the tolerance, and the explanation prices none at 0.0 days."""
    from designer.question.build import build_scenario
    from solvers.cpsat.solve import solve_cpsat
    from solvers.purchase_rule import idle_purchases

    s = build_scenario(model="llama3-405b", tokens=15e12, budget=500e6)
    plan = solve_cpsat(s).best
    assert plan is not None and not idle_purchases(s, plan)
    code, text, _ = run_main(
        capsys, ["optimize", "--model", "llama3-405b", "--tokens", "15T", "--budget", "500M"]
    )
    assert code == 0 and "saving 0.0 days" not in text


def test_the_cost_objective_keeps_every_purchase():
    """Under the cost objective a purchase pays in cost or meets the deadline: phase two
    does not run, and no step is called idle."""
    s, plan = _405b_mi300x_plan(2.0, 4.0)
    cost = s.with_changes(objective="cost")
    assert purchases_that_pay(cost, plan) is plan
    assert idle_purchases(cost, plan) == []
    assert settle(cost, [plan])[0] is plan


def test_settle_keeps_a_list_that_pays_and_sorts_a_settled_one():
    s, idle = _405b_mi300x_plan(2.0, 4.0)
    _, kept = _405b_mi300x_plan(2.0, 1.0)
    assert settle(s, []) == []
    plans = [kept]
    assert settle(s, plans) is plans  # nothing moved: the same list
    settled = settle(s, [idle, kept])
    assert [p.objective for p in settled] == sorted(p.objective for p in settled)
    assert all(not idle_purchases(s, p) for p in settled)
    assert {(p.config.spares_per_100, p.config.storage_gb_per_s) for p in settled} == {(2.0, 1.0)}
    layouts = {(p.config.shape, p.config.dp, p.config.microbatches) for p in settled}
    assert layouts == {(idle.config.shape, idle.config.dp, idle.config.microbatches)}


def test_idle_steps_say_what_each_saves_against_the_next_cheaper_level():
    s, plan = _405b_mi300x_plan(2.0, 4.0)
    ((what, saved),) = idle_purchases(s, plan)
    assert what == "4 GB/s storage (against 2)"
    _, cheaper = _405b_mi300x_plan(2.0, 2.0)
    days = plan.evaluation.time_to_train_days
    assert saved == pytest.approx(cheaper.evaluation.time_to_train_days - days, rel=1e-9)
    assert 0 <= saved <= PURCHASE_TOLERANCE * days


def test_a_purchase_that_saves_under_a_tenth_of_a_day_says_so_in_hours():
    """GPT-OSS-120B on $100M bought 3 hot spare servers "saving 0.0 days" (0.8 hours: the
    budget's remainder could buy no DP step of 32 GPUs): a purchase the plan makes saves
    time, so its saving is never printed as zero."""
    from designer.output.formats import _saved

    assert _saved(0.8 / 24) == "0.8 hours"
    assert _saved(0.0999) == "2.4 hours"
    assert _saved(0.1) == "0.1 days" and _saved(4.72) == "4.7 days"


def test_a_binding_family_that_saves_under_a_tenth_of_a_day_says_so_in_hours(capsys):
    """mt-nlg-530b on $200M is limited by nic_slots and memory, whose relaxations each
    save under 0.05 days: the explanation says how many hours, not "would save 0.0 days"."""
    code, text, _ = run_main(
        capsys,
        ["optimize", "--model", "mt-nlg-530b", "--tokens", "270B", "--budget", "200M",
         "--gpu", "h100-sxm"],
    )  # fmt: skip
    assert code == 0 and "would save 0.0 days" not in text and "saving 0.0 days" not in text
    head = text.split("Not limiting")[0]
    assert "one more NIC slot per server would save" in head and "hours" in head
