"""memory: the ZeRO-1 shard, activations and buffers fit each GPU's usable memory.

Checked by the performance model (models/memory.py, models/feasibility.py check_layout);
the solvers use each shape's smallest DP degree that fits (solvers/space.py
dp_min_from_terms). Relaxed by scaling every GPU's capacity (Scenario.memory_scale)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from solvers.families.base import EvaluatorCheck, Fix, FixSearch, Grid, bisect

if TYPE_CHECKING:
    from solvers.cpsat.context import BuildContext
    from solvers.plan import Plan
    from solvers.scenario import Scenario
    from solvers.space import Candidate


class Memory(EvaluatorCheck):
    def relax(self, s: Scenario) -> Scenario:
        return s.with_changes(memory_scale=s.memory_scale * 1.1)

    def encode(self, ctx: BuildContext) -> None:
        on = ctx.enforce[self.name]
        never = [ctx.x[i] for i, c in enumerate(ctx.candidates) if c.dp_min_memory is None]
        if never:
            ctx.md.add(sum(never) == 0).only_enforce_if(on)
        ctx.md.add(ctx.dp >= ctx.sel(c.dp_min_memory or 1 for c in ctx.candidates)).only_enforce_if(
            on
        )

    def moved_by_relaxing(self, s: Scenario) -> Callable[[Candidate], bool] | None:
        # the capacity reaches the plans through one bound, d >= dp_min_memory (encode):
        # a shape whose bound stays put keeps every plan
        return memory_bound_moved

    def admits(self, s: Scenario, grid: Grid) -> Any:
        need = grid.cand.dp_min_memory
        return False if need is None else grid.dps >= need

    def slack(self, s: Scenario, plan: Plan) -> tuple[float | None, str, str]:
        mem = plan.evaluation.memory
        return (
            mem.usable - mem.total,
            "GB",
            f"{mem.total:,.1f} of {mem.usable:,.1f} GB per GPU",
        )

    def smallest_fix(self, s: Scenario, search: FixSearch) -> Fix | None:
        # a shape the other families rule out (memory off) stays out at any capacity: probe
        # only the others (a budget far too small leaves few)
        pool = search.presolve(search.only(s, search.active - {self.name}), search.cands)

        def fits(v: float) -> bool:
            scaled = s.with_changes(memory_scale=v)
            space = search.with_memory_scale(scaled, pool)
            return bool(pool) and search.feasible(scaled, search.active, space) is True

        # whole GB of the largest GPU (the figure printed): exact, so that the capacity
        # named fits and one GB less does not (a float search to 1% named 155 GB where
        # 156 was the least that fits)
        big = max(s.gpus, key=lambda g: s.catalog.gpu(g).memory_gb)
        mem = s.catalog.gpu(big).memory_gb
        now = mem * s.memory_scale
        gb = bisect(lambda g: fits(g / mem), math.floor(now), math.ceil(mem * 64.0), True)
        if gb is None:
            return None
        more = math.ceil(100 * (gb / now - 1) - 1e-9)  # a percentage at least the GB named
        return Fix(
            self.name,
            f"needs {more}% more memory per GPU (e.g. {gb:,.0f} GB instead of "
            f"{now:,.0f} GB on {big})",
            s.with_changes(memory_scale=gb / mem),
        )


def memory_bound_moved(cand: Candidate) -> bool:
    """Whether a shape of a question at another memory scale (space.with_memory_scale)
    has another smallest fitting DP degree than the shape it was made from (True when it
    was not made from one)."""
    origin = cand.origin
    return origin is None or cand.dp_min_memory != origin.dp_min_memory


# the capacity is the GPU's; the question scales it (explain)
FAMILY = Memory("memory", 10, "GPU memory +10%", field="memory_scale")
