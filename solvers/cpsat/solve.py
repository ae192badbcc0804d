"""Solving the CP-SAT model (solvers/cpsat/model.py) over the shapes solvers/screen/prune.py
keeps: warm start, incumbent, top K, and the tie rule's second phase (solvers/tie_rule.py:
the fastest plan at the optimal cost, the cheapest NICs at the optimal time).

One worker following the model's decision strategy, deterministic; the plans are
re-evaluated by the float model (solvers/plan.py).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from ortools.sat.python import cp_model

from models.cost import Cluster
from solvers import cloud_terms
from solvers.cpsat.context import Bounds
from solvers.cpsat.model import Formulation, build
from solvers.gc_pause import without_gc_pauses
from solvers.grid_search import best_for_candidate
from solvers.intmath import up
from solvers.plan import Config, Plan, build_plan
from solvers.purchase_rule import settle
from solvers.result import SolveResult, merged_gap, names_objective, relative_gap
from solvers.scenario import PreparedQuestion, Scenario
from solvers.screen.bounds import BoundTerms, prepare_bounds
from solvers.screen.presolve import Presolved, defer_presolve, finish_is_costly, presolve
from solvers.screen.prune import (
    PRUNE_MARGIN,
    WARM_SHAPES,
    Pruned,
    kept_limit,
    prune,
    prune_deferred,
)
from solvers.space import Candidate, enumerate_within
from solvers.stop import stoppable_solver
from solvers.tie_rule import plan_order, ties_or_beats

# a time cap's relative margin (solve_cpsat's time_cap_days): far above the CP-SAT model's
# rounding (about 1e-9), far below what an explanation calls an improvement
TIME_CAP_MARGIN = 1e-7
# the cost objective's second phase (_fastest_at_cost): how far above the optimum, relative,
# a plan's cost in the model's units may lie and still tie it in the float model (seed 187
# of bench/agreement.py --full --toys: 2e-7; the model's rounding of a cost, far below
# what the float model calls a difference), and how many searches it spends on plans
# there that prove dearer before it holds the cost at the optimum itself
TIE_SLACK = 1e-6
TIE_TRIES = 2


def _config(form: Formulation, solver: cp_model.CpSolver) -> Config:
    i = next(i for i, v in enumerate(form.x) if solver.boolean_value(v))
    nic = next(name for name, lit in form.nic_lits.items() if solver.boolean_value(lit))
    spares = next((k for k, lit in form.spare_lits.items() if solver.boolean_value(lit)), 0.0)
    storage = next((b for b, lit in form.storage_lits.items() if solver.boolean_value(lit)), None)
    return Config(
        form.candidates[i].shape,
        nic,
        solver.value(form.nics),
        solver.value(form.dp),
        solver.value(form.m),
        spares,
        storage,
    )


def _hint(scenario: Scenario, form: Formulation, cfg: Config) -> None:
    md = form.model
    for cand, v in zip(form.candidates, form.x, strict=True):
        md.add_hint(v, cand.shape == cfg.shape)
    for name, lit in form.nic_lits.items():
        md.add_hint(lit, name == cfg.nic)
    md.add_hint(form.nics, cfg.nics_per_node)
    md.add_hint(form.dp, cfg.dp)
    md.add_hint(form.m, cfg.microbatches)
    for k, lit in form.spare_lits.items():  # hot spares and storage (solvers/cpsat/purchases.py)
        md.add_hint(lit, k == cfg.spares_per_100)
    for b, lit in form.storage_lits.items():
        md.add_hint(lit, b == cfg.storage_gb_per_s)
    if form.cluster is not None:  # the float model's fabric and racks (search would take more)
        cat = scenario.catalog
        nic = cat.nic(cfg.nic)
        num_gpus = cfg.shape.replica_gpus * cfg.dp
        cl = Cluster(
            cat.gpu(cfg.shape.gpu),
            nic,
            cat.switch_for(nic),
            cat.facility,
            num_gpus,
            cfg.nics_per_node,
        )
        for name, tiers in form.cluster.tiers.items():
            for t, lit in tiers.items():
                md.add_hint(lit, name == cfg.nic and t == cl.fabric.tiers)
        md.add_hint(form.cluster.racks, cl.racks)


def _solver(time_limit_s: float, workers: int, effort: float | None = None) -> cp_model.CpSolver:
    solver = stoppable_solver()  # a stop signal ends the search (solvers/stop.py)
    solver.parameters.max_time_in_seconds = max(0.01, time_limit_s)
    if effort is not None:  # CP-SAT's deterministic time: the same answer on any machine
        solver.parameters.max_deterministic_time = effort
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = 0
    # One worker following the model's decision strategy (shapes by their lower bound,
    # then the largest DP degree) proves optimality fastest here, and is deterministic;
    # presolve costs more than it saves on this small, product-heavy model (bench/solver.py).
    solver.parameters.search_branching = cp_model.FIXED_SEARCH
    solver.parameters.cp_model_presolve = False
    solver.parameters.cp_model_probing_level = 0
    return solver


@dataclass(frozen=True)
class Resolve:
    """What a caller that re-solves questions it derived knows about one of them
    (resolve_cpsat; the explanation, solvers/explain.py, and the alternatives,
    designer/alternatives.py): not part of the public solve_cpsat.

    ``hint`` warm-starts the search (e.g. the optimum of a tighter question); ``effort``:
    CP-SAT's deterministic time (machine-independent answers); ``alive``:
    ``presolve(scenario, candidates)``; ``warm_shapes``: how many shapes the warm start
    tries (fewer will do when ``hint`` is a good plan); ``time_cap_days`` (time
    objective): whether any plan is faster than this (a relaxed question against the
    plan it explains): "infeasible" says none is; otherwise the search stops at the
    first one it finds ("feasible"), or, with ``cap_minimises``, searches on for the best
    plan at most that fast (the cap only prunes: the question's optimum when it lies at
    or below the cap, "infeasible" when it does not; the cap raised by prune's margin,
    _time_cap); ``terms``:
    ``bounds.prepare_bounds(scenario)``; ``ties`` (cost objective): the tie rule's second
    phase, the fastest plan at the optimal cost (_fastest_at_cost; off for a caller
    that reads only the optimum's objective, the explanation's prices). Each
    of ``alive`` and ``terms`` belongs to the question it is handed in with: a solve
    split by rental term or GPU type drops them (and the time cap with the GPU types,
    the cost objective's)."""

    hint: Config | None = None
    effort: float | None = None
    alive: Presolved | None = None
    warm_shapes: int = WARM_SHAPES
    time_cap_days: float | None = None
    terms: BoundTerms | None = None
    cap_minimises: bool = False
    ties: bool = True


class _Found(NamedTuple):
    """A search's plans (best first), its status and its relative gap (None: no plan)."""

    plans: list[Plan]
    status: str
    gap: float | None


@dataclass(frozen=True)
class _Search:
    """One CP-SAT search over the pruned shapes (_solve_built): the question, the shapes
    and their bounds, the whole space (reported with the result), the incumbents to warm
    start from (distinct shapes, best first: the first is the hint) and the limits."""

    scenario: Scenario
    cands: list[Candidate]
    space: list[Candidate]
    bounds: Bounds
    warm: list[Config]
    top_k: int
    time_limit_s: float
    workers: int
    effort: float | None
    ties: bool = True  # Resolve's


def _solve_cloud_cost_by_gpu(
    scenario: Scenario,
    how: Resolve,
    top_k: int,
    time_limit_s: float,
    workers: int,
    space: list[Candidate],
) -> SolveResult:
    """Cheapest rented plan: one solve per GPU type (each with an integer objective), merged."""
    start = time.perf_counter()
    each = replace(how, alive=None, terms=None, time_cap_days=None)
    results = [
        resolve_cpsat(
            scenario.with_changes(gpus=(g,)),
            each,
            top_k=top_k,
            time_limit_s=time_limit_s,
            workers=workers,
            candidates=[c for c in space if c.shape.gpu == g],
        )
        for g in scenario.gpus
    ]
    plans = sorted(  # optimize's tie rule: then the faster, then fewer GPUs
        (p for r in results for p in r.plans), key=lambda p: plan_order(p, scenario.objective)
    )
    # the answer's gap against every type's bound (merged_gap: None while a type stopped
    # with no plan and no bound, since it may hold a cheaper one); proved only when every
    # type is (a gap of 0 does not settle the tie rule's second key: exhaustive.py)
    gap = merged_gap(results, float(plans[0].objective)) if plans else None
    status = "infeasible"
    if plans:
        proved = all(r.status in ("optimal", "infeasible") for r in results)
        status, gap = ("optimal", 0.0) if proved else ("feasible", gap)
    elif any(r.status == "unknown" for r in results):
        status = "unknown"
    return SolveResult(
        status=status,
        solver="cpsat",
        wall_s=time.perf_counter() - start,
        gap=gap,
        plans=plans[:top_k],
        candidates=space,
    )


def solve_cpsat(
    scenario: Scenario,
    top_k: int = 1,
    time_limit_s: float = 60.0,
    workers: int = 1,
    candidates: list[Candidate] | None = None,
) -> SolveResult:
    """Minimise the objective; ``top_k`` best plans with distinct shapes (``candidates``:
    the question's space, when the caller has it). A caller that re-solves questions it
    derived hands in what it knows through resolve_cpsat."""
    return resolve_cpsat(scenario, Resolve(), top_k, time_limit_s, workers, candidates)


@names_objective
@without_gc_pauses
def resolve_cpsat(
    scenario: Scenario,
    how: Resolve,
    top_k: int = 1,
    time_limit_s: float = 60.0,
    workers: int = 1,
    candidates: list[Candidate] | None = None,
) -> SolveResult:
    """solve_cpsat with what the caller knows of the question (Resolve)."""
    if cloud_terms.applies(scenario):  # one solve per rental term (solvers/cloud_terms.py)
        each = replace(how, alive=None, terms=None)
        return cloud_terms.solve_by_term(
            resolve_cpsat, scenario, top_k, how=each, time_limit_s=time_limit_s,
            workers=workers, candidates=candidates,
        )  # fmt: skip
    start = time.perf_counter()
    cloud_by_gpu = (
        scenario.objective == "cost" and scenario.pricing == "cloud" and len(scenario.gpus) > 1
    )
    # what the stages read of the question, computed once (PreparedQuestion, BoundTerms);
    # the per-GPU solves of a rented cost question compute their own
    terms = how.terms
    if terms is None and not cloud_by_gpu:
        terms = prepare_bounds(scenario)
    space = candidates
    if space is None:  # enumerated within the time limit too (a space kept returns at once)
        space = enumerate_within(scenario, time_limit_s, terms.prepared if terms else None)
        if space is None:
            wall = time.perf_counter() - start
            return SolveResult.enumeration_stopped("cpsat", wall)
    if cloud_by_gpu:
        return _solve_cloud_cost_by_gpu(scenario, how, top_k, time_limit_s, workers, space)
    assert terms is not None  # (computed above unless cloud_by_gpu)
    kept = _pruned(scenario, how, space, top_k, terms)
    if kept is None or not kept.candidates:  # (none: every bound above a minimised cap)
        return SolveResult(
            "infeasible", "cpsat", time.perf_counter() - start, None, candidates=space
        )
    incumbents = kept.incumbents
    cap = None
    if scenario.pricing == "tco" and scenario.objective == "cost" and len(incumbents) >= top_k:
        cap = incumbents[top_k - 1][0] * 1.05 + 1.0  # no plan among the top k costs more
    search = _Search(
        scenario,
        kept.candidates,
        space,
        Bounds(kept.dp_ranges, kept.lower_bounds),
        [cfg for _, cfg in incumbents],
        top_k,
        time_limit_s,
        workers,
        how.effort,
        how.ties,
    )
    result = _solve_built(search, terms, cap, _time_cap(how), how.cap_minimises)
    if result.status == "infeasible" and cap is not None:
        # the incumbent's bound is valid by construction; this only guards against rounding
        result = _solve_built(search, terms)
    # phase two: the cheapest purchases within the tolerance of each plan's time
    plans = settle(scenario, result.plans, terms.prepared)  # (solvers/purchase_rule.py)
    plans = _cheapest_nics(scenario, plans, terms.prepared)
    return replace(result, plans=plans, wall_s=time.perf_counter() - start)


def _cheapest_nics(scenario: Scenario, plans: list[Plan], q: PreparedQuestion) -> list[Plan]:
    """The time objective's tie rule on the NICs (solvers/tie_rule.py: the cheaper of two
    equally fast plans): each plan's layout and purchases kept, its NIC type and count
    chosen again among those its server takes, the best by plan_order of those at least
    as fast. The model's search takes the most NICs first and no cost into account: a toy
    on 40 A100s (bench/agreement.py --full --toys seed 64) kept 8 NICs a server where 4
    train as fast for less, as the exhaustive solver's plan does. Not when renting (the
    GPU-hours' price does not depend on the NICs: the fastest in every slot)."""
    if scenario.objective != "time" or scenario.pricing == "cloud" or not plans:
        return plans
    chosen = []
    for plan in plans:
        cfg, best = plan.config, plan
        gpu = cfg.shape.gpu
        for nic in q.nics_for[gpu]:
            for k in q.nic_counts[gpu]:
                if (nic.name, k) == (cfg.nic, cfg.nics_per_node):
                    continue
                other = build_plan(scenario, replace(cfg, nic=nic.name, nics_per_node=k), q)
                if other.feasible and plan_order(other, "time") < plan_order(best, "time"):
                    best = other
        chosen.append(best)
    if all(a is b for a, b in zip(chosen, plans, strict=True)):
        return plans
    return sorted(chosen, key=lambda p: plan_order(p, "time"))


def _pruned(
    scenario: Scenario, how: Resolve, space: list[Candidate], top_k: int, terms: BoundTerms
) -> Pruned | None:
    """prune(presolve(...)) (None: presolve keeps no shape). Where presolve's last steps
    are costly (a deadline's stage times, bounds.dp_bounds' last rule), from its screen:
    prune_deferred finishes only the shapes pruning reads, with the same result."""
    if how.alive is None and space and finish_is_costly(scenario):
        deferred = defer_presolve(scenario, space, terms=terms)
        return prune_deferred(scenario, deferred, top_k, how.hint, how.warm_shapes, terms)
    pre = how.alive if how.alive is not None else presolve(scenario, space, terms=terms)
    if not pre.candidates:
        return None
    lid = _time_cap(how)  # a capped minimisation asks only for plans at most the cap
    ceiling = (
        lid if how.cap_minimises and lid is not None and scenario.objective == "time" else math.inf
    )
    return prune(scenario, pre, top_k, how.hint, how.warm_shapes, terms, ceiling)


def capped_search_limit(time_cap_days: float) -> float:
    """The largest lower bound a shape may have and still be searched by a capped
    minimisation at ``time_cap_days`` (Resolve's ``cap_minimises``): prune's margin above
    the search's cap (_time_cap). A question none of whose shapes' bounds lies at or
    under it has no plan that search could return."""
    return kept_limit(_raised_cap(time_cap_days))


def _time_cap(how: Resolve) -> float | None:
    """The time cap the search applies: Resolve's ``time_cap_days``, raised by prune's
    margin for a capped minimisation. CP-SAT's integer objective rounds a plan's time up
    (by under 1e-7 of it on the benchmark questions), so a plan tied with the cap stays
    in the search, and the float model ranks it as when the question is solved in full
    (the alternatives and the explanation's shape rules minimise under a cap)."""
    if how.time_cap_days is None or not how.cap_minimises:
        return how.time_cap_days
    return _raised_cap(how.time_cap_days)


def _raised_cap(time_cap_days: float) -> float:
    """A capped minimisation's cap raised by prune's margin (_time_cap)."""
    return time_cap_days * (1 + PRUNE_MARGIN)


def _solve_built(
    search: _Search,
    terms: BoundTerms,
    cost_cap_usd: float | None = None,
    time_cap_days: float | None = None,
    cap_minimises: bool = False,
) -> SolveResult:
    """One CP-SAT search (``cost_cap_usd``: no plan that matters costs more;
    ``time_cap_days`` and ``cap_minimises``: Resolve's)."""
    start = time.perf_counter()
    scenario = search.scenario
    form = build(scenario, search.cands, cost_cap_usd, search.bounds, terms)
    md = form.model
    md.minimize(form.objective)
    capped = time_cap_days is not None and form.days_per_unit is not None
    first_only = capped and not cap_minimises
    if capped:  # the cap on the objective variable's own domain (TIME_CAP_MARGIN)
        var = form.objective
        assert isinstance(var, cp_model.IntVar)
        assert time_cap_days is not None and form.days_per_unit is not None
        dom = md.proto.variables[var.index].domain
        cap = up(time_cap_days * (1 + TIME_CAP_MARGIN) / form.days_per_unit)
        _set_domain(md, var, dom[0], min(dom[len(dom) - 1], max(dom[0], cap)))
    if search.top_k > 1:
        found = _top_k_by_shape(search, form)
    else:
        found = _best(search, form, first_only)
    return SolveResult(
        status=found.status,
        solver="cpsat",
        wall_s=time.perf_counter() - start,
        gap=found.gap,
        plans=found.plans,
        candidates=search.space,
    )


def _best(search: _Search, form: Formulation, first_only: bool) -> _Found:
    """The best plan, warm-started from the first incumbent (``first_only``: the first plan
    found under the time cap); under the cost objective, the fastest at the proved
    optimal cost (_fastest_at_cost: the tie rule's second phase)."""
    md = form.model
    if search.warm:
        _hint(search.scenario, form, search.warm[0])
    deadline = time.perf_counter() + search.time_limit_s
    solver = _solver(search.time_limit_s, search.workers, search.effort)
    _tune(search.scenario, solver)
    # proving the optimum under a cap can make CP-SAT's bound propagation crawl through
    # the step's products (minutes for a relaxed 671B model): the first plan answers
    solver.parameters.stop_after_first_solution = first_only
    code = _checked_solve(solver, md)
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return _Found([], "unknown" if code == cp_model.UNKNOWN else "infeasible", None)
    status = "optimal" if code == cp_model.OPTIMAL else "feasible"
    best, bound = solver.objective_value, solver.best_objective_bound
    gap = 0.0 if code == cp_model.OPTIMAL else relative_gap(best, bound)
    cfg = _config(form, solver)
    if code == cp_model.OPTIMAL and _ties_on_cost(search, form):
        cut = md.add(form.objective <= 0).index
        at_zero = md.proto.constraints[cut].linear.domain[-1]
        limits = (deadline, search.workers, search.effort)
        cfg, proved, _ = _fastest_at_cost(search.scenario, form, (cut, at_zero, best), cfg, limits)
        status = "optimal" if proved else "feasible"
    plan = build_plan(search.scenario, cfg, form.prepared)
    return _Found([plan], status, gap)


def _time_m_order(form: Formulation) -> Any:
    """How the time objective's search branches on the micro-batches (model.py
    _search_order): the fewest first where the batch's tokens depend on it (at most 0.5x
    phase two's work on the cost questions of bench/agreement.py), else the most."""
    q = form.prepared
    if q is not None and q.critical_batch_seq is not None:
        return cp_model.SELECT_MIN_VALUE
    return cp_model.SELECT_UPPER_HALF


def _m_order(form: Formulation, order: Any) -> Any:
    """Set the micro-batches' value order in the model's decision strategy; the one it
    replaces (to restore it)."""
    for strategy in form.model.proto.search_strategy:
        if [list(e.vars) for e in strategy.exprs] == [[form.m.index]]:
            old = strategy.domain_reduction_strategy
            strategy.domain_reduction_strategy = order
            return old
    raise AssertionError("no decision strategy on the micro-batches")


def _ties_on_cost(search: _Search, form: Formulation) -> bool:
    """Whether a cost question's optimum takes the tie rule's second phase: the cost
    objective with the time per sequence in the model (solvers/tie_rule.py), unless the
    caller reads only the optimum's objective (Resolve's ``ties``)."""
    objective = search.scenario.objective
    return search.ties and objective == "cost" and form.time_per_seq is not None


def _fastest_at_cost(
    scenario: Scenario,
    form: Formulation,
    cutoff: tuple[int, int, float],
    cheapest: Config,
    limits: tuple[float, int, float | None],
) -> tuple[Config, bool, float | None]:
    """Phase two of the cost objective (solvers/tie_rule.py: the faster of two equally
    cheap plans): the objective held at its proved optimum (``cutoff``: the linear
    constraint's index, its constant and the optimum, in the model's units) and the
    expected time per sequence minimised, warm-started from ``cheapest`` (phase one's
    plan), with its own deterministic effort and the wall clock left (``limits``:
    deadline, workers, effort). Phase one alone kept the first cheapest plan its search
    met, whose micro-batch count it branches from the top: 8 H100s for Llama 3 8B by a
    200-day deadline took 188.7 days where the same $297.5K trains in 74.3.

    The model's units round each plan's cost up, by amounts a layout's terms decide: a
    plan as cheap in the float model can lie a few hundred units above the optimum
    (bench/agreement.py --full --toys seed 187: 24 Gaudi 3 x 1 micro-batch, the same
    $0.69 as 8 x 3 and 3x faster, 400-700 units of 3.3e9 above it). So the cost is first
    held within TIE_SLACK of the optimum, and the fastest plan found there kept only if
    the float model ties it with ``cheapest`` or better (tie_rule.ties_or_beats: no dearer
    beyond FLOAT_TIE, no slower); one that is dearer lowers the cost's hold below its own
    model cost, for at most TIE_TRIES searches, and then the hold is the optimum itself
    (the plan can then cost what ``cheapest`` does in the model's units, no more).
    Returns the fastest plan found (``cheapest`` when none is), whether it is proved the
    fastest in its search, and its time per sequence in the model's units (None:
    ``cheapest`` returned); the model's objective, hints, search order and cutoff are
    restored."""
    cut, at_zero, optimum = cutoff
    best = int(round(optimum))
    hold = best + math.ceil(best * TIE_SLACK)
    base: Plan | None = None  # ``cheapest`` in the float model (built when first needed)
    for _ in range(TIE_TRIES):
        found = _fastest_within(scenario, form, (cut, at_zero, hold), cheapest, limits)
        if found is None or found[3] <= best:  # none, or at the optimum's own units
            return _answer(cheapest, found)
        base = base or build_plan(scenario, cheapest, form.prepared)
        if ties_or_beats(build_plan(scenario, found[0], form.prepared), base, "cost"):
            return _answer(cheapest, found)
        hold = found[3] - 1  # dearer in the float model: below its units
        if hold <= best:
            break
    at_optimum = _fastest_within(scenario, form, (cut, at_zero, best), cheapest, limits)
    return _answer(cheapest, at_optimum)


def _answer(
    cheapest: Config, found: tuple[Config, bool, float, int] | None
) -> tuple[Config, bool, float | None]:
    """_fastest_at_cost's answer from one search's (_fastest_within; None: ``cheapest``)."""
    if found is None:
        return cheapest, False, None
    return found[0], found[1], found[2]


def _fastest_within(
    scenario: Scenario,
    form: Formulation,
    cutoff: tuple[int, int, int],
    cheapest: Config,
    limits: tuple[float, int, float | None],
) -> tuple[Config, bool, float, int] | None:
    """One search of _fastest_at_cost: the time per sequence minimised with the objective
    at most ``cutoff``'s bound (the constraint's index, its constant, the bound in the
    model's units), warm-started from ``cheapest``. Returns the plan, whether it is proved
    the fastest, its time per sequence and its objective in the model's units (None: no
    plan within the limits); the model's objective, hints, search order and cutoff are
    restored."""
    md = form.model
    cut, at_zero, hold = cutoff
    deadline, workers, effort = limits
    assert form.time_per_seq is not None
    _set_cutoff(md, cut, hold + at_zero)
    md.clear_hints()
    _hint(scenario, form, cheapest)
    md.minimize(form.time_per_seq)
    solver = _solver(deadline - time.perf_counter(), workers, effort)
    # the time objective's settings: no LP relaxation (_tune), its micro-batch order
    solver.parameters.linearization_level = 0
    m_order = _m_order(form, _time_m_order(form))
    code = _checked_solve(solver, md)
    _m_order(form, m_order)
    md.minimize(form.objective)
    md.clear_hints()
    _set_cutoff(md, cut, 2**61 + at_zero)
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    cost = int(solver.value(form.objective))
    return _config(form, solver), code == cp_model.OPTIMAL, solver.objective_value, cost


def _tune(scenario: Scenario, solver: cp_model.CpSolver) -> None:
    if scenario.objective == "time":
        # the LP relaxation of the product-heavy time model costs more than it prunes
        # (bench/solver.py: about 1.5x faster without it); it pays off for cost
        solver.parameters.linearization_level = 0


def _checked_solve(solver: cp_model.CpSolver, md: cp_model.CpModel) -> Any:
    code = solver.solve(md)
    if code == cp_model.MODEL_INVALID:
        raise RuntimeError(f"internal error: invalid CP-SAT model ({md.validate()})")
    return code


def _set_domain(md: cp_model.CpModel, var: cp_model.IntVar, lo: int, hi: int) -> None:
    dom = md.proto.variables[var.index].domain
    dom.clear()
    dom.extend([lo, hi])


def _set_cutoff(md: cp_model.CpModel, index: int, hi: int) -> None:
    """The upper end of linear constraint ``index`` (proto fields are copied on item access,
    so the domain is rewritten whole, as ``_set_domain`` does)."""
    dom = md.proto.constraints[index].linear.domain
    lo = dom[0]
    dom.clear()
    dom.extend([lo, hi])


def _first_plan(
    scenario: Scenario, md: cp_model.CpModel, deadline: float, workers: int, effort
) -> tuple[cp_model.CpSolver, Any]:
    """The first plan a search finds (the hint's, when it holds), or the search's end."""
    solver = _solver(deadline - time.perf_counter(), workers, effort)
    _tune(scenario, solver)
    solver.parameters.stop_after_first_solution = True
    return solver, _checked_solve(solver, md)


def _solve_shape(
    scenario: Scenario,
    form: Formulation,
    cutoff: tuple[int, int, int, float | None],
    hint: Config | None,
    prepared: PreparedQuestion,
    deadline: float,
    workers: int,
    effort: float | None,
) -> tuple[cp_model.CpSolver, Any]:
    """The chosen shape's best plan with an objective at most ``cutoff``'s (constraint
    index, its constant, the k-th plan's model objective and float objective, None before
    k plans): when the hint (the warm start's incumbent; under the time objective, for a
    shape it did not try, the same heuristic's, grid_search.best_for_candidate, about
    10 ms) beats the k-th plan, its plan is found first and its objective then cuts from
    the root of the search that proves the shape.

    Left to CP-SAT's own objective bound, which tightens only after the search has started
    (one worker, fixed search, no restarts), the proof visited DP degrees one by one
    (agreement seed 189, Llama 3 8B at a failure rate x 100: 29-43 s for one shape with its
    optimal plan as the hint, 1.4 s with its objective as the cutoff). The time objective
    alone takes the heuristic: its search tries the largest DP degree first, far from a
    plan past the critical batch; a cost's tries the smallest."""
    md = form.model
    cut, at_zero, kth, kth_plan = cutoff
    _set_cutoff(md, cut, kth + at_zero)
    md.clear_hints()
    own: float | None = None  # the hint's objective (float model), when known
    if hint is None and scenario.objective == "time":
        cand = next(c for c, v in zip(form.candidates, form.x, strict=True) if _fixed_one(md, v))
        found = best_for_candidate(
            scenario, cand, list(prepared.nic_specs), scenario.assumptions.dp_overlap,
            prepared=prepared,
        )  # fmt: skip
        own, hint = (found[0][0], found[1]) if found is not None else (None, None)
    if hint is not None:
        _hint(scenario, form, hint)
        if kth_plan is not None and own is None:
            own = build_plan(scenario, hint, prepared).objective
    if hint is None or (kth_plan is not None and own is not None and own >= kth_plan):
        solver = _solver(deadline - time.perf_counter(), workers, effort)  # the k-th cuts
        _tune(scenario, solver)
        return solver, _checked_solve(solver, md)
    first, code = _first_plan(scenario, md, deadline, workers, effort)
    if code != cp_model.FEASIBLE:  # none under the cutoff, proved optimal, or out of time
        return first, code
    _set_cutoff(md, cut, int(round(first.objective_value)) + at_zero)
    solver = _solver(deadline - time.perf_counter(), workers, effort)
    _tune(scenario, solver)
    code = _checked_solve(solver, md)
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return solver, code
    return first, cp_model.FEASIBLE  # out of time: the first plan, unproved


def _fixed_one(md: cp_model.CpModel, var: cp_model.IntVar) -> bool:
    return md.proto.variables[var.index].domain[0] == 1


def _tied_fastest(
    search: _Search,
    form: Formulation,
    sub: tuple[cp_model.CpSolver, Any],
    cut: tuple[int, int],
    limits: tuple[float, int, float | None],
) -> tuple[float, Config, bool]:
    """A shape's plan from its sub-solve ``sub`` (solver, status) under _top_k_by_shape:
    under the cost objective, once the shape's cost is proved, the fastest plan at it
    (_fastest_at_cost on the shape's cutoff constraint ``cut``: its index and constant),
    so that every plan of a top-K list, not only the first, follows the tie rule. Returns
    the plan's time per sequence in the model's units (the order among shapes tied on the
    cost; 0 elsewhere), the plan, and whether its tie is proved."""
    solver, code = sub
    cfg = _config(form, solver)
    if code != cp_model.OPTIMAL or not _ties_on_cost(search, form):
        return 0.0, cfg, True
    assert form.time_per_seq is not None
    own = float(solver.value(form.time_per_seq))
    cutoff = (*cut, solver.objective_value)
    fastest, proved, t = _fastest_at_cost(search.scenario, form, cutoff, cfg, limits)
    return (own if t is None else t), fastest, proved


def _top_k_by_shape(search: _Search, form: Formulation) -> _Found:
    """The ``top_k`` best plans of distinct shapes, each shape solved once.

    Shapes are visited by their objective lower bound; each is solved alone (its
    literal fixed to 1 in the same model) with the objective capped at the k-th best
    plan found so far, warm-started from its incumbent when the warm start found
    one, until the next shape's bound exceeds the k-th best (no later shape can
    enter the top k). Every shape is proved once, instead of the whole space K
    times; ties are broken by the bound order. With ``effort``, each sub-solve gets
    an equal share of it."""
    scenario, top_k, effort = search.scenario, search.top_k, search.effort
    lbs, warm = search.bounds.lower_bounds, search.warm
    start = time.perf_counter()
    md = form.model
    # the cutoff is the upper end of one linear constraint's domain, rewritten per shape: a
    # cutoff variable of domain [0, 2^61] broke CP-SAT's check that the variables' domains
    # sum within int64 on wide questions (an "invalid CP-SAT model" at --top 20)
    cut = md.add(form.objective <= 0).index
    at_zero = md.proto.constraints[cut].linear.domain[-1]  # the constant moved to the right
    hints = {cfg.shape: cfg for cfg in warm}
    # (model objective, model time per sequence at ties on cost, visit order, config)
    found: list[tuple[float, float, int, Config]] = []
    ties_proved = True  # every cost tie settled by a proved second phase (_tied_fastest)
    unproved: list[float] = []  # model-unit bounds of shapes whose sub-solve stopped early
    order = sorted(range(len(form.candidates)), key=lambda i: (lbs[i], i))
    for v in form.x:
        _set_domain(md, v, 0, 0)
    kth_plan: float | None = None
    for rank, i in enumerate(order):
        if kth_plan is not None and lbs[i] > kth_plan * (1 + PRUNE_MARGIN):
            break
        left = search.time_limit_s - (time.perf_counter() - start)
        if left <= 0:
            unproved.append(-math.inf)
            break
        _set_domain(md, form.x[i], 1, 1)
        kth = sorted(f[0] for f in found)[top_k - 1] if len(found) >= top_k else 2**61
        share = None if effort is None else effort / top_k
        hint = hints.get(form.candidates[i].shape)
        deadline = time.perf_counter() + left
        q = form.prepared if form.prepared is not None else scenario.prepare()
        args = (scenario, form, (cut, at_zero, int(kth), kth_plan), hint, q, deadline)
        solver, code = _solve_shape(*args, search.workers, share)
        if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):  # (the shape still fixed)
            limits = (deadline, search.workers, share)
            sub = (solver, code)
            t, cfg, settled = _tied_fastest(search, form, sub, (cut, at_zero), limits)
            ties_proved = ties_proved and settled
            found.append((solver.objective_value, t, rank, cfg))
            if code == cp_model.FEASIBLE:
                unproved.append(solver.best_objective_bound)
        elif code == cp_model.UNKNOWN:
            unproved.append(-math.inf)
        _set_domain(md, form.x[i], 0, 0)
        if len(found) >= top_k:
            found.sort(key=lambda f: f[:3])
            del found[top_k:]
            kth_plan = build_plan(scenario, found[-1][3], form.prepared).objective
    for v in form.x:
        _set_domain(md, v, 0, 1)
    _set_cutoff(md, cut, 2**61 + at_zero)
    md.clear_hints()
    found.sort(key=lambda f: f[:3])
    plans = [build_plan(scenario, f[3], form.prepared) for f in found[:top_k]]
    if not plans:
        return _Found([], "unknown" if unproved else "infeasible", None)
    if not unproved:
        return _Found(plans, "optimal" if ties_proved else "feasible", 0.0)
    # an unknown shape's bound is -inf: a gap of 1
    return _Found(plans, "feasible", relative_gap(found[0][0], min(unproved)))
