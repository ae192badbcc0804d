"""The constraint-family registry (solvers/families/): every family has every hook, and
at each limit x (1 +- 1e-6) CP-SAT, the exhaustive solver and the family's own
violation check agree.

Adding a family: its module under solvers/families/ and, for a limit, one entry in
LIMITS below (README "Adding a constraint family")."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from catalog import load_catalog
from helpers import ideal_scenario
from models.transformer import TransformerSpec
from solvers import FAMILIES
from solvers.cpsat.solve import solve_cpsat
from solvers.exhaustive import solve_exhaustive
from solvers.families import BY_NAME, NAMES, REGISTRY, SHAPE_RULES
from solvers.families.base import KINDS, Family, ShapeRule
from solvers.plan import Plan, build_plan
from solvers.scenario import Scenario

HOOKS = ("relax", "encode", "admits", "violation", "slack", "smallest_fix")
REL_TOL = 1e-3  # CP-SAT's integer time unit (README "Guarantees and limits")
EPS = 1e-6


def missing_hooks(family: Family) -> list[str]:
    """The hooks a family leaves to the base class (which raises NotImplementedError)."""
    hooks = HOOKS + (("violated_by",) if family.shape_rule else ())
    return [h for h in hooks if getattr(type(family), h) is getattr(Family, h)]


def test_registry_is_complete_and_ordered():
    assert FAMILIES == NAMES == tuple(f.name for f in REGISTRY)
    assert len(set(NAMES)) == len(NAMES)
    assert len({f.position for f in REGISTRY}) == len(REGISTRY)
    assert {f.name for f in SHAPE_RULES} == {
        "tp_bandwidth",
        "tp_domain",
        "divisibility",
        "ep_domain",
    }
    assert set(BY_NAME) == set(NAMES)


@pytest.mark.parametrize("family", REGISTRY, ids=NAMES)
def test_every_hook_is_implemented(family):
    assert missing_hooks(family) == []
    assert family.kind in KINDS
    assert isinstance(family.relaxation, str) and family.relaxation
    assert family.field is None or family.field in Scenario.__dataclass_fields__
    assert (family.kind == "structural") == (family.field is None)


def test_a_family_without_a_hook_fails_conformance():
    class Halfway(ShapeRule):
        pass

    assert set(missing_hooks(Halfway("halfway", 10_000, "halfway off"))) == {
        "slack",
        "violated_by",
    }


# ------------------------------------------------------------------ a small question
# four layers of a 1K-wide model: every solve takes well under a second
SPEC = TransformerSpec(name="tiny", layers=4, hidden=1024, heads=16, vocab=32000, seq_len=1024)
# one GPU and NIC type, the narrowest space that still has pipelines and a fabric
SMALL = {"tokens": 2e10, "gpus": ("h100-sxm",), "nics": ("cx7-400g",), "max_gpus": 32}
SMALL_SPACE = {"micro_batches": (1, 2), "recompute_modes": ("none",), "max_batch_tokens": 2**19}


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def small(cat, **kw) -> Scenario:
    spec = kw.pop("spec", SPEC)
    fields = {**SMALL, **SMALL_SPACE, **kw}
    return ideal_scenario(spec=spec, catalog=cat, seq_len=spec.seq_len, **fields)


@pytest.fixture(scope="module")
def loose(cat):
    """Every limit set, none binding: the families are all active."""
    return small(
        cat,
        budget_usd=1e8,
        deadline_days=1e4,
        power_cap_mw=10.0,
        max_racks=100,
        min_batch_tokens=2**10,
    )


@pytest.fixture(scope="module")
def loose_plan(loose) -> Plan:
    res = solve_exhaustive(loose)
    assert res.status == "optimal"
    return res.best


# families active only on a mixture-of-experts question (ep_domain) are tried on one
MOE_SPEC = TransformerSpec(
    name="tiny-moe", layers=4, hidden=1024, heads=16, vocab=32000, seq_len=1024,
    experts=8, experts_per_token=2, expert_ffn_hidden=1024,
)  # fmt: skip


@pytest.fixture(scope="module")
def loose_moe(loose):
    s = loose.with_changes(spec=MOE_SPEC)
    return s, solve_exhaustive(s).best


@pytest.mark.parametrize("family", REGISTRY, ids=NAMES)
def test_hooks_behave_on_a_feasible_plan(family, loose, loose_plan, loose_moe):
    if not family.active(loose):
        loose, loose_plan = loose_moe
    assert family.active(loose)
    assert not family.active(loose.with_changes(disabled=frozenset({family.name})))
    slack, unit, detail = family.slack(loose, loose_plan)
    assert isinstance(unit, str) and isinstance(detail, str) and detail
    assert slack is None or slack >= 0
    ev, cfg = loose_plan.evaluation, loose_plan.config
    assert family.violation(loose, ev, cfg) is None
    # the relaxed question admits the plan too
    relaxed = family.relax(loose)
    assert isinstance(relaxed, Scenario)
    assert build_plan(relaxed, cfg).feasible
    if family.shape_rule:
        gpu = loose.catalog.gpu(cfg.shape.gpu)
        assert not family.violated_by(loose, cfg.shape, gpu)


def test_shape_rules_match_the_evaluator(cat):
    """A shape a rule forbids is one the plan reports as violating it (the performance
    model's check, or the family's own: ep_domain's --ep-in-domain)."""
    from solvers.space import enumerate_candidates

    twelve = SPEC.model_copy(update={"name": "tiny-12-heads", "heads": 12, "kv_heads": 12})
    off = frozenset(f.name for f in SHAPE_RULES)
    seen = set()
    for spec, in_domain in ((SPEC, False), (twelve, False), (MOE_SPEC, True)):
        s = small(cat, spec=spec, gpus=("h100-sxm", "l40s"), ep_in_domain=in_domain)
        for cand in enumerate_candidates(s.with_changes(disabled=off)):
            gpu = cat.gpu(cand.shape.gpu)
            for rule in SHAPE_RULES:
                if rule.violated_by(s, cand.shape, gpu):
                    seen.add(rule.name)
                    plan = build_plan(s, _config(cand.shape, cand.shape.pp, cand.shape.dp_step))
                    assert rule.name in {v.constraint for v in plan.violations}
                    assert not rule.admits(s, _grid(cand, gpu))
    assert seen == {f.name for f in SHAPE_RULES}  # the space holds shapes each rule forbids


def _grid(cand, gpu):
    from solvers.families.base import Grid

    return Grid(cand, gpu, 8, None, None, None, None, None, None)


def _config(shape, microbatches, dp=1):
    from solvers.plan import Config

    return Config(shape, "cx7-400g", 8, dp, max(1, microbatches))


# --------------------------------------------------- agreement at each limit x (1 +- 1e-6)
# family -> (base question's extra fields, the plan's amount, the question at a limit,
# whether the base question's optimum minimises the amount: then just below it is
# infeasible for both solvers)
Limit = tuple[dict, Callable[[Plan, Scenario], float], Callable[[Scenario, float], Scenario], bool]
LIMITS: dict[str, Limit] = {
    "budget": (
        dict(objective="cost"),
        lambda p, s: p.cost_usd,
        lambda s, x: s.with_changes(budget_usd=x),
        True,
    ),
    "deadline": (
        dict(objective="time"),
        lambda p, s: float(p.evaluation.time_to_train_days or 0.0),
        lambda s, x: s.with_changes(deadline_days=x),
        True,
    ),
    "max_gpus": (
        dict(objective="cost"),
        lambda p, s: p.num_gpus,
        lambda s, x: s.with_changes(max_gpus=math.floor(x)),
        True,
    ),
    "max_racks": (
        dict(objective="cost"),
        lambda p, s: p.evaluation.cluster.racks,
        lambda s, x: s.with_changes(max_racks=math.floor(x)),
        True,
    ),
    "power": (
        dict(objective="time", max_gpus=16),
        lambda p, s: p.evaluation.cluster.facility_power_w / 1e6,
        lambda s, x: s.with_changes(power_cap_mw=x),
        False,
    ),
    "batch_ceiling": (
        dict(objective="time"),
        lambda p, s: p.evaluation.layout.global_batch * s.seq_len,
        lambda s, x: s.with_changes(max_batch_tokens=x),
        False,
    ),
    "batch_floor": (
        dict(objective="time", max_batch_tokens=2**17),
        lambda p, s: p.evaluation.layout.global_batch * s.seq_len,
        lambda s, x: s.with_changes(min_batch_tokens=x),
        True,  # the ceiling's largest batch: a floor just above it leaves nothing
    ),
}


def test_every_limit_family_has_a_limit_test():
    limits = {f.name for f in REGISTRY if f.kind == "limit"}
    # memory and nic_slots: their limits are the hardware's (tests/test_explain.py binds them)
    assert limits - {"memory", "nic_slots"} == set(LIMITS)


def _statuses(s: Scenario) -> tuple[str, str, Plan | None, Plan | None]:
    ref = solve_exhaustive(s)
    got = solve_cpsat(s, time_limit_s=30.0)
    return ref.status, got.status, ref.best, got.best


@pytest.mark.parametrize("name", sorted(LIMITS))
def test_solvers_and_violation_agree_at_the_limit(name, cat):
    extra, amount, at, minimal = LIMITS[name]
    family = BY_NAME[name]
    base = small(cat, **extra)
    ref = solve_exhaustive(base)
    assert ref.status == "optimal"
    plan = ref.best
    x = float(amount(plan, base))
    for side, s in (("above", at(base, x * (1 + EPS))), ("below", at(base, x * (1 - EPS)))):
        violated = side == ("above" if name == "batch_floor" else "below")  # a floor: above
        assert family.active(s)
        checked = build_plan(s, plan.config)
        assert (family.violation(s, checked.evaluation, plan.config) is not None) == violated, side
        assert (name in {v.constraint for v in checked.violations}) == violated, side
        ref_status, cp_status, ref_best, cp_best = _statuses(s)
        assert ref_status in ("optimal", "infeasible") and cp_status in ("optimal", "infeasible")
        assert ref_status == cp_status, (side, ref_status, cp_status)
        if violated and minimal:
            assert ref_status == "infeasible", side
        if not violated:
            assert ref_status == "optimal", side
        if ref_best is not None and cp_best is not None:
            assert cp_best.feasible and ref_best.feasible
            assert cp_best.objective == pytest.approx(ref_best.objective, rel=REL_TOL)


@pytest.mark.parametrize("name", sorted(LIMITS))
def test_enumerated_families_cut_nothing_the_enumeration_keeps(name, cat, monkeypatch):
    """The exhaustive solver skips ``admits`` of the families its enumeration keeps within
    (Family.enumerated); applying every family's check there changes no answer."""
    import solvers.grid_search as grid_search

    s = small(cat, min_batch_tokens=2**12, **LIMITS[name][0])
    plain = solve_exhaustive(s, top_k=3)
    every = [f for f in REGISTRY if f.active(s)]
    assert any(f.enumerated for f in every)
    monkeypatch.setattr(grid_search, "checked_families", lambda q: every)
    checked = solve_exhaustive(s, top_k=3)
    assert [p.config for p in checked.plans] == [p.config for p in plain.plans]


def test_pipeline_fill_counts_one_micro_batch_and_one_stage_in_the_singular(loose, loose_plan):
    """Its slack spelled 'N micro-batches per step for N stages' whatever N."""
    from dataclasses import replace

    from solvers.families.pipeline_fill import FAMILY

    ev, cfg = loose_plan.evaluation, loose_plan.config
    one = replace(
        loose_plan,
        config=replace(cfg, microbatches=1),
        evaluation=replace(ev, layout=replace(ev.layout, pp=1)),
    )
    assert FAMILY.slack(loose, one)[2] == "1 micro-batch per step for 1 stage"
    two = replace(one, evaluation=replace(ev, layout=replace(ev.layout, pp=2)))
    assert FAMILY.slack(loose, two)[2] == "1 micro-batch per step for 2 stages"


def test_tp_bandwidth_names_fp8_traffic_only_where_it_applies(loose, loose_plan):
    """Its slack said 'x FP8 traffic' for every FP8 plan, Gaudi 3's too, whose limit takes
    no traffic factor (models.scaleup.TRANSFORMER_ENGINE_VENDORS)."""
    from dataclasses import replace

    from solvers.families.tp_bandwidth import FAMILY

    ev, cfg = loose_plan.evaluation, loose_plan.config
    for gpu, named in (("h100-sxm", True), ("gaudi3", False)):
        plan = replace(
            loose_plan,
            config=replace(cfg, shape=cfg.shape._replace(gpu=gpu)),
            evaluation=replace(ev, layout=replace(ev.layout, tp=2, precision="fp8")),
        )
        assert ("x FP8 traffic" in FAMILY.slack(loose, plan)[2]) is named, gpu
