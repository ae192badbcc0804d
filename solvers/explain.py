"""Why the answer: binding constraints with their price, and conflicts with the smallest fix.

Binding (an optimum exists): every active constraint family gets its slack in
natural units on the chosen plan and is re-solved with that family relaxed by
a stated step (capacity +10%, budget +10%, batch ceiling x2, one more NIC
slot, rule switched off, ...), warm-started from the optimum, which stays
feasible. A step of +10% that buys no purchase unit (a server, an NVL72 rack) is
widened to one that does: a GPU cap by one unit, a budget to what the plan's shape
costs on the next size up, a deadline (cost objective) to what it takes on the next
size down (Family.relaxations). A family is binding when relaxing it improves the
objective. With the
time objective a re-solve that stops at its effort is followed by one that only asks
whether any plan beats the optimum (proving that none does is usually quick); a shape
rule switched off re-solves only the shapes it admits (the others keep their plans,
whose best is the proved optimum).

Conflict (nothing fits): the active families are shrunk to a minimal infeasible set
by deletion, each step a feasibility test (presolve, a quick witness, a TCO budget
below every shape's cost cut, or a CP-SAT solve), decided tests reused by monotonicity
(infeasible_core), the conflict first guessed with memory kept and tested once without
it (_guess: the deletion's trials without memory bound every shape). For each member the
smallest relaxation that makes the question feasible, the others unchanged, is found
by bisection on its amount. When no member's relaxation alone makes the question
feasible, another conflict among the families outside the first blocks them all (a
budget that alone rules out every plan, say, where deletion in the registry's order kept
deadline and max_gpus): the families outside the conflicts found so far are shrunk
again, until they hold together (_disjoint_cores), and every conflict gets its fixes in
turn, the last found first with the others held off, each later one with the first fix
of every earlier one applied (_staged): one fix of each, applied together, makes the
question feasible.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ortools.sat.python import cp_model

from solvers import cloud_terms
from solvers.cpsat.context import Bounds
from solvers.cpsat.model import Formulation, build
from solvers.cpsat.solve import Resolve, _solver, resolve_cpsat, solve_cpsat
from solvers.decisions import Shape
from solvers.exhaustive import best_for_candidate
from solvers.families import BY_NAME, NAMES, REGISTRY, SHAPE_RULES, active, enforced
from solvers.families.base import Family, Fix
from solvers.gc_pause import without_gc_pauses
from solvers.intmath import down
from solvers.limits import TCO_UNITS_PER_CENT
from solvers.plan import Config, Plan, build_plan
from solvers.result import SolveResult
from solvers.scenario import Scenario
from solvers.screen.bounds import (
    BoundTerms,
    objective_lower_bounds,
    prepare_bounds,
    shared_bounds,
)
from solvers.screen.presolve import Presolved, presolve
from solvers.screen.prune import may_beat
from solvers.space import (
    Candidate,
    enumerate_candidates,
    for_question,
    nic_specs,
    with_memory_scale,
)

EXPLAIN_EFFORT = 0.3  # deterministic-time cap of each re-solve (README "Explanations")
# A capped probe's wall-clock backstop, in multiples of the wall time its re-solve from the
# plan took to spend the same effort (so, nearly machine-independent): CP-SAT checks its
# deterministic-time limit between propagations, and the probe's capped objective can make
# one propagation creep on (GPT-OSS-120B's memory and batch_ceiling probes: 752 conflicts
# within 0.15 units, then one propagation of 50M integer steps to 5.7 units, 20-30 s,
# ending "unknown", measured with CP-SAT 9.15). ASSUMED: a probe that decides does so well
# within 3x its re-solve's wall time (the 27 benchmark answers are unchanged by it)
PROBE_WALL_FACTOR = 3.0
# Shapes each re-solve's warm start tries besides the plan being explained, which is
# already a good incumbent for its relaxed question
EXPLAIN_WARM_SHAPES = 6
# How far above the plan's time a shape rule's admitted shape may lie and still be
# presolved: more than the capped search's own room (prune's 1e-4 margin on a cap raised by
# it, solvers.cpsat.solve._time_cap), so it drops none of the shapes the search would keep
UNDER_THE_PLAN_ROOM = 1.001
# _guess's tests stop here (seconds of CP-SAT search; undecided, a test answers nothing):
# those with memory kept, which refute in milliseconds but can take a second to find a
# plan (seed 26 of bench/explain_speed.py --random), and the one without memory, which
# refutes seed 123's guess in 0.7 s
GUESS_TRIAL_S = 0.25
GUESS_LIMIT_S = 5.0


@dataclass(frozen=True)
class Binding:
    constraint: str
    slack: float | None
    unit: str
    detail: str
    relaxation: str
    improvement_if_relaxed: float  # objective units (days or USD); 0 when not binding
    improvement_pct: float
    exact: bool = True  # False: the relaxed re-solve stopped at its effort limit (a lower bound)
    # False: the plan is not proved optimal and the relaxed re-solve is not proved either, so
    # a better relaxed plan may be one the unrelaxed search missed: binding is not claimed
    decided: bool = True

    @property
    def binding(self) -> bool:
        return self.decided and self.improvement_if_relaxed > 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "constraint": self.constraint,
            "slack": self.slack,
            "unit": self.unit,
            "detail": self.detail,
            "relaxation": self.relaxation,
            "improvement_if_relaxed": self.improvement_if_relaxed,
            "improvement_pct": self.improvement_pct,
            "binding": self.binding,
            "exact": self.exact,
            "decided": self.decided,
        }


def slack_of(scenario: Scenario, plan: Plan, family: str) -> tuple[float | None, str, str]:
    """(slack, unit, 'used of limit' text) of one family on a plan."""
    return BY_NAME[family].slack(scenario, plan)


@without_gc_pauses
def binding_constraints(
    scenario: Scenario,
    plan: Plan,
    candidates: list[Candidate] | None = None,
    time_limit_s: float = 30.0,
    effort: float | None = EXPLAIN_EFFORT,
    plan_proved: bool = True,
) -> list[Binding]:
    """Every active family with slack and price, binding ones first (largest improvement).

    Each re-solve is capped at ``effort`` units of CP-SAT's deterministic time (about
    seconds, but machine-independent, so answers stay reproducible); one that stops
    there reports the improvement it found, a lower bound, with ``exact`` false.
    ``plan_proved`` false (the search stopped before proving the plan optimal): a
    family is called binding only when its relaxed re-solve is proved optimal; the
    others report what they found with ``decided`` false and binding false."""
    base = plan.objective
    cands = candidates if candidates is not None else enumerate_candidates(scenario)
    families = [f for f in REGISTRY if f.active(scenario)]

    def price(family: Family) -> tuple[float, bool, str]:
        """The relaxed optimum by the first of the family's steps that improves the plan
        (the last step's when none does), whether it is proved, and the step in words."""
        steps = family.relaxations(scenario, plan)
        for i, (words, relaxed) in enumerate(steps):
            better, exact = _price(
                family, (scenario, relaxed), cands, plan, plan_proved, effort, time_limit_s
            )
            if _gain(base, better) > 0 or i == len(steps) - 1:
                return better, exact, words
        raise AssertionError(f"{family.name}: no relaxation step")

    # CP-SAT releases the GIL while it searches: the re-solves run side by side
    with ThreadPoolExecutor(max_workers=max(1, min(len(families), os.cpu_count() or 1))) as pool:
        priced = list(pool.map(price, families))
    out = []
    for family, (better, exact, words) in zip(families, priced, strict=True):
        gain = _gain(base, better)
        slack, unit, detail = family.slack(scenario, plan)
        pct = 100.0 * gain / base if base else 0.0
        decided = plan_proved or exact
        # the step's words: ep_domain's depend on --ep-in-domain, tp_domain's on the step
        out.append(Binding(family.name, slack, unit, detail, words, gain, pct, exact, decided))
    out.sort(key=lambda b: (not b.binding, -b.improvement_if_relaxed, b.constraint))
    return out


def _gain(base: float, better: float) -> float:
    """The improvement of ``better`` over the plan's ``base``: 0 within 1e-6 of it."""
    gain = max(0.0, float(base - better))
    return 0.0 if gain <= 1e-6 * max(abs(base), 1e-12) else gain


def _price(
    family: Family,
    questions: tuple[Scenario, Scenario],
    cands: list[Candidate],
    plan: Plan,
    plan_proved: bool,
    effort: float | None,
    time_limit_s: float,
) -> tuple[float, bool]:
    """The optimum of the relaxed question (``questions``: the question and one relaxation
    step of ``family``) warm-started from the plan, at most the plan's, and whether it is
    proved; ``effort``, ``time_limit_s``: each re-solve's (binding_constraints)."""
    scenario, relaxed = questions
    base = plan.objective
    space = for_question(relaxed, scenario, cands)
    # a shape rule off (or its request dropped): the shapes the question already had keep
    # their plans, the best of which is the proved optimum; only the shapes it kept out
    # can improve
    admits = plan_proved and _adds_shapes_only(family, scenario, relaxed)
    terms = prepare_bounds(relaxed)  # once for its presolve, bound and re-solves
    changed, among = _relaxed_shapes(
        family, scenario, relaxed, space, plan, plan_proved, admits, terms
    )
    # no shape of the relaxed question (that it changes) can beat the plan: no re-solve
    if not may_beat(relaxed, changed, base, terms):
        return base, True

    def run(
        hint: Config | None, cap: float | None, wall_s: float | None = None, lid: bool = False
    ) -> SolveResult:
        # only the optimum's objective is read: no tie rule's second phase (Resolve's ties)
        settings = Resolve(hint, effort, among, EXPLAIN_WARM_SHAPES, cap, terms, lid, False)
        limit_s = time_limit_s if wall_s is None else min(time_limit_s, wall_s)
        return resolve_cpsat(relaxed, settings, time_limit_s=limit_s, candidates=space)

    if admits and relaxed.objective == "time":
        lidded = _under_the_plan(run, base)
        if lidded is not None:
            return lidded
    first = run(plan.config, None, None)
    res = first
    if relaxed.objective == "time" and first.status != "optimal":
        probed = _probed(run, base, first)
        if probed is None:
            return base, True
        res = probed
    better = res.best.objective if res.best else base
    return min(base, better), res.status == "optimal"


def _relaxed_shapes(
    family: Family,
    scenario: Scenario,
    relaxed: Scenario,
    space: list[Candidate],
    plan: Plan,
    proved: bool,
    admits: bool,
    terms: BoundTerms,
) -> tuple[Presolved, Presolved]:
    """(the presolved shapes of ``relaxed`` whose plans relaxing ``family`` may change, the
    shapes its re-solves search); ``proved``: the plan is proved optimal.

    - ``admits`` (a shape rule off, the plan proved optimal): the shapes it admits, for
      both, presolved only under the plan's time for a time question (the lid,
      _under_the_plan: those whose GEMM-only bound lies above it, with room for prune's
      margins, are left out before their memory bounds are computed).
    - A relaxation that moves some shapes only (Family.moved_by_relaxing, the plan proved
      optimal): those; to search, those and the plan's own (its best plan, the proved
      optimum, is the warm start and the bound the moved ones must beat).
    - Otherwise every shape, for both."""
    base = plan.objective
    lid = base * UNDER_THE_PLAN_ROOM if admits and relaxed.objective == "time" else None
    breaking = family.name if admits else None
    if admits and _request_dropped(family, scenario, relaxed):  # the shapes the rule lets in
        space = [c for c in space if _let_in(family.name, c)]
        breaking = None
    alive = presolve(relaxed, space, breaking=breaking, terms=terms, under_days=lid)
    moves = family.moved_by_relaxing(scenario) if proved and not admits else None
    if moves is None:
        return alive, alive
    moved = _moved(alive, moves)
    return moved, _with_shape(moved, alive, plan.config.shape)


def _let_in(name: str, cand: Candidate) -> bool:
    """Whether a rule's dropped request admits the shape: the rule kept it out of the
    question it was derived from (its ``origin``, for_question) and no longer does."""
    return (
        cand.origin is not None and name in cand.origin.structural and name not in cand.structural
    )


def _under_the_plan(run: Callable[..., SolveResult], base: float) -> tuple[float, bool] | None:
    """A time question's re-solve over only the shapes a shape rule kept out (none of them
    the plan's, so only a plan faster than it changes the answer): minimised under the
    plan's time (Resolve's ``cap_minimises``, as the alternatives do: a plan tied with it
    improves nothing). (base, True) when no plan lies
    there, (its objective, True) when the search proves one optimal; None when it stops
    at its effort undecided, and the full route answers (binding_constraints)."""
    res = run(None, base, None, True)
    if res.status == "infeasible":
        return base, True
    if res.status == "optimal" and res.best is not None:
        return min(base, res.best.objective), True
    return None


def _moved(alive: Presolved, moves: Callable[[Candidate], bool]) -> Presolved:
    """The presolved shapes a relaxation moves (Family.moved_by_relaxing), with their
    DP ranges."""
    return _kept(alive, [moves(c) for c in alive.candidates])


def _with_shape(moved: Presolved, alive: Presolved, shape: Shape) -> Presolved:
    """``moved`` and, in its place in ``alive``'s order, ``shape`` (when alive)."""
    inside = {id(c) for c in moved.candidates}
    return _kept(alive, [id(c) in inside or c.shape == shape for c in alive.candidates])


def _kept(pre: Presolved, keep: list[bool]) -> Presolved:
    at = [i for i, k in enumerate(keep) if k]
    return Presolved([pre.candidates[i] for i in at], [pre.dp_ranges[i] for i in at])


def _probed(
    run: Callable[[Config | None, float | None, float | None], SolveResult],
    base: float,
    unproved: SolveResult,
) -> SolveResult | None:
    """A time question's relaxed re-solve when the one warm-started from the plan
    (``unproved``) stopped at its effort: first ask whether any plan beats ``base``
    (proving that none does is usually quick; None: none does), then re-solve from the
    plan that question found, or keep ``unproved`` when it found none.

    The probe comes second because it is the costly step when it cannot decide (its
    capped objective makes CP-SAT's propagation crawl: GPT-OSS-120B's memory and
    pipeline_fill probes overran their 0.3 effort to 5 units each), and a re-solve proved
    optimal needs no probe: it gives the improvement the probe's route would give (none
    when the probe would prove that no plan is faster), and with the probe undecided that
    route is this very re-solve. (Both routes prove the same optimum of the model; two
    plans tied in its integer objective could differ in the float's last digits, which
    no benchmark question shows: bench/answers_diff.py, tests/test_explain_order.py.)

    The probe stops at PROBE_WALL_FACTOR times the wall time ``unproved`` took as well as
    at its effort (CP-SAT overruns the effort inside one creeping propagation); stopped
    there it is undecided, as it is when it stops at its effort."""
    probe = run(None, base, PROBE_WALL_FACTOR * unproved.wall_s)
    if probe.status == "infeasible":
        return None
    if probe.best is None:
        return unproved
    return run(probe.best.config, None, None)


def _adds_shapes_only(family: Family, scenario: Scenario, relaxed: Scenario) -> bool:
    """Whether relaxing ``family`` only admits shapes, leaving every other shape's plans
    as they were: a shape rule (violated whatever d, m and NICs are) switched off, or its
    request dropped (tp_domain's --cp-across-servers: _request_dropped), and nothing else
    about the question changed."""
    return (
        family.shape_rule
        and relaxed.memory_scale == scenario.memory_scale
        and (
            enforced(relaxed) == enforced(scenario) - {family.name}
            or _request_dropped(family, scenario, relaxed)
        )
    )


def _request_dropped(family: Family, scenario: Scenario, relaxed: Scenario) -> bool:
    """Whether ``relaxed`` keeps ``family`` enforced and differs from ``scenario`` only in
    what its shape rules request (tp_domain's lesser step, CP across servers)."""
    return (
        family.name in enforced(relaxed)
        and enforced(relaxed) == enforced(scenario)
        and relaxed.with_changes(
            assumptions=scenario.assumptions, ep_in_domain=scenario.ep_in_domain
        )
        == scenario
    )


# ----------------------------------------------------------------- conflicts
def _only(scenario: Scenario, families: set[str]) -> Scenario:
    """The question with every active family outside ``families`` switched off."""
    off = {f for f in NAMES if active(scenario, f) and f not in families}
    return scenario.with_changes(disabled=scenario.disabled | off)


def _feasible(
    scenario: Scenario, families: set[str], cands: list[Candidate], time_limit_s: float
) -> bool | None:
    """Is the question feasible with only ``families`` enforced? None if undecided in time.
    A question renting under terms is feasible when one term's is (solvers.cloud_terms:
    each term's price, block and minimum; the plain cloud question has neither block nor
    minimum, so it called questions feasible that no term could rent, and the reverse)."""
    s = _only(scenario, families)
    if cloud_terms.applies(s):
        found = []
        for term in cloud_terms.terms(s):
            rented = cloud_terms.term_scenario(s, term)
            # the block's cap holds as the solve holds it (max_gpus, unless switched off)
            held = families | (enforced(rented) - enforced(s))
            found.append(_feasible(rented, held, cands, time_limit_s))
        return True if True in found else None if None in found else False
    # a plan among the shapes whose memory bound is already known spares bounding the
    # rest (a dropped shape rule admits thousands of shapes never bounded before)
    quick = presolve(s, cands, cheap_only=True)
    if quick.candidates and _witness(s, quick):
        return True
    # (the quick presolve is the whole one when no shape's memory bound was left out)
    pre = quick if quick.complete else presolve(s, cands)
    if not pre.candidates:
        return False
    if len(pre.candidates) != len(quick.candidates) and _witness(s, pre):
        return True
    cuts = _cost_cuts(s, pre)
    if cuts is not None and not any(_under_budget(s, lb) for lb in cuts):
        return False  # every shape's cut exceeds the budget: the model, unbuilt, is infeasible
    return _decide(_feasibility_model(s, pre, cuts), time_limit_s)


def _decide(form: Formulation, time_limit_s: float) -> bool | None:
    """Whether the model has a solution (None: undecided in time)."""
    solver = _solver(time_limit_s, 1)
    code = solver.solve(form.model)
    if code == cp_model.MODEL_INVALID:
        raise RuntimeError(f"internal error: invalid CP-SAT model ({form.model.validate()})")
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return True
    if code == cp_model.INFEASIBLE:
        return False
    return None


def _admits_config(
    scenario: Scenario, families: set[str], cands: list[Candidate], cfg: Config, time_limit_s: float
) -> bool | None:
    """Whether the CP-SAT model _feasible solves for the question (``families`` enforced)
    admits the plan of ``cfg``: its shape, NICs, DP degree, micro-batches, spares and
    storage fixed, the rest (fabric, racks) free. Fixed, the model decides by propagation
    in a few milliseconds where _feasible's search proves a budget a dollar short of its
    cheapest plan infeasible in about half a second (the 405B question of
    tests/test_fix_figures.py). True: _feasible's model is feasible there too. None where
    _feasible asks another model (a question renting under terms) or undecided in time."""
    s = _only(scenario, families)
    if cloud_terms.applies(s):
        return None
    quick = presolve(s, cands, cheap_only=True)
    pre = quick if quick.complete else presolve(s, cands)
    at = [i for i, c in enumerate(pre.candidates) if c.shape == cfg.shape]
    if not at:
        return False
    cuts = _cost_cuts(s, pre)
    if cuts is not None and not _under_budget(s, cuts[at[0]]):
        return False  # the shape's own cut exceeds the budget (_feasible's shortcut)
    form = _feasibility_model(s, pre, cuts)
    md = form.model
    md.add(form.x[at[0]] == 1)
    if cfg.nic not in form.nic_lits:
        return False
    md.add(form.nic_lits[cfg.nic] == 1)
    md.add(form.nics == cfg.nics_per_node)
    md.add(form.dp == cfg.dp)
    md.add(form.m == cfg.microbatches)
    for k, lit in form.spare_lits.items():  # hot spares and storage (solvers/cpsat/purchases.py)
        md.add(lit == int(k == cfg.spares_per_100))
    for b, lit in form.storage_lits.items():
        md.add(lit == int(b == cfg.storage_gb_per_s))
    return _decide(form, time_limit_s)


def _cost_cuts(s: Scenario, pre: Presolved) -> list[float] | None:
    """Under a TCO budget, each presolved shape's TCO lower bound less 1e-6 of itself, the
    cut _feasibility_model gives its cost; None otherwise (no cut)."""
    if not (s.pricing == "tco" and active(s, "budget")):
        return None
    costed = s if s.objective == "cost" else s.with_changes(objective="cost")
    lbs = objective_lower_bounds(costed, pre.candidates, pre.dp_ranges)
    return [lb * (1 - 1e-6) for lb in lbs]


def _under_budget(s: Scenario, cut: float) -> bool:
    """Whether a shape whose cost cut (_cost_cuts) is ``cut`` may meet the TCO budget in
    _feasibility_model: the cut as the model rounds it (solvers.cpsat.model._cuts) at most
    the budget as the budget family rounds it (solvers.families.budget's encode), both in
    TCO cost units. False: the model admits no plan of the shape, so a question whose every
    shape is cut off is infeasible without building it (issue 22: seed 44's explanation
    built a dozen models over thousands of shapes that CP-SAT refuted at once)."""
    units = 100 * TCO_UNITS_PER_CENT
    return down(cut * units * (1 - 1e-12)) <= down(s.budget * units)


def _feasibility_model(s: Scenario, pre: Presolved, cuts: list[float] | None = None) -> Formulation:
    """A feasibility question's model: the presolved DP ranges, no objective bounds (a TCO
    bound over thousands of shapes and every NIC option costs seconds, and decides
    nothing), and the time objective (the constraints do not depend on it; the cloud cost
    objective is built one GPU type at a time). Except under a TCO budget: there each
    shape's TCO lower bound (bounds.tco_lower_bound) is a cut on the cost, as in the cost
    objective's model (solve_cpsat's), and it decides what the budget allows (without
    it, CP-SAT proves a budget just under a plan's cost over every shape, seconds: the
    budget's fix, solvers/families/base.py other_objective_fix, asks exactly that). Less
    1e-6 of itself (the cloud cut's margin: the model's integer cost may round below the
    float bound, and intmath.down forgives 1e-9 upward), so that it never rules out a
    plan the model without it admits. ``cuts``: _cost_cuts's, when the caller has them."""
    cuts = cuts if cuts is not None else _cost_cuts(s, pre)
    if cuts is not None:
        costed = s if s.objective == "cost" else s.with_changes(objective="cost")
        return build(costed, pre.candidates, bounds=Bounds(pre.dp_ranges, cuts))
    timed = s if s.objective == "time" else s.with_changes(objective="time")
    zero = [0.0] * len(pre.candidates)
    return build(timed, pre.candidates, bounds=Bounds(pre.dp_ranges, zero))


def _witness(s: Scenario, pre: Presolved, tries: int = 4) -> bool:
    """Whether one of a few presolved shapes has a feasible plan (the reference solver's
    per-shape search, re-checked by the float model): a quick yes that spares CP-SAT a
    search over wide domains (a question with few limits left, as conflict shrinking
    makes, can take it seconds to find any plan)."""
    nics = nic_specs(s)
    step = max(1, len(pre.candidates) // tries)
    for cand in pre.candidates[::step][:tries]:
        found = best_for_candidate(s, cand, nics, s.assumptions.dp_overlap)
        if found is not None and build_plan(s, found[1]).feasible:
            return True
    return False


def infeasible_core(
    scenario: Scenario,
    cands: list[Candidate],
    time_limit_s: float = 30.0,
    known: _Outcomes | None = None,
) -> list[str]:
    """A minimal set of families that cannot hold together (empty if the question is
    feasible, or undecided in time).

    Deletion from every active family (_shrink), each step verified: a presolve (which
    usually empties the space: bounds.dp_bounds), a quick witness, or a CP-SAT solve over
    the presolved shapes with their bounds and cuts; after a guess (_guess) whose decided
    tests answer the deletion's trials that hold it. (An assumption solve over every shape
    with the families as literals, which this replaced, cost more on every question of
    bench/explain_speed.py --random than the deletions it saved: its model had no bound to
    use.)"""
    active = [f for f in NAMES if f in enforced(scenario)]
    known = known if known is not None else _Outcomes()
    first = known.check(scenario, set(active), cands, time_limit_s)
    if first is not False:
        return []
    _guess(scenario, active, cands, time_limit_s, known)
    return _shrink(scenario, active, cands, time_limit_s, known)


def _guess(
    scenario: Scenario,
    active: list[str],
    cands: list[Candidate],
    time_limit_s: float,
    known: _Outcomes,
) -> None:
    """Learn, before the deletion, whether the conflict it will likely find holds without
    memory, when the question without memory is infeasible: shrink the other families
    with memory kept (tests that presolve to a few shapes, milliseconds each), then test
    what is left without memory, once. Infeasible
    there (``known`` records it), it answers every deletion trial that holds it, each of
    which drops memory and so bounds every shape (issue 22: seeds 44 and 123 ran 7 to 10
    such tests, a second or more each). Every answer ``known`` records is a decided test's,
    so the deletion finds the core it finds without the guess; a guess test undecided in
    time records nothing and leaves ``known.undecided`` as it was (a guess costs little:
    its tests with memory stop at GUESS_TRIAL_S of search, a member left in when one does,
    the one without at GUESS_LIMIT_S)."""
    if "memory" not in active:
        return
    undecided = known.undecided
    core = [f for f in active if f != "memory"]
    # the deletion's first trial (memory comes first): feasible, memory is in the conflict
    # and every later trial keeps it, so there is nothing to guess
    if known.check(scenario, set(core), cands, time_limit_s) is not False:
        known.undecided = undecided
        return
    for fam in list(core):
        trial = set(core) - {fam}
        limit_s = min(time_limit_s, GUESS_TRIAL_S)
        if known.check(scenario, trial | {"memory"}, cands, limit_s) is False:
            core.remove(fam)
    if core:
        known.check(scenario, set(core), cands, min(time_limit_s, GUESS_LIMIT_S))
    known.undecided = undecided


class _Outcomes:
    """The decided feasibility of one question under subsets of its families. Switching a
    family off only removes constraints, so infeasible with a set means infeasible with
    every superset, and feasible with a set means feasible with every subset: a test
    these answer is not run again, and the answer is the one it would have given."""

    def __init__(self) -> None:
        self.infeasible: list[frozenset[str]] = []
        self.feasible: list[frozenset[str]] = []
        self.undecided = False  # a test ran out of time: the core may not be minimal

    def known(self, fams: set[str]) -> bool | None:
        if any(fams >= bad for bad in self.infeasible):
            return False
        if any(fams <= good for good in self.feasible):
            return True
        return None

    def check(
        self, scenario: Scenario, fams: set[str], cands: list[Candidate], time_limit_s: float
    ) -> bool | None:
        """_feasible, answered from what is known when it can be."""
        found = self.known(fams)
        if found is None:
            found = _feasible(scenario, fams, cands, time_limit_s)
            if found is not None:
                (self.feasible if found else self.infeasible).append(frozenset(fams))
            else:
                self.undecided = True
        return found


# families whose absence lets most shapes through presolve: a question without them
# bounds every shape (its step time, its cost), one with them few
_PRUNING = frozenset({"memory", *(f.name for f in SHAPE_RULES)})


def _shrink(
    scenario: Scenario,
    core: list[str],
    cands: list[Candidate],
    time_limit_s: float,
    known: _Outcomes | None = None,
) -> list[str]:
    """Deletion: drop a member while the rest is still infeasible (each shrink verified).

    A trial that has lost a pruning family (memory, a shape rule: it bounds most shapes)
    is first answered, when it can be, by the question with only the member dropped (a
    superset: its presolve keeps few shapes): feasible there, the trial is feasible. Not
    when the member is a pruning family itself (that question admits shapes whose memory
    bound nobody has computed, and such a member is seldom needed)."""
    known = known if known is not None else _Outcomes()
    everything = set(core)
    for fam in list(core):
        trial = set(core) - {fam}
        probe = everything - {fam}
        if (
            fam not in _PRUNING
            and (everything - trial) & _PRUNING
            and known.known(trial) is None
            and known.check(scenario, probe, cands, time_limit_s) is True
        ):
            continue  # trial is a subset of probe: feasible
        if known.check(scenario, trial, cands, time_limit_s) is False:
            core = sorted(trial)
    return sorted(core)


class _Search:
    """What a family's smallest-fix search asks (solvers.families.base.FixSearch): is the
    question feasible with the active families, or with some of them."""

    def __init__(self, scenario: Scenario, cands: list[Candidate], time_limit_s: float) -> None:
        self.scenario = scenario
        self.cands = cands
        self.time_limit_s = time_limit_s
        self.active = set(enforced(scenario))
        self.undecided = False  # a test ran out of time: a fix may be missing or not least

    def ok(self, s: Scenario, fams: set[str] | None = None) -> bool:
        fams = self.active if fams is None else fams
        # another memory scale or shape-rule request: the same shapes with their memory
        # bound or rules recomputed, from the memory terms they share (enumerating again
        # would recompute every term)
        space = for_question(s, self.scenario, self.cands)
        return self.feasible(s, {f for f in fams if active(s, f)}, space) is True

    def only(self, s: Scenario, fams: set[str]) -> Scenario:
        return _only(s, fams)

    def feasible(self, s: Scenario, fams: set[str], space: list[Candidate]) -> bool | None:
        found = _feasible(s, fams, space, self.time_limit_s)
        self.undecided |= found is None
        return found

    def solve(self, s: Scenario, candidates: list[Candidate] | None) -> SolveResult:
        return solve_cpsat(s, time_limit_s=self.time_limit_s, candidates=candidates)

    def admits(self, s: Scenario, cfg: Config) -> bool | None:
        space = for_question(s, self.scenario, self.cands)
        fams = {f for f in self.active if active(s, f)}
        return _admits_config(s, fams, space, cfg, self.time_limit_s)

    def presolve(self, s: Scenario, candidates: list[Candidate]) -> list[Candidate]:
        return presolve(s, candidates).candidates

    def with_memory_scale(self, s: Scenario, candidates: list[Candidate]) -> list[Candidate]:
        return with_memory_scale(s, candidates)


def smallest_fix(
    scenario: Scenario,
    family: str,
    cands: list[Candidate],
    time_limit_s: float = 30.0,
    search: _Search | None = None,
) -> Fix | None:
    """The least relaxation of one family that makes the question feasible, the rest unchanged
    (each family's own search: solvers/families/)."""
    search = search if search is not None else _Search(scenario, cands, time_limit_s)
    return BY_NAME[family].smallest_fix(scenario, search)


@dataclass(frozen=True)
class Core:
    """One of several disjoint conflicts (Conflict.cores): its families and their fixes."""

    constraints: list[str]
    fixes: list[Fix]

    def as_dict(self) -> dict[str, Any]:
        return {"constraints": self.constraints, "fixes": [f.as_dict() for f in self.fixes]}


@dataclass(frozen=True)
class Conflict:
    constraints: list[str]
    fixes: list[Fix]
    # every feasibility test decided within the time limit; False: a test ran out of
    # time, so the conflict may not be minimal and a fix may be missing or not the least
    complete: bool = True
    # more than one conflict, each needing a change of its own (no single family's fix of
    # the first makes the question feasible): every one, in the order their fixes apply,
    # each one's fixes found with the first fix of every earlier one applied
    # (_staged; a fix's ``scenario`` is the question it was found on, feasible: the
    # earlier ones' first fixes applied, the later ones' families switched off);
    # ``constraints`` and ``fixes`` are then theirs together, in that order.
    # Empty: one conflict, any one of whose fixes alone makes the question feasible
    cores: tuple[Core, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "constraints": self.constraints,
            "fixes": [f.as_dict() for f in self.fixes],
            "complete": self.complete,
        }
        if self.cores:
            out["cores"] = [c.as_dict() for c in self.cores]
        return out


def explain_infeasible(
    scenario: Scenario, time_limit_s: float = 30.0, candidates: list[Candidate] | None = None
) -> Conflict:
    cands = candidates if candidates is not None else enumerate_candidates(scenario)
    # every question the explanation derives shares its shapes' bounds (bounds.shared_bounds)
    known, search = _Outcomes(), _Search(scenario, cands, time_limit_s)
    with shared_bounds():
        core = infeasible_core(scenario, cands, time_limit_s, known)
        fixes = _fixes(scenario, core, cands, search)
        # no member's fix alone holds: another conflict outside this one blocks them all
        lone = not core or bool(fixes)
        cores = [] if lone else _disjoint_cores(scenario, core, cands, time_limit_s, known)
        staged = _staged(scenario, cores, cands, search) if len(cores) > 1 else ()
    complete = not (known.undecided or search.undecided)
    if not staged:
        return Conflict(core, fixes, complete)
    together = [name for c in staged for name in c.constraints]
    return Conflict(together, [f for c in staged for f in c.fixes], complete, staged)


def _fixes(
    scenario: Scenario, core: list[str], cands: list[Candidate], search: _Search
) -> list[Fix]:
    """Each member's smallest fix that exists, the other active families enforced
    (``search``'s question, ``scenario``, and its ``undecided`` flag)."""
    found = (smallest_fix(scenario, fam, cands, search.time_limit_s, search) for fam in core)
    return [f for f in found if f is not None]


def _disjoint_cores(
    scenario: Scenario,
    first: list[str],
    cands: list[Candidate],
    time_limit_s: float,
    known: _Outcomes,
) -> list[list[str]]:
    """``first`` and, while the active families outside every conflict found so far still
    rule out every plan, a minimal conflict among them (_shrink, its tests reused by
    ``known``): disjoint conflicts whose families, switched off together, leave a feasible
    question (or one undecided in time). At most one conflict per active family, and
    usually one or two: a single-family fix of ``first`` exists unless another conflict
    avoids that family."""
    cores = [first]
    rest = [f for f in NAMES if f in enforced(scenario) and f not in first]
    while first and rest and known.check(scenario, set(rest), cands, time_limit_s) is False:
        core = _shrink(scenario, rest, cands, time_limit_s, known)
        if not core:
            break
        cores.append(core)
        rest = [f for f in rest if f not in core]
    return cores


def _staged(
    scenario: Scenario, cores: list[list[str]], cands: list[Candidate], search: _Search
) -> tuple[Core, ...]:
    """Each of the disjoint ``cores`` with its fixes, in the order they apply: the last
    found first, its fixes searched with every other core's families held off; then each
    earlier one with the first fix of every core before it applied and the cores found
    before it held off; the first core last, with every family enforced. So one fix of
    each core (the first of every one but the last, any of the last), applied together,
    makes the question feasible. A core without a fix ends the search: the cores after it
    have none either. ``search``: the explanation's, told when a test ran out of time."""
    out: list[Core] = []
    base, space = scenario, cands
    for i in reversed(range(len(cores))):
        held = {f for core in cores[:i] for f in core}
        asked = _only(base, set(enforced(base)) - held)
        step = _Search(asked, space, search.time_limit_s)
        fixes = _fixes(asked, cores[i], space, step)
        search.undecided |= step.undecided
        out.append(Core(cores[i], fixes))
        if not fixes:
            return (*out, *(Core(cores[j], []) for j in reversed(range(i))))
        # the first fix applied to the question, with the held cores back on (and what
        # the fix itself switched off, a rule, kept off)
        fixed = fixes[0].scenario
        base = fixed.with_changes(disabled=base.disabled | (fixed.disabled - asked.disabled))
        space = for_question(base, scenario, cands)
    return tuple(out)
