"""`designer compare`: the same question answered once per GPU type."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from designer.question.build import scenario_from_options
from designer.question.fields import evidence_spares
from solvers import Scenario, SolveResult, solve
from solvers.explain import Binding, Conflict, binding_constraints, explain_infeasible
from solvers.result import objective_fields
from solvers.tie_rule import tie_key


@dataclass
class CompareRow:
    gpu: str
    result: SolveResult
    binding: list[Binding] | None

    @property
    def top_binding(self) -> str:
        for b in self.binding or []:
            if b.binding:
                return b.constraint
        return ""

    @property
    def sort_key(self) -> tuple:
        """The rows with a plan first, by optimize's tie rule (solvers/tie_rule.py: the
        objective, then the other one, then fewer GPUs), then by name: the first row is
        the plan optimize picks among these GPU types."""
        best = self.result.best
        if best is None:
            return (True, (), self.gpu)
        time_name, _ = objective_fields("time")
        objective = "time" if self.result.objective_name == time_name else "cost"
        return (False, tie_key(best, objective), self.gpu)


def compare(
    scenario: Scenario,
    explain: bool = True,
    time_limit_s: float = 60.0,
    top_k: int = 1,
    solver: str = "cpsat",
) -> list[CompareRow]:
    """Best plan per GPU type (each solved on its own with ``solver``), best first,
    infeasible ones last; with ``top_k`` > 1 the K best distinct plans of each type, one row
    each (optimize's --top per type; the binding constraints priced on each type's best)."""

    def one(gpu: str) -> list[CompareRow]:
        s = scenario.with_changes(gpus=(gpu,))
        res = solve(s, solver=solver, top_k=top_k, time_limit_s=time_limit_s)
        binding = None
        if explain and res.best is not None:
            binding = binding_constraints(
                s,
                res.best,
                res.candidates or None,
                time_limit_s=time_limit_s,
                plan_proved=res.status == "optimal",
            )
        if len(res.plans) <= 1:
            return [CompareRow(gpu, res, binding)]
        return [
            CompareRow(gpu, replace(res, plans=[plan]), binding if i == 0 else None)
            for i, plan in enumerate(res.plans)
        ]

    with ThreadPoolExecutor(
        max_workers=max(1, min(len(scenario.gpus), os.cpu_count() or 1))
    ) as pool:
        rows = [row for rows in pool.map(one, scenario.gpus) for row in rows]
    rows.sort(key=lambda r: r.sort_key)
    return rows


def compare_conflict(
    scenario: Scenario, rows: list[CompareRow], time_limit_s: float = 60.0
) -> Conflict | None:
    """When every GPU type is proved infeasible, the conflict that rules out the whole
    question (every GPU type at once, as optimize explains it) and its smallest fixes;
    None when some type has a plan, or one ran out of time before proving it has none."""
    if not rows or any(r.result.status != "infeasible" for r in rows):
        return None
    return explain_infeasible(scenario, time_limit_s=time_limit_s)


def left_out(question: dict[str, Any], scenario: Scenario) -> dict[str, Any] | None:
    """The GPU types a question left out for want of evidence at its --evidence level (of
    the catalog, or of the GPUs named when --evidence is given), and those --evidence thin
    would add (JSON ``left_out``: {evidence, gpus, thin}); None when GPUs were named without
    --evidence (searched whatever their evidence), --evidence any searched every type, or
    the rule left none out. ``question``: the command line's question options."""
    if evidence_spares(question) or scenario.evidence == "any":
        return None
    searched = set(scenario.gpus)

    def added(level: str) -> list[str]:
        wider = scenario_from_options({**question, "evidence": level})
        return [g for g in wider.gpus if g not in searched]

    gpus = added("any")
    if not gpus:
        return None
    thin = added("thin") if scenario.evidence == "measured" else []
    return {"evidence": scenario.evidence, "gpus": gpus, "thin": thin}
