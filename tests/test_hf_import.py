"""Hugging Face config.json import (models/hf_config.py): real configs of popular dense
models import at their published size and at their pre-training sequence length."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from helpers import run_main
from models import moe
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


@pytest.mark.parametrize("window", [0, -1, 4096.5, float("inf")])
def test_a_sliding_window_that_is_no_length_is_refused_naming_the_key(tmp_path, window):
    """window_fields skipped anything but a positive int: 0 and -1 were read as no window,
    silently (so a plan past the window was priced as full attention)."""
    from models.errors import ModelError

    cfg = json.loads((HF / "gemma-2-9b-it.json").read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**cfg, "sliding_window": window}))
    with pytest.raises(ModelError) as info:
        load_model_file(path)
    assert str(info.value).startswith(f"{path}: sliding_window: "), info.value


def test_a_sliding_window_written_as_a_whole_float_is_read(tmp_path):
    """4096.0 (a config written by a tool that writes floats) was ignored: no window."""
    cfg = json.loads((HF / "gemma-2-9b-it.json").read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**cfg, "sliding_window": 4096.0}))
    spec = load_model_file(path)
    assert (spec.attention_window, spec.attention_window_key) == (4096, "sliding_window")
    path.write_text(json.dumps({**cfg, "sliding_window": None}))  # null: no window
    assert load_model_file(path).attention_window is None


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
        ({"vision_config": {"depth": 32}}, "vision_config", "multimodal"),  # Qwen2-VL
        ({"audio_config": {"d_model": 1280}}, "audio_config", "multimodal"),
        ({"img_processor": {"name": "clip_vision_model"}}, "img_processor", "multimodal"),
        ({"embd_layer": {"embedding_cls": "image"}}, "embd_layer", "multimodal"),  # Phi-3-V
        ({"rotary_dim": 64}, "rotary_dim", "GPT-J"),
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


# ------------------------------------------------------------- the family, not the names
# bigcode/starcoder2-15b's config.json (its released file sets tie_word_embeddings false:
# the 15B checkpoint stores lm_head, the 3B and 7B none, bigcode-project/starcoder2 issue 18)
STARCODER2_15B = {
    "architectures": ["Starcoder2ForCausalLM"], "model_type": "starcoder2",
    "attention_dropout": 0.1, "residual_dropout": 0.1, "embedding_dropout": 0.1,
    "hidden_act": "gelu_pytorch_tanh", "hidden_size": 6144, "intermediate_size": 24576,
    "max_position_embeddings": 16384, "mlp_type": "default", "norm_epsilon": 1e-05,
    "norm_type": "layer_norm", "num_attention_heads": 48, "num_hidden_layers": 40,
    "num_key_value_heads": 4, "rope_theta": 100000, "sliding_window": 4096,
    "tie_word_embeddings": False, "use_bias": True, "vocab_size": 49152,
}  # fmt: skip


def _config(tmp_path, cfg: dict) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    return path


def test_starcoder2_is_its_plain_layernorm_biased_model(tmp_path):
    """transformers' modeling_starcoder2: c_fc -> gelu -> c_proj (not gated), nn.LayerNorm
    of norm_epsilon, biases on q, k, v, o, c_fc and c_proj (use_bias). Until 2026-12-05 its
    gelu_pytorch_tanh made it gated, RMSNorm and bias-free: 21,995,427,840 parameters."""
    spec = load_model_file(_config(tmp_path, STARCODER2_15B))
    assert not spec.gated_mlp and spec.normalization == "layernorm" and spec.linear_bias
    assert (spec.norm_eps, spec.hidden_dropout, spec.attention_dropout) == (1e-5, 0.1, 0.1)
    h, f, kv = 6144, 24576, 4 * 128
    layer = 2 * (h * h + h) + 2 * (h * kv + kv) + (h * f + f) + (f * h + h) + 2 * 2 * h
    assert spec.params() == 40 * layer + 2 * 49152 * h + 2 * h == 15_957_889_024
    assert (spec.seq_len, spec.attention_window) == (4096, 4096)
    # its 3B, whose config.json has no tie_word_embeddings: Starcoder2Config ties (3.03B)
    small = STARCODER2_15B | dict(num_hidden_layers=30, hidden_size=3072, intermediate_size=12288)
    small |= dict(num_attention_heads=24, num_key_value_heads=2)
    small.pop("tie_word_embeddings")
    spec = load_model_file(_config(tmp_path, small))
    assert spec.tied_embeddings and spec.params() == 3_030_371_328
    off = load_model_file(_config(tmp_path, STARCODER2_15B | {"use_bias": False}))
    assert not off.linear_bias and not off.qkv_bias


@pytest.mark.parametrize(
    "extra, key",
    [
        ({"norm_type": "rms_norm"}, "norm_type"),
        ({"mlp_type": "gated"}, "mlp_type"),
        ({"use_bias": "yes"}, "use_bias"),
        ({"norm_epsilon": "1e-5"}, "norm_epsilon"),
        ({"embedding_dropout": 0.0}, "embedding_dropout"),
    ],
)
def test_starcoder2_keys_are_read_never_ignored(capsys, tmp_path, extra, key):
    """A StarCoder2 key the spec cannot hold is refused naming it (exit 2, one line)."""
    path = _config(tmp_path, STARCODER2_15B | extra)
    code, _, err = run_main(capsys, ["models", "show", str(path)])
    assert code == 2 and err.count("\n") == 1 and f"config.json: {key}: " in err, err


def test_gated_mlp_is_the_familys_not_the_activations(capsys, tmp_path):
    """Gemma's MLP is gated whatever its activation; a family the designer does not know is
    refused naming model_type (its silu once made any such config gated), and a config
    without model_type is read from its architectures class, or, naming no family, with the
    contract's Llama-family keys as Llama (../shared/CLI-CONTRACT.md)."""
    gelu_llama = LLAMA2_7B | {"hidden_act": "gelu_pytorch_tanh"}
    assert load_model_file(_config(tmp_path, gelu_llama)).gated_mlp
    no_type = {k: v for k, v in LLAMA2_7B.items() if k != "model_type"}
    spec = load_model_file(_config(tmp_path, no_type | {"architectures": ["LlamaForCausalLM"]}))
    assert spec.gated_mlp and spec.params() == 6_738_415_616  # Llama 2 7B
    bare = load_model_file(_config(tmp_path, no_type))
    assert bare.gated_mlp and bare.params() == 6_738_415_616
    cfg = LLAMA2_7B | {"model_type": "internlm2"}
    code, _, err = run_main(capsys, ["models", "show", str(_config(tmp_path, cfg))])
    assert code == 2 and err.count("\n") == 1 and "'internlm2' is not a family" in err, err
    assert "spec file" in err


