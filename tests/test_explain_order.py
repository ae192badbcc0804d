"""solvers/explain.py's re-solve order (issue 34's speed target): a time question's
relaxed re-solve starts from the plan and asks the capped probe (is any plan faster?)
only when that re-solve stops at its effort. Checked against the order before it
(probe first, then the re-solve from the probe's plan), family by family."""

from __future__ import annotations

import pytest

import solvers.explain as explain
from designer.question.build import scenario_from_options
from solvers.cpsat.solve import Resolve, resolve_cpsat, solve_cpsat
from solvers.families import REGISTRY
from solvers.screen.presolve import presolve
from solvers.screen.prune import may_beat
from solvers.space import enumerate_candidates, with_memory_scale


def _probe_first(scenario, plan, cands, family) -> tuple[float, bool]:
    """A family's (improvement, exact) by the order before, over its relaxation steps as
    binding_constraints takes them (the first that improves the plan, else the last:
    budget's and deadline's are sized by the plan, a purchase unit more or fewer)."""
    steps = family.relaxations(scenario, plan)
    for i, (_, relaxed) in enumerate(steps):
        gain, exact = _probe_first_step(scenario, plan, cands, family, relaxed)
        if gain > 0 or i == len(steps) - 1:
            return gain, exact
    raise AssertionError(family.name)


def _probe_first_step(scenario, plan, cands, family, relaxed) -> tuple[float, bool]:
    """One step's (improvement, exact) by the order before: the probe, then the re-solve
    warm-started from its plan (or from the explained plan when it found none)."""
    base = plan.objective
    space = (
        cands
        if relaxed.memory_scale == scenario.memory_scale
        else with_memory_scale(relaxed, cands)
    )
    admits = explain._adds_shapes_only(family, scenario, relaxed)
    alive = presolve(relaxed, space, breaking=family.name if admits else None)
    if not may_beat(relaxed, alive, base):
        return 0.0, True

    def run(hint, cap):
        how = Resolve(
            hint=hint,
            effort=explain.EXPLAIN_EFFORT,
            alive=alive,
            warm_shapes=explain.EXPLAIN_WARM_SHAPES,
            time_cap_days=cap,
        )
        return resolve_cpsat(relaxed, how, time_limit_s=30.0, candidates=space)

    hint = plan.config
    if relaxed.objective == "time":
        probe = run(None, base)
        if probe.status == "infeasible":
            return 0.0, True
        hint = probe.best.config if probe.best else hint
    res = run(hint, None)
    better = min(base, res.best.objective if res.best else base)
    gain = max(0.0, float(base - better))
    if gain <= 1e-6 * max(abs(base), 1e-12):
        gain = 0.0
    return gain, res.status == "optimal"


@pytest.mark.slow
@pytest.mark.parametrize(
    "options",
    [
        {"model": "deepseek-v3", "tokens": 15e12, "budget": 100e6},
        {"model": "qwen3-30b-a3b", "tokens": 15e12, "budget": 100e6},
        {"model": "llama2-7b", "tokens": 1e12, "budget": 1e6},
        {"model": "llama2-70b", "tokens": 2e12, "budget": 30e6},
    ],
)
def test_the_plan_first_order_prices_every_family_as_the_probe_first_order(options):
    scenario = scenario_from_options(options)
    res = solve_cpsat(scenario)
    assert res.status == "optimal" and res.best is not None
    cands = enumerate_candidates(scenario)
    got = {
        b.constraint: (b.improvement_if_relaxed, b.exact)
        for b in explain.binding_constraints(scenario, res.best, cands)
    }
    want = {
        f.name: _probe_first(scenario, res.best, cands, f) for f in REGISTRY if f.active(scenario)
    }
    assert got == want


@pytest.mark.parametrize(
    "options",
    [
        {"model": "llama2-7b", "tokens": 1e12, "budget": 1e7},
        {"model": "qwen3-30b-a3b", "tokens": 15e12, "budget": 100e6, "evidence": "any"},
    ],
)
def test_a_capped_minimisation_finds_the_optimum_at_or_below_the_cap_and_nothing_above(options):
    """Resolve(time_cap_days=cap, cap_minimises=True): the question's optimum (objective and
    status) when it lies below the cap, "infeasible" when it lies above; prune
    drops the shapes whose bounds pass the cap, and a cap none reaches builds no model."""
    s = scenario_from_options(options)
    full = solve_cpsat(s)
    assert full.status == "optimal" and full.best is not None
    opt = full.best.objective
    for cap in (opt * (1 + 1e-6), opt * 1.2):  # (at opt itself CP-SAT's rounding may not)
        got = resolve_cpsat(s, Resolve(time_cap_days=cap, cap_minimises=True))
        assert got.status == "optimal" and got.best is not None
        assert got.best.objective == opt
    for cap in (opt * 0.999, opt * 0.5, opt * 1e-6):
        got = resolve_cpsat(s, Resolve(time_cap_days=cap, cap_minimises=True))
        assert (got.status, got.best) == ("infeasible", None)
