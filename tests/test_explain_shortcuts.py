"""The conflict explanation's shortcuts change no answer (issue 22: explaining any infeasible
question under 5 s).

Shortcuts: presolve rules shapes out by their GEMM time before computing their step
time (presolve._gemm_screen, bounds.too_slow_by_gemm); the questions one explanation
derives share their shapes' deadline and budget answers (bounds.shared_bounds), keyed by
every input those read; the deletion loop answers a test from a decided superset or subset
of families (explain._Outcomes) and tries the superset with only the member dropped first
(explain._shrink); a TCO budget's feasibility model carries the shapes' cost bounds
(explain._feasibility_model), and a question whose every shape that cut rules out is not
built (explain._under_budget); before the deletion, the conflict it will likely find is
guessed with memory kept and tested once without it (explain._guess); a fix's bisection asks its upper end after a few failed
probes (families.base.bisect). Each is checked against the computation without it, on the random
questions of bench/agreement.py's generator (small models) and on one question varied
along every input the shared keys hold."""

from __future__ import annotations

import contextlib
import itertools
from types import SimpleNamespace

import numpy as np
import pytest
from ortools.sat.python import cp_model

import solvers.explain as explain
import solvers.families.base as family_base
import solvers.screen.bounds as bounds
import solvers.screen.presolve as presolve_module
from designer.question.build import build_scenario
from helpers import load_bench
from solvers.cpsat.context import Bounds
from solvers.cpsat.model import build
from solvers.cpsat.solve import solve_cpsat
from solvers.families import NAMES, active, enforced
from solvers.screen.bounds import (
    expected_time_lower_bound,
    shared_bounds,
    stage_time_lower,
    too_slow,
    too_slow_by_gemm,
)
from solvers.screen.presolve import presolve
from solvers.space import enumerate_candidates, with_memory_scale

agreement = load_bench("agreement.py", "bench_agreement")

# Questions of bench/agreement.py --full's generator (small models), varied so that the
# shortcuts act: a deadline a GPU cap makes too tight, a deadline that failures make too
# tight, a deadline with a cloud budget (each has a conflict: the test checks it); the
# plain ones include TCO budgets (explain._feasibility_model's cuts)
VARIANTS = {
    "plain": {},
    "cap": dict(deadline_days=0.05, max_gpus=8, budget_usd=None, power_cap_mw=None),
    "fail": dict(
        deadline_days=0.02,
        failure_scale=1000.0,
        no_failures=False,
        budget_usd=None,
        power_cap_mw=None,
        max_gpus=None,
    ),
    "cloud": dict(
        deadline_days=0.05, budget_usd=3e3, pricing="cloud", power_cap_mw=None, max_gpus=None
    ),
}
CONFLICTS = (
    (0, "plain"),
    (5, "plain"),
    (22, "plain"),
    (10, "plain"),
    (13, "plain"),
    (20, "plain"),
    (0, "cap"),
    (5, "cap"),
    (18, "cap"),
    (34, "cap"),
    (43, "cap"),
    (64, "cap"),
    (0, "fail"),
    (5, "fail"),
    (64, "fail"),
    (0, "cloud"),
    (64, "cloud"),
)


def small_question(seed: int, variant: str = "plain"):
    kw, _ = agreement.full_question(seed, small=True)
    return build_scenario(**kw).with_changes(**VARIANTS[variant])


def without_shortcuts(monkeypatch) -> None:
    """The explanation as before the shortcuts: no shared bounds, no GEMM screen, every
    deletion test run in the order of the families."""
    monkeypatch.setattr(explain, "shared_bounds", contextlib.nullcontext)
    monkeypatch.setattr(presolve_module, "_gemm_screen", _no_screen)
    monkeypatch.setattr(explain._Outcomes, "known", lambda self, fams: None)
    monkeypatch.setattr(explain, "_PRUNING", frozenset())
    monkeypatch.setattr(explain, "_guess", lambda *_a: None)
    monkeypatch.setattr(explain, "_under_budget", lambda _s, _cut: True)


def _no_screen(_s, _c, ok, *_a):
    return np.zeros(len(ok), dtype=bool)


