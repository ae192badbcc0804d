"""Qwen3-Next's per-layer attention types (issue 34): Gated DeltaNet layers and the gated
attention's output gate in the spec, the parameter count, the FLOPs, the stored
activations and the step (models/linear_attention.py), each term switched off and on and
checked against its formula; the row of the Megatron-MoE-ModelZoo scores; the launch
emitters refuse the model in one line."""

from __future__ import annotations

import csv
import dataclasses
import importlib.util
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from catalog.specs import DEFAULT_STACK
from designer.errors import Infeasible
from designer.launch import Launch, emit
from designer.launch.emit import FORMATS
from designer.question.build import stack_catalog
from helpers import run_main
from models import flops, moe
from models import linear_attention as la
from models.evaluate import Hardware, evaluate
from models.expert import (
    GDN_CORE_FIXED_S_PER_PASS,
    GDN_CORE_PEAK_SHARE,
    ExpertLayout,
    moe_gemm_per_microbatch_s,
    tokens_per_gpu,
)
from models.layout import Assumptions, Layout
from models.memory import StoredActivations, _moe_ranks, moe_attention_activation_coeff
from models.step import forward_passes, matmul_efficiency
from models.zoo import moe_zoo, resolve_model, zoo

ROOT = Path(__file__).resolve().parent.parent
NEXT = moe_zoo()["qwen3-next-80b-a3b"]
H = 2048
D_QK, D_V, N_V, HEAD_V, K_C = 16 * 128, 32 * 128, 32, 128, 4  # its config.json
Q_WIDTH = 16 * 256
FLAT = Layout(tp=1, pp=1, dp=32, micro_batch=1, global_batch=256)


@pytest.fixture(scope="module")
def hw() -> Hardware:
    return Hardware.from_catalog(stack_catalog((), DEFAULT_STACK), "h100-sxm")


def test_pattern_three_linear_layers_to_one_full():
    pattern = la.full_attention_pattern(NEXT)
    assert pattern[:8] == (False, False, False, True) * 2
    assert la.linear_layers(NEXT) == 36 and la.linear_share(NEXT) == 0.75
    assert NEXT.has_linear_attention and not NEXT.is_dense


def test_every_other_model_is_all_full_attention():
    for spec in [*zoo().values(), *(s for n, s in moe_zoo().items() if n != NEXT.name)]:
        assert not spec.has_linear_attention and not spec.attention_output_gate
        assert la.linear_layers(spec) == 0 and la.gdn_params(spec) == 0
        assert moe.mean_attention_params(spec) == moe.attention_params(spec)


@pytest.mark.parametrize(
    ("update", "needle"),
    [
        ({"full_attention_every": 1}, "linear_key_heads needs full_attention_every > 1"),
        ({"linear_conv_kernel": None}, "linear_conv_kernel: linear attention"),
        ({"full_attention_every": 49}, "leaves no full-attention layer"),
        ({"linear_value_heads": 24, "linear_key_heads": 16}, "multiple of linear_key_heads"),
    ],
)
def test_spec_refuses_incomplete_linear_attention(update, needle):
    fields = {**NEXT.model_dump(), **update}
    with pytest.raises(ValidationError, match=needle):
        type(NEXT)(**fields)


def test_parameters_from_the_config_shapes():
    gdn = H * (2 * D_QK + 2 * D_V + 2 * N_V) + D_V * H + (2 * D_QK + D_V) * K_C + 2 * N_V + HEAD_V
    assert la.gdn_params(NEXT) == gdn
    full = 2 * H * Q_WIDTH + 2 * H * 2 * 256 + 2 * 256 + H * Q_WIDTH  # gate in q_proj
    assert moe.attention_params(NEXT) == full
    expert = 3 * H * 512
    # norms, router, experts, the shared expert and its sigmoid gate (h x 1)
    layer_rest = 2 * H + H * 512 + 512 * expert + expert + H
    total = 36 * gdn + 12 * full + 48 * layer_rest + 2 * 151936 * H + H
    assert NEXT.params() == total
    assert NEXT.params() == pytest.approx(80e9, rel=0.01)  # "80B in total"
    ungated = NEXT.model_copy(update={"attention_output_gate": False})
    assert NEXT.params() - ungated.params() == 12 * H * Q_WIDTH


