"""tp_domain: TP within one scale-up domain (NVLink server or rack; catalog ServerSpec).

Context parallelism may leave the domain: ring attention's KV exchange then crosses the
NICs and is charged there (models/step.py cp_nic_mb_s), as Llama 3 ran CP 16 across
servers with TP 8 inside (Dubey et al. 2024, section 3.3.2)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from solvers.families.base import ShapeRule

if TYPE_CHECKING:
    from catalog.specs import GPUSpec
    from solvers.plan import Plan
    from solvers.scenario import Scenario
    from solvers.space import Shape


class TpDomain(ShapeRule):
    def violated_by(self, s: Scenario, shape: Shape, gpu: GPUSpec) -> bool:
        return shape.tp > gpu.server.scale_up_domain_gpus

    def slack(self, s: Scenario, plan: Plan) -> tuple[float | None, str, str]:
        lay = plan.evaluation.layout
        dom = s.catalog.gpu(plan.config.shape.gpu).server.scale_up_domain_gpus
        return (dom - lay.tp, "GPUs", f"TP {lay.tp} of a {dom}-GPU scale-up domain")


FAMILY = TpDomain("tp_domain", 30, "TP beyond the scale-up domain allowed")
