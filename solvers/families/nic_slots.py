"""nic_slots: NICs per server among the counts the vendor ships (catalog ServerSpec
allowed_nic_counts); relaxed by extra slots (Scenario.extra_nic_slots), up to twice the
slots when ignored (Scenario.nic_counts). Checked by the performance model."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from solvers.families.base import EvaluatorCheck, Fix, FixSearch, Grid, bisect_fix, ep_domains

if TYPE_CHECKING:
    from solvers.cpsat.context import BuildContext
    from solvers.plan import Plan
    from solvers.scenario import Scenario


class NicSlots(EvaluatorCheck):
    def relax(self, s: Scenario) -> Scenario:
        return s.with_changes(extra_nic_slots=s.extra_nic_slots + 1)

    def encode(self, ctx: BuildContext) -> None:
        from ortools.sat.python import cp_model

        for name in ctx.gpu_names:
            ctx.md.add_linear_expression_in_domain(
                ctx.nics_per_node, cp_model.Domain.from_values(ctx.counts_of[name])
            ).only_enforce_if([ctx.gpu_lit[name], ctx.enforce[self.name]])

    def admits(self, s: Scenario, grid: Grid) -> Any:
        return grid.nics_per_node in grid.gpu.server.allowed_nic_counts(s.extra_nic_slots, True)

    def slack(self, s: Scenario, plan: Plan) -> tuple[float | None, str, str]:
        cfg = plan.config
        slots = s.nic_slots(cfg.shape.gpu)
        detail = f"{cfg.nics_per_node} of {slots} NIC slots per server"
        if plan.evaluation.breakdown.ep_comm and _ep_crosses_nics(s, plan):
            detail += "; EP traffic crosses the NICs"
        if plan.evaluation.breakdown.cp_nic_comm:
            detail += "; ring attention crosses the NICs"
        return slots - cfg.nics_per_node, "NICs", detail

    def smallest_fix(self, s: Scenario, search: FixSearch) -> Fix | None:
        return bisect_fix(
            search,
            self.name,
            lambda v: s.with_changes(extra_nic_slots=int(v)),
            0,
            64,
            True,
            lambda x: f"{int(x)} more NIC slots per server",
        )


def _ep_crosses_nics(s: Scenario, plan: Plan) -> bool:
    """Whether the plan's EP group spans scale-up domains (solvers/families/ep_domain.py)."""
    return ep_domains(plan, s) > 1


# the slots are the server's; the question adds to them
FAMILY = NicSlots("nic_slots", 80, "one more NIC slot per server", field="extra_nic_slots")