def test_flops_terms_follow_megatron_gdn_layer_flops():
    t = flops.moe_flops_terms_per_token(NEXT, 4096)
    assert t["gdn_chunk"] == 3.0 * 36 * 2 * 4 * N_V * HEAD_V**2
    assert t["gdn_conv"] == 3.0 * 36 * 2 * K_C * (2 * D_QK + D_V)
    assert t["attention_output_gate"] == 6.0 * 12 * H * Q_WIDTH
    assert t["attention_core"] == 6.0 * 12 * 4096 * Q_WIDTH  # full layers only
    gdn_proj = H * (2 * D_QK + 2 * D_V + 2 * N_V) + H * D_V
    full_proj = 2 * H * Q_WIDTH + 2 * H * 2 * 256
    assert t["attention_projections"] == 6.0 * (36 * gdn_proj + 12 * full_proj)
    dense = flops.moe_flops_terms_per_token(moe_zoo()["qwen3-30b-a3b"], 4096)
    assert dense["gdn_chunk"] == dense["gdn_conv"] == dense["attention_output_gate"] == 0


def test_chunk_term_switched_off_changes_the_step_by_its_formula(hw):
    """The Gated DeltaNet core as measured: 3 passes x 36 layers x (the fixed cost per pass
    + T x FLOPs per token at GDN_CORE_PEAK_SHARE of the bf16 peak)."""
    on, off = ExpertLayout(ep=32), ExpertLayout(ep=32, linear_attention_chunk=False)
    a = moe_gemm_per_microbatch_s(NEXT, FLAT, 4096, hw.gpu, on)
    b = moe_gemm_per_microbatch_s(NEXT, FLAT, 4096, hw.gpu, off)
    per_token = 2 * K_C * (2 * D_QK + D_V) + 8 * N_V * HEAD_V**2
    rate = hw.gpu.dense_bf16_tflops * 1e12 * GDN_CORE_PEAK_SHARE
    want = 3 * 36 * (GDN_CORE_FIXED_S_PER_PASS + 4096 * per_token / rate)
    assert a - b == pytest.approx(want, rel=1e-9)
    step_on = evaluate(NEXT, hw, FLAT, 4096, experts=on).breakdown
    step_off = evaluate(NEXT, hw, FLAT, 4096, experts=off).breakdown
    assert step_on.compute - step_off.compute == pytest.approx(8 * (a - b), rel=1e-6)


def test_chunk_term_under_full_recomputation_pays_a_fourth_pass(hw):
    """Full recomputation runs the core's forward again: 4 fixed costs a layer, not 3, and
    the FLOPs of a fourth pass."""
    on, off = ExpertLayout(ep=32), ExpertLayout(ep=32, linear_attention_chunk=False)
    full = dataclasses.replace(FLAT, recompute="full")
    per_token = 2 * K_C * (2 * D_QK + D_V) + 8 * N_V * HEAD_V**2
    rate = hw.gpu.dense_bf16_tflops * 1e12 * GDN_CORE_PEAK_SHARE
    a = moe_gemm_per_microbatch_s(NEXT, full, 4096, hw.gpu, on)
    b = moe_gemm_per_microbatch_s(NEXT, full, 4096, hw.gpu, off)
    want = 4 * 36 * (GDN_CORE_FIXED_S_PER_PASS + 4096 * per_token / rate)
    assert a - b == pytest.approx(want, rel=1e-9)


