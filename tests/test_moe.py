"""Mixture-of-experts groundwork (issue 17 items 1-3).

- MoE, latent attention and multi-token prediction are planned since item 5 (zoo names,
  spec files, config.json, a question's inline model); unknown or uncovered MoE keys
  of a config.json are still refused naming the key.
- The spec's MoE / MLA / MTP keys, the config.json mapping, and parameter counts total
  and active per token, against the published sizes of the MoE zoo and real configs.
- Megatron-LM's MoE FLOPs and the memory of the most loaded GPU, by hand-computed cases.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from helpers import run_main
from models import flops, moe
from models.errors import ModelError
from models.layout import Assumptions, Layout
from models.memory import expert_data_parallel, moe_memory_per_gpu, rank_layer_ids
from models.pipeline import stage_layers
from models.transformer import TransformerSpec, windowed_sequence_refusal
from models.zoo import moe_zoo, read_model_file, zoo

HF = Path(__file__).resolve().parent / "data" / "hf"
HF_MOE = Path(__file__).resolve().parent / "data" / "hf_moe"
SOURCES = yaml.safe_load((HF_MOE / "SOURCES.yaml").read_text())["files"]
EVAL = ["--gpu", "h100-sxm", "--tp", "1", "--pp", "1", "--dp", "8"]
MOE_ZOO = sorted(moe_zoo())
TINY = {"layers": 4, "hidden": 256, "heads": 4, "vocab": 1000, "seq_len": 512}


def one_line(err: str) -> str:
    assert "Traceback" not in err
    lines = err.strip("\n").split("\n")
    assert len(lines) == 1, err
    return lines[0]


def refused(capsys, args: list[str]) -> str:
    code, out, err = run_main(capsys, args)
    line = one_line(err)
    assert code == 2, (out, err)
    return line


# ------------------------------------------------- item 1, lifted by item 5: planning


def planned(capsys, args: list[str]) -> dict:
    code, out, err = run_main(capsys, [*args, "--json"])
    assert code == 0, (out, err)
    return json.loads(out)


@pytest.mark.parametrize(
    ("name", "experts"), [("DeepSeek-V3.json", 256), ("Mixtral-8x7B-v0.1.json", 8)]
)
def test_real_moe_config_is_read_for_planning(capsys, name, experts):
    path = HF_MOE / name
    doc = planned(capsys, ["models", "show", str(path)])
    assert doc["experts"] == experts


@pytest.mark.parametrize(
    "key",
    ["router_foo", "moe_topk_something_new", "expert_capacity", "kv_lora_rank_extra",
     "interleave_moe_layer_step", "intermediate_size_mlp", "mlp_only_layers", "moe_layers"],
)  # fmt: skip
def test_unknown_or_uncovered_moe_key_is_never_ignored(capsys, tmp_path, key):
    cfg = json.loads((HF / "Qwen3-0.6B.json").read_text())
    cfg[key] = [1] if "layers" in key else 4
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    line = refused(capsys, ["evaluate", "--model", str(path), *EVAL])
    assert f"{path}: {key}: " in line


@pytest.mark.parametrize(
    "added",
    [{"num_experts": 8, "num_experts_per_tok": 2, "router_aux_loss_coef": 0.001},
     {"n_routed_experts": 8, "num_experts_per_tok": 2},
     {"kv_lora_rank": 64, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16, "v_head_dim": 32},
     {"num_nextn_predict_layers": 1}],
)  # fmt: skip
def test_moe_config_keys_are_read_for_planning(capsys, tmp_path, added):
    cfg = json.loads((HF / "Qwen3-0.6B.json").read_text()) | added
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    doc = planned(capsys, ["models", "show", str(path)])
    assert doc["experts"] or doc["kv_lora_rank"] or doc["mtp_layers"]


@pytest.mark.parametrize(
    "added",
    [{"experts": 4, "experts_per_token": 2},
     {"kv_lora_rank": 32, "qk_head_dim": 32, "qk_rope_head_dim": 16, "v_head_dim": 32},
     {"mtp_layers": 1}],
)  # fmt: skip
def test_spec_file_with_moe_keys_is_planned(capsys, tmp_path, added):
    path = tmp_path / "moe.yaml"
    path.write_text(yaml.safe_dump(TINY | added))
    small = ["--gpu", "h100-sxm", "--tokens", "1B", "--budget", "1M", "--no-explain"]
    doc = planned(capsys, ["optimize", "--model", str(path), *small])
    plan = doc["plans"][0]
    assert plan["ep"] >= 1 and plan["etp"] >= 1
    if "experts" not in added:
        assert plan["ep"] == plan["etp"] == 1


@pytest.mark.parametrize(
    ("added", "message"),
    [({"experts": 4, "experts_per_token": 5}, "experts_per_token (5) must be at most experts"),
     ({"experts": 4}, "experts needs experts_per_token"),
     ({"experts_per_token": 2}, "experts_per_token needs experts"),
     ({"dense_layers": 1}, "dense_layers needs experts"),
     ({"experts": 4, "experts_per_token": 1, "dense_layers": 4}, "dense_layers (4) must be fewer"),
     ({"experts": 4, "experts_per_token": 1, "shared_expert_ffn_hidden": 64},
      "shared_expert_ffn_hidden needs shared_experts"),
     ({"experts": 4, "experts_per_token": 1, "shared_expert_gate": True},
      "shared_expert_gate needs shared_experts"),
     ({"kv_lora_rank": 32}, "qk_head_dim: multi-head latent attention needs all of"),
     ({"q_lora_rank": 32}, "kv_lora_rank: multi-head latent attention needs all of")],
)  # fmt: skip
def test_spec_validation_errors_name_the_key(capsys, tmp_path, added, message):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(TINY | added))
    line = refused(capsys, ["evaluate", "--model", str(path), *EVAL])
    assert f"{path}: {message}" in line


@pytest.mark.parametrize("name", MOE_ZOO)
def test_moe_zoo_names_are_read_for_planning(capsys, name):
    assert planned(capsys, ["models", "show", name])["experts"] > 1


def test_question_inline_moe_model_is_planned(capsys, tmp_path):
    path = tmp_path / "q.yaml"
    model = TINY | {"experts": 4, "experts_per_token": 2}
    path.write_text(yaml.safe_dump({"model": model, "gpus": ["h100-sxm"], "tokens": "1B",
                                    "budget": "1M"}))  # fmt: skip
    code, out, err = run_main(capsys, ["explain", str(path)])
    assert code == 0, err
    assert "ep_domain" in out


def test_the_dense_zoo_and_the_moe_zoo_are_apart():
    assert not set(zoo()) & set(moe_zoo())
    assert all(s.is_dense for s in zoo().values())
    assert not any(s.is_dense for s in moe_zoo().values())


# ------------------------------------------------------- item 2: spec, import, counts


# published active sizes given to one figure (Qwen3-Next-80B-A3B's "3B activated", the
# name's A3B): the layers' active weights (no embedding, no output head) round to it
ONE_FIGURE_ACTIVE = {"qwen3-next-80b-a3b"}
# published active sizes given as a share of the total to the nearest 5% (xAI's "25% of the
# weights active on a given token" for Grok-1): the counted share rounds to it
SHARE_ACTIVE = {"grok-1"}


@pytest.mark.parametrize("name", MOE_ZOO)
def test_moe_zoo_within_2pct_of_published_total_and_active(name):
    spec = moe_zoo()[name]
    assert spec.source and spec.published_params_b and spec.published_active_params_b
    assert spec.params() == pytest.approx(spec.published_params_b * 1e9, rel=0.02)
    active = moe.active_params(spec, include_embedding=spec.published_active_counts_embedding)
    if name in ONE_FIGURE_ACTIVE:
        layers = active - spec.vocab * spec.hidden - spec.norm_params
        assert round(layers / 1e9) == spec.published_active_params_b
    elif name in SHARE_ACTIVE:
        share = spec.published_active_params_b / spec.published_params_b
        assert round(active / spec.params() * 20) / 20 == pytest.approx(share)
    else:
        assert active == pytest.approx(spec.published_active_params_b * 1e9, rel=0.02)
    assert active < spec.params()


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_real_moe_config_imports_at_published_sizes(name):
    spec = read_model_file(HF_MOE / name)
    entry = SOURCES[name]
    assert entry["repo"].startswith("https://huggingface.co/") and entry["params_source"]
    assert spec.params() == pytest.approx(entry["published_params_b"] * 1e9, rel=0.02)
    active = moe.active_params(spec)
    assert active == pytest.approx(entry["published_active_params_b"] * 1e9, rel=0.02)


def test_every_moe_config_file_has_its_source():
    assert {p.name for p in HF_MOE.glob("*.json")} == set(SOURCES)


def test_deepseek_v3_config_reads_every_contract_key():
    spec = read_model_file(HF_MOE / "DeepSeek-V3.json")
    assert (spec.experts, spec.experts_per_token, spec.expert_ffn) == (256, 8, 2048)
    assert (spec.shared_experts, spec.shared_expert_ffn) == (1, 2048)
    assert (spec.dense_layers, spec.moe_layer_every, moe.moe_layers(spec)) == (3, 1, 58)
    assert (spec.q_lora_rank, spec.kv_lora_rank) == (1536, 512)
    assert (spec.qk_head_dim, spec.qk_rope_head_dim, spec.v_head_dim) == (128, 64, 128)
    assert spec.mtp_layers == 1 and spec.seq_len == 4096 and spec.gated_mlp
    # the checkpoint's 671,026,419,200 less 58 x 256 router score biases (not counted)
    assert spec.params() == 671_026_419_200 - 58 * 256
    # one MLA layer's projections, as the checkpoint's tensors (q_a, q_a norm, q_b,
    # kv_a, kv_a norm, kv_b, o)
    assert moe.attention_params(spec) == (
        11010048 + 1536 + 37748736 + 4128768 + 512 + 16777216 + 117440512
    )
    # DeepSeek: the MTP module is 11.5B unique parameters besides the shared embedding
    # and head (README_WEIGHTS.md); ours adds the 2h x h projection and norms to a layer
    assert moe.mtp_params(spec) == pytest.approx(11.5e9, rel=0.02)
    assert moe.training_params(spec) == spec.params() + moe.mtp_params(spec)
    assert spec.architecture() == moe_zoo()["deepseek-v3"].architecture()


def test_mixtral_config_imports_46_7b_total_12_9b_active():
    spec = read_model_file(HF_MOE / "Mixtral-8x7B-v0.1.json")
    assert spec.params() == pytest.approx(46.7e9, rel=0.02)
    assert moe.active_params(spec) == pytest.approx(12.9e9, rel=0.02)
    assert spec.expert_ffn == spec.ffn == 14336 and spec.seq_len == 32768
    assert spec.architecture() == moe_zoo()["mixtral-8x7b"].architecture()


def test_dense_counts_unchanged_and_moe_helpers_agree_on_dense():
    for spec in zoo().values():
        assert moe.dense_layer_params(spec) == spec.layer_params()
        assert moe.total_params(spec) == spec.params()
        assert moe.active_params(spec) == spec.params()
        assert moe.mtp_params(spec) == 0


def test_shared_expert_gate_is_h_weights_per_moe_layer_total_and_active():
    """Qwen2-MoE's shared_expert_gate (Linear(h, 1), no bias) belongs to the shared experts:
    h weights in every MoE layer, all of them used by every token, none in dense layers."""
    fields = TINY | dict(experts=4, experts_per_token=1, shared_experts=1, moe_layer_every=2)
    gated = TransformerSpec(**fields, shared_expert_gate=True)
    plain = TransformerSpec(**fields)
    assert moe.shared_expert_params(gated) - moe.shared_expert_params(plain) == 256
    assert gated.params() - plain.params() == 2 * 256  # layers 1 and 3 are MoE
    assert moe.active_params(gated) - moe.active_params(plain) == 2 * 256


def test_moe_layer_every_places_the_nth_layers():
    spec = moe_zoo()["llama4-maverick"]
    pattern = moe.moe_layer_pattern(spec)
    assert pattern[:4] == (False, True, False, True) and sum(pattern) == 24
    ds = moe_zoo()["deepseek-v3"]
    assert moe.moe_layer_pattern(ds)[:4] == (False, False, False, True)


def test_hf_window_shorter_than_planned_length_is_refused_for_moe(tmp_path):
    """The window is read (attention_window) and a plan longer than it refused naming the
    key and --seq-len; at or below it the attention is full causal attention."""
    cfg = json.loads((HF_MOE / "Mixtral-8x7B-v0.1.json").read_text()) | {"sliding_window": 4096}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    spec = read_model_file(path)
    assert (spec.experts, spec.attention_window, spec.attention_window_key) == (
        8,
        4096,
        "sliding_window",
    )
    line = windowed_sequence_refusal(spec, spec.seq_len)
    assert line is not None and "sliding_window: 4,096 tokens, shorter" in line
    assert "pass --seq-len 4096 or less" in line
    assert windowed_sequence_refusal(spec, 4096) is None
    cfg["sliding_window"] = 32768  # the planned length: full causal attention
    path.write_text(json.dumps(cfg))
    assert windowed_sequence_refusal(read_model_file(path), 32768) is None


@pytest.mark.parametrize("name", ["llama4-scout", "llama4-maverick"])
def test_llama4_chunked_attention_refuses_longer_sequences(capsys, name):
    """Llama 4's text_config attention_chunk_size 8192 (chunked attention, not modelled) is
    in the zoo as in a config.json: a sequence over 8,192 tokens is refused naming the key
    (until 2026-12-05 it was priced as full attention); at 8,192 or less it is planned."""
    spec = moe_zoo()[name]
    assert (spec.attention_window, spec.attention_window_key) == (8192, "attention_chunk_size")
    args = ["evaluate", "--model", name, "--tp", "4", "--pp", "4", "--dp", "8", "--ep", "16"]
    line = refused(capsys, [*args, "--seq-len", "16384"])
    assert f"{name}: attention_chunk_size: 8,192 tokens" in line and "--seq-len 8192" in line
    code, _, err = run_main(capsys, [*args, "--seq-len", "8192"])
    assert code in (0, 1), err


def test_hf_synonyms_must_agree(tmp_path):
    cfg = json.loads((HF_MOE / "Mixtral-8x7B-v0.1.json").read_text()) | {"num_experts": 16}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(ModelError, match="num_experts: 16 disagrees"):
        read_model_file(path)


def test_qwen_shared_expert_intermediate_size_is_one_shared_expert(tmp_path):
    cfg = json.loads((HF / "Qwen3-0.6B.json").read_text())
    cfg |= {"num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 256,
            "shared_expert_intermediate_size": 1024, "decoder_sparse_step": 2}  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    spec = read_model_file(path)
    assert (spec.shared_experts, spec.shared_expert_ffn, spec.moe_layer_every) == (1, 1024, 2)
    assert moe.moe_layers(spec) == spec.layers // 2


# ------------------------------------------------------------ item 3: FLOPs, memory


def test_deepseek_v3_flops_per_token_is_6_x_active_plus_attention():
    """Megatron-LM's count (training.py at 000c4ac): the GEMMs are 6 x the active
    parameters a token multiplies (no input embedding; Megatron counts neither the
    router nor the norms and biases), plus the causal attention core and MTP."""
    spec = moe_zoo()["deepseek-v3"]
    s = 4096
    t = flops.moe_flops_terms_per_token(spec, s)
    heads, qk, rope, v = 128, 128, 64, 128
    mtp_layer = moe.moe_layer_params(spec, active=True)
    core = 6 * (61 + 1) * (s * heads * (qk + rope) / 2 + s * heads * v / 2)
    assert t["attention_core"] == pytest.approx(core)
    gemm = t["megatron"] - t["attention_core"]
    # main model active parameters without the input embedding, plus the MTP module's
    # layer, projection and one more output head; less what Megatron does not count
    n = moe.active_params(spec, include_embedding=False) + mtp_layer + 2 * 7168**2
    n += 129280 * 7168
    uncounted = 62 * 2 * 7168 + 59 * moe.router_params(spec) + 7168  # norms, routers
    assert gemm == pytest.approx(6 * (n - uncounted), rel=2e-3)
    # about 6 x 37B x tokens plus attention, MTP and the router
    assert t["total"] == pytest.approx(6 * 37e9 + core, rel=0.12)
    assert t["total"] == t["megatron"] + t["router"]
    assert flops.moe_model_flops_per_token(spec, s) == t["total"]


def test_dense_model_megatron_terms_match_the_dense_planner_but_causal_half():
    spec = zoo()["llama3-70b"]
    s = 8192
    t = flops.moe_flops_terms_per_token(spec, s)
    dense = flops.model_flops_per_token(spec, s)
    full_square = 3 * spec.layers * flops.attention_forward_flops_per_token(spec, s)
    assert t["megatron"] - t["attention_core"] == pytest.approx(dense - full_square)
    assert t["attention_core"] == pytest.approx(full_square / 2)
    assert t["router"] == 0 and t["routed_experts"] == 0


def test_mixtral_routed_flops_are_top2_of_8():
    spec = moe_zoo()["mixtral-8x7b"]
    t = flops.moe_flops_terms_per_token(spec, 4096)
    assert t["routed_experts"] == 6 * 32 * 2 * 3 * 4096 * 14336
    assert t["dense_mlp"] == 0 and t["shared_experts"] == 0
    assert t["router"] == 6 * 32 * 4096 * 8


def test_mixtral_memory_at_ep_8_by_hand():
    """Mixtral 8x7B, TP 1, PP 1, DP 8, EP 8 (one expert per GPU, expert-DP 1), ZeRO-1,
    2 + 2 + 12 bytes per parameter, micro-batch 1 at 4096 tokens, 8 micro-batches."""
    spec = moe_zoo()["mixtral-8x7b"]
    layout = Layout(tp=1, pp=1, dp=8, micro_batch=1, global_batch=64)
    a = Assumptions()
    m = moe_memory_per_gpu(spec, layout, 4096, 80.0, a, ep=8)
    h, f, L, V = 4096, 14336, 32, 32000
    expert = 3 * h * f
    attention = 2 * h * h + 2 * h * 1024
    dense = L * (attention + 2 * h + h * 8) + 2 * V * h + h  # router replicated
    assert m.expert_dp == 1
    assert m.expert_params == L * expert  # one of 8 experts per layer
    assert m.dense_params == dense
    gb = 1e9
    assert m.memory.weights == pytest.approx((dense + L * expert) * 2 / gb)
    assert m.memory.gradients == pytest.approx((dense + L * expert) * 2 / gb)
    # the distributed optimizer shards dense states over DP 8, expert states over EDP 1
    assert m.memory.optimizer == pytest.approx((dense * 12 / 8 + L * expert * 12) / gb)
    # activations of the one micro-batch in flight (PP 1): attention part (Korthikanti,
    # no TP: 10 + Q 2 + K, V 2 x 2/8 each + output 2) and the routed part: 4096 tokens
    # x top-2, each with its input 2h and gated FFN 6f (no output: Megatron-Core weights
    # it before the second GEMM, so the combine keeps nothing); router fp32 logits and
    # scores 8 x 8 bytes and gates with indices 12 x 2 bytes per token
    sbh = 4096 * h
    attn = sbh * (10 + 2 + 4 * 1024 / 4096 + 2)
    routed = 4096 * 2 * (2 * h + 6 * f)
    router = 4096 * (8 * 8 + 12 * 2)
    assert m.routed_activations_gb == pytest.approx(L * routed / gb)
    assert m.router_activations_gb == pytest.approx(L * router / gb)
    assert m.memory.activations == pytest.approx(L * (attn + routed + router) / gb)
    logits = 4 * 4096 * V / gb
    dispatch = 2 * 4096 * 2 * 2 * h / gb
    assert m.dispatch_gb == pytest.approx(dispatch)
    assert m.memory.other == pytest.approx(logits + dispatch)


def test_ep_and_expert_dp_shard_expert_states():
    spec = moe_zoo()["mixtral-8x7b"]
    layout = Layout(tp=1, pp=1, dp=16, micro_batch=1, global_batch=64)
    a = Assumptions()
    at = {ep: moe_memory_per_gpu(spec, layout, 4096, 80.0, a, ep=ep) for ep in (1, 2, 8)}
    assert at[1].expert_dp == 16 and at[8].expert_dp == 2
    assert at[2].expert_params == 4 * at[8].expert_params
    # ZeRO-1: expert optimizer states over expert-DP; EP 8 x EDP 2 = EP 1 x EDP 16
    expert_optim = {ep: at[ep].expert_params * 12 / at[ep].expert_dp for ep in at}
    assert expert_optim[1] == pytest.approx(expert_optim[8])
    assert at[8].memory.weights < at[2].memory.weights < at[1].memory.weights


def test_capacity_factor_scales_routed_buffers_and_dropless_uses_the_load():
    spec = moe_zoo()["qwen3-30b-a3b"]
    layout = Layout(tp=2, pp=2, dp=4, micro_batch=1, global_batch=32)
    a = Assumptions()
    run = {
        "balanced": moe_memory_per_gpu(spec, layout, 4096, 80.0, a, ep=8),
        "cf": moe_memory_per_gpu(spec, layout, 4096, 80.0, a, ep=8, capacity_factor=1.25),
        "skewed": moe_memory_per_gpu(spec, layout, 4096, 80.0, a, ep=8, expert_load=1.5),
    }
    base = run["balanced"].routed_activations_gb
    assert run["cf"].routed_activations_gb == pytest.approx(1.25 * base)
    assert run["skewed"].routed_activations_gb == pytest.approx(1.5 * base)
    assert run["cf"].dispatch_gb == pytest.approx(1.25 * run["balanced"].dispatch_gb)


def test_full_recompute_keeps_layer_inputs_only():
    spec = moe_zoo()["mixtral-8x7b"]
    a = Assumptions()
    full = Layout(tp=1, pp=1, dp=8, micro_batch=1, global_batch=64, recompute="full")
    sel = Layout(tp=1, pp=1, dp=8, micro_batch=1, global_batch=64)
    m_full = moe_memory_per_gpu(spec, full, 4096, 80.0, a, ep=8)
    m_sel = moe_memory_per_gpu(spec, sel, 4096, 80.0, a, ep=8)
    assert m_full.memory.activations < m_sel.memory.activations / 5


def test_mtp_sits_on_the_last_pipeline_rank():
    spec = moe_zoo()["deepseek-v3"]
    # one micro-batch per step: both ranks hold one in flight
    layout = Layout(tp=1, pp=2, dp=64, micro_batch=1, global_batch=64)
    last = stage_layers(61, layout)[-1]  # Megatron's split of 61 over 2 ranks
    assert rank_layer_ids(61, layout, 1) == tuple(range(61 - last, 61))
    m = moe_memory_per_gpu(spec, layout, 4096, 141.0, Assumptions(), ep=64)
    per_expert_layer = 256 * moe.expert_params(spec) / 64
    # its layers are all MoE (after the 3 dense ones), and the MTP module's layer too
    assert m.rank == 1 and m.expert_params == pytest.approx((last + 1) * per_expert_layer)


def test_virtual_stages_interleave_layers():
    layout = Layout(tp=1, pp=2, dp=1, vp=2, micro_batch=1, global_batch=8)
    assert rank_layer_ids(8, layout, 0) == (0, 1, 4, 5)
    assert rank_layer_ids(8, layout, 1) == (2, 3, 6, 7)


def test_folding_rules_are_model_errors():
    spec = moe_zoo()["mixtral-8x7b"]
    layout = Layout(tp=2, pp=1, dp=4, micro_batch=1, global_batch=8)
    assert expert_data_parallel(spec, layout, ep=8) == 1
    assert expert_data_parallel(spec, layout, ep=4, etp=2) == 1
    assert expert_data_parallel(spec, layout, ep=2) == 4
    with pytest.raises(ModelError, match="must divide TP x CP x DP = 8"):
        expert_data_parallel(spec, layout, ep=16)
    with pytest.raises(ModelError, match="must divide experts"):
        expert_data_parallel(TransformerSpec(**TINY, experts=6, experts_per_token=2), layout, 4)


@pytest.mark.parametrize(
    "layout",
    [Layout(tp=8, pp=4, dp=4, micro_batch=1, global_batch=1024),
     Layout(tp=4, pp=8, dp=2, vp=5, micro_batch=2, global_batch=512, recompute="full"),
     Layout(tp=2, pp=2, dp=8, cp=2, micro_batch=1, global_batch=64, zero=3,
            recompute="none", precision="fp8")],
)  # fmt: skip
def test_moe_memory_of_a_dense_model_is_the_dense_planners(layout):
    from models.memory import memory_per_gpu

    spec = zoo()["llama2-70b"]
    a = Assumptions(memory_overhead_fraction=0.05, runtime_reserved_gb=3.0)
    dense = memory_per_gpu(spec, layout, 4096, 80.0, a)
    ours = moe_memory_per_gpu(spec, layout, 4096, 80.0, a, ep=1)
    assert ours.memory.as_dict() == pytest.approx(dense.as_dict(), rel=1e-9)
    assert ours.expert_params == 0 and ours.dispatch_gb == 0


def test_a_moe_cp_rank_stores_its_queries_scores_against_every_key():
    """Without FlashAttention (recompute none) a CP rank keeps its s / cp queries' scores
    against all s keys, 5 a (s / cp) s b / t bytes a layer, half per CP doubling (they
    fell as (s / cp)^2, a quarter: models.memory.attention_score_coeff)."""
    spec, seq = moe_zoo()["mixtral-8x7b"], 32768
    a = Assumptions(flash_attention=False)
    scores = []
    for cp in (1, 2, 4):
        gb = [
            moe_memory_per_gpu(
                spec,
                Layout(tp=2, pp=1, dp=4, cp=cp, micro_batch=1, global_batch=4, recompute=rc),
                seq, 1e9, a, ep=8,
            ).memory.activations
            for rc in ("none", "selective")
        ]  # fmt: skip
        scores.append(gb[0] - gb[1])
    per_layer = 5.0 * spec.heads * (seq / 2) * seq / 2 / 1e9  # CP 2, TP 2: 85.9 GB a layer
    assert scores[1] == pytest.approx(spec.layers * per_layer, rel=1e-9)
    assert scores == pytest.approx([scores[0], scores[0] / 2, scores[0] / 4], rel=1e-9)


def test_a_kimi_k2_config_imports_as_the_zoo_model(tmp_path):
    """Kimi K2's config.json is DeepSeek-V3's keys under model_type kimi_k2 (the zoo entry's
    source): with Kimi's values it imports with the zoo's architecture and counts."""
    import json

    cfg = json.loads((HF_MOE / "DeepSeek-V3.json").read_text(encoding="utf-8"))
    cfg.pop("rope_scaling", None)  # (the zoo entry, as the ModelZoo's config, has none)
    cfg.update(
        model_type="kimi_k2", num_attention_heads=64, num_key_value_heads=64,
        n_routed_experts=384, first_k_dense_replace=1, vocab_size=163840, n_group=1,
        topk_group=1, routed_scaling_factor=2.827, num_nextn_predict_layers=0,
        rope_theta=50000.0,
    )  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    spec, zoo_spec = read_model_file(path), moe_zoo()["kimi-k2"]
    assert spec.params() == zoo_spec.params()
    assert moe.active_params(spec) == moe.active_params(zoo_spec)
    assert (spec.experts, spec.dense_layers, spec.mtp_layers) == (384, 1, 0)


@pytest.mark.parametrize(
    "groups,kept,message",
    [
        (3, 1, r"router_groups \(3\) must divide experts \(8\)"),
        (4, 5, r"router_group_topk \(5\) must be at most router_groups \(4\)"),
        (8, 1, r"router_group_topk \(1\) groups of 1 experts hold fewer than experts_per_token"),
    ],
)
def test_group_limited_routing_must_be_one_megatron_can_run(groups, kept, message):
    """Megatron-Core splits the experts evenly into router_groups groups and keeps the top
    router_group_topk: a spec whose groups do not divide the experts, keep more groups than
    exist or hold fewer than top-k experts is refused (it reached --emit's flags before)."""
    fields = dict(name="rg", layers=8, hidden=1024, heads=8, vocab=32000, seq_len=2048,
                  experts=8, experts_per_token=2, expert_ffn_hidden=1024)  # fmt: skip
    with pytest.raises(ValueError, match=message):
        TransformerSpec(**fields, router_groups=groups, router_group_topk=kept)
    assert TransformerSpec(**fields, router_groups=4, router_group_topk=2).router_groups == 4


@pytest.mark.parametrize(
    "layers, kw",
    [
        (80, dict(pp=8)),
        (80, dict(pp=4, vp=5)),
        (61, dict(pp=4, first_stage_layers=13, last_stage_layers=16)),
        (10, dict(pp=4)),
        (8, dict(pp=2, stage_counts=(1, 3, 2, 2), vp=2)),
    ],
)
def test_ranks_layer_ids_place_every_layer_once(layers, kw):
    """Every rank's layers in one pass (ranks_layer_ids; rank by rank it was quadratic in
    the stages): each layer on exactly one rank, and rank_layer_ids its entry."""
    from models.memory import ranks_layer_ids

    layout = Layout(tp=1, dp=1, micro_batch=1, global_batch=kw["pp"], **kw)
    every = ranks_layer_ids(layers, layout)
    assert len(every) == layout.pp
    assert sorted(i for ids in every for i in ids) == list(range(layers))
    assert all(rank_layer_ids(layers, layout, r) == every[r] for r in range(layout.pp))
