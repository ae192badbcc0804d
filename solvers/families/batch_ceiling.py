"""batch_ceiling: the global batch, in tokens, at most the question's ceiling.

Checked by the performance model (models/feasibility.py check_layout, from
Assumptions.batch_ceiling_tokens). In CP-SAT the largest micro-batch count the ceiling
allows is always best (the dominance the exhaustive solver's docstring states); with
tokens that depend on the batch, the largest up to the critical batch."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from models.feasibility import TOL
from models.pipeline import microbatch_step
from solvers.families.base import EvaluatorCheck, Fix, FixSearch, Grid, bisect

if TYPE_CHECKING:
    from solvers.cpsat.context import BuildContext
    from solvers.plan import Plan
    from solvers.scenario import Scenario


def ceiling_sequences(s: Scenario) -> int:
    """The ceiling in whole sequences, as the exhaustive solver counts it."""
    return math.floor(s.ceiling_tokens / s.seq_len + TOL)


class BatchCeiling(EvaluatorCheck):
    def relax(self, s: Scenario) -> Scenario:
        return s.with_changes(max_batch_tokens=s.ceiling_tokens * 2)

    def encode(self, ctx: BuildContext) -> None:
        on, ceiling = ctx.enforce[self.name], ctx.ceiling_seq
        ctx.md.add(ctx.global_batch <= ceiling).only_enforce_if(on)
        crit = ctx.scenario.critical_batch_seq
        if ceiling and crit is not None:
            # with tokens that depend on the batch, a larger m is best only up to the
            # critical batch (past it each micro-batch costs tokens: solvers/cpsat/batch_tokens.py)
            ceiling = min(ceiling, crit)
        if ceiling:
            # dominance: the largest m the ceiling allows is always best (exhaustive.py); under
            # the interleaved schedule m steps by p (cpsat_model._batch), so the largest is
            # within p of the ceiling: d (m + step) > ceiling / b, one row per step
            steps = [microbatch_step(s.pp, s.vp) for s in ctx.shapes]
            for step in sorted(set(steps)):
                ctx.md.add(
                    ctx.w + step * ctx.dp
                    >= ctx.sel(
                        ceiling // s.micro_batch + 1 if k == step else 0
                        for s, k in zip(ctx.shapes, steps, strict=True)
                    )
                ).only_enforce_if(on)

    def admits(self, s: Scenario, grid: Grid) -> Any:
        return grid.cand.shape.micro_batch * grid.m * grid.dps <= ceiling_sequences(s)

    def slack(self, s: Scenario, plan: Plan) -> tuple[float | None, str, str]:
        used = plan.evaluation.layout.global_batch * s.seq_len
        return (
            s.ceiling_tokens - used,
            "tokens",
            f"{used:,.0f} of {s.ceiling_tokens:,.0f} tokens per batch",
        )

    def smallest_fix(self, s: Scenario, search: FixSearch) -> Fix | None:
        # whole sequences, the unit the solvers decide in (ceiling_sequences): exact, where a
        # float search to 1% rounded up named 35 sequences when 34 was the least that works
        seq = s.seq_len
        n = bisect(
            lambda v: search.ok(s.with_changes(max_batch_tokens=float(v * seq))),
            ceiling_sequences(s),
            math.ceil(s.ceiling_tokens * 1e4 / seq),
            True,
        )
        if n is None:
            return None
        tokens = float(n * seq)
        return Fix(
            self.name,
            f"raise the batch ceiling to {tokens:,.0f} tokens",
            s.with_changes(max_batch_tokens=tokens),
        )


FAMILY = BatchCeiling("batch_ceiling", 60, "batch ceiling x2", field="max_batch_tokens")