def conflict_of(s):
    res = solve_cpsat(s, time_limit_s=30.0)
    assert res.status == "infeasible", res.status
    c = explain.explain_infeasible(s, time_limit_s=30.0, candidates=res.candidates or None)
    return c.constraints, [(f.as_dict(), f.scenario) for f in c.fixes]


@pytest.mark.parametrize(("seed", "variant"), CONFLICTS)
def test_explanation_is_the_same_without_shortcuts(seed, variant, monkeypatch):
    """Core (the same members, found by the same deletions) and fixes (the same change and
    the same fixed question) with and without the shortcuts."""
    fast = conflict_of(small_question(seed, variant))
    assert fast[0]  # a conflict was found
    with monkeypatch.context() as m:
        without_shortcuts(m)
        slow = conflict_of(small_question(seed, variant))
    assert fast == slow


def derived_questions(s):
    """The question along every input bounds.shared_bounds keys on (the deadline and
    budget, the batch ceiling, the NICs and NICs per server, the memory scale, failures
    and checkpoints, the pricing), each under subsets of its families."""
    # one NIC every GPU type's server takes (another question would be refused)
    common = set.intersection(*({n.name for n in s.nics_for(g)} for g in s.gpus))
    changes = [
        {},
        {"deadline_days": (s.deadline_days or 30.0) * 3},
        {"deadline_days": (s.deadline_days or 30.0) / 3},
        {"budget_usd": (s.budget_usd or 1e7) * 3},
        {"tokens": s.tokens * 2},
        {"max_batch_tokens": 2**20},
        {"extra_nic_slots": 2},
        {"nics": (min(common),)} if common else {"fabric": s.fabric},
        {"memory_scale": 1.5},
        {"memory_scale": 0.03},  # shapes that need DP to fit: DP floors above 1
        {"no_failures": not s.no_failures},
        {"failure_scale": 10.0},
        {"checkpoint_every_min": 30.0},
        {"pricing": "cloud"},
        {"pricing": "tco"},
    ]
    out = []
    for change in changes:
        base = s.with_changes(**change)
        active = [f for f in NAMES if f in enforced(base)]
        out.append(base)
        out.extend(explain._only(base, set(active) - {f}) for f in active)
        out.append(explain._only(base, {f for f in active if f in ("deadline", "budget")}))
    return out


def presolved(s, cands):
    """(shapes, DP ranges) of the question's presolve (its memory scale's candidates)."""
    space = cands if s.memory_scale == 1.0 else with_memory_scale(s, cands)
    pre = presolve(s, space)
    return [c.shape for c in pre.candidates], pre.dp_ranges


SHARED_CASES = (
    (1, "plain"),
    (35, "plain"),
    (22, "plain"),
    (0, "cap"),
    (64, "fail"),
    (0, "cloud"),
)


@pytest.mark.parametrize(("seed", "variant"), SHARED_CASES)
def test_shared_bounds_agree_with_each_questions_own(seed, variant):
    """Questions presolved one after another inside one shared_bounds scope (each taking
    what the others computed) keep the shapes and DP ranges each has alone (a fresh copy
    of the question, outside the scope)."""
    s = small_question(seed, variant)
    cands = enumerate_candidates(s)
    questions = derived_questions(s)
    with shared_bounds():
        shared = [presolved(q, cands) for q in questions]
    for q, got in zip(questions, shared, strict=True):
        assert got == presolved(q.with_changes(), enumerate_candidates(s)), q


