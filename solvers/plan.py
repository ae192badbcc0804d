"""A chosen configuration, re-evaluated with the float performance model."""

from __future__ import annotations

import math
from dataclasses import replace

from models.batch_tokens import token_multiplier
from models.evaluate import Evaluation, Hardware, evaluate
from solvers.columns import PLAN_COLUMNS  # noqa: F401  (its home before solvers/columns.py)
from solvers.decisions import (  # noqa: F401  (Config, Plan, Shape: their home before decisions.py)
    Config,
    Plan,
    Shape,
    question_experts,
)
from solvers.families import REGISTRY, active
from solvers.families.base import register_plan_builder
from solvers.purchases import purchased
from solvers.scenario import PreparedQuestion, Scenario


def cost_usd(ev: Evaluation, pricing: str) -> float:
    """The plan's cost under ``pricing``; renting, its rent (Evaluation.cloud_cost: its
    term's rate for its billed days, models/rental.py)."""
    if pricing == "capex":
        return ev.capex
    if pricing == "tco":
        return float(ev.tco_cost or 0.0)
    return float(ev.cloud_cost or 0.0)


def build_plan(
    scenario: Scenario, config: Config, prepared: PreparedQuestion | None = None
) -> Plan:
    """Re-evaluate a configuration with the float model and check every enforced family.
    ``prepared``: ``scenario.prepare()``, when the caller has it (its GPU types hold the
    configuration's)."""
    q: Scenario | PreparedQuestion = scenario if prepared is None else prepared
    crit = q.critical_batch_seq
    cat = scenario.catalog
    hw = Hardware.from_catalog(cat, config.shape.gpu, config.nic, config.nics_per_node)
    layout = config.shape.layout(config.dp, config.microbatches)
    a = scenario.assumptions.model_copy(
        update={
            "batch_ceiling_tokens": scenario.max_batch_tokens,
            "batch_floor_tokens": scenario.min_batch_tokens,
        }
    )
    gpu = hw.gpu
    if scenario.memory_scale != 1.0:
        gpu = gpu.model_copy(update={"memory_gb": gpu.memory_gb * scenario.memory_scale})
    if scenario.extra_nic_slots:
        server = gpu.server.model_copy(
            update={
                "nic_slots": scenario.nic_slots(gpu.name),
                "nic_counts": scenario.nic_counts(gpu.name),
            }
        )
        gpu = gpu.model_copy(update={"server": server})
    hw = replace(hw, gpu=gpu)
    ev = evaluate(
        scenario.spec,
        hw,
        layout,
        scenario.seq_len,
        scenario.tokens * token_multiplier(layout.global_batch, crit),  # the batch's tokens
        a,
        failures=(
            scenario.failure_model(gpu.name)
            if prepared is None
            else prepared.failure_models[gpu.name]
        ),
        # EP and ETP (1 and 1 for a dense model) and the question's dispatcher
        experts=question_experts(config.shape.ep, config.shape.etp, scenario.dispatcher),
    )
    ev = purchased(ev, config.spares_per_100, config.storage_gb_per_s)
    rental = scenario.rental(gpu.name) if prepared is None else prepared.rentals[gpu.name]
    ev = replace(ev, rental=rental)  # its term's (models/rental.py)
    cost = cost_usd(ev, scenario.pricing)
    ev.extra["cost_usd"] = cost
    ev.extra["gpus_per_node"] = gpu.server.gpus_per_server
    ev.extra["critical_batch_tokens"] = None if crit is None else crit * scenario.seq_len
    ev.extra["dispatcher"] = scenario.dispatcher if scenario.spec.is_moe else None
    # the evaluator's checks (models/feasibility.py), then the families it does not check
    violations = [v for v in ev.violations if active(scenario, v.constraint)]
    for family in REGISTRY:
        if not family.in_evaluator and family.active(scenario):
            found = family.violation(scenario, ev, config)
            if found is not None:
                violations.append(found)
    days = ev.time_to_train_days or math.inf
    objective = days if scenario.objective == "time" else cost
    return Plan(config, ev, tuple(violations), objective)


register_plan_builder(build_plan)  # (solvers/families/base.py resized reads it)
