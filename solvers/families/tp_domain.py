"""tp_domain: TP x CP within one scale-up domain (NVLink server or rack; catalog ServerSpec).

The contract's rule (../shared/CLI-CONTRACT.md "Constraint names"): a plan's TP x CP
group stays inside one scale-up domain. The question may let context parallelism leave
it (``--cp-across-servers``, ``Assumptions.cp_across_servers``): ring attention's KV
exchange then crosses the NICs and is charged there (models/step.py cp_nic_mb_s), as
Llama 3 ran CP 16 across servers with TP 8 inside (Dubey et al. 2024, section 3.3.2),
and the rule limits TP alone. A rule on the shape (models.feasibility.tp_domain_violation
checks a layout, ``violated_by`` a shape: both solvers forbid the shapes that break it).

Its relaxation comes in two steps (``relaxations``): where the question keeps CP inside
the domain and its sequence admits CP, first CP across servers (the question with
--cp-across-servers: the rule kept for TP), then the rule switched off (TP beyond the
domain too). Binding prices the first step that improves the plan, and a conflict's fix
is the first step that makes the question feasible, so a plan bound by CP names the
option that allows it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from models.feasibility import tp_domain_gpus
from solvers.cp_degrees import cp_options
from solvers.families.base import ShapeRule

if TYPE_CHECKING:
    from catalog.specs import GPUSpec
    from solvers.plan import Plan
    from solvers.scenario import Scenario
    from solvers.space import Shape

# the first relaxation step of a question that keeps CP inside the domain
CP_ACROSS_SERVERS = "CP across servers allowed (--cp-across-servers)"
# the rule switched off under --cp-across-servers: only TP was left inside the domain
TP_OFF = "TP beyond the scale-up domain allowed"


def cp_across_servers(s: Scenario) -> Scenario:
    """The question with context parallelism allowed across servers (--cp-across-servers)."""
    a = s.assumptions.model_copy(update={"cp_across_servers": True})
    return s.with_changes(assumptions=a)


def domain_group(s: Scenario, tp: int, cp: int) -> tuple[int, str]:
    """The GPUs the rule keeps inside the domain, and their name: TP x CP, or TP alone
    under --cp-across-servers (or without CP)."""
    gpus = tp_domain_gpus(tp, cp, s.assumptions.cp_across_servers)
    return gpus, (f"TP {tp}" if gpus == tp else f"TP x CP {gpus}")


class TpDomain(ShapeRule):
    def violated_by(self, s: Scenario, shape: Shape, gpu: GPUSpec) -> bool:
        return domain_group(s, shape.tp, shape.cp)[0] > gpu.server.scale_up_domain_gpus

    def slack(self, s: Scenario, plan: Plan) -> tuple[float | None, str, str]:
        lay = plan.evaluation.layout
        dom = s.catalog.gpu(plan.config.shape.gpu).server.scale_up_domain_gpus
        used, words = domain_group(s, lay.tp, lay.cp)
        return (dom - used, "GPUs", f"{words} of a {dom}-GPU scale-up domain")

    def relaxation_in(self, s: Scenario) -> str:
        """The rule switched off: TP x CP beyond the domain, or TP beyond it when CP may
        already leave it."""
        return TP_OFF if s.assumptions.cp_across_servers else self.relaxation

    def relaxations(self, s: Scenario, plan: Plan | None = None) -> list[tuple[str, Scenario]]:
        off = (self.relaxation_in(s), self.relax(s))
        if s.assumptions.cp_across_servers or not _cp_searched(s):
            return [off]
        return [(CP_ACROSS_SERVERS, cp_across_servers(s)), off]


def _cp_searched(s: Scenario) -> bool:
    """Whether the question's decision space holds CP > 1 (solvers.cp_degrees.cp_options)."""
    return len(cp_options(s.seq_len)) > 1


FAMILY = TpDomain("tp_domain", 30, "TP x CP beyond the scale-up domain allowed")
