"""designer/dry_run.py: evaluate's options checked before the model runs. The default
global batch, the expert layout (EP dividing the experts, EP x ETP dividing TP x CP x DP),
the MoE mechanisms refused on a dense model, a layout the model cannot take and a server's
misfit blamed on the option at fault (exit 2 through the CLI)."""

from __future__ import annotations

import json

import pytest

from designer.dry_run import (
    check_layout,
    default_global_batch,
    expert_layout,
    fused_attention,
    given_precision,
    hardware,
    moe_plan,
    recompute_modules,
)
from designer.errors import UsageError
from helpers import WIDE_MOE
from models.expert import HOPPER_FUSED_ATTENTION_SPEEDUP, ExpertLayout
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
    lay = _layout()
    assert moe_plan(DENSE, lay, ExpertLayout(), {"moe_overlap": "none"}, []) == (
        lay,
        ExpertLayout(),
    )
    for dispatcher in ("deepep", "flex", "allgather"):
        with pytest.raises(UsageError) as info:
            moe_plan(DENSE, lay, ExpertLayout(), {"dispatcher": dispatcher}, [])
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
    _, ex = moe_plan(
        WIDE_MOE,
        _layout(),
        ExpertLayout(ep=8),
        {"moe_overlap": "dualpipe", "dispatcher": "deepep", "fp8_activations": True,
         "gpu": "h100-sxm"},
        [],
    )  # fmt: skip
    assert ex.ep == 8 and ex.dualpipe and ex.dispatch_per_domain and ex.fp8_activations
    with pytest.raises(UsageError, match="nosuch: not one of") as info:
        moe_plan(WIDE_MOE, _layout(), ExpertLayout(), {"recompute_modules": "nosuch"}, [])
    assert info.value.option == "--recompute-modules"
    assert "core_attn, mlp, shared_experts" in str(info.value)


def _modules(given: str, recompute: str = "selective"):
    notes: list[str] = []
    lay, modules = recompute_modules(_layout(recompute=recompute), given, notes)
    return lay.recompute, modules, " | ".join(notes)


def test_recompute_modules_take_megatrons_names_as_the_importer_reads_them():
    """Megatron-LM's --recompute-modules spellings, as --from-megatron reads them
    (megatron_import.megatron_modules): space- or comma-separated, shared_experts as
    shared_expert, core_attn the layout's selective recompute (it turns none to
    selective), mlp noted and not priced. They had been refused as not models.memory's."""
    assert _modules("moe_act layernorm")[:2] == ("selective", {"moe_act", "layernorm"})
    assert _modules("moe_act, layernorm")[1] == {"moe_act", "layernorm"}
    assert _modules("shared_experts")[1] == {"shared_expert"}
    recompute, modules, notes = _modules("core_attn")
    assert (recompute, modules) == ("selective", frozenset())
    assert "core_attn: the layout's selective recompute" in notes
    assert _modules("core_attn moe_act", "none")[:2] == ("selective", {"moe_act"})
    assert _modules("moe_act", "none")[:2] == ("none", {"moe_act"})
    recompute, modules, notes = _modules("mlp moe")
    assert modules == {"moe"} and "mlp: a dense MLP's recompute, not priced" in notes


def test_recompute_modules_are_not_read_under_full_recompute():
    """Megatron-Core reads --recompute-modules with selective granularity only (the importer
    notes them as not read under full): evaluate's --recompute full had still priced them
    (DeepSeek-V3's activations 7.32 -> 6.18 GB); now none is, and a note says so."""
    recompute, modules, notes = _modules("moe_act layernorm", "full")
    assert (recompute, modules) == ("full", frozenset())
    assert "not read under full recomputation" in notes
    assert _modules("", "full") == ("full", frozenset(), "")
    assert "mlp" not in _modules("mlp", "full")[2]  # not read: one note


def test_dispatcher_aliases_take_the_importers_meaning():
    """--dispatcher flex and hybridep (Megatron-LM's flex dispatcher and its HybridEP
    backend) dispatch per domain as deepep does; allgather is priced as alltoall and noted,
    as --from-megatron prices --moe-token-dispatcher-type allgather."""
    for name, per_domain in (("flex", True), ("hybridep", True), ("allgather", False)):
        notes: list[str] = []
        opts = {"dispatcher": name, "gpu": "h100-sxm"}
        _, ex = moe_plan(WIDE_MOE, _layout(), ExpertLayout(ep=8), opts, notes)
        assert ex.dispatch_per_domain is per_domain, name
        assert bool(notes) is (name == "allgather"), name


def test_fused_attention_speeds_up_hopper_only():
    """The 1.61 x is cuDNN's over FlashAttention-2 on H100, the rate of the Hopper profiles;
    Blackwell's profile was fitted on fused-attention runs (bench/moe_accuracy.py keeps its
    rows at 1.0) and the A100's ratio is unmeasured: there the option changes nothing and
    says so (gb200 had come out 29% faster with it)."""
    for gpu in ("h100-sxm", "h100-pcie", "h200", "h800"):
        assert fused_attention(gpu, []) == HOPPER_FUSED_ATTENTION_SPEEDUP
    for gpu in ("b200", "gb200", "b300", "a100-80gb", "mi300x"):
        notes: list[str] = []
        assert fused_attention(gpu, notes) == 1.0
        assert notes == [notes[0]] and notes[0].startswith(f"--fused-attention: no change on {gpu}")


def test_mxfp8_is_priced_as_fp8_and_refused_on_hopper():
    """--precision mxfp8 (Megatron-LM --fp8-recipe mxfp8) is the Layout's fp8, noted; Hopper
    has no MXFP8 tensor cores: a usage error naming --precision."""
    notes: list[str] = []
    assert given_precision("mxfp8", "b200", notes) == "fp8"
    assert notes[0].startswith("--precision mxfp8 (") and "priced as fp8" in notes[0]
    assert given_precision("bf16", "h100-sxm", notes) == "bf16" and len(notes) == 1
    with pytest.raises(UsageError, match="no MXFP8") as info:
        given_precision("mxfp8", "h100-sxm", [])
    assert info.value.option == "--precision"


@pytest.mark.parametrize("given", ["fp8-cs", "FP8-CS", "fp8_ds", "FP8-MX", "fp8-blockwise"])
def test_fp8_recipes_by_name_are_priced_as_fp8_and_noted(capsys, given):
    """NeMo / Megatron-Bridge tables name FP8 by recipe (FP8-CS, FP8-DS, MXFP8): evaluate
    took bf16, fp8 and mxfp8 only (exit 2 'invalid choice'); each recipe is now the fp8 step,
    with a note naming it; 4-bit formats are refused by name."""
    from helpers import refused, run_main

    args = ["evaluate", "--model", "llama3-8b", "--gpu", "b200", "--dp", "8"]
    args += ["--global-batch", "64", "--json"]
    code, out, err = run_main(capsys, [*args, "--precision", given])
    assert code == 0, err
    doc = json.loads(out)
    code, plain, _ = run_main(capsys, [*args, "--precision", "fp8"])
    fp8 = json.loads(plain)
    assert doc["step_time_s"] == fp8["step_time_s"] and doc["layout"]["precision"] == "fp8"
    assert len(doc["notes"]) == 1 and "priced as fp8" in doc["notes"][0]
    assert given.lower().replace("_", "-") in doc["notes"][0]
    refused(capsys, [*args, "--precision", "NVFP4"], "--precision", "4-bit")
    refused(capsys, [*args[:4], "h100-sxm", *args[5:], "--precision", "fp8-mx"], "no MXFP8")


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
