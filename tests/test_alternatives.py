"""designer/alternatives.py: the pairs the evidence rule kept out, each solved only when
its shapes' lower bounds leave it a chance to be shown (issue 34's speed target), with
the list that solving every pair gives."""

from __future__ import annotations

import math
import time
from types import SimpleNamespace

import pytest

from designer import alternatives as alt_mod
from designer.alternatives import MAX_ALTERNATIVES, alternatives, as_dicts
from designer.question.build import scenario_from_options
from models.evidence_range import catalog_band
from solvers import solve_cpsat
from solvers.pair_bound import pair_lower_bound
from solvers.screen.bounds import prepare_bounds


def _question(**options):
    """The question optimize asks (--evidence measured) and its --evidence any form."""
    scenario = scenario_from_options(options)
    wide = scenario_from_options({**options, "evidence": "any"})
    return scenario, wide, solve_cpsat(scenario)


def _solving_every_pair(monkeypatch, scenario, wide, res):
    """The alternatives with no pair skipped (as before the skips), and how many pairs."""
    with monkeypatch.context() as m:
        m.setattr(alt_mod._Pair, "reaches", lambda self, limit, strict: True)
        m.setattr(alt_mod, "_hopeless", lambda *args: False)
        m.setattr(alt_mod, "_crowded_out", lambda pair, standing: False)
        m.setattr(alt_mod, "_cap", lambda pair, standing, best: None)
        return alternatives(scenario, wide, res)


@pytest.mark.slow
@pytest.mark.parametrize(
    "options",
    [
        {"model": "gpt-oss-120b", "tokens": 15e12, "budget": 100e6},
        {"model": "llama2-7b", "tokens": 1e12, "deadline": 30.0, "objective": "cost"},
    ],
)
def test_skipped_pairs_leave_the_alternatives_unchanged(monkeypatch, options):
    scenario, wide, res = _question(**options)
    solved: list[str] = []
    plain = alt_mod._Pair.solve

    def counted(self, time_limit_s, cap=None):
        solved.append(self.gpu)
        return plain(self, time_limit_s, cap)

    monkeypatch.setattr(alt_mod._Pair, "solve", counted)
    prepared: list[str] = []
    plain_prepared = alt_mod._prepared

    def enumerated(wide, gpu, precisions, terms=None, stop=None):
        prepared.append(gpu)
        return plain_prepared(wide, gpu, precisions, terms, stop)

    monkeypatch.setattr(alt_mod, "_prepared", enumerated)
    fast = alternatives(scenario, wide, res)
    skipped = len(alt_mod.excluded_pairs(scenario, wide)) - len(solved)
    never_enumerated = len(alt_mod.excluded_pairs(scenario, wide)) - len(set(prepared))
    solved_fast = list(solved)
    solved.clear()
    every = _solving_every_pair(monkeypatch, scenario, wide, res)
    assert skipped > 0, "the question should let some pair be skipped"
    if options["model"] == "gpt-oss-120b":  # B200 reaches the answer's time, not its cap
        assert "b200" in prepared and "b200" not in solved_fast
    if scenario.objective == "time":  # the pair bound (solvers/pair_bound.py) skips some
        assert never_enumerated > 0, "some pair should be skipped before its shapes exist"
    assert len(solved) == len(alt_mod.excluded_pairs(scenario, wide))
    assert as_dicts(fast) == as_dicts(every)
    assert [a.sentence for a in fast] == [a.sentence for a in every]


def test_a_pair_is_crowded_out_only_by_enough_extrapolated_wins():
    """Fewer than MAX_ALTERNATIVES objectives known to be reached, or a pair that may be
    thin: never crowded out."""
    scenario, wide, res = _question(model="llama2-7b", tokens=1e12, budget=1e6)
    pairs = [
        alt_mod._prepared(wide, gpu, precs)
        for gpu, precs in alt_mod.excluded_pairs(scenario, wide).items()
    ]
    assert pairs
    tiny = [1e-9] * MAX_ALTERNATIVES
    assert not any(alt_mod._crowded_out(p, tiny[:-1]) for p in pairs)
    thin = [p for p in pairs if p.maybe_thin]
    assert thin and not any(alt_mod._crowded_out(p, tiny) for p in thin)
    assert all(alt_mod._crowded_out(p, tiny) for p in pairs if not p.maybe_thin)