GEMMA_7B = {  # google/gemma-7b's config.json: no tie_word_embeddings key
    "architectures": ["GemmaForCausalLM"], "model_type": "gemma", "head_dim": 256,
    "hidden_act": "gelu", "hidden_size": 3072, "intermediate_size": 24576,
    "max_position_embeddings": 8192, "num_attention_heads": 16, "num_hidden_layers": 28,
    "num_key_value_heads": 16, "rms_norm_eps": 1e-06, "rope_theta": 10000.0,
    "vocab_size": 256000,
}  # fmt: skip


@pytest.mark.parametrize(
    "shape, non_embedding",
    [
        ({}, 7_751_248_896),
        (dict(hidden_size=2048, intermediate_size=16384, num_attention_heads=8,
              num_hidden_layers=18, num_key_value_heads=1), 1_981_884_416),
    ],
)  # fmt: skip
def test_gemma_ties_its_embeddings_and_trains_at_8k(tmp_path, shape, non_embedding):
    """GemmaConfig ties by default (tie_word_embeddings True) and Gemma 1 trained at 8,192
    tokens (Gemma Team 2024, section 2). Gemma Team 2024, Table 2: 7B 786,825,216 embedding
    + 7,751,248,896 non-embedding, 2B 524,550,144 + 1,981,884,416 (their embedding counts
    a 256,128 vocabulary, config.json 256,000). Until 2026-12-05: untied, 9.32B and 3.03B."""
    spec = load_model_file(_config(tmp_path, GEMMA_7B | shape))
    assert spec.tied_embeddings and spec.seq_len == 8192
    assert spec.params() - spec.vocab * spec.hidden == non_embedding


QWEN15_MOE = {  # Qwen/Qwen1.5-MoE-A2.7B's config.json, the keys the reader reads
    "model_type": "qwen2_moe", "hidden_act": "silu", "hidden_size": 2048,
    "intermediate_size": 5632, "num_attention_heads": 16, "num_hidden_layers": 24,
    "num_key_value_heads": 16, "vocab_size": 151936, "tie_word_embeddings": False,
    "num_experts": 60, "num_experts_per_tok": 4, "moe_intermediate_size": 1408,
    "shared_expert_intermediate_size": 5632, "decoder_sparse_step": 1,
    "rms_norm_eps": 1e-06, "use_sliding_window": False, "sliding_window": 32768,
}  # fmt: skip