@pytest.mark.parametrize(("seed", "variant"), SHARED_CASES)
def test_shared_keys_hold_every_input(seed, variant):
    """Two questions whose shared-table keys agree get the same bound, to the last bit:
    too_slow's expected time and GEMM time at each DP end, priced_out's cost (a key that
    missed an input would let one question's answer stand for another's); and the TCO
    bound with a lifetime (bounds._shared_tco_bounds)."""
    s = small_question(seed, variant)
    cands = enumerate_candidates(s)[::5]
    seen: dict[tuple, tuple] = {}
    collisions = 0
    for q in derived_questions(s):
        space = cands if q.memory_scale == 1.0 else with_memory_scale(q, cands)
        for cand in space:
            gpu = cand.shape.gpu
            rows = []
            if active(q, "deadline"):
                key = bounds._table_key("too_slow", q, gpu)
                for hi in (1, 16, 4096):
                    value = (expected_time_lower_bound(q, cand, hi), too_slow(q, cand, hi))
                    rows.append(((key, *bounds._shape_key("too_slow", q, cand, hi)), value))
            if active(q, "budget") and q.pricing != "capex":
                key = bounds._table_key("priced_out", q, gpu)
                for lo in (1, cand.dp_floor(q), 64):
                    value = (bounds._cost_gemm_lower_bound(q, cand, lo),)
                    rows.append(((key, *bounds._shape_key("priced_out", q, cand, lo)), value))
            if q.pricing == "tco" and q.catalog.facility.lifetime_years is not None:
                key = bounds._table_key("tco_bound", q, gpu)
                for lo in (1, cand.dp_floor(q), 64):
                    value = (bounds.tco_lower_bound(q, cand, lo),)
                    rows.append(((key, *bounds._shape_key("tco_bound", q, cand, lo)), value))
            for key, value in rows:
                if key in seen:
                    collisions += 1
                    assert seen[key] == value, (q, cand)
                seen[key] = value
    assert collisions > 0


