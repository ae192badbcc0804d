"""pipeline_fill: at least as many micro-batches per step as pipeline stages (m >= p).

Checked by the performance model (models/feasibility.py check_layout). The interleaved
schedule's own need for m >= p (Narayanan et al. SC'21, section 2.2) is not this rule:
it holds whether the rule is enforced or not (solvers/cpsat/model.py, exhaustive.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from solvers.families.base import EvaluatorCheck, Grid, Rule

if TYPE_CHECKING:
    from solvers.cpsat.context import BuildContext
    from solvers.plan import Plan
    from solvers.scenario import Scenario
    from solvers.space import Candidate


class PipelineFill(Rule, EvaluatorCheck):
    def encode(self, ctx: BuildContext) -> None:
        ctx.md.add(ctx.m >= ctx.sel(s.pp for s in ctx.shapes)).only_enforce_if(
            ctx.enforce[self.name]
        )

    def moved_by_relaxing(self, s: Scenario) -> Callable[[Candidate], bool] | None:
        # m >= p binds a pipeline of one chunk per stage only: one stage needs no fill, and
        # the interleaved schedule needs m >= p whether the rule holds or not (module doc)
        return _fills_its_own_pipeline

    def admits(self, s: Scenario, grid: Grid) -> Any:
        pp = grid.cand.shape.pp
        return True if pp == 1 else grid.m >= pp

    def slack(self, s: Scenario, plan: Plan) -> tuple[float | None, str, str]:
        m, pp = plan.config.microbatches, plan.evaluation.layout.pp
        batches = f"{m} micro-batch{'' if m == 1 else 'es'}"
        return m - pp, "micro-batches", f"{batches} per step for {pp} stage{'' if pp == 1 else 's'}"


def _fills_its_own_pipeline(cand: Candidate) -> bool:
    """Whether pipeline_fill is the shape's only need for m >= p (PipelineFill)."""
    return cand.shape.pp > 1 and cand.shape.vp == 1


FAMILY = PipelineFill("pipeline_fill", 50, "fewer micro-batches than stages allowed")