def test_the_wins_that_crowd_a_pair_out_are_the_pairs_the_list_ranks():
    """_standing counts the alternatives that compete for the MAX_ALTERNATIVES places, by the
    rule's tier as the list ranks them, not by the plan's band: MI300X BF16 has 2 runs
    (tier thin, always listed) while its MoE band has none (extrapolated), so its plan is
    no win, and a pair whose tier is thin may never be crowded out."""
    scenario, wide, _ = _question(model="gpt-oss-120b", tokens=15e12, budget=100e6)
    excluded = alt_mod.excluded_pairs(scenario, wide)
    assert excluded["mi300x"] == ("bf16",) and excluded["gb200"] == ("bf16",)
    assert catalog_band(wide.catalog, "mi300x", "bf16", "moe").status == "extrapolated"

    def done_with(gpu: str, days: float) -> tuple:
        pair = alt_mod._Pair(gpu, alt_mod._question(wide, gpu, excluded[gpu]), None, None, False)
        layout = SimpleNamespace(precision="bf16")
        plan = SimpleNamespace(objective=days, evaluation=SimpleNamespace(layout=layout))
        return pair, SimpleNamespace(best=plan)

    done = [done_with("mi300x", 5.0), done_with("gb200", 6.0), done_with("gb200", 20.0)]
    kept = [p for p, _ in done]  # (no shapes here: no incumbent either)
    assert alt_mod._standing(kept, done, 10.0) == [6.0]  # mi300x is thin; 20 days loses
    assert alt_mod._standing(kept, done, 10.0, but=kept[1]) == []
    assert alt_mod._maybe_thin(wide, "mi300x", ("bf16",))
    assert not alt_mod._maybe_thin(wide, "gb200", ("bf16",))


def test_a_pair_reaches_a_limit_only_through_a_valid_bound():
    """``reaches``: a pair said not to reach a limit has no plan below it; every pair
    reaches its own optimum (at most it) and anything above it."""
    scenario, wide, res = _question(model="llama2-7b", tokens=1e12, budget=1e6)
    checked = 0
    for gpu, precs in alt_mod.excluded_pairs(scenario, wide).items():
        pair = alt_mod._prepared(wide, gpu, precs)
        got = pair.solve(60.0)
        if got.best is None or got.status != "optimal":
            continue
        opt = got.best.objective
        assert pair.reaches(opt, strict=False) and pair.reaches(opt * 1.01, strict=True)
        for limit in (opt * 0.5, opt * 0.9, opt):
            assert pair.reaches(limit, strict=True) or opt >= limit
        checked += 1
    assert checked


@pytest.mark.slow
def test_a_moe_alternatives_tier_is_the_rules_in_its_row_and_its_sentence():
    """GB200's MoE band rests on 4 MoE runs, but the rule counts no BF16 run on GB200: its
    row, its JSON tier and its sentence all say extrapolated (they disagreed before)."""
    scenario, wide, res = _question(model="deepseek-v3", tokens=15e12, budget=100e6)
    alts = alternatives(scenario, wide, res)
    assert alts, "the question should have alternatives"
    table = alt_mod.text(scenario, alts)
    for a in alts:
        assert f"({a.tier}:" in a.sentence
    gb200 = [a for a in alts if a.gpu == "gb200"]
    assert gb200 and gb200[0].tier == "extrapolated"
    assert "gb200 (extrapolated)" in table
    assert {d["tier"] for d in as_dicts(gb200)} == {"extrapolated"}


def test_a_capped_pair_is_infeasible_only_when_no_plan_reaches_the_cap():
    """``_Pair.solve`` with a cap (a minimisation below it): "infeasible" when the pair's
    optimum is slower than the cap (it cannot enter the list), else the uncapped solve's
    optimum."""
    pairs = _pairs_solved_to_optimum(budget=1e6)
    for pair, opt in pairs:
        assert pair.solve(60.0, cap=opt * 0.9).status == "infeasible"
        above = pair.solve(60.0, cap=opt * 1.01)
        assert above.status == "optimal" and above.best is not None
        assert above.best.objective == opt
    assert pairs


def _pairs_solved_to_optimum(budget: float) -> list[tuple[alt_mod._Pair, float]]:
    """The excluded pairs of a Llama 2 7B question at ``budget`` with a proved optimum,
    each with that optimum's objective."""
    scenario, wide, _ = _question(model="llama2-7b", tokens=1e12, budget=budget)
    out = []
    for gpu, precs in alt_mod.excluded_pairs(scenario, wide).items():
        pair = alt_mod._prepared(wide, gpu, precs)
        got = pair.solve(60.0)
        if got.best is not None and got.status == "optimal" and pair.pre is not None:
            out.append((pair, got.best.objective))
    return out


