"""designer/dry_run.py: evaluate's options checked before the model runs. The default
global batch, the expert layout (EP dividing the experts, EP x ETP dividing TP x CP x DP),
the MoE mechanisms refused on a dense model, a layout the model cannot take and a server's
misfit blamed on the option at fault (exit 2 through the CLI)."""

from __future__ import annotations

import pytest

from designer.dry_run import check_layout, default_global_batch, expert_layout, hardware, moe_plan
from designer.errors import UsageError
from helpers import WIDE_MOE
from models.expert import ExpertLayout
from models.layout import Layout
from models.zoo import zoo

DENSE = zoo()["llama2-7b"]


def _layout(**changes) -> Layout:
    base = dict(tp=2, pp=1, dp=4, micro_batch=1, global_batch=8, recompute="none")
    return Layout(**{**base, **changes})


def test_the_default_global_batch_is_one_micro_batch_per_stage_per_replica():
    assert default_global_batch(2, 8, 4) == 64
    assert default_global_batch(1, 1, 1) == 1


def test_a_dense_model_takes_no_expert_options():
    assert expert_layout(DENSE, _layout(), 1, 1) == ExpertLayout()
    for ep, etp, option in ((2, 1, "--ep"), (1, 2, "--etp")):
        with pytest.raises(UsageError, match="dense model") as info:
            expert_layout(DENSE, _layout(), ep, etp)
        assert info.value.option == option
    assert moe_plan(DENSE, ExpertLayout(), {"moe_overlap": "none"}) == ExpertLayout()
    with pytest.raises(UsageError) as info:
        moe_plan(DENSE, ExpertLayout(), {"dispatcher": "deepep"})
    assert info.value.option == "--dispatcher"


def test_expert_parallelism_must_fold_into_the_layout():
    lay = _layout(tp=2, dp=4)  # TP x CP x DP = 8
    assert expert_layout(WIDE_MOE, lay, 8, 1) == ExpertLayout(ep=8, etp=1)
    with pytest.raises(UsageError, match="must divide the model's 128 experts") as info:
        expert_layout(WIDE_MOE, lay, 3, 1)
    assert info.value.option == "--ep"
    with pytest.raises(UsageError, match="must divide TP x CP x DP = 8") as info:
        expert_layout(WIDE_MOE, lay, 16, 1)
    assert info.value.option == "--ep"
    with pytest.raises(UsageError) as info:
        expert_layout(WIDE_MOE, lay, 4, 4)  # EP divides 8, EP x ETP does not
    assert info.value.option == "--etp"


def test_moe_mechanisms_switch_on_and_unknown_modules_are_refused():
    ex = moe_plan(
        WIDE_MOE,
        ExpertLayout(ep=8),
        {"moe_overlap": "dualpipe", "dispatcher": "deepep", "fp8_activations": True},
    )
    assert ex.ep == 8 and ex.dualpipe and ex.dispatch_per_domain and ex.fp8_activations
    with pytest.raises(UsageError, match="nosuch: not one of") as info:
        moe_plan(WIDE_MOE, ExpertLayout(), {"recompute_modules": "nosuch"})
    assert info.value.option == "--recompute-modules"


def test_a_layout_the_model_cannot_take_names_its_option():
    check_layout(DENSE, _layout(), DENSE.seq_len)  # 32 heads over TP 2: fine
    with pytest.raises(UsageError) as info:
        check_layout(DENSE, _layout(tp=3), DENSE.seq_len)
    assert info.value.option and info.value.option.startswith("--")


def test_a_misfit_blames_the_gpu_or_the_nic(cat):
    assert hardware(cat, "h100-sxm", None, None).gpu.name == "h100-sxm"
    with pytest.raises(UsageError) as info:
        hardware(cat, "h900", None, None)
    assert info.value.option == "--gpu"
    with pytest.raises(UsageError) as info:
        hardware(cat, "h100-sxm", "cx8-800g", None)  # PCIe Gen 6 in a Gen 5 server
    assert info.value.option == "--nic"