def test_qwen2_moe_has_qkv_biases(tmp_path):
    """Qwen1.5-MoE-A2.7B (Qwen/Qwen1.5-MoE-A2.7B config.json): Qwen2MoeAttention has biases
    on q, k and v (bias=config.qkv_bias, default true), as Qwen 2; a config that sets
    qkv_bias false has none."""
    spec = load_model_file(_config(tmp_path, QWEN15_MOE))
    assert spec.qkv_bias and spec.layer_bias_params() == 3 * 2048
    without = load_model_file(_config(tmp_path, QWEN15_MOE | {"qkv_bias": False}))
    assert not without.qkv_bias
    assert spec.params() - without.params() == 24 * 3 * 2048


def test_qwen2_moe_counts_its_shared_expert_gate(tmp_path):
    """Qwen2MoeSparseMoeBlock's shared_expert_gate, a bias-free Linear(2048, 1) per MoE
    layer (transformers modeling_qwen2_moe.py at 1c351314a42a), in the total and in what a
    token uses: Qwen1.5-MoE-A2.7B's checkpoint holds 14,315,784,192 parameters (Hugging
    Face's safetensors total; keras-hub's qwen1.5_moe_2.7b_en preset says the same). Until
    2026-12-06 the gate was not counted: 14,315,735,040, 24 x 2048 short."""
    spec = load_model_file(_config(tmp_path, QWEN15_MOE))
    assert spec.shared_experts == 1 and spec.shared_expert_gate
    ungated = spec.model_copy(update={"shared_expert_gate": False})
    assert spec.params() == 14_315_784_192 == ungated.params() + 24 * 2048
    assert moe.active_params(spec) == moe.active_params(ungated) + 24 * 2048
    assert moe.active_params(spec) == pytest.approx(2.7e9, rel=0.01)  # "2.7B activated"


@pytest.mark.parametrize(
    ("name", "total"),
    [("OLMo-2-1124-7B.json", 7_298_617_344), ("OLMo-2-1124-13B.json", 13_716_198_400)],
)
def test_olmo2_counts_its_full_width_query_key_norms(name, total):
    """Olmo2Attention normalises the whole query projection and the whole key projection
    (q_norm of heads x head_dim, k_norm of kv_heads x head_dim weights, before the heads
    are split; transformers modeling_olmo2.py at 000c33fdfde1), not one head as Qwen 3:
    the checkpoints hold 7,298,617,344 and 13,716,198,400 parameters (Hugging Face's
    safetensors totals of allenai/OLMo-2-1124-7B and -13B). Until 2026-12-05 neither norm
    was counted: 262,144 and 409,600 short."""
    spec = load_model_file(HF / name)
    assert spec.qk_norm and spec.qk_norm_full
    assert spec.qk_norm_params == spec.q_width + spec.kv * spec.head_dim == 2 * spec.hidden
    assert spec.params() == total
    plain = spec.model_copy(update={"qk_norm": False, "qk_norm_full": False})
    assert spec.params() - plain.params() == spec.layers * 2 * spec.hidden


# after google/embeddinggemma-300m's config.json: a Gemma 3 text model run as an encoder
EMBEDDING_GEMMA = {
    "architectures": ["Gemma3TextModel"], "model_type": "gemma3_text", "hidden_size": 768,
    "intermediate_size": 1152, "num_hidden_layers": 24, "num_attention_heads": 3,
    "num_key_value_heads": 1, "head_dim": 256, "vocab_size": 262144,
    "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-06, "use_bidirectional_attention": True,
}  # fmt: skip


def test_bidirectional_gemma_is_refused_naming_the_file_and_key(capsys, tmp_path):
    """Gemma3TextConfig's use_bidirectional_attention (EmbeddingGemma: every token attends
    to all, transformers' Gemma3Attention is_causal false) makes an encoder, not the causal
    language model the designer plans: refused in one line, exit 2, as the other
    architectures the readers would misread. Until 2026-12-05 it was read as a causal
    Gemma 3. Set false it is the causal model."""
    path = _config(tmp_path, EMBEDDING_GEMMA)
    code, _, err = run_main(capsys, ["models", "show", str(path)])
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert f"{path}: use_bidirectional_attention: bidirectional attention" in err
    assert "not modelled" in err
    causal = load_model_file(
        _config(tmp_path, EMBEDDING_GEMMA | {"use_bidirectional_attention": False})
    )
    assert causal.layers == 24 and causal.head_dim == 256
