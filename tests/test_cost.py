"""models/cost.py: rack-scale purchase units. NVL72 plans come in whole racks (four NICs per
tray), and evaluate charges the whole rack. From issue 15's checklist."""

from __future__ import annotations

import pytest

from designer.question.build import build_scenario
from models import Assumptions, Hardware, Layout, evaluate, zoo
from solvers.cpsat.solve import solve_cpsat


@pytest.mark.parametrize("gpu, nic", [("gb200", "cx7-400g"), ("gb300", "cx8-800g")])
def test_nvl72_plans_come_in_whole_racks_with_four_nics_per_tray(gpu, nic):
    scenario = build_scenario(budget=30e6, gpus=(gpu,), evidence="any")
    res = solve_cpsat(scenario)
    assert res.status == "optimal"
    plan = res.plans[0]
    assert plan.num_gpus % 72 == 0
    assert plan.config.nics_per_node == 4 and plan.config.nic == nic
    assert plan.evaluation.cluster.racks == plan.num_gpus // 72


def test_evaluate_charges_whole_racks(cat):
    spec = zoo()["llama2-70b"]
    hw = Hardware.from_catalog(cat, "gb200")
    layout = Layout(tp=4, pp=4, dp=4, micro_batch=1, global_batch=64, recompute="none")
    ev = evaluate(spec, hw, layout, spec.seq_len, 2e12, Assumptions())
    gpu_line = next(line for line in ev.cluster.bom() if line.item.startswith("GPU"))
    assert ev.cluster.num_gpus == 64 and gpu_line.quantity == 72
