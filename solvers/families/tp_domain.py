"""tp_domain: TP x CP within one scale-up domain (NVLink server or rack; catalog ServerSpec)."""

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
        return shape.tp * shape.cp > gpu.server.scale_up_domain_gpus

    def slack(self, s: Scenario, plan: Plan) -> tuple[float | None, str, str]:
        lay = plan.evaluation.layout
        dom = s.catalog.gpu(plan.config.shape.gpu).server.scale_up_domain_gpus
        return (
            dom - lay.tp * lay.cp,
            "GPUs",
            f"TP x CP {lay.tp * lay.cp} of a {dom}-GPU scale-up domain",
        )


FAMILY = TpDomain("tp_domain", 30, "TP x CP beyond the scale-up domain allowed")
