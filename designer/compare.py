"""`designer compare`: the same question answered once per GPU type."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from solvers import Scenario, SolveResult, solve_cpsat
from solvers.explain import Binding, binding_constraints


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
        best = self.result.best
        return (best is None, best.objective if best else 0.0, self.gpu)


def compare(
    scenario: Scenario, explain: bool = True, time_limit_s: float = 60.0
) -> list[CompareRow]:
    """Best plan per GPU type (each solved on its own), best first, infeasible ones last."""

    def one(gpu: str) -> CompareRow:
        s = scenario.with_changes(gpus=(gpu,))
        res = solve_cpsat(s, time_limit_s=time_limit_s)
        binding = None
        if explain and res.best is not None:
            binding = binding_constraints(
                s,
                res.best,
                res.candidates or None,
                time_limit_s=time_limit_s,
                plan_proved=res.status == "optimal",
            )
        return CompareRow(gpu, res, binding)

    with ThreadPoolExecutor(
        max_workers=max(1, min(len(scenario.gpus), os.cpu_count() or 1))
    ) as pool:
        rows = list(pool.map(one, scenario.gpus))
    rows.sort(key=lambda r: r.sort_key)
    return rows
