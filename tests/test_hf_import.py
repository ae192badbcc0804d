"""Hugging Face config.json import (models/hf_config.py): real configs of popular dense
models import at their published size and at their pre-training sequence length."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from helpers import run_main
from models.hf_config import families, pretraining_seq_len
from models.zoo import load_model_file

HF = Path(__file__).resolve().parent / "data" / "hf"
SOURCES = yaml.safe_load((HF / "SOURCES.yaml").read_text())["files"]


def test_every_config_file_has_its_source():
    files = {p.name for p in HF.glob("*.json")}
    assert files == set(SOURCES)
    assert len(files) >= 12
    for entry in SOURCES.values():
        assert entry["repo"].startswith("https://huggingface.co/")
        assert entry["params_source"] and entry["published_params_b"] > 0


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_real_config_imports_at_published_size(name):
    spec = load_model_file(HF / name)
    published = SOURCES[name]["published_params_b"] * 1e9
    assert spec.params() == pytest.approx(published, rel=0.01)


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_real_config_plans_at_pretraining_length_not_max_positions(name):
    cfg = json.loads((HF / name).read_text())
    spec = load_model_file(HF / name)
    seq, source = pretraining_seq_len(cfg)
    assert spec.seq_len == seq and source
    if cfg.get("max_position_embeddings", 0) > seq:
        assert spec.seq_len != cfg["max_position_embeddings"]


def test_llama31_reads_rope_and_plans_at_8k():
    spec = load_model_file(HF / "Llama-3.1-8B-Instruct.json")
    assert spec.seq_len == 8192  # not 131,072 (max_position_embeddings)
    assert spec.rope_base == 500000.0 and spec.norm_eps == 1e-5
    assert spec.rope_scaling is not None and spec.rope_scaling.type == "llama3"
    assert spec.rope_scaling.factor == 8.0 and spec.rope_scaling.high_freq_factor == 4.0
    assert spec.position_embedding == "rope" and spec.normalization == "rmsnorm"
    assert not spec.linear_bias and not spec.qkv_bias and not spec.tied_embeddings


def test_gemma2_27b_head_dim_and_tied_embeddings():
    spec = load_model_file(HF / "gemma-2-27b-it.json")
    assert spec.head_dim == 128 and spec.q_width == 4096 != spec.hidden
    assert spec.tied_embeddings  # absent from config.json: Gemma2Config ties by default
    assert spec.activation == "gelu_tanh" and spec.gated_mlp
    assert spec.params() / 1e9 == pytest.approx(27.2, abs=0.05)  # not 28.7


def test_qwen2_biases_on_qkv_only():
    qwen = load_model_file(HF / "Qwen2.5-3B-Instruct.json")
    assert qwen.qkv_bias and not qwen.linear_bias
    assert qwen.layer_bias_params() == qwen.q_width + 2 * qwen.kv * qwen.head_dim


def test_unknown_family_gets_stated_default(tmp_path):
    cfg = {"model_type": "brand-new", "num_hidden_layers": 2, "hidden_size": 64}
    cfg |= {"num_attention_heads": 4, "vocab_size": 100, "max_position_embeddings": 65536}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    spec = load_model_file(tmp_path / "config.json")
    assert spec.seq_len == families()["default_seq_len"] != 65536


def test_seq_len_option_overrides_the_family_length(capsys):
    path = str(HF / "Llama-3.1-8B-Instruct.json")
    args = ["evaluate", "--model", path, "--tp", "1", "--pp", "1", "--dp", "8"]
    args += ["--micro-batch", "1", "--global-batch", "8", "--json"]
    code, out, err = run_main(capsys, args)
    assert code in (0, 1), err
    assert json.loads(out)["layout"]["seq_len"] == 8192
    code, out, err = run_main(capsys, [*args, "--seq-len", "2048"])
    assert code in (0, 1), err
    assert json.loads(out)["layout"]["seq_len"] == 2048


def test_a_sliding_window_shorter_than_the_plan_is_refused_naming_the_key(capsys):
    """../shared/CLI-CONTRACT.md: a config with keys the designer cannot model is refused with
    exit 2 naming the key, never read as a different model. Gemma 2 slides a 4,096-token window
    on alternate layers and pre-trained at 8,192: planned at 8,192 it would be priced as full
    attention, so evaluate and optimize refuse it naming sliding_window and --seq-len; at
    4,096 or less the window covers the whole sequence and the plan is exact."""
    gemma = str(HF / "gemma-2-9b-it.json")
    spec = load_model_file(HF / "gemma-2-9b-it.json")
    assert (spec.attention_window, spec.attention_window_key) == (4096, "sliding_window")
    for cmd in (
        ["evaluate", "--tp", "2", "--dp", "4"],
        ["optimize", "--budget", "5M", "--no-explain"],
    ):
        code, _, err = run_main(capsys, [*cmd, "--model", gemma])
        assert code == 2 and err.count("\n") == 1, err
        assert "--seq-len" in err and "sliding_window: 4,096 tokens, shorter than the " in err
        code, out, err = run_main(capsys, [*cmd, "--model", gemma, "--seq-len", "4096"])
        assert code == 0, err
    # a window that does not apply is not read: Qwen 2.5 (use_sliding_window false)
    assert load_model_file(HF / "Qwen2.5-3B-Instruct.json").attention_window is None
    # nor one at least as long as the pre-training length (Phi-3.5: 262,144 over 131,072)
    phi = load_model_file(HF / "Phi-3.5-mini-instruct.json")
    assert phi.attention_window == 262144 and phi.seq_len <= 262144
    code, _, err = run_main(
        capsys, ["evaluate", "--dp", "8", "--model", str(HF / "Phi-3.5-mini-instruct.json")]
    )
    assert code == 0, err


LLAMA2_7B = {
    "model_type": "llama",
    "num_hidden_layers": 32,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "intermediate_size": 11008,
    "vocab_size": 32000,
    "hidden_act": "silu",
}


@pytest.mark.parametrize(
    "extra, key, what",
    [
        ({"multi_query": True, "num_kv_heads": 71}, "multi_query", "multi-query attention"),
        ({"new_decoder_architecture": True}, "new_decoder_architecture", "parallel attention"),
        ({"parallel_attn": True}, "parallel_attn", "parallel attention and MLP"),
        ({"use_parallel_residual": True}, "use_parallel_residual", "parallel attention"),
        ({"hybrid_override_pattern": "M-M*-"}, "hybrid_override_pattern", "state-space"),
        ({"layers_block_type": ["mamba", "attention"]}, "layers_block_type", "state-space"),
        ({"attn_layer_period": 8}, "attn_layer_period", "state-space"),
        ({"is_encoder_decoder": True}, "is_encoder_decoder", "encoder-decoder"),
        ({"text_config": {"hidden_size": 5376}}, "text_config", "multimodal"),
        ({"ssm_cfg": {}}, "ssm_cfg", "state-space"),
        ({"mamba_d_state": 128}, "mamba_d_state", "state-space"),
        ({"state_size": 16, "conv_kernel": 4}, "state_size", "state-space"),
    ],
)
def test_an_architecture_the_readers_would_misread_is_refused(capsys, tmp_path, extra, key, what):
    """Falcon-7B (multi-query, parallel blocks) was read as 8.5B parameters with 71 KV
    heads, a Mamba hybrid as 52 transformer layers, NeoX without its parallel residual;
    T5 and a nested text_config were refused as missing `layers`: now each names its key."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA2_7B, **extra}))
    code, _, err = run_main(capsys, ["models", "show", str(path)])
    assert code == 2
    assert f"config.json: {key}: " in err and what in err and "not modelled" in err


def test_those_keys_set_false_and_an_encoder_decoder_without_llama_keys(capsys, tmp_path):
    path = tmp_path / "config.json"
    off = {"multi_query": False, "parallel_attn": False, "use_parallel_residual": False}
    path.write_text(json.dumps({**LLAMA2_7B, **off, "is_encoder_decoder": False}))
    assert load_model_file(path).layers == 32
    t5 = {"model_type": "t5", "d_model": 768, "num_layers": 12, "is_encoder_decoder": True}
    path.write_text(json.dumps(t5))  # none of the Llama or GPT-2 keys: still a config.json
    code, _, err = run_main(capsys, ["models", "show", str(path)])
    assert code == 2 and "is_encoder_decoder: an encoder-decoder model" in err