def test_the_pairs_solved_do_not_depend_on_how_far_the_work_beside_a_wave_got(monkeypatch):
    """_solved prepares the pairs visited later while a wave solves: how far it gets
    depends on the machine, but which pairs each wave holds, and the cap each is asked
    under, depend only on the waves before it and the incumbents. Solves slowed down
    (every such pair prepared during the first wave) ask the same (pair, cap) sequence and
    give the same list as solves at full speed."""
    scenario, wide, res = _question(model="llama2-7b", tokens=1e12, budget=1e7)
    plain = alt_mod._Pair.solve

    def asked(delay_s: float) -> tuple[list, list]:
        calls: list[tuple[str, float | None]] = []

        def recorded(self, time_limit_s, cap=None):
            calls.append((self.gpu, cap))
            time.sleep(delay_s)
            return plain(self, time_limit_s, cap)

        with monkeypatch.context() as m:
            m.setattr(alt_mod._Pair, "solve", recorded)
            return calls, as_dicts(alternatives(scenario, wide, res))

    fast, slow = asked(0.0), asked(0.5)
    assert any(cap is not None for _, cap in fast[0]), "the question should cap some pair"
    assert fast == slow


def test_a_pair_capped_at_its_own_optimum_is_solved():
    """The capped minimisation keeps only the shapes whose bounds reach the cap, with prune's
    margin, and caps CP-SAT's objective with it too: a cap equal to the pair's optimum
    keeps the optimum's shape and plan (CP-SAT's rounding of the time lies within the
    margin), so the pair is solved to its optimum, not called infeasible."""
    pairs = _pairs_solved_to_optimum(budget=1e7)
    for pair, opt in pairs:
        at = pair.solve(60.0, cap=opt)
        assert at.status == "optimal" and at.best is not None and at.best.objective == opt
    assert pairs


def test_a_pair_is_skipped_unprepared_only_where_its_bound_skips_it():
    """_hopeless: a pair whose catalog bound (solvers/pair_bound.py) reaches the answer is
    skipped; one below it only when MAX_ALTERNATIVES extrapolated wins all beat its bound
    and it cannot be thin (a thin pair is always shown)."""
    scenario, wide, _ = _question(model="deepseek-v3", tokens=15e12, budget=100e6)
    thin_seen = False
    for gp in alt_mod.excluded_pairs(scenario, wide).items():
        s = alt_mod._question(wide, *gp)
        terms = prepare_bounds(s)
        floor = pair_lower_bound(terms, *gp)
        assert 0 < floor < math.inf
        assert alt_mod._hopeless(s, gp, terms, [], floor)
        assert not alt_mod._hopeless(s, gp, terms, [], floor * 1.01)
        below = [floor * 0.5] * MAX_ALTERNATIVES
        thin = alt_mod._maybe_thin(s, *gp)
        thin_seen |= thin
        assert alt_mod._hopeless(s, gp, terms, below, floor * 1.01) == (not thin)
        assert not alt_mod._hopeless(s, gp, terms, below[:-1], floor * 1.01)
    assert thin_seen


def test_the_work_beside_a_wave_stops_when_its_solves_end(monkeypatch):
    """Beside a wave the pairs visited later are prepared (or dropped by their catalog
    bound), and no longer: prepare_ahead is handed a stop that says no while a solve of the
    wave runs and yes once they have all ended."""
    scenario, wide, res = _question(model="llama2-7b", tokens=1e12, budget=1e7)
    plain_solve, plain_ahead = alt_mod._Pair.solve, alt_mod._Visits.prepare_ahead
    stops: list = []
    asked_while_solving: list[bool] = []

    def recorded_ahead(self, stop):
        stops.append(stop)
        return plain_ahead(self, stop)

    def recorded_solve(self, time_limit_s, cap=None):
        got = plain_solve(self, time_limit_s, cap)
        if stops:  # a solve of the wave still runs (this one): the stop says no
            asked_while_solving.append(stops[-1]())
        return got

    monkeypatch.setattr(alt_mod._Visits, "prepare_ahead", recorded_ahead)
    monkeypatch.setattr(alt_mod._Pair, "solve", recorded_solve)
    alternatives(scenario, wide, res)
    assert stops, "the question should solve some wave"
    assert asked_while_solving and not any(asked_while_solving)
    assert all(stop() for stop in stops)


def test_a_pair_s_solve_reports_at_most_what_its_incumbent_says():
    """_Pair.reached, the objective a pair stands for before it is solved, is at least what
    its solve reports: on DeepSeek-V3's $100M question Gaudi 3's incumbent (the fastest
    plan of its first shapes, 4 GB/s of checkpoint storage) is faster than its reported
    optimum (the same layout with the 1 GB/s that pays, solvers/purchase_rule.py), so the
    purchase steps' tolerance is needed, and covers it."""
    scenario, wide, _ = _question(model="deepseek-v3", tokens=15e12, budget=100e6)
    checked, below = 0, []
    for gpu, precs in alt_mod.excluded_pairs(scenario, wide).items():
        pair = alt_mod._prepared(wide, gpu, precs)
        got = pair.solve(60.0)
        if got.best is None:
            assert pair.incumbent() == math.inf  # an incumbent is a plan the solve would find
            continue
        assert got.status == "optimal" and got.best.objective <= pair.reached()
        assert pair.incumbent() < math.inf
        if pair.incumbent() < got.best.objective:
            below.append(gpu)
        checked += 1
    assert checked >= 10 and "gaudi3" in below


