"""solvers/decisions.py: the shape (its degrees, the DP step expert folding allows, its
layouts), the configuration and the plan (its row holds exactly the CLI contract's plan
columns, solvers/columns.py)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from helpers import plan_of
from models.expert import ExpertLayout
from solvers.columns import PLAN_COLUMNS
from solvers.decisions import Config, Plan, Shape

DENSE = Shape("h100-sxm", 4, 2, 3, 1, 2, "selective", "bf16")


def test_a_shape_is_an_ordered_tuple_with_dense_defaults():
    assert DENSE.split == (0, 0, False, False) and (DENSE.ep, DENSE.etp) == (1, 1)
    assert DENSE.replica_gpus == 4 * 2 * 3
    assert DENSE < DENSE._replace(tp=8)  # compared field by field
    assert DENSE.experts == ExpertLayout(1, 1)


@pytest.mark.parametrize(
    "tp,cp,ep,etp,step",
    [
        (4, 2, 1, 1, 1),  # dense: every DP degree
        (8, 1, 8, 1, 1),  # EP 8 folds into TP 8
        (1, 1, 8, 1, 8),  # EP 8 needs DP a multiple of 8
        (2, 1, 8, 1, 4),
        (4, 2, 16, 2, 4),  # EP x ETP = 32 over TP x CP = 8
        (3, 1, 4, 1, 4),  # gcd(4, 3) = 1
        (6, 1, 4, 1, 2),
    ],
)
def test_dp_step_is_ep_x_etp_over_its_gcd_with_tp_x_cp(tp, cp, ep, etp, step):
    shape = DENSE._replace(tp=tp, cp=cp, ep=ep, etp=etp)
    assert shape.dp_step == step
    # EP x ETP divides TP x CP x DP for every multiple of the step (and not below it)
    assert (tp * cp * step) % (ep * etp) == 0
    assert all((tp * cp * d) % (ep * etp) for d in range(1, step))
    assert step == ep * etp // math.gcd(ep * etp, tp * cp)


def test_layout_carries_the_shape_the_dp_degree_and_the_batch():
    lay = DENSE.layout(dp=5, microbatches=7)
    assert (lay.tp, lay.cp, lay.pp, lay.vp, lay.dp) == (4, 2, 3, 1, 5)
    assert lay.micro_batch == 2 and lay.global_batch == 2 * 7 * 5
    assert lay.num_gpus == 4 * 2 * 3 * 5
    assert (lay.recompute, lay.precision, lay.zero) == ("selective", "bf16", 1)
    assert lay.first_stage_layers is None and lay.last_stage_layers is None


def test_an_uneven_split_reaches_the_layout():
    lay = DENSE._replace(split=(5, 3, True, False)).layout(1, 3)
    assert (lay.first_stage_layers, lay.last_stage_layers) == (5, 3)
    assert lay.embedding_in_split is True and lay.loss_in_split is False


def test_probe_layout_is_the_smallest_dp_with_full_pipelines():
    moe = DENSE._replace(tp=1, cp=1, ep=8)
    probe = moe.probe_layout()
    assert probe.dp == moe.dp_step == 8
    assert probe.global_batch == moe.micro_batch * moe.pp * 8  # m = p micro-batches
    assert DENSE._replace(pp=1).probe_layout().global_batch == DENSE.micro_batch  # m >= 1


def test_a_config_is_frozen_with_nothing_bought_by_default():
    cfg = Config(DENSE, "cx7-400g", 8, 4, 6)
    assert (cfg.spares_per_100, cfg.storage_gb_per_s) == (0.0, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.dp = 8  # type: ignore[misc]


def test_a_plans_row_has_exactly_the_plan_columns_in_order():
    shape = Shape("h100-sxm", 8, 1, 2, 1, 1, "selective", "bf16")
    _, plan = plan_of("llama2-7b", shape, 4, 8)
    row = plan.as_dict(rank=3)
    assert list(row) == PLAN_COLUMNS
    assert len(set(PLAN_COLUMNS)) == len(PLAN_COLUMNS)
    assert row["rank"] == 3 and row["gpu"] == "h100-sxm"
    assert (row["tp"], row["pp"], row["dp"], row["grad_accum"]) == (8, 2, 4, 8)
    assert row["num_gpus"] == plan.num_gpus == 8 * 2 * 4
    assert row["global_batch"] == 1 * 8 * 4
    assert row["cost_usd"] == plan.cost_usd == plan.evaluation.extra["cost_usd"]
    assert row["nic"] == plan.config.nic and row["nics_per_node"] == plan.config.nics_per_node


def test_a_plan_is_feasible_only_without_violations():
    shape = Shape("h100-sxm", 8, 1, 2, 1, 1, "selective", "bf16")
    _, plan = plan_of("llama2-7b", shape, 4, 8)
    assert plan.feasible == (plan.violations == ())
    broken = Plan(plan.config, plan.evaluation, ("a violation",), plan.objective)  # type: ignore[arg-type]
    assert not broken.feasible