def test_output_gate_costs_its_gemm(hw):
    """The gate: 2 h x heads x head_dim FLOPs per token and full-attention layer, each
    forward-equivalent, at the GEMM efficiency."""
    ex = ExpertLayout(ep=32)
    ungated = NEXT.model_copy(update={"attention_output_gate": False})
    a = moe_gemm_per_microbatch_s(NEXT, FLAT, 4096, hw.gpu, ex)
    b = moe_gemm_per_microbatch_s(ungated, FLAT, 4096, hw.gpu, ex)
    work = 4096 * forward_passes(FLAT.recompute) * 12 * 2 * H * Q_WIDTH
    rate = hw.gpu.peak_tflops("bf16") * 1e12 * matmul_efficiency(hw.gpu, H, 1)
    assert a - b == pytest.approx(work / rate, rel=1e-9)


def test_gdn_and_gate_activations_at_the_mean_over_the_layers():
    full = Q_WIDTH / H * (4.0 + 4.0 * 2 / 16) + 2.0 * Q_WIDTH / H  # Q, K, V, output; gate
    gdn = (2 * (2 * D_QK + 2 * D_V + 2 * N_V) + 2 * (2 * D_QK + D_V) + 4 * D_V) / H
    assert moe_attention_activation_coeff(NEXT) == pytest.approx(0.25 * full + 0.75 * gdn)


def test_shared_expert_recompute_drops_its_activations_and_reruns_its_gemms(hw):
    layout = Layout(tp=1, pp=1, dp=32, micro_batch=1, global_batch=32)  # 1 micro-batch
    a = Assumptions()
    keep = _moe_ranks(NEXT, layout, 4096, a, 32, 1, None, 1.0, StoredActivations())
    drop = _moe_ranks(
        NEXT, layout, 4096, a, 32, 1, None, 1.0, StoredActivations(frozenset({"shared_expert"}))
    )
    saved = 48 * 4096 * H * (6.0 * 512 / H)  # 6 f bytes per token and MoE layer
    assert keep[0].act - drop[0].act == pytest.approx(saved)
    on = ExpertLayout(ep=32, recompute_modules=frozenset({"shared_expert"}))
    more = moe_gemm_per_microbatch_s(NEXT, layout, 4096, hw.gpu, on)
    base = moe_gemm_per_microbatch_s(NEXT, layout, 4096, hw.gpu, ExpertLayout(ep=32))
    rate = hw.gpu.peak_tflops("bf16") * 1e12 * matmul_efficiency(hw.gpu, H, 1)
    t = tokens_per_gpu(layout, 4096)
    assert more - base == pytest.approx(t * 48 * 2 * 3 * H * 512 / rate, rel=1e-9)