def test_gemm_bound_never_exceeds_the_expected_time_bound():
    """too_slow_by_gemm implies too_slow, shape by shape: the stage time is at least the
    GEMM time, and the GEMM bound at most expected_time_lower_bound (failures on and off)."""
    screened = 0
    for seed, no_failures in itertools.product((0, 5, 64), (False, True)):
        s = small_question(seed, "fail").with_changes(no_failures=no_failures)
        s = explain._only(s, {"deadline"})
        for cand in enumerate_candidates(s)[::7]:
            sh = cand.shape
            assert stage_time_lower(cand) >= cand.gemm_mb_s
            for hi in (1, 64, 4096, 2**20 // sh.replica_gpus):
                by_gemm = bool(
                    too_slow_by_gemm(s, sh.gpu, cand.gemm_mb_s, sh.micro_batch, sh.replica_gpus, hi)
                )
                if by_gemm:
                    screened += 1
                    assert expected_time_lower_bound(s, cand, hi) > s.deadline * (1 + 1e-9)
                    assert too_slow(s, cand, hi)
    assert screened > 0


def test_outcomes_follow_monotonicity():
    """Infeasible with a set: infeasible with every superset; feasible: with every subset;
    anything else undecided."""
    known = explain._Outcomes()
    known.infeasible.append(frozenset({"budget", "memory"}))
    known.feasible.append(frozenset({"memory", "tp_domain"}))
    assert known.known({"budget", "memory", "max_gpus"}) is False
    assert known.known({"budget", "memory"}) is False
    assert known.known({"memory"}) is True
    assert known.known(set()) is True
    assert known.known({"budget"}) is None
    assert known.known({"memory", "max_gpus"}) is None


def plain_deletion(families: list[str], conflicts: list[set[str]]) -> list[str]:
    """The core plain deletion in the families' order finds, a set of families being
    infeasible when it holds one of ``conflicts``."""
    want = list(families)
    for fam in list(want):
        trial = set(want) - {fam}
        if any(c <= trial for c in conflicts):
            want = sorted(trial)
    return sorted(want)


def test_deletion_answers_as_plain_deletion(monkeypatch):
    """_shrink with its superset probes and decided outcomes returns the core plain deletion
    returns, on monotone feasibility oracles (infeasible when the set holds one of a few
    conflicts), and a trial that lost memory is answered by its probe when the probe is
    feasible (never run)."""
    families = ["memory", "tp_domain", "divisibility", "batch_ceiling", "budget", "deadline"]
    conflicts_list = [
        [{"deadline"}],
        [{"deadline", "budget"}],
        [{"budget", "memory"}, {"deadline", "batch_ceiling"}],
        [{"deadline", "tp_domain", "batch_ceiling"}],
        [{"memory"}],
    ]
    for conflicts in conflicts_list:
        calls: list[frozenset[str]] = []

        def oracle(_s, fams, _c, _t, conflicts=conflicts, calls=calls):
            calls.append(frozenset(fams))
            return not any(c <= fams for c in conflicts)

        monkeypatch.setattr(explain, "_feasible", oracle)
        got = explain._shrink(None, list(families), [], 1.0)
        assert got == plain_deletion(families, conflicts), conflicts
        if conflicts == [{"deadline", "budget"}]:
            # memory goes first (the rest stays infeasible); dropping deadline or budget
            # then makes it feasible, which the probe without only that member shows: no
            # question without memory and without either is ever tested
            assert not any("memory" not in c and not {"deadline", "budget"} <= c for c in calls)


def _model_feasible(form) -> bool:
    code = cp_model_solver().solve(form.model)
    assert code in (cp_model.OPTIMAL, cp_model.FEASIBLE, cp_model.INFEASIBLE), code
    return code != cp_model.INFEASIBLE


def cp_model_solver():
    from solvers.cpsat.solve import _solver

    return _solver(60.0, 1)


@pytest.mark.parametrize("seed", (1, 10, 13, 20, 22, 35))
def test_tco_budget_cuts_keep_the_models_answer(seed):
    """Under a TCO budget the feasibility model carries each shape's TCO lower bound as a
    cut (explain._feasibility_model); at budgets around the cheapest plan's cost (the
    budget fix's nudges, where the model's rounding decides) it answers as the model
    without cuts does."""
    s = small_question(seed).with_changes(pricing="tco")
    active = set(enforced(s))
    cheapest = solve_cpsat(
        explain._only(s, active - {"budget"}).with_changes(objective="cost"), time_limit_s=60.0
    )
    assert cheapest.best is not None
    cands = enumerate_candidates(s)
    answers = set()
    for nudge in (-1e-3, -1e-6, 0.0, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3):
        q = s.with_changes(budget_usd=cheapest.best.cost_usd * (1 + nudge))
        pre = presolve(q, cands)
        if not pre.candidates:
            answers.add(False)
            continue
        plain = build(
            q.with_changes(objective="time"),
            pre.candidates,
            bounds=Bounds(pre.dp_ranges, [0.0] * len(pre.candidates)),
        )
        cut = explain._feasibility_model(q, pre)
        answers.add(_model_feasible(cut))
        assert _model_feasible(cut) == _model_feasible(plain), nudge
        # explain._feasible's shortcut: every shape's cut over the budget, the model is
        # infeasible (and each shape over it is infeasible alone)
        cuts = explain._cost_cuts(q, pre)
        under = [explain._under_budget(q, lb) for lb in cuts]
        if not any(under):
            assert not _model_feasible(cut), nudge
        for i in [i for i, u in enumerate(under) if not u][:3]:
            one = explain._feasibility_model(q, pre, cuts)
            one.model.add(one.x[i] == 1)
            assert not _model_feasible(one), (nudge, i)
    assert answers == {False, True}


@pytest.mark.parametrize("integer", (False, True))
def test_bisect_answers_as_before_and_stops_early_when_nothing_fits(integer):
    """On monotone questions bisect gives what it gave before asking its upper end early;
    with no fix below the upper end it stops after a few probes instead of ~20."""
    lo, hi = (100.0, 1e6) if not integer else (8, 2**20)
    for threshold in (100.5, 101, 150, 1e3, 5e4, 999_999, 1e6, 2e6):
        calls: list[float] = []

        def feasible(x, threshold=threshold, calls=calls):
            calls.append(x)
            return x >= threshold

        got = family_base.bisect(feasible, lo, hi, integer)
        with pytest.MonkeyPatch.context() as m:  # as before: the doubling to the end
            m.setattr(family_base, "BISECT_TRIES_BEFORE_HI", 10**9)
            before = family_base.bisect(lambda x, t=threshold: x >= t, lo, hi, integer)
        assert got == before, threshold
        if threshold > hi:
            assert got is None
            assert len(calls) == family_base.BISECT_TRIES_BEFORE_HI + 1


def test_under_the_plan_answers_only_what_the_capped_search_decided():
    """solvers.explain._under_the_plan: a shape rule's re-solve minimised under the plan's
    time (Resolve raises it by prune's margin): no plan there is no improvement (exact);
    a proved optimum is the improvement (exact, never above the plan); a search stopped
    at its effort leaves the answer to the full route (None)."""
    from types import SimpleNamespace

    from solvers.explain import _under_the_plan

    asked = []

    def run_giving(status, objective=None):
        best = None if objective is None else SimpleNamespace(objective=objective)

        def run(hint, cap, wall_s=None, lid=False):
            asked.append((hint, cap, wall_s, lid))
            return SimpleNamespace(status=status, best=best)

        return run

    assert _under_the_plan(run_giving("infeasible"), 10.0) == (10.0, True)
    assert asked[-1] == (None, 10.0, None, True)
    assert _under_the_plan(run_giving("optimal", 9.0), 10.0) == (9.0, True)
    assert _under_the_plan(run_giving("optimal", 10.0005), 10.0) == (10.0, True)
    assert _under_the_plan(run_giving("feasible", 9.5), 10.0) is None
    assert _under_the_plan(run_giving("unknown"), 10.0) is None


def test_guess_spares_the_deletion_its_tests_without_memory(monkeypatch):
    """infeasible_core guesses the conflict with memory kept and tests it once without
    memory (explain._guess): the core is plain deletion's, and a conflict that holds
    without memory is found with one test without memory, where the deletion alone asks
    one per family it drops after memory (issue 22: seeds 44 and 123, a second or more
    each); no guess when the question without memory is feasible."""
    families = ["memory", "tp_domain", "divisibility", "batch_ceiling", "budget", "deadline"]
    question = SimpleNamespace(disabled=frozenset())
    monkeypatch.setattr(explain, "enforced", lambda _s: set(families))
    for conflicts in ([{"deadline", "budget"}], [{"budget", "memory"}], [{"deadline"}]):
        calls: list[frozenset[str]] = []

        def oracle(_s, fams, _c, _t, conflicts=conflicts, calls=calls):
            calls.append(frozenset(fams))
            return not any(c <= fams for c in conflicts)

        monkeypatch.setattr(explain, "_feasible", oracle)
        got = explain.infeasible_core(question, [], 1.0)
        assert got == plain_deletion(families, conflicts), conflicts
        without_memory = [c for c in calls if "memory" not in c]
        if "memory" not in conflicts[0]:  # the deletion's first trial, then the guess
            assert without_memory == [
                frozenset(families) - {"memory"},
                frozenset(conflicts[0]),
            ], conflicts
        else:  # feasible without memory: no guess
            assert without_memory == [frozenset(families) - {"memory"}], conflicts
        with monkeypatch.context() as m:  # the deletion alone
            m.setattr(explain, "_guess", lambda *_a: None)
            calls.clear()
            assert explain.infeasible_core(question, [], 1.0) == got
            if "memory" not in conflicts[0]:
                assert len([c for c in calls if "memory" not in c]) >= 4


def test_a_tco_budget_that_prices_out_every_shape_builds_no_model(monkeypatch):
    """explain._feasible under a TCO budget below every presolved shape's cost cut answers
    infeasible without building the model (explain._under_budget); the model, built,
    agrees, and with a budget the cheapest cut meets it is built (and asked)."""
    s = small_question(1).with_changes(pricing="tco")
    fams = set(enforced(s))
    cands = enumerate_candidates(s)
    least = min(explain._cost_cuts(s, presolve(s, cands)))
    low = s.with_changes(budget_usd=least * 0.99)
    pre = presolve(low, cands)
    assert pre.candidates  # the GEMM-only screen keeps shapes the exact cut rules out
    assert not _model_feasible(explain._feasibility_model(low, pre))
    built = []
    real_build = explain.build
    monkeypatch.setattr(explain, "build", lambda *a, **k: built.append(1) or real_build(*a, **k))
    monkeypatch.setattr(explain, "_witness", lambda *_a: False)
    assert explain._feasible(low, fams, cands, 30.0) is False
    assert built == []
    explain._feasible(s.with_changes(budget_usd=least * 1.01), fams, cands, 30.0)
    assert built == [1]
