"""batch_floor: the global batch, in tokens, at least the question's floor.

Checked by the performance model (models/feasibility.py check_layout, from
Assumptions.batch_floor_tokens)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from models.feasibility import TOL
from solvers.families.base import EvaluatorCheck, Fix, FixSearch, Grid, bisect
from solvers.intmath import up

if TYPE_CHECKING:
    from solvers.cpsat.context import BuildContext
    from solvers.plan import Plan
    from solvers.scenario import Scenario


class BatchFloor(EvaluatorCheck):
    def relax(self, s: Scenario) -> Scenario:
        return s.with_changes(min_batch_tokens=s.floor_tokens / 2)

    def encode(self, ctx: BuildContext) -> None:
        s = ctx.scenario
        ctx.md.add(ctx.global_batch >= up(s.floor_tokens / s.seq_len)).only_enforce_if(
            ctx.enforce[self.name]
        )

    def admits(self, s: Scenario, grid: Grid) -> Any:
        floor_seq = math.ceil(s.floor_tokens / s.seq_len - TOL)
        return grid.cand.shape.micro_batch * grid.m * grid.dps >= floor_seq

    def slack(self, s: Scenario, plan: Plan) -> tuple[float | None, str, str]:
        used = plan.evaluation.layout.global_batch * s.seq_len
        return (
            used - s.floor_tokens,
            "tokens",
            f"{used:,.0f} tokens, floor {s.floor_tokens:,.0f}",
        )

    def smallest_fix(self, s: Scenario, search: FixSearch) -> Fix | None:
        def feasible_floor(v: float) -> bool:  # lower is easier: bisect on the cut
            return search.ok(s.with_changes(min_batch_tokens=s.floor_tokens - v))

        x = bisect(feasible_floor, 0.0, s.floor_tokens - s.seq_len, False)
        if x is None:
            return None
        floor = s.floor_tokens - x
        return Fix(
            self.name,
            f"lower the batch floor to {floor:,.0f} tokens",
            s.with_changes(min_batch_tokens=floor),
        )


FAMILY = BatchFloor("batch_floor", 70, "batch floor /2", field="min_batch_tokens")