def _bench():
    spec = importlib.util.spec_from_file_location("moe_accuracy", ROOT / "bench/moe_accuracy.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["moe_accuracy"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_modelzoo_row_is_scored():
    bench = _bench()
    path = ROOT / "bench/data/published/moe_independent.csv"
    rows = [r for r in csv.DictReader(path.open()) if r["model"] == NEXT.name]
    assert len(rows) == 1 and bench.skip_reason(rows[0]) is None
    layout, ex = bench.independent_layout(rows[0])
    assert (layout.pp, layout.vp, ex.ep) == (4, 3, 32)
    assert "shared_expert" in ex.recompute_modules


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_launch_format_refuses_it_in_one_line(fmt):
    from test_launch_round_trip import MOE_PLANS, moe_plan

    MOE_PLANS.setdefault(NEXT.name, (1, 4, 32, 32, 1))
    scenario, plan = moe_plan(NEXT.name)
    with pytest.raises(Infeasible) as err:
        emit(Launch.from_plan(scenario, plan), fmt)
    assert "\n" not in str(err.value)
    assert "Qwen3-Next" in str(err.value) or "has experts" in str(err.value)


def test_launch_check_cannot_pick_a_linear_attention_model():
    spec = importlib.util.spec_from_file_location("launch_check", ROOT / "bench/launch_check.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    names = {v[0] for v in mod.FIXED.values()} | set(mod.FIXED_OPTIMIZE) | set(mod.RANDOM_MODELS)
    assert not any(resolve_model(n).has_linear_attention for n in names)


def test_models_show_prints_total_and_active(capsys):
    code, out, _ = run_main(capsys, ["models", "show", NEXT.name])
    assert code == 0
    fields = dict(line.split(maxsplit=1) for line in out.splitlines() if line.strip())
    assert fields["params"] == "79,674,391,296"
    assert fields["active_params_no_embedding"] == "3,563,764,480"
    assert fields["full_attention_every"] == "4"


def test_evaluate_the_modelzoo_layout(capsys):
    args = [
        "evaluate", "--model", NEXT.name, "--gpu", "h100-sxm", "--tp", "1", "--pp", "4",
        "--vp", "3", "--dp", "32", "--ep", "32", "--micro-batch", "1", "--global-batch",
        "256", "--seq-len", "4096", "--dispatcher", "deepep", "--recompute", "none",
        "--recompute-modules", "layernorm,moe_act,shared_expert",
    ]  # fmt: skip
    code, out, _ = run_main(capsys, args)
    assert code == 0
    assert "recompute modules layernorm,moe_act,shared_expert" in out
    assert "feasible: yes" in out


# Qwen/Qwen3-Next-80B-A3B-Instruct config.json (the zoo's source), the keys the importer reads
NEXT_CONFIG = {
    "model_type": "qwen3_next", "num_hidden_layers": 48, "hidden_size": 2048,
    "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
    "intermediate_size": 5120, "hidden_act": "silu", "vocab_size": 151936,
    "tie_word_embeddings": False, "rope_theta": 10000000, "partial_rotary_factor": 0.25,
    "rms_norm_eps": 1e-06, "num_experts": 512, "num_experts_per_tok": 10,
    "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512,
    "decoder_sparse_step": 1, "mlp_only_layers": [], "norm_topk_prob": True,
    "full_attention_interval": 4, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
    "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
    "router_aux_loss_coef": 0.001, "output_router_logits": False,
}  # fmt: skip


def test_config_json_imports_as_the_zoo_model():
    from models.zoo import from_hf_config

    spec = from_hf_config(dict(NEXT_CONFIG), "config.json")
    assert spec.architecture() == NEXT.architecture()
    assert spec.params() == NEXT.params()
    kinds = ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(48)]
    listed = {k: v for k, v in NEXT_CONFIG.items() if k != "full_attention_interval"}
    assert from_hf_config({**listed, "layer_types": kinds}, "c").architecture() == (
        NEXT.architecture()
    )


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"layer_types": ["linear_attention", "full_attention"] * 24}, "layer_types"),
        ({"linear_conv_kernel_dim": None}, "linear_conv_kernel_dim"),
    ],
)
def test_config_json_names_the_key_it_cannot_read(change, key):
    from models.errors import ModelError
    from models.zoo import from_hf_config

    with pytest.raises(ModelError, match=f"^c: {key}: "):
        from_hf_config({**NEXT_CONFIG, **change}, "c")


HOSTILE = [0, -1, float("nan"), "x", "4", [], {}, True, 10**30, None, 1e308, 0.5]
LINEAR_KEYS = [k for k in NEXT_CONFIG if k.startswith("linear_") or k == "full_attention_interval"]


@pytest.mark.parametrize("key", [*LINEAR_KEYS, "layer_types"])
def test_hostile_linear_attention_keys_exit_cleanly(tmp_path, capsys, key):
    import json

    for value in HOSTILE:
        path = tmp_path / "config.json"
        path.write_text(json.dumps({**NEXT_CONFIG, key: value}))
        code, _, err = run_main(capsys, ["models", "show", str(path)])
        assert code in (0, 1, 2), (key, value, err)
        if code:
            assert "internal error" not in err and err.count("\n") <= 1, (key, value, err)


ALL_FULL = NEXT.model_copy(
    update={
        "full_attention_every": 1, "linear_key_heads": None, "linear_value_heads": None,
        "linear_key_head_dim": None, "linear_value_head_dim": None, "linear_conv_kernel": None,
    }
)  # fmt: skip


