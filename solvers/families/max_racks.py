"""max_racks: at most the question's racks (servers per rack under the rack's power
budget; models/cost.py servers_per_rack, solvers/cpsat/cluster.py encodes the count)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from solvers.families.base import Family, Fix, FixSearch, Grid, LeastPerGpu, count_fix, violation
from solvers.scenario import GPU_CAP

if TYPE_CHECKING:
    from catalog.specs import GPUSpec
    from models.evaluate import Evaluation
    from models.feasibility import Violation
    from solvers.cpsat.context import BuildContext
    from solvers.plan import Config, Plan
    from solvers.scenario import Scenario


class MaxRacks(Family):
    needs_cluster = True  # the rack count is a cluster term, priced or not

    def gpu_limit(self, s: Scenario, gpu: GPUSpec, least: LeastPerGpu) -> int | None:
        """A rack holds at most servers_per_rack servers (with the least power-hungry NIC)."""
        # lazy: models.cost loads numpy, which commands that never solve do not load
        from models.cost import nic_power_w, servers_per_rack

        nic_w = min(nic_power_w(s.catalog.nic(n)) for n in s.nics)
        spr = servers_per_rack(gpu, s.catalog.facility, nic_w)
        return s.rack_cap * spr * gpu.server.gpus_per_server

    def relax(self, s: Scenario) -> Scenario:
        return s.with_changes(max_racks=max(s.rack_cap + 1, math.ceil(s.rack_cap * 1.1)))

    def encode(self, ctx: BuildContext) -> None:
        assert ctx.cluster is not None
        ctx.md.add(ctx.cluster.racks <= ctx.scenario.rack_cap).only_enforce_if(
            ctx.enforce[self.name]
        )

    def admits(self, s: Scenario, grid: Grid) -> Any:
        return grid.cluster.racks <= s.rack_cap

    def violation(self, s: Scenario, ev: Evaluation, config: Config) -> Violation | None:
        racks = ev.cluster.racks
        if racks > s.rack_cap:
            return violation(self.name, f"needs {racks:,} racks, limit {s.rack_cap:,}")
        return None

    def slack(self, s: Scenario, plan: Plan) -> tuple[float | None, str, str]:
        racks = plan.evaluation.cluster.racks
        return s.rack_cap - racks, "racks", f"{racks:,} of {s.rack_cap:,} racks"

    def smallest_fix(self, s: Scenario, search: FixSearch) -> Fix | None:
        return count_fix(search, self.name, "max_racks", s.rack_cap, "racks", GPU_CAP)


FAMILY = MaxRacks("max_racks", 130, "racks +10%", field="max_racks")