def test_a_pair_under_a_deadline_stands_for_no_incumbent():
    """Under the time objective with a deadline a purchase dropped may break the deadline,
    so _Pair.reached claims nothing (math.inf); with a budget alone it does."""
    scenario, wide, _ = _question(model="llama2-7b", tokens=1e12, budget=1e7)
    gpu, precs = next(iter(alt_mod.excluded_pairs(scenario, wide).items()))
    assert alt_mod._prepared(wide, gpu, precs).reached() < math.inf
    timed = scenario_from_options(
        {"model": "llama2-7b", "tokens": 1e12, "budget": 1e7, "deadline": 400.0, "evidence": "any"}
    )
    pair = alt_mod._prepared(timed, gpu, precs)
    assert pair.incumbent() < math.inf and pair.reached() == math.inf


def test_a_pair_waits_for_a_wave_whose_solve_could_change_what_it_is_asked():
    """_settled: a pair that cannot be thin joins a wave only when no pending pair's solve
    can move the MAX_ALTERNATIVES-th objective it reads (a pending pair already below it
    cannot; one that adds nothing yet can); a thin pair always may (it reads the answer's
    objective alone)."""
    scenario, wide, res = _question(model="llama2-7b", tokens=1e12, budget=1e7)
    pairs = [
        alt_mod._prepared(wide, gpu, precs)
        for gpu, precs in alt_mod.excluded_pairs(scenario, wide).items()
    ]
    assert any(p.maybe_thin for p in pairs) and not all(p.maybe_thin for p in pairs)
    low, high = [1.0, 2.0, 10.0], [0.5, 0.6, 0.7]
    for p in pairs:
        assert alt_mod._settled(p, low, [3.0])
        assert alt_mod._settled(p, high, [3.0]) == p.maybe_thin
        assert alt_mod._settled(p, low[:2], [math.inf]) == p.maybe_thin
        assert alt_mod._settled(p, high, [])


@pytest.mark.slow
def test_a_pair_prepared_beside_a_wave_is_skipped_at_its_visit_by_its_catalog_bound(
    monkeypatch,
):
    """A pair prepared before the waves that would skip it (here every pair, prepared
    before the answer) is skipped at its visit by its catalog bound (_hopeless), its
    shapes' bounds never read: RTX 4090's bound on GPT-OSS-120B lies far above the
    answer. The solves and the list are those of nothing prepared ahead."""
    scenario, wide, res = _question(model="gpt-oss-120b", tokens=15e12, budget=100e6)
    s = alt_mod._question(wide, "rtx4090", ("bf16",))
    assert pair_lower_bound(prepare_bounds(s), "rtx4090", ("bf16",)) > res.best.objective
    plain_solve, plain_reaches = alt_mod._Pair.solve, alt_mod._Pair.reaches

    def asked(queue):
        calls: list[tuple[str, float | None]] = []
        read: list[str] = []

        def recorded(self, time_limit_s, cap=None):
            calls.append((self.gpu, cap))
            return plain_solve(self, time_limit_s, cap)

        def reaches(self, limit, strict):
            read.append(self.gpu)
            return plain_reaches(self, limit, strict)

        with monkeypatch.context() as m:
            m.setattr(alt_mod._Pair, "solve", recorded)
            m.setattr(alt_mod._Pair, "reaches", reaches)
            return calls, as_dicts(alternatives(scenario, wide, res, 60.0, queue)), read

    queue = alt_mod.PairQueue(wide, alt_mod.excluded_pairs(scenario, wide))
    queue.prepare_until(lambda: False)
    assert "rtx4090" in [p.gpu for p in queue.ready]
    ahead, plain = asked(queue), asked(None)
    assert "rtx4090" not in ahead[2] and ahead[:2] == plain[:2]


def test_a_slow_end_over_the_budget_is_said():
    """Renting, a slower run costs more: an alternative that still wins at the slow end of
    its band but would pay more than the budget there says so, as one that misses the
    deadline there does."""
    s = SimpleNamespace(objective="time", budget_usd=1e6)
    doc = {"cost_usd_range": [9e5, 1.58e6]}
    assert (
        alt_mod._over_budget(s, doc)
        == ", though at the slow end it costs $1.58M, over the $1.00M budget"
    )
    assert alt_mod._over_budget(s, {"cost_usd_range": [9e5, 9.9e5]}) == ""
    assert alt_mod._over_budget(SimpleNamespace(objective="time", budget_usd=None), doc) == ""
    assert alt_mod._over_budget(SimpleNamespace(objective="cost", budget_usd=1e6), doc) == ""