def test_gdn_projections_replace_attention_gemms_and_the_core(hw):
    """36 of 48 layers as Gated DeltaNet: per token and forward-equivalent 2 x (GDN
    projection weights - full attention weights) more GEMM work per linear layer (the
    small conv, A_log, dt_bias and norm weights counted with them, as the mean does), and
    the quadratic core of those 36 layers gone (chunk term off on both sides)."""
    from models.expert import attention_core_forward_per_token
    from models.step import StageWork, work_gemm_s

    ex = ExpertLayout(ep=32, linear_attention_chunk=False)
    a = moe_gemm_per_microbatch_s(NEXT, FLAT, 4096, hw.gpu, ex)
    b = moe_gemm_per_microbatch_s(ALL_FULL, FLAT, 4096, hw.gpu, ex)
    t, fwd = 4096, forward_passes(FLAT.recompute)
    linear = t * fwd * 36 * 2.0 * (la.gdn_params(NEXT) - moe.attention_params(NEXT))
    assert hw.gpu.calibration.flash_attention and FLAT.recompute != "full"
    core_passes = 3.5  # FlashAttention's passes (models/expert.py)
    core = -t * 36 * attention_core_forward_per_token(NEXT, 4096) * core_passes
    want = work_gemm_s(StageWork(linear, core, 0.0), H, FLAT, hw.gpu)
    assert a - b == pytest.approx(want, rel=1e-9)


def test_gdn_activations_switched_to_full_attention_by_their_formula():
    layout = Layout(tp=1, pp=1, dp=32, micro_batch=1, global_batch=32)  # 1 micro-batch
    a = Assumptions()
    gdn = _moe_ranks(NEXT, layout, 4096, a, 32, 1, None, 1.0)[0].act
    full = _moe_ranks(ALL_FULL, layout, 4096, a, 32, 1, None, 1.0)[0].act
    coeff = (2 * (2 * D_QK + 2 * D_V + 2 * N_V) + 2 * (2 * D_QK + D_V) + 4 * D_V) / H
    full_coeff = Q_WIDTH / H * (4.0 + 4.0 * 2 / 16) + 2.0 * Q_WIDTH / H
    assert gdn - full == pytest.approx(36 * 4096 * H * (coeff - full_coeff))


def test_evaluate_reports_the_gated_deltanet_core_a_step(hw):
    """evaluate's moe line gives the measured core's seconds a step on the rank with the
    most layers (the micro-batches of a step x gdn_chunk_per_microbatch_s); a model
    without linear attention has no such entry."""
    from models.expert import gdn_chunk_per_microbatch_s

    ex = ExpertLayout(ep=32)
    layout = Layout(tp=1, pp=4, dp=32, vp=3, micro_batch=1, global_batch=256)
    ev = evaluate(NEXT, hw, layout, 4096, experts=ex)
    per_mb = gdn_chunk_per_microbatch_s(NEXT, layout, 4096, hw.gpu, ex, 12)
    (line,) = [p for p in ev.moe_plan if p.startswith("Gated DeltaNet core")]
    assert line.startswith(f"Gated DeltaNet core {8 * per_mb:.3g} s a step")
    per_token = 2 * K_C * (2 * D_QK + D_V) + 8 * N_V * HEAD_V**2
    rate = hw.gpu.dense_bf16_tflops * 1e12 * GDN_CORE_PEAK_SHARE
    per_pass = GDN_CORE_FIXED_S_PER_PASS + 4096 * per_token / rate  # one layer, one pass
    assert 8 * per_mb == pytest.approx(8 * 9 * 3 * per_pass, rel=1e-9)  # 9 of 12 are linear
    other = evaluate(moe_zoo()["qwen3-30b-a3b"], hw, layout, 4096, experts=ExpertLayout(ep=8))
    assert not any("Gated DeltaNet" in p for p in other.moe_plan)
