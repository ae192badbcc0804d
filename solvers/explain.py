"""Why the answer: binding constraints with their price, and conflicts with the smallest fix.

Binding (an optimum exists): every active constraint family gets its slack in
natural units on the chosen plan and is re-solved with that family relaxed by
a stated step (capacity +10%, budget +10%, batch ceiling x2, one more NIC
slot, rule switched off, ...), warm-started from the optimum, which stays
feasible. A family is binding when relaxing it improves the objective.

Conflict (nothing fits): each family's enforcement literal is an assumption;
CP-SAT returns a sufficient set of assumptions for infeasibility (one worker,
the reliable case), which is shrunk to a minimal set by deletion and
verified. For each member the smallest relaxation that makes the question
feasible, the others unchanged, is found by bisection on its amount.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ortools.sat.python import cp_model

from models.scaleup import tp_limit
from solvers.cpsat import _solver, solve_cpsat
from solvers.cpsat_model import build
from solvers.exhaustive import best_for_candidate
from solvers.gc_pause import without_gc_pauses
from solvers.plan import Plan, build_plan
from solvers.prune import Presolved, may_beat, presolve
from solvers.scenario import FAMILIES, Scenario
from solvers.space import Candidate, enumerate_candidates, nic_specs, with_memory_scale

STRUCTURAL = ("tp_bandwidth", "tp_domain", "divisibility", "pipeline_fill")
EXPLAIN_EFFORT = 0.3  # deterministic-time cap of each re-solve (README "Explanations")
# Shapes each re-solve's warm start tries besides the plan being explained, which is
# already a good incumbent for its relaxed question
EXPLAIN_WARM_SHAPES = 6


def _disable(s: Scenario, family: str) -> Scenario:
    return s.with_changes(disabled=s.disabled | {family})


RELAXATIONS: dict[str, tuple[str, Callable[[Scenario], Scenario]]] = {
    "memory": ("GPU memory +10%", lambda s: s.with_changes(memory_scale=s.memory_scale * 1.1)),
    "budget": ("budget +10%", lambda s: s.with_changes(budget_usd=s.budget * 1.1)),
    "deadline": ("deadline +10%", lambda s: s.with_changes(deadline_days=s.deadline * 1.1)),
    "batch_ceiling": (
        "batch ceiling x2",
        lambda s: s.with_changes(max_batch_tokens=s.ceiling_tokens * 2),
    ),
    "batch_floor": (
        "batch floor /2",
        lambda s: s.with_changes(min_batch_tokens=s.floor_tokens / 2),
    ),
    "max_gpus": ("GPU caps +10%", lambda s: s.with_gpu_caps_scaled(1.1)),
    "power": ("power cap +10%", lambda s: s.with_changes(power_cap_mw=s.power_cap_w / 1e6 * 1.1)),
    "max_racks": (
        "racks +10%",
        lambda s: s.with_changes(max_racks=max(s.rack_cap + 1, math.ceil(s.rack_cap * 1.1))),
    ),
    "nic_slots": (
        "one more NIC slot per server",
        lambda s: s.with_changes(extra_nic_slots=s.extra_nic_slots + 1),
    ),
    "tp_bandwidth": ("TP bandwidth rule off", lambda s: _disable(s, "tp_bandwidth")),
    "tp_domain": ("TP x CP beyond the scale-up domain allowed", lambda s: _disable(s, "tp_domain")),
    "divisibility": ("splits Megatron refuses allowed", lambda s: _disable(s, "divisibility")),
    "pipeline_fill": (
        "fewer micro-batches than stages allowed",
        lambda s: _disable(s, "pipeline_fill"),
    ),
}


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
    ev, lay, cfg = plan.evaluation, plan.evaluation.layout, plan.config
    gpu = scenario.catalog.gpu(cfg.shape.gpu)
    if family == "memory":
        cap = ev.memory.usable
        return cap - ev.memory.total, "GB", f"{ev.memory.total:,.1f} of {cap:,.1f} GB per GPU"
    if family == "budget":
        return (
            scenario.budget - plan.cost_usd,
            "USD",
            f"${plan.cost_usd:,.0f} of ${scenario.budget:,.0f}",
        )
    if family == "deadline":
        days = float(ev.time_to_train_days or 0.0)
        return (
            scenario.deadline - days,
            "days",
            f"{days:,.1f} of {scenario.deadline:,.1f} days",
        )
    if family == "batch_ceiling":
        used = lay.global_batch * scenario.seq_len
        return (
            scenario.ceiling_tokens - used,
            "tokens",
            f"{used:,.0f} of {scenario.ceiling_tokens:,.0f} tokens per batch",
        )
    if family == "batch_floor":
        used = lay.global_batch * scenario.seq_len
        return (
            used - scenario.floor_tokens,
            "tokens",
            f"{used:,.0f} tokens, floor {scenario.floor_tokens:,.0f}",
        )
    if family == "max_gpus":
        allowed = scenario.gpu_cap(cfg.shape.gpu)
        if allowed is None:
            return None, "GPUs", f"no cap on {cfg.shape.gpu}"
        return (
            allowed - lay.num_gpus,
            "GPUs",
            f"{lay.num_gpus:,} of {allowed:,} {cfg.shape.gpu} GPUs allowed",
        )
    if family == "nic_slots":
        slots = gpu.server.nic_slots + scenario.extra_nic_slots
        return (
            slots - cfg.nics_per_node,
            "NICs",
            f"{cfg.nics_per_node} of {slots} NIC slots per server",
        )
    if family == "power":
        used_mw = ev.cluster.facility_power_w / 1e6
        cap_mw = scenario.power_cap_w / 1e6
        return cap_mw - used_mw, "MW", f"{used_mw:,.3f} of {cap_mw:,.3f} MW facility power"
    if family == "max_racks":
        n_racks = ev.cluster.racks
        return scenario.rack_cap - n_racks, "racks", f"{n_racks:,} of {scenario.rack_cap:,} racks"
    if family == "tp_bandwidth":
        limit = tp_limit(scenario.spec.hidden, gpu, lay.tp, lay.precision)[0]
        return limit - lay.tp, "TP degree", f"TP {lay.tp} of limit {limit:.2f} (3h x bw / peak)"
    if family == "tp_domain":
        dom = gpu.server.scale_up_domain_gpus
        return (
            dom - lay.tp * lay.cp,
            "GPUs",
            f"TP x CP {lay.tp * lay.cp} of a {dom}-GPU scale-up domain",
        )
    if family == "divisibility":
        return None, "", "layers, heads and batch split as Megatron allows"
    if family == "pipeline_fill":
        return (
            cfg.microbatches - lay.pp,
            "micro-batches",
            f"{cfg.microbatches} micro-batches per step for {lay.pp} stages",
        )
    raise ValueError(family)


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
    families = [f for f in RELAXATIONS if scenario.active(f)]

    def price(family: str) -> tuple[float, bool]:
        relaxed = RELAXATIONS[family][1](scenario)
        space = with_memory_scale(relaxed, cands) if family == "memory" else cands
        # no shape of the relaxed question can beat the plan: nothing to re-solve
        alive = presolve(relaxed, space)
        if not may_beat(relaxed, alive, base):
            return base, True
        res = solve_cpsat(
            relaxed,
            time_limit_s=time_limit_s,
            candidates=space,
            hint=plan.config,
            effort=effort,
            alive=alive,
            warm_shapes=EXPLAIN_WARM_SHAPES,
        )
        return (res.best.objective if res.best else base), res.status == "optimal"

    # CP-SAT releases the GIL while it searches: the re-solves run side by side
    with ThreadPoolExecutor(max_workers=max(1, min(len(families), os.cpu_count() or 1))) as pool:
        priced = list(pool.map(price, families))
    out = []
    for family, (better, exact) in zip(families, priced, strict=True):
        gain = max(0.0, float(base - better))
        if gain <= 1e-6 * max(abs(base), 1e-12):
            gain = 0.0
        slack, unit, detail = slack_of(scenario, plan, family)
        label = RELAXATIONS[family][0]
        pct = 100.0 * gain / base if base else 0.0
        decided = plan_proved or exact
        out.append(Binding(family, slack, unit, detail, label, gain, pct, exact, decided))
    out.sort(key=lambda b: (not b.binding, -b.improvement_if_relaxed, b.constraint))
    return out


# ----------------------------------------------------------------- conflicts
def _only(scenario: Scenario, families: set[str]) -> Scenario:
    """The question with every active family outside ``families`` switched off."""
    off = {f for f in RELAXATIONS if scenario.active(f) and f not in families}
    return scenario.with_changes(disabled=scenario.disabled | off)


def _feasible(
    scenario: Scenario, families: set[str], cands: list[Candidate], time_limit_s: float
) -> bool | None:
    """Is the question feasible with only ``families`` enforced? None if undecided in time."""
    s = _only(scenario, families)
    pre = presolve(s, cands)
    if not pre.candidates:
        return False
    if _witness(s, pre):
        return True
    form = build(s, pre.candidates)
    solver = _solver(time_limit_s, 1)
    code = solver.solve(form.model)
    if code == cp_model.MODEL_INVALID:
        raise RuntimeError(f"internal error: invalid CP-SAT model ({form.model.validate()})")
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return True
    if code == cp_model.INFEASIBLE:
        return False
    return None


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
    scenario: Scenario, cands: list[Candidate], time_limit_s: float = 30.0, effort: float = 2.0
) -> list[str]:
    """A minimal set of families that cannot hold together (empty if the question is feasible).

    The assumption solve runs over every shape with wide domains and can be slow; it gets
    ``effort`` units of deterministic time. If it proves nothing in that budget, deletion
    starts from every active family instead (still minimal, still verified). When presolve
    alone empties the space (every shape ruled out before any search, the usual case),
    the assumption solve is skipped and deletion starts from every active family: each
    shrink is then a presolve or a quick witness, not a search."""
    active = [f for f in FAMILIES if scenario.active(f)]
    if not presolve(scenario, cands).candidates:
        return _shrink(scenario, active, cands, time_limit_s)
    form = build(scenario, cands, fix_families=False)
    md = form.model
    lits = dict(form.enforce)
    md.add_assumptions(list(lits.values()))
    solver = _solver(time_limit_s, 1, effort)  # one worker: multi-worker cores are not reliable
    code = solver.solve(md)
    if code == cp_model.MODEL_INVALID:
        raise RuntimeError(f"internal error: invalid CP-SAT model ({md.validate()})")
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return []
    core = list(lits)
    if code == cp_model.INFEASIBLE:
        idx = set(solver.sufficient_assumptions_for_infeasibility())
        core = [fam for fam, lit in lits.items() if lit.index in idx]
    if _feasible(scenario, set(core), cands, time_limit_s) is not False:
        core = list(lits)  # not verified: shrink from every family
        if _feasible(scenario, set(core), cands, time_limit_s) is not False:
            return []  # the whole question is feasible (or undecided in time)
    return _shrink(scenario, core, cands, time_limit_s)


def _shrink(
    scenario: Scenario, core: list[str], cands: list[Candidate], time_limit_s: float
) -> list[str]:
    """Deletion: drop a member while the rest is still infeasible (each shrink verified)."""
    for fam in list(core):
        trial = set(core) - {fam}
        if _feasible(scenario, trial, cands, time_limit_s) is False:
            core = sorted(trial)
    return sorted(core)


@dataclass(frozen=True)
class Fix:
    constraint: str
    change: str
    scenario: Scenario  # the question with the fix applied (feasible)

    def as_dict(self) -> dict[str, str]:
        return {"constraint": self.constraint, "change": self.change}


def _bisect(
    feasible: Callable[[float], bool], lo: float, hi: float, integer: bool, rel: float = 0.01
) -> float | None:
    """Smallest x in (lo, hi] with feasible(x), x monotone-feasible, to ``rel`` (or exact for
    integers); None when even ``hi`` is infeasible. Brackets by doubling from lo first."""
    step = max(1.0 if integer else abs(lo) * 0.01, 1e-12)
    upper = None
    probe = lo
    while probe < hi:
        probe = min(hi, lo + step)
        if integer:
            probe = math.ceil(probe)
        if feasible(probe):
            upper = probe
            break
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


def smallest_fix(
    scenario: Scenario, family: str, cands: list[Candidate], time_limit_s: float = 30.0
) -> Fix | None:
    """The least relaxation of one family that makes the question feasible, the rest unchanged."""
    active = {f for f in RELAXATIONS if scenario.active(f)}
    x: float | None

    def ok(s: Scenario, fams=None) -> bool:
        fams = active if fams is None else fams
        # another memory scale: the same shapes with their memory bound recomputed from the
        # memory terms they share (enumerating again would recompute every term)
        space = cands if s.memory_scale == scenario.memory_scale else with_memory_scale(s, cands)
        return _feasible(s, {f for f in fams if s.active(f)}, space, time_limit_s) is True

    if family in STRUCTURAL:
        s = _disable(scenario, family)
        if ok(s, active - {family}):
            return Fix(family, RELAXATIONS[family][0], s)
        return None
    if family in ("budget", "deadline"):
        # the least budget (deadline) is the optimum of the other objective with that limit off
        s = _only(scenario, active - {family}).with_changes(
            objective="cost" if family == "budget" else "time"
        )
        res = solve_cpsat(
            s,
            time_limit_s=time_limit_s,
            candidates=cands if s.memory_scale == scenario.memory_scale else None,
        )
        if res.best is None:
            return None
        # the optimum of the relaxed question, nudged past the solver's rounding and verified
        base = (
            res.best.cost_usd
            if family == "budget"
            else float(res.best.evaluation.time_to_train_days or 0.0)
        )
        field = "budget_usd" if family == "budget" else "deadline_days"
        for nudge in (1e-6, 1e-4, 1e-3, 1e-2):
            x = base * (1 + nudge)
            fixed = scenario.with_changes(**{field: x})
            if ok(fixed):
                break
        else:
            return None
        change = (
            f"budget must be at least ${x:,.0f}"
            if family == "budget"
            else (f"deadline must be at least {x:,.2f} days")
        )
        return Fix(family, change, fixed)
    if family == "max_gpus":
        if not scenario.gpu_caps and scenario.max_gpus is not None:  # one overall cap: exact count
            x = _bisect(
                lambda v: ok(scenario.with_changes(max_gpus=int(v))), scenario.max_gpus, 2**20, True
            )
            if x is None:
                return None
            return Fix(
                family, f"allow at least {int(x):,} GPUs", scenario.with_changes(max_gpus=int(x))
            )
        factor = _bisect(lambda v: ok(scenario.with_gpu_caps_scaled(v)), 1.0, 2.0**20, False)
        if factor is None:
            return None
        return Fix(
            family,
            f"raise the GPU caps by {100 * (factor - 1):.0f}%",
            scenario.with_gpu_caps_scaled(factor),
        )
    if family == "batch_ceiling":
        x = _bisect(
            lambda v: ok(scenario.with_changes(max_batch_tokens=v)),
            scenario.ceiling_tokens,
            scenario.ceiling_tokens * 1e4,
            False,
        )
        if x is None:
            return None
        x = float(math.ceil(x / scenario.seq_len) * scenario.seq_len)
        return Fix(
            family,
            f"raise the batch ceiling to {x:,.0f} tokens",
            scenario.with_changes(max_batch_tokens=x),
        )
    if family == "batch_floor":

        def feasible_floor(v: float) -> bool:  # lower is easier: bisect on the cut
            return ok(scenario.with_changes(min_batch_tokens=scenario.floor_tokens - v))

        x = _bisect(feasible_floor, 0.0, scenario.floor_tokens - scenario.seq_len, False)
        if x is None:
            return None
        floor = scenario.floor_tokens - x
        return Fix(
            family,
            f"lower the batch floor to {floor:,.0f} tokens",
            scenario.with_changes(min_batch_tokens=floor),
        )
    if family == "memory":
        # a shape the other families rule out (memory off) stays out at any capacity: probe
        # only the others (a budget far too small leaves few)
        pool = presolve(_only(scenario, active - {"memory"}), cands).candidates

        def ok_memory(v: float) -> bool:
            s = scenario.with_changes(memory_scale=v)
            return (
                bool(pool)
                and _feasible(s, active, with_memory_scale(s, pool), time_limit_s) is True
            )

        x = _bisect(ok_memory, scenario.memory_scale, 64.0, False)
        if x is None:
            return None
        big = max(scenario.gpus, key=lambda g: scenario.catalog.gpu(g).memory_gb)
        mem = scenario.catalog.gpu(big).memory_gb
        return Fix(
            family,
            f"needs {100 * (x - 1):.0f}% more memory per GPU (e.g. {mem * x:,.0f} GB instead of "
            f"{mem:,.0f} GB on {big})",
            scenario.with_changes(memory_scale=x),
        )
    if family == "power":
        cap_mw = scenario.power_cap_w / 1e6
        x = _bisect(
            lambda v: ok(scenario.with_changes(power_cap_mw=v)), cap_mw, cap_mw * 1e6, False
        )
        if x is None:
            return None
        return Fix(
            family,
            f"raise the power cap to {x:,.3f} MW",
            scenario.with_changes(power_cap_mw=x),
        )
    if family == "max_racks":
        x = _bisect(
            lambda v: ok(scenario.with_changes(max_racks=int(v))), scenario.rack_cap, 2**20, True
        )
        if x is None:
            return None
        return Fix(
            family, f"allow at least {int(x):,} racks", scenario.with_changes(max_racks=int(x))
        )
    if family == "nic_slots":
        x = _bisect(lambda v: ok(scenario.with_changes(extra_nic_slots=int(v))), 0, 64, True)
        if x is None:
            return None
        return Fix(
            family,
            f"{int(x)} more NIC slots per server",
            scenario.with_changes(extra_nic_slots=int(x)),
        )
    return None


@dataclass(frozen=True)
class Conflict:
    constraints: list[str]
    fixes: list[Fix]

    def as_dict(self) -> dict[str, Any]:
        return {"constraints": self.constraints, "fixes": [f.as_dict() for f in self.fixes]}


def explain_infeasible(
    scenario: Scenario, time_limit_s: float = 30.0, candidates: list[Candidate] | None = None
) -> Conflict:
    cands = candidates if candidates is not None else enumerate_candidates(scenario)
    core = infeasible_core(scenario, cands, time_limit_s)
    fixes = [
        f
        for f in (smallest_fix(scenario, fam, cands, time_limit_s) for fam in core)
        if f is not None
    ]
    return Conflict(core, fixes)
