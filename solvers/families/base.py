"""What a constraint family is: the hooks every module under solvers/families/ implements.

A family is one rule of the design question (README "Adding a constraint family").
It owns its name, its kind (``structural``: a rule that is on or off; ``limit``: an
amount the question sets), the Scenario field that holds its limit, when it is
active, its CP-SAT encoding under its enforcement literal (``encode``), its
vectorised check in the exhaustive solver (``admits``), its violation and slack on
a plan, its relaxation step and its smallest-fix search. The registry
(solvers/families/__init__.py) collects every module's ``FAMILY``; a family that
lacks a hook fails tests/test_families.py.

Nothing here imports numpy or OR-Tools at module level: the registry is loaded with
the solvers package, which commands that never solve import too (bench/startup.py).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from models.feasibility import Violation

if TYPE_CHECKING:
    from catalog.specs import GPUSpec
    from models.evaluate import Evaluation
    from solvers.cpsat.context import BuildContext
    from solvers.plan import Config, Plan
    from solvers.result import SolveResult
    from solvers.scenario import Scenario
    from solvers.space import Candidate, Shape

KINDS = ("structural", "limit")


@dataclass(frozen=True)
class Fix:
    """The least change to one family that makes an infeasible question feasible."""

    constraint: str
    change: str
    scenario: Scenario  # the question with the fix applied (feasible)

    def as_dict(self) -> dict[str, str]:
        return {"constraint": self.constraint, "change": self.change}


@dataclass
class Grid:
    """One shape and NIC option of the exhaustive solver: every (d, m) pair as arrays."""

    cand: Candidate
    gpu: GPUSpec
    nics_per_node: int
    dps: Any  # np.ndarray of DP degrees
    m: Any  # np.ndarray of micro-batches per step, one per pair
    gpus: Any  # np.ndarray of GPUs
    days: Any  # np.ndarray of days to train
    cost_cents: Any  # np.ndarray (or scalar) of the cost in cents
    cluster: Any  # models.cost.ClusterTotals of the pairs


class FixSearch(Protocol):
    """What a family's smallest-fix search may ask of the explanation (solvers/explain.py),
    the solver's parts included (``solve``, ``presolve``, ``with_memory_scale``): handed
    in by the caller, so no family imports the solvers that import the registry."""

    scenario: Scenario
    cands: list[Candidate]
    active: set[str]
    time_limit_s: float

    def ok(self, s: Scenario, fams: set[str] | None = None) -> bool: ...

    def only(self, s: Scenario, fams: set[str]) -> Scenario: ...

    def feasible(self, s: Scenario, fams: set[str], space: list[Candidate]) -> bool | None: ...

    def solve(self, s: Scenario, candidates: list[Candidate] | None) -> SolveResult:
        """CP-SAT's answer to ``s`` within the search's time limit (solvers.cpsat.solve.solve_cpsat)."""
        ...

    def admits(self, s: Scenario, cfg: Config) -> bool | None:
        """Whether the CP-SAT model ``ok`` solves for ``s`` admits the plan of ``cfg`` (its
        decisions fixed: decided by propagation, where ``ok`` may search); None where
        ``ok`` asks another model, or undecided in time. True implies ``ok(s)``."""
        ...

    def presolve(self, s: Scenario, candidates: list[Candidate]) -> list[Candidate]:
        """The shapes presolve keeps (solvers.screen.presolve.presolve)."""
        ...

    def with_memory_scale(self, s: Scenario, candidates: list[Candidate]) -> list[Candidate]:
        """The shapes with their memory bound at ``s.memory_scale`` (solvers.space)."""
        ...


# (least capex USD, least IT watts) per GPU of a type on question s: solvers.screen.bounds
# least_per_gpu, handed to ``Family.gpu_limit`` by the bounds that call it
LeastPerGpu = Callable[["Scenario", "GPUSpec"], tuple[float, float]]

# infeasible bracketing probes after which bisect asks its upper end (a fix that exists is
# usually found by then; one that does not is known at once instead of after ~20 probes)
BISECT_TRIES_BEFORE_HI = 3


def bisect(
    feasible: Callable[[float], bool], lo: float, hi: float, integer: bool, rel: float = 0.01
) -> float | None:
    """Smallest x in (lo, hi] with feasible(x), x monotone-feasible, to ``rel`` (or exact for
    integers); None when even ``hi`` is infeasible. Brackets by doubling from lo first;
    after BISECT_TRIES_BEFORE_HI infeasible probes it asks ``hi`` (the doubling's last
    probe): infeasible there, nothing below is feasible, and the answer (None) is the
    one the remaining probes would give, without them."""
    step = max(1.0 if integer else abs(lo) * 0.01, 1e-12)
    upper = None
    probe = lo
    asked: dict[float, bool] = {}

    def ask(x: float) -> bool:
        if x not in asked:
            asked[x] = feasible(x)
        return asked[x]

    tries = 0
    while probe < hi:
        probe = min(hi, lo + step)
        if integer:
            probe = math.ceil(probe)
        if ask(probe):
            upper = probe
            break
        tries += 1
        if tries == BISECT_TRIES_BEFORE_HI and probe < hi and not ask(hi):
            return None
        lo, step = probe, step * 2
    if upper is None:
        return None
    hi = upper
    while (hi - lo > 1) if integer else (hi - lo > rel * hi):
        mid = (lo + hi) // 2 if integer else (lo + hi) / 2
        if feasible(mid):
            hi = mid
        else:
            lo = mid
    return hi


def violation(name: str, detail: str) -> Violation:
    return Violation(name, detail)


class Family:
    """A constraint family. Its module makes the one instance, ``FAMILY = Cls(name,
    position, relaxation, field=...)``; subclasses set the class-level traits below and
    override every hook that raises NotImplementedError here (tests/test_families.py
    checks they do)."""

    kind: ClassVar[str] = "limit"  # "structural" (a rule, on or off) or "limit" (an amount)
    # checked by the performance model (models/feasibility.py check_layout): the plan's
    # violation is the evaluator's; otherwise ``violation`` computes it
    in_evaluator: ClassVar[bool] = False
    # a rule on the shape alone (solvers.space.structural_violations, Candidate.structural)
    shape_rule: ClassVar[bool] = False
    # its CP-SAT encoding needs the cluster's terms (fabric, racks, power) even when renting
    needs_cluster: ClassVar[bool] = False
    # renting's dominance (the fastest NIC in every slot is best) still holds under it
    keeps_nic_dominance: ClassVar[bool] = True
    # the exhaustive solver's enumeration keeps within it (Candidate.allowed, dp_floor,
    # dp_upper, batch_bounds, Scenario.nic_counts), so it skips ``admits`` on its pairs;
    # tests/test_families.py checks that applying it there changes no answer
    enumerated: ClassVar[bool] = False

    def __init__(self, name: str, position: int, relaxation: str, field: str | None = None):
        self.name = name
        self.position = position  # order in the registry (and in FAMILIES, --ignore's choices)
        self.relaxation = relaxation  # the step binding_constraints relaxes it by, in words
        # the Scenario field holding the limit (None: a rule, on unless the question ignores it)
        self.field = field

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    def active(self, s: Scenario) -> bool:
        """Enforced: not ignored, and its limit set (rules are always set)."""
        if self.name in s.disabled:
            return False
        return self.field is None or getattr(s, self.field) is not None

    def relax(self, s: Scenario) -> Scenario:
        """The question with this family relaxed by its stated step (``relaxation``)."""
        raise NotImplementedError

    def relaxation_in(self, s: Scenario) -> str:
        """The relaxation step in words on question ``s`` (``relaxation`` unless the family's
        rule depends on a question setting: ep_domain's --ep-in-domain)."""
        return self.relaxation

    def relaxations(self, s: Scenario, plan: Plan | None = None) -> list[tuple[str, Scenario]]:
        """The relaxation steps on question ``s``, least first, each (its words, the relaxed
        question): binding_constraints prices the first that improves the plan (solvers/
        explain.py), a rule's smallest fix is the first that makes the question feasible.
        One step unless the family has a lesser one (tp_domain's --cp-across-servers).
        ``plan``: the plan being explained, when there is one (budget and deadline size
        their step by it: one purchase unit more or fewer, resized)."""
        return [(self.relaxation_in(s), self.relax(s))]

    def violated_by(self, s: Scenario, shape: Shape, gpu: GPUSpec) -> bool:
        """Shape rules: whether the shape breaks the rule whatever d, m and NICs are."""
        raise NotImplementedError

    def encode(self, ctx: BuildContext) -> None:
        """Add the CP-SAT constraints, each only enforced if ``ctx.enforce[self.name]``."""
        raise NotImplementedError

    def admits(self, s: Scenario, grid: Grid) -> Any:
        """The exhaustive solver's check: a boolean (array over the grid's pairs)."""
        raise NotImplementedError

    def violation(self, s: Scenario, ev: Evaluation, config: Config) -> Violation | None:
        """The plan's violation of this family (None: within it)."""
        raise NotImplementedError

    def slack(self, s: Scenario, plan: Plan) -> tuple[float | None, str, str]:
        """(slack, unit, 'used of limit' text) on a plan."""
        raise NotImplementedError

    def smallest_fix(self, s: Scenario, search: FixSearch) -> Fix | None:
        """The least relaxation that makes the question feasible, the others unchanged."""
        raise NotImplementedError

    def moved_by_relaxing(self, s: Scenario) -> Callable[[Candidate], bool] | None:
        """Optional: which shapes of the relaxed question (``relax(s)``, its candidates) can
        have other plans than in ``s`` (other feasible d, m or NICs, or another objective).
        A shape it does not move keeps every plan, so when the plan being explained is proved
        optimal, only the moved shapes can beat it (solvers/explain.py). None: any shape."""
        return None

    def gpu_limit(self, s: Scenario, gpu: GPUSpec, least: LeastPerGpu) -> int | None:
        """Optional: the most GPUs of this type any plan within the limit can use, a valid
        bound that prunes DP degrees before the search (solvers/screen/bounds.py dp_bounds, which
        hands in ``least``: its least_per_gpu). None: no such bound."""
        return None


class Rule(Family):
    """A structural family: relaxed by switching it off, fixed only that way."""

    kind = "structural"

    def relax(self, s: Scenario) -> Scenario:
        return s.with_changes(disabled=s.disabled | {self.name})

    def smallest_fix(self, s: Scenario, search: FixSearch) -> Fix | None:
        """The first relaxation step that makes the question feasible (``relaxations``: a
        lesser step keeps the rule enforced)."""
        for how, relaxed in self.relaxations(s):
            off = self.name in relaxed.disabled
            if search.ok(relaxed, search.active - {self.name} if off else search.active):
                return Fix(self.name, how, relaxed)
        return None


class EvaluatorCheck(Family):
    """A family the performance model checks (models/feasibility.py check_layout); the
    exhaustive solver's enumeration keeps within each of them."""

    in_evaluator = True
    enumerated = True

    def violation(self, s: Scenario, ev: Evaluation, config: Config) -> Violation | None:
        return next((v for v in ev.violations if v.constraint == self.name), None)


class ShapeRule(Rule, EvaluatorCheck):
    """A rule on the shape alone: shapes that break it are forbidden (both solvers)."""

    shape_rule = True

    def encode(self, ctx: BuildContext) -> None:
        bad = [ctx.x[i] for i, c in enumerate(ctx.candidates) if self.name in c.structural]
        if bad:
            ctx.md.add(sum(bad) == 0).only_enforce_if(ctx.enforce[self.name])

    def admits(self, s: Scenario, grid: Grid) -> Any:
        return self.name not in grid.cand.structural


def bisect_fix(
    search: FixSearch,
    name: str,
    change: Callable[[float], Scenario],
    lo: float,
    hi: float,
    integer: bool,
    words: Callable[[float], str],
    rel: float = 0.01,
) -> Fix | None:
    """The fix found by bisection on an amount: ``change(x)`` is the question at x, found
    to ``rel`` above the least that works (bisect)."""
    x = bisect(lambda v: search.ok(change(v)), lo, hi, integer, rel)
    if x is None:
        return None
    return Fix(name, words(x), change(x))


def count_fix(
    search: FixSearch, name: str, field: str, start: int, what: str, most: int
) -> Fix | None:
    """The least count (GPUs, racks) that makes the question feasible, by bisection from
    ``start`` up to ``most`` (the decision space's largest, solvers.scenario.GPU_CAP: the
    caller hands it in, so that this bottom floor imports nothing of solvers/)."""
    return bisect_fix(
        search,
        name,
        lambda v: search.scenario.with_changes(**{field: int(v)}),
        start,
        most,
        True,
        lambda x: f"allow at least {int(x):,} {what}",
    )


# other_objective_fix's margins over the other objective's optimum, relative, first to last
NUDGES = (1e-6, 1e-4, 1e-3, 1e-2)


def other_objective_fix(
    search: FixSearch,
    family: Family,
    objective: str,
    amount: Callable[[Plan], float],
    words: Callable[[float], str],
    least: Callable[[Scenario, float], float],
    first: Callable[[float, Plan], float | None] | None = None,
) -> Fix | None:
    """The least budget (deadline): the optimum of the other objective with the limit off,
    nudged past the solver's rounding and verified (``amount``: the plan's cost or days),
    then named as ``least(fixed question, optimum)`` finds it at the unit ``words`` prints
    (a figure that holds, where one unit less does not). ``first(optimum, optimal plan)``,
    when given, is asked before the nudges: the figure it names (None: none) is the fix."""
    s = search.scenario
    name, fam = family.name, family.field
    assert fam is not None, name
    relaxed = search.only(s, search.active - {name}).with_changes(objective=objective)
    same_space = relaxed.memory_scale == s.memory_scale
    res = search.solve(relaxed, search.cands if same_space else None)
    if res.best is None:
        return None
    base = amount(res.best)
    named = None if first is None else first(base, res.best)
    if named is not None:
        return Fix(name, words(named), s.with_changes(**{fam: named}))
    for nudge in NUDGES:
        x = base * (1 + nudge)
        fixed = s.with_changes(**{fam: x})
        if search.ok(fixed):
            named = least(fixed, base)
            return Fix(name, words(named), fixed.with_changes(**{fam: named}))
    return None


# a budget or deadline step sized to a resized plan (their relaxations) lies this far above its
# cost or days: past CP-SAT's rounding of them (about 2^-20 a factor: solvers/cpsat/cluster.py
# product_cents), so that the model admits the plan that sized it
STEP_ROOM = 1e-5


def resized(s: Scenario, plan: Plan, units: int) -> Plan | None:
    """The plan's shape, NICs and purchases on the next DP degree up (``units`` 1) or down
    (-1) that buys whole purchase units (servers, or NVL72 racks: the DP step
    solvers.screen.bounds.dp_step takes), its global batch kept as near as micro-batches
    allow; evaluated whatever it violates (None: no such degree). What one purchase unit
    more (fewer) costs (takes): budget's and deadline's relaxation steps, where +10% buys
    no unit."""
    cfg = plan.config
    shape = cfg.shape
    unit = s.catalog.gpu(shape.gpu).server.purchase_unit_gpus
    step = math.lcm(unit // math.gcd(shape.replica_gpus, unit), shape.dp_step)
    dp = cfg.dp + units * step
    if dp < 1:
        return None
    micro = max(1, round(cfg.dp * cfg.microbatches / dp))
    return PLAN_BUILDER[0](s, dataclasses.replace(cfg, dp=dp, microbatches=micro))


# the float model's plan of a configuration (solvers.plan.build_plan), registered by
# solvers.plan when it loads: it imports the registry, and so this module, so this module
# cannot import it (tests/test_import_cycles.py); whoever holds a Plan has loaded it
PLAN_BUILDER: list[Callable[[Scenario, Config], Plan]] = []


def register_plan_builder(build: Callable[[Scenario, Config], Plan]) -> None:
    """Set the builder ``resized`` evaluates its configurations with (solvers.plan's)."""
    PLAN_BUILDER[:] = [build]


# the EP group's scale-up domains: ep_domain's rule and nic_slots's price read them (here, on
# the bottom floor, so that no family module imports another)
def shape_ep_domains(shape: Shape, gpu: GPUSpec) -> int:
    """Scale-up domains one EP group of the shape spans on ``gpu`` (its members ETP apart)."""
    # lazy: models.expert loads numpy, which commands that never solve do not load
    from models.expert import ep_ranks_in_domain

    return -(-shape.ep // ep_ranks_in_domain(gpu, shape.experts))


def ep_domains(plan: Plan, s: Scenario) -> int:
    """Scale-up domains one EP group spans (its members ETP apart)."""
    shape = plan.config.shape
    return shape_ep_domains(shape, s.catalog.gpu(shape.gpu))
