"""Hugging Face config.json -> TransformerSpec.

Keys read: the shape (Llama-family ``num_hidden_layers``, ``hidden_size``,
``num_attention_heads``, ``num_key_value_heads``, ``head_dim``,
``intermediate_size``, ``vocab_size``; GPT-2 ``n_layer``, ``n_embd``, ``n_head``,
``n_inner``), ``tie_word_embeddings`` (absent: the family's default, e.g. Gemma ties),
``rope_theta``, ``rope_scaling``, ``partial_rotary_factor``, ``rms_norm_eps`` /
``layer_norm_eps``, ``attention_bias``, ``mlp_bias``, ``attention_dropout``,
``hidden_dropout`` / ``resid_pdrop`` and ``hidden_act`` / ``hidden_activation``
(transformers' config classes, e.g. LlamaConfig, Gemma2Config, Qwen2Config); StarCoder2's
``use_bias``, ``norm_epsilon``, ``residual_dropout`` and ``embedding_dropout``, with its
``norm_type`` and ``mlp_type`` checked (``starcoder2_fields``); Qwen2-MoE's ``qkv_bias``.
Parameters no key names, as the family's transformers module builds them: Qwen 3's
per-head query/key norms, OLMo 2's full-width ones (``QK_NORM_FULL_TYPES``), Qwen2-MoE's
shared-expert gate (``SHARED_EXPERT_GATE_TYPES``). Gemma's
``use_bidirectional_attention`` (EmbeddingGemma, an encoder) is refused naming the key
(``UNMODELLED_KEYS``).

Whether the MLP is gated is the family's (``model_type``; ``architectures`` where a config
omits it), as its transformers modeling code builds it (``gated_mlp``), never the
activation's name; a config of a family the designer does not know is refused naming
``model_type``.

The training sequence length is never ``max_position_embeddings`` (the longest
context the released model supports, 131,072 for Llama 3.1): it is the length the
family was pre-trained with (models/data/hf_families.yaml, with sources), or the
stated default there; --seq-len overrides it.

Mixture-of-experts, latent attention and multi-token prediction (issue 17; the keys of
../shared/CLI-CONTRACT.md, "Mixture-of-experts and attention variants"): ``moe_fields``
maps the contract's keys (``HF_MOE_KEYS``); MoE keys that change neither the parameter
count nor the model FLOPs are read and not mapped, each with its reason
(``HF_MOE_IGNORED``); keys that change the model and that the contract does not cover
are refused naming the key (``HF_MOE_REFUSED``, DeepSeek's ``moe_layer_freq`` above 1),
and so is any other key that looks like an MoE or latent-attention key
(``models.moe.MOE_LOOKING``). Attention variants, decided key by key:
- ``sliding_window`` (Mistral, Gemma 2/3, GPT-OSS) and Llama 4's
  ``attention_chunk_size``: read into the spec's ``attention_window`` (``window_fields``;
  not when ``use_sliding_window`` is false or no ``layer_types`` entry slides). The window
  changes no parameter but the attention FLOPs, which the model prices as full causal
  attention only, so a plan or evaluation whose sequence is longer than the window is
  refused naming the key and ``--seq-len`` (models.transformer.windowed_sequence_refusal;
  ../shared/CLI-CONTRACT.md: never read as a different model); at or below the window
  every token attends to all before it, the attention priced. Until 2026-12-04 a dense
  config's window was read as full attention at any length, and a MoE config's refused
  at import against its pretraining length only.
- Not MoE-looking and not read, none changing parameters or FLOPs: Llama 4's
  ``no_rope_layers`` (which layers rotate), ``use_qk_norm`` (a weightless L2 norm),
  ``attn_temperature_tuning`` / ``attn_scale`` / ``floor_scale`` (scalars on the
  queries); GPT-OSS ``layer_types`` (which layers use its window, refused through
  ``sliding_window``) and its attention sinks (one logit per head, not a config key).
  A GPT-OSS config is refused at ``attention_bias`` (its experts' biases have no key).
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from models.errors import ModelError
from models.moe import MOE_LOOKING

_LLAMA = {
    "num_hidden_layers": "layers",
    "hidden_size": "hidden",
    "num_attention_heads": "heads",
    "num_key_value_heads": "kv_heads",
    "head_dim": "head_dim",
    "intermediate_size": "ffn_hidden",
    "vocab_size": "vocab",
    "tie_word_embeddings": "tied_embeddings",
}
_GPT2 = {
    "n_layer": "layers",
    "n_embd": "hidden",
    "n_head": "heads",
    "n_inner": "ffn_hidden",
    "vocab_size": "vocab",
    "tie_word_embeddings": "tied_embeddings",
}
_REQUIRED = ("layers", "hidden", "heads", "vocab")
_WINDOW_KEYS_READ = ("sliding_window", "attention_chunk_size")
# families whose MLP is gated (transformers' modeling code: gate_proj/up_proj/down_proj;
# Kimi K2 runs DeepSeek-V3's code, Llama4TextMLP and Qwen3NextMLP are gated too)
GATED_TYPES = {
    "llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "phi3", "olmo2",
    "mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3", "kimi_k2",
    "llama4_text", "qwen3_next",
}  # fmt: skip
# families whose MLP is plain, one up- and one down-projection around the activation
# (transformers' Starcoder2MLP: c_fc -> act -> c_proj), whatever the activation's name
PLAIN_MLP_TYPES = {"starcoder2"}
# families with biases on q, k and v only (Qwen2Attention: q/k/v_proj bias=True, o_proj
# none; Qwen2MoeAttention: bias=config.qkv_bias, Qwen2MoeConfig.qkv_bias default true)
QKV_BIAS_TYPES = {"qwen2", "qwen2_moe"}
# of those, the families whose config class has the qkv_bias switch (Qwen2MoeConfig)
QKV_BIAS_KEY_TYPES = {"qwen2_moe"}
# families whose attention normalises each query and key head (head_dim weights each):
# transformers' Qwen3Attention / Qwen3MoeAttention q_norm and k_norm
QK_NORM_TYPES = {"qwen3", "qwen3_moe", "qwen3_next"}
# families whose query and key norms each span the whole projection, heads x head_dim and
# kv_heads x head_dim weights (transformers' Olmo2Attention q_norm and k_norm, applied
# before the heads are split; modeling_olmo2.py at commit
# 000c33fdfde12e1ffafbfcdb3c926df5727a00b6)
QK_NORM_FULL_TYPES = {"olmo2"}
# families whose shared expert has a sigmoid gate, a bias-free Linear(hidden, 1) per MoE
# layer (transformers' Qwen2MoeSparseMoeBlock shared_expert_gate; modeling_qwen2_moe.py at
# commit 1c351314a42ac9aef3510fc536c18130d52be2ef) and Qwen3NextSparseMoeBlock's the same
SHARED_EXPERT_GATE_TYPES = {"qwen2_moe", "qwen3_next"}
# families whose full-attention layers gate their output (transformers' Qwen3NextAttention:
# q_proj twice the query width, half of it a sigmoid gate)
OUTPUT_GATE_TYPES = {"qwen3_next"}
# Qwen3-Next's linear-attention keys -> the spec's (models/linear_attention.py)
_LINEAR_KEYS = {
    "linear_num_key_heads": "linear_key_heads",
    "linear_num_value_heads": "linear_value_heads",
    "linear_key_head_dim": "linear_key_head_dim",
    "linear_value_head_dim": "linear_value_head_dim",
    "linear_conv_kernel_dim": "linear_conv_kernel",
}


@cache
def families() -> dict[str, Any]:
    """models/data/hf_families.yaml: pre-training lengths, tie defaults, activations."""
    text = (resources.files("models") / "data" / "hf_families.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def architecture(cfg: dict[str, Any]) -> str | None:
    """The config's family: its model_type, or where a config omits it the known family
    its ``architectures`` class names (LlamaForCausalLM -> llama, Qwen2MoeForCausalLM ->
    qwen2_moe); None when neither says."""
    kind = cfg.get("model_type")
    if kind is not None:
        return str(kind)
    names = cfg.get("architectures")
    known = {t.replace("_", ""): t for t in GATED_TYPES | PLAIN_MLP_TYPES}
    for name in names if isinstance(names, list) else []:
        stem = str(name).removesuffix("ForCausalLM").lower()
        if stem in known:
            return known[stem]
    return None


def family(cfg: dict[str, Any]) -> dict[str, Any] | None:
    """The first families rule that matches the config's model_type (and `when` values)."""
    kind = architecture(cfg) or ("gpt2" if "n_layer" in cfg else None)
    for rule in families()["families"]:
        if rule["model_type"] == kind and all(
            cfg.get(k) == v for k, v in (rule.get("when") or {}).items()
        ):
            return rule
    return None


def pretraining_seq_len(cfg: dict[str, Any]) -> tuple[int, str]:
    """(sequence length, where it comes from) for planning pre-training of this config."""
    rule = family(cfg)
    if rule is not None:
        return int(rule["seq_len"]), rule["source"]
    fam = families()
    return int(fam["default_seq_len"]), "stated default: " + fam["default_seq_len_source"]


def _rope_scaling(raw: Any, origin: str) -> dict[str, Any] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ModelError(f"{origin}: rope_scaling: expected a mapping or null, got {raw!r}")
    kind = raw.get("rope_type") or raw.get("type")
    if kind in (None, "default"):
        return None
    if kind == "su":  # the first Phi-3 releases' name for LongRoPE
        kind = "longrope"
    out = {"type": kind, "factor": raw.get("factor")}
    for key in (
        "low_freq_factor",
        "high_freq_factor",
        "original_max_position_embeddings",
        "mscale",
        "mscale_all_dim",
        "beta_fast",
        "beta_slow",
    ):
        if raw.get(key) is not None:
            out[key] = raw[key]
    return out


def _activation(cfg: dict[str, Any], origin: str) -> tuple[str | None, str | None]:
    """(HF activation name, the spec's activation) from hidden_act / hidden_activation."""
    name = cfg.get("hidden_activation") or cfg.get("hidden_act") or cfg.get("activation_function")
    if name is None:
        return None, None
    ours = families()["activations"].get(str(name))
    if ours is None:
        key = "hidden_activation" if "hidden_activation" in cfg else "hidden_act"
        known = ", ".join(sorted(families()["activations"]))
        raise ModelError(f"{origin}: {key}: unknown activation {name!r}; use one of {known}")
    return str(name), ours


# number keys read from a config.json besides the shape's and the MoE keys
_NUMBER_KEYS = (
    *("rope_theta", "partial_rotary_factor", "rms_norm_eps", "layer_norm_eps"),
    *("layer_norm_epsilon", "attention_dropout", "attn_pdrop", "hidden_dropout"),
    *("resid_pdrop", "n_positions", "experts_per_token", *_WINDOW_KEYS_READ),
    *("full_attention_interval", *_LINEAR_KEYS),
    *("norm_epsilon", "residual_dropout", "embedding_dropout"),  # (StarCoder2's)
)
# keys whose value may not be null: the FFN width (null would silently take the default)
_NOT_NULL = ("intermediate_size",)
# the MoE keys for which 0 is no model (0 experts, a 0-wide expert, MoE every 0th layer)
_NOT_ZERO = (
    *("num_local_experts", "n_routed_experts", "num_experts", "num_experts_per_tok"),
    *("moe_intermediate_size", "moe_layer_freq", "decoder_sparse_step"),
)
# layer_types values the designer reads (GPT-OSS's sliding attention, Qwen3-Next's linear
# attention: ``linear_attention_fields``); others are another model
_LAYER_TYPES = {"full_attention", "sliding_attention", "linear_attention"}


# keys that mark an architecture the Llama and GPT-2 readers would misread as a plain
# decoder-only transformer (an audit read Falcon-7B, multi-query with parallel blocks, as
# 8.5B parameters with 71 KV heads, and a Mamba hybrid as 52 transformer layers): refused,
# with what they mark, when set (true, or any value but false and null)
UNMODELLED_KEYS = (
    ("is_encoder_decoder", "an encoder-decoder model (T5, BART)"),
    ("text_config", "a multimodal config (its text model nested under text_config)"),
    ("vision_config", "a multimodal config (a vision encoder beside the text model)"),
    ("audio_config", "a multimodal config (an audio encoder beside the text model)"),
    ("img_processor", "a multimodal config (Phi-3-vision's image encoder)"),
    ("embd_layer", "a multimodal config (Phi-3-vision's image embedding layer)"),
    ("rotary_dim", "partial rotary embeddings with parallel attention and MLP blocks (GPT-J)"),
    # Gemma2Config / Gemma3TextConfig's switch for EmbeddingGemma: every token attends to
    # all others (transformers' Gemma3Attention is_causal = not use_bidirectional_attention,
    # modeling_gemma3.py at commit f14d0cbc824e447ef294d8cdc0f8ad4222f3dfee)
    (
        "use_bidirectional_attention",
        "bidirectional attention, an embedding encoder (EmbeddingGemma) rather than a causal "
        "language model,",
    ),
    ("multi_query", "Falcon's multi-query attention (multi_query, num_kv_heads)"),
    ("new_decoder_architecture", "Falcon's parallel attention and MLP blocks"),
    ("parallel_attn", "parallel attention and MLP blocks"),
    ("use_parallel_residual", "GPT-NeoX's parallel attention and MLP residual"),
    ("hybrid_override_pattern", "state-space (Mamba) layers mixed with attention"),
    ("layers_block_type", "state-space (Mamba) layers mixed with attention"),
    ("attn_layer_period", "state-space (Mamba) layers mixed with attention (Jamba)"),
)
SSM_KEY_PREFIXES = ("mamba", "ssm", "state_size", "conv_kernel", "time_step")
"""Keys of state-space layers (Mamba's config and its Hugging Face form)."""


def check_architecture(cfg: dict[str, Any], origin: str) -> None:
    """ModelError naming the key when the config is of an architecture the designer does
    not model (UNMODELLED_KEYS, state-space keys): refused rather than read as another
    model."""
    for key, what in UNMODELLED_KEYS:
        if cfg.get(key) not in (None, False):
            raise ModelError(
                f"{origin}: {key}: {what} is not modelled; the designer refuses it rather "
                "than read another model"
            )
    ssm = next((k for k in cfg if str(k).startswith(SSM_KEY_PREFIXES)), None)
    if ssm is not None:
        raise ModelError(
            f"{origin}: {ssm}: state-space (Mamba) layers are not modelled; the designer "
            "refuses it rather than read another model"
        )


def check_values(cfg: dict[str, Any], origin: str) -> None:
    """Every number key a number (not text, a boolean or null where null means nothing),
    the MoE counts not 0, and no layer type the designer does not model: ModelError naming
    the key (issue 33: ``"num_hidden_layers": "80"`` and ``n_routed_experts: 0`` were read
    as 80 and as a dense model)."""
    kind = cfg.get("model_type")
    if kind is not None and not isinstance(kind, str):
        raise ModelError(f"{origin}: model_type: {kind!r} is not a name; give e.g. llama")
    check_architecture(cfg, origin)
    mapping = _GPT2 if "n_layer" in cfg else _LLAMA
    numbers = [k for k in mapping if k != "tie_word_embeddings"]
    for key in (*numbers, *HF_MOE_KEYS, *_NUMBER_KEYS):
        if key not in cfg:
            continue
        value = cfg[key]
        if value is None:
            if key in _NOT_NULL or mapping.get(key) in _REQUIRED:
                raise ModelError(f"{origin}: {key}: null; give a number")
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ModelError(f"{origin}: {key}: {value!r} is not a number; give a number")
        if value == 0 and key in _NOT_ZERO:
            raise ModelError(
                f"{origin}: {key}: 0 is no mixture-of-experts model; leave the key out (or "
                "null) for a dense model, or give the real value"
            )
    kinds = cfg.get("layer_types")
    if isinstance(kinds, list) and set(map(str, kinds)) - _LAYER_TYPES:
        other = sorted(set(map(str, kinds)) - _LAYER_TYPES)
        raise ModelError(
            f"{origin}: layer_types: {', '.join(other)} layers are not modelled (only full, "
            "sliding and linear attention); the designer refuses it rather than read another "
            "model"
        )


def hf_fields(cfg: dict[str, Any], origin: str) -> dict[str, Any]:
    """The spec's fields for a config.json (validated by the caller)."""
    check_values(cfg, origin)
    gpt2 = "n_layer" in cfg
    mapping = _GPT2 if gpt2 else _LLAMA
    fields: dict[str, Any] = {
        ours: cfg[hf] for hf, ours in mapping.items() if cfg.get(hf) is not None
    }
    for ours in _REQUIRED:
        if ours not in fields:
            hf_key = next(k for k, v in mapping.items() if v == ours)
            raise ModelError(f"{origin}: {hf_key}: required Hugging Face key is missing; add it")
    rule = family(cfg)
    if "tied_embeddings" not in fields:
        fields["tied_embeddings"] = bool(rule and rule.get("tied"))
    fields["seq_len"] = pretraining_seq_len(cfg)[0]
    activation = _activation(cfg, origin)[1]
    if activation is not None:
        fields["activation"] = activation
    if gpt2:
        fields.update(
            position_embedding="learned_absolute",
            normalization="layernorm",
            linear_bias=True,
            norm_eps=cfg.get("layer_norm_epsilon", 1e-5),
        )
        # GPT-2's learned position table is n_positions long: the length it was trained at
        fields["seq_len"] = int(cfg.get("n_positions") or fields["seq_len"])
        fields.setdefault("activation", "gelu_tanh")
    else:
        fields.update(_decoder_fields(cfg, origin))
    for hf_key, ours in (
        ("attention_dropout", "attention_dropout"),
        ("attn_pdrop", "attention_dropout"),
        ("hidden_dropout", "hidden_dropout"),
        ("resid_pdrop", "hidden_dropout"),
    ):
        if cfg.get(hf_key) is not None:
            fields[ours] = float(cfg[hf_key])
    if architecture(cfg) == "starcoder2":
        fields.update(starcoder2_fields(cfg, origin))
    fields.update(moe_fields(cfg, origin))
    fields.update(window_fields(cfg, origin))
    fields.update(linear_attention_fields(cfg, origin, fields["layers"]))
    name = cfg.get("_name_or_path") or Path(origin).parent.name or "hf-model"
    fields["name"] = str(name)
    return fields


def _decoder_fields(cfg: dict[str, Any], origin: str) -> dict[str, Any]:
    """The Llama-reader's architecture fields: the MLP (gated_mlp), RoPE, the norm and
    the biases (attention_bias, mlp_bias; q, k and v only for QKV_BIAS_TYPES) and the
    query/key norms, as transformers' modeling code of the family builds them."""
    kind = architecture(cfg)
    fields: dict[str, Any] = {"gated_mlp": gated_mlp(cfg, origin)}
    if cfg.get("rope_theta") is not None:
        fields["rope_base"] = float(cfg["rope_theta"])
    if cfg.get("partial_rotary_factor") is not None:
        fields["rope_percent"] = float(cfg["partial_rotary_factor"])
    scaling = _rope_scaling(cfg.get("rope_scaling"), origin)
    if scaling is not None:
        fields["rope_scaling"] = scaling
    if cfg.get("rms_norm_eps") is not None:
        fields["norm_eps"] = float(cfg["rms_norm_eps"])
    elif cfg.get("layer_norm_eps") is not None:
        fields.update(normalization="layernorm", norm_eps=float(cfg["layer_norm_eps"]))
    if kind == "starcoder2":  # (biases and norms from its own keys: starcoder2_fields)
        return fields
    attention_bias, mlp_bias = bool(cfg.get("attention_bias")), bool(cfg.get("mlp_bias"))
    if attention_bias and mlp_bias:
        fields["linear_bias"] = True
    elif attention_bias or mlp_bias:
        key = "attention_bias" if attention_bias else "mlp_bias"
        raise ModelError(
            f"{origin}: {key}: biases on only the attention or only the MLP projections "
            "are not modelled; the designer models biases on every linear layer or on "
            "QKV only"
        )
    elif kind in QKV_BIAS_TYPES:
        fields["qkv_bias"] = True
        if kind in QKV_BIAS_KEY_TYPES:
            fields["qkv_bias"] = _switch(cfg, "qkv_bias", True, origin)
    if kind in QK_NORM_TYPES and not _is_set(cfg.get("kv_lora_rank")):
        fields["qk_norm"] = True  # (latent attention has its own norms instead)
    if kind in QK_NORM_FULL_TYPES:
        fields.update(qk_norm=True, qk_norm_full=True)
    return fields


def gated_mlp(cfg: dict[str, Any], origin: str) -> bool:
    """Whether the MLP is gated, as the family's transformers modeling code builds it
    (GATED_TYPES: gate_proj, up_proj, down_proj; PLAIN_MLP_TYPES: Starcoder2MLP's c_fc and
    c_proj), never from the activation's name: StarCoder2's gelu_pytorch_tanh MLP is
    plain, Gemma 2's gated. Until 2026-12-05 any silu, swiglu or gelu_pytorch_tanh config was
    read as gated (StarCoder2-15B as 22.0B parameters instead of 15.96B). A config with
    intermediate_size of any other family is refused naming model_type: config.json does
    not say whether its MLP is gated. A config that names no family (no model_type, no known
    architectures class) is read with the Llama-family keys ../shared/CLI-CONTRACT.md lists,
    as Llama: gated. Without intermediate_size the MLP is the spec's default, plain and 4 x
    hidden wide."""
    if "intermediate_size" not in cfg:
        return False
    kind = architecture(cfg) or "llama"  # no family named: the contract's Llama-family keys
    if kind in GATED_TYPES or kind in PLAIN_MLP_TYPES:
        return kind in GATED_TYPES
    known = ", ".join(sorted(GATED_TYPES | PLAIN_MLP_TYPES))
    raise ModelError(
        f"{origin}: model_type: {kind!r} is not a family the designer reads (config.json "
        f"does not say whether its MLP is gated); use one of {known}, or write a designer "
        "spec file with gated_mlp"
    )


def _switch(cfg: dict[str, Any], key: str, default: bool, origin: str) -> bool:
    """A true/false key of config.json (``default`` when absent or null)."""
    value = cfg.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ModelError(f"{origin}: {key}: {value!r} is not true or false; give true or false")
    return value


def starcoder2_fields(cfg: dict[str, Any], origin: str) -> dict[str, Any]:
    """StarCoder2 as transformers' modeling_starcoder2 builds it: nn.LayerNorm of
    ``norm_epsilon`` (Starcoder2Config default 1e-5) before attention, before the MLP and
    at the end; biases on q, k, v, o, c_fc and c_proj when ``use_bias`` (default true; none
    on the output head: Qwen2ForCausalLM's lm_head); a plain MLP (gated_mlp);
    ``residual_dropout`` on the attention and MLP outputs and ``embedding_dropout`` on the
    embeddings. Its ``norm_type`` and ``mlp_type`` keys (NeMo's export) are not read by
    transformers, which builds LayerNorm and the plain MLP whatever they say: a value that
    disagrees (not layer_norm, not default) is refused naming the key, and so is an
    embedding dropout other than the residual one (the spec has one hidden dropout,
    Megatron-LM's --hidden-dropout, which drops the embeddings' output too)."""
    for key, built in (("norm_type", "layer_norm"), ("mlp_type", "default")):
        if cfg.get(key, built) not in (built, None):
            raise ModelError(
                f"{origin}: {key}: {cfg[key]!r}, but transformers' Starcoder2 builds "
                f"{built!r} whatever it says; fix the key or write a designer spec file"
            )
    eps = cfg.get("norm_epsilon")
    out: dict[str, Any] = {
        "normalization": "layernorm",
        "norm_eps": 1e-5 if eps is None else float(eps),
        "linear_bias": _switch(cfg, "use_bias", True, origin),
    }
    residual, embedding = cfg.get("residual_dropout"), cfg.get("embedding_dropout")
    if residual is not None:
        out["hidden_dropout"] = float(residual)
    if embedding is not None and float(embedding) != out.get("hidden_dropout", 0.0):
        raise ModelError(
            f"{origin}: embedding_dropout: {embedding!r} differs from residual_dropout "
            f"({residual!r}); the spec's one hidden dropout (Megatron-LM --hidden-dropout) "
            "drops the embeddings and the residuals alike"
        )
    return out


def linear_attention_fields(cfg: dict[str, Any], origin: str, layers: Any) -> dict[str, Any]:
    """Qwen3-Next's per-layer attention types (models/linear_attention.py): every
    ``full_attention_interval``-th layer full attention, the others Gated DeltaNet of the
    ``linear_*`` widths; a ``layer_types`` list must be that pattern (ModelError naming the
    key otherwise), and a gated family's attention has its output gate. ``layers`` is the
    config's layer count, checked by the spec's validation (a pattern is compared with
    it only when it is a whole number in the spec's range)."""
    if isinstance(layers, bool) or not isinstance(layers, int) or not 1 <= layers <= 100_000:
        layers = None
    kinds = cfg.get("layer_types")
    linear = isinstance(kinds, list) and "linear_attention" in map(str, kinds)
    every = cfg.get("full_attention_interval")
    if not linear and every is None:
        return {}
    if isinstance(kinds, list) and "sliding_attention" in map(str, kinds):
        raise ModelError(f"{origin}: layer_types: sliding and linear attention together")
    if every is None:  # the pattern from the list: its first full-attention layer
        full = [i for i, k in enumerate(map(str, kinds or [])) if k == "full_attention"]
        every = full[0] + 1 if full else len(kinds or []) + 1
    if isinstance(every, float) and every.is_integer():
        every = int(every)
    if not isinstance(every, int) or isinstance(every, bool) or every < 1:
        raise ModelError(f"{origin}: full_attention_interval: {every!r}; give a whole number")
    if isinstance(kinds, list) and layers is not None:
        kind = ("linear_attention", "full_attention")
        want = [kind[(i + 1) % every == 0] for i in range(layers)]
        if list(map(str, kinds)) != want:
            raise ModelError(
                f"{origin}: layer_types: only every n-th layer full attention and the others "
                f"linear attention is modelled ({len(kinds)} entries for {layers} layers, "
                f"full_attention_interval {every})"
            )
    out: dict[str, Any] = {"full_attention_every": every}
    for key, ours in _LINEAR_KEYS.items():
        if cfg.get(key) is None:
            raise ModelError(f"{origin}: {key}: linear attention needs it; add it")
        out[ours] = cfg[key]
    if cfg.get("model_type") in OUTPUT_GATE_TYPES:
        out["attention_output_gate"] = True
    return out


# ------------------------------------------------------------- mixture-of-experts keys
# The contract's config.json keys ("Mixture-of-experts and attention variants") -> the
# spec's. Synonyms must agree when a config gives more than one.
HF_MOE_KEYS: dict[str, str] = {
    "num_local_experts": "experts",  # Mixtral, GPT-OSS
    "n_routed_experts": "experts",  # DeepSeek-V2/V3
    "num_experts": "experts",  # Qwen2-MoE, Qwen3-MoE
    "num_experts_per_tok": "experts_per_token",
    "moe_intermediate_size": "expert_ffn_hidden",
    "n_shared_experts": "shared_experts",
    "shared_expert_intermediate_size": "shared_expert_ffn_hidden",
    "first_k_dense_replace": "dense_layers",
    "moe_layer_freq": "moe_layer_every",
    "decoder_sparse_step": "moe_layer_every",
    "q_lora_rank": "q_lora_rank",
    "kv_lora_rank": "kv_lora_rank",
    "qk_nope_head_dim": "qk_head_dim",
    "qk_rope_head_dim": "qk_rope_head_dim",
    "v_head_dim": "v_head_dim",
    "num_nextn_predict_layers": "mtp_layers",
}
# MoE keys read and deliberately not mapped: none changes the parameter count or the
# model FLOPs (Megatron-LM's count: top-k experts per token, whatever picks them).
HF_MOE_IGNORED: dict[str, str] = {
    "output_router_logits": "whether the forward returns router logits",
    "router_aux_loss_coef": "weight of the load-balancing loss (a scalar in the loss)",
    "aux_loss_alpha": "DeepSeek's load-balancing loss weight (a scalar in the loss)",
    "seq_aux": "DeepSeek's sequence-wise balance loss switch (a scalar in the loss)",
    "router_jitter_noise": "noise on router inputs in training (elementwise)",
    "router_z_loss_coef": "weight of the router z-loss (a scalar in the loss)",
    "norm_topk_prob": "renormalises the top-k gate weights (k numbers per token)",
    "ep_size": "DeepSeek's inference expert-parallel size, not the model",
    "experts_per_token": "GPT-OSS's copy of num_experts_per_tok (must agree with it)",
    "swiglu_limit": "GPT-OSS clamps the SwiGLU inputs (elementwise)",
}
# the router's keys (DeepSeek-V3): read into the spec's router fields (router_fields)
HF_ROUTER_KEYS = ("scoring_func", "topk_method", "n_group", "topk_group", "routed_scaling_factor")
# attention-variant keys of MoE configs: read as full causal attention only when that is
# the model at the planned sequence length; otherwise refused (the contract has no key)
_WINDOW_KEYS = _WINDOW_KEYS_READ
# MoE keys that change the model and that the contract does not cover: refused
HF_MOE_REFUSED: dict[str, str] = {
    "interleave_moe_layer_step": "Llama 4's dense/MoE interleave (use a spec file's "
    "moe_layer_every)",
    "intermediate_size_mlp": "Llama 4's dense FFN width beside the experts' (use a spec file)",
    "mlp_only_layers": "Qwen-MoE's list of dense layers (the spec has leading dense "
    "layers and moe_layer_every only)",
    "moe_layers": "Llama 4's list of MoE layers (the spec has leading dense layers and "
    "moe_layer_every only)",
}


def _is_set(value: object) -> bool:
    return value is not None and value != [] and value is not False


def moe_keys(cfg: dict[str, Any]) -> dict[str, str]:
    """Spec key -> the config.json key that set it (for error messages)."""
    out: dict[str, str] = {}
    for hf, ours in HF_MOE_KEYS.items():
        if _is_set(cfg.get(hf)) and ours not in out:
            out[ours] = hf
    return out


def moe_fields(cfg: dict[str, Any], origin: str) -> dict[str, Any]:
    """The contract's MoE, MLA and MTP fields of a config.json; a key that would make
    it a different model than the designer reads is refused naming it."""
    for key, value in cfg.items():
        if key in HF_MOE_REFUSED and _is_set(value):
            raise ModelError(
                f"{origin}: {key}: not modelled ({HF_MOE_REFUSED[key]}); the designer "
                "refuses it rather than read a different model"
            )
        known = key in HF_MOE_KEYS or key in HF_MOE_IGNORED or key in HF_MOE_REFUSED
        known = known or key in HF_ROUTER_KEYS
        if MOE_LOOKING.search(key) and not known and _is_set(value):
            raise ModelError(
                f"{origin}: {key}: unknown mixture-of-experts or latent-attention key; the "
                "designer refuses it rather than read a different model"
            )
    out: dict[str, Any] = {}
    for hf, ours in HF_MOE_KEYS.items():
        value = cfg.get(hf)
        if not _is_set(value) or value == 0:
            continue
        if ours in out and out[ours] != value:
            raise ModelError(f"{origin}: {hf}: {value!r} disagrees with another key for {ours}")
        out[ours] = value
    if "experts" not in out:
        # a dense config: keys that only mean something with experts would be ignored
        for ours in ("experts_per_token", "expert_ffn_hidden", "shared_experts",
                     "shared_expert_ffn_hidden", "dense_layers"):  # fmt: skip
            out.pop(ours, None)
        out.pop("moe_layer_every", None)
    if out.get("moe_layer_every", 1) != 1 and "moe_layer_freq" in cfg:
        raise ModelError(
            f"{origin}: moe_layer_freq: {cfg['moe_layer_freq']!r} is not modelled (DeepSeek "
            "places MoE layers at multiples counted from layer 0, the spec from the "
            "first layer after the dense ones); only 1 is read"
        )
    if "n_shared_experts" in cfg and "shared_expert_intermediate_size" in cfg:
        if _is_set(cfg["n_shared_experts"]) and _is_set(cfg["shared_expert_intermediate_size"]):
            raise ModelError(
                f"{origin}: shared_expert_intermediate_size: give n_shared_experts or it, not both"
            )
    if "shared_expert_ffn_hidden" in out:  # Qwen2-MoE: one shared expert of that width
        out["shared_experts"] = 1
        if architecture(cfg) in SHARED_EXPERT_GATE_TYPES:
            out["shared_expert_gate"] = True
    gpt_oss_k = cfg.get("experts_per_token")
    if "experts_per_token" not in out and _is_set(gpt_oss_k) and "experts" in out:
        out["experts_per_token"] = gpt_oss_k
    if _is_set(gpt_oss_k) and gpt_oss_k != out.get("experts_per_token", gpt_oss_k):
        raise ModelError(
            f"{origin}: experts_per_token: {gpt_oss_k!r} disagrees with num_experts_per_tok"
        )
    names = moe_keys(cfg)
    if "experts" in out and "experts_per_token" not in out:
        raise ModelError(
            f"{origin}: {names['experts']}: experts need num_experts_per_tok (the router's "
            "top-k); add it"
        )
    if out.get("q_lora_rank") is not None and "kv_lora_rank" not in out:
        raise ModelError(f"{origin}: q_lora_rank: latent attention also needs kv_lora_rank")
    mla = ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
    if "kv_lora_rank" in out and not all(_is_set(cfg.get(k)) for k in mla):
        raise ModelError(
            f"{origin}: kv_lora_rank: latent attention also needs {', '.join(mla)}; add them"
        )
    if "kv_lora_rank" not in out:  # v_head_dim etc. without MLA: not this model's
        for ours in ("qk_head_dim", "qk_rope_head_dim", "v_head_dim"):
            if ours in out:
                hf = next(k for k, v in HF_MOE_KEYS.items() if v == ours)
                raise ModelError(f"{origin}: {hf}: latent attention also needs kv_lora_rank")
    if "experts" in out:
        out.update(router_fields(cfg, origin))
    return out


def window_fields(cfg: dict[str, Any], origin: str = "config.json") -> dict[str, Any]:
    """The spec's ``attention_window`` (and the key it came from): the shortest sliding
    window or attention chunk the config applies, None when none applies
    (``use_sliding_window: false``, Qwen 2; a ``layer_types`` list without sliding layers;
    a key null or absent). A window that is no length of tokens is refused naming the key
    (_window_length: 4096.0 was ignored, and so were 0 and -1).
    The window changes the attention FLOPs, which the model prices only as full causal
    attention, so a plan whose sequence is longer than it is refused
    (models.transformer.windowed_sequence_refusal); at or below it nothing changes."""
    kinds = cfg.get("layer_types")
    applied = []
    for key in _WINDOW_KEYS:
        window = _window_length(cfg.get(key), key, origin)
        if window is None:
            continue
        if key == "sliding_window" and cfg.get("use_sliding_window") is False:
            continue
        if (
            key == "sliding_window"
            and isinstance(kinds, list)
            and "sliding_attention" not in map(str, kinds)
        ):
            continue
        applied.append((window, key))
    if not applied:
        return {}
    window, key = min(applied)
    return {"attention_window": window, "attention_window_key": key}


def _window_length(value: Any, key: str, origin: str) -> int | None:
    """A window key's tokens: None for null; a whole number, also written as a float
    (4096.0); ModelError naming the key for anything else (0, negative, fractional, text)."""
    if value is None:
        return None
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or value != value or value in (float("inf"), float("-inf")):
        raise ModelError(
            f"{origin}: {key}: {value!r} is not a number of tokens; give the window's length, "
            "or null for none"
        )
    if value != int(value) or value < 1:
        raise ModelError(
            f"{origin}: {key}: {value!r} is not a window; give its length in tokens, a whole "
            "number of at least 1, or null for none"
        )
    return int(value)


def router_fields(cfg: dict[str, Any], origin: str) -> dict[str, Any]:
    """The router as DeepSeek-V3's config.json gives it: scoring_func (softmax or
    sigmoid), topk_method noaux_tc (a per-expert score bias for auxiliary-loss-free
    balancing, DeepSeek-V3 Technical Report section 2.1.2), n_group / topk_group
    (group-limited routing, when more than one group) and routed_scaling_factor."""
    out: dict[str, Any] = {}
    score = cfg.get("scoring_func")
    if score is not None:
        if score not in ("softmax", "sigmoid"):
            raise ModelError(f"{origin}: scoring_func: {score!r} is not softmax or sigmoid")
        out["router_score"] = score
    method = cfg.get("topk_method")
    if method not in (None, "greedy", "group_limited_greedy", "noaux_tc"):
        raise ModelError(
            f"{origin}: topk_method: {method!r} is not modelled (greedy, "
            "group_limited_greedy or noaux_tc)"
        )
    if method == "noaux_tc":
        out["router_expert_bias"] = True
    groups = _router_number(cfg, "n_group", origin, whole=True)
    kept = _router_number(cfg, "topk_group", origin, whole=True)
    if method != "greedy" and groups is not None and groups > 1:
        if kept is None:
            raise ModelError(f"{origin}: n_group: group-limited routing also needs topk_group")
        out.update(router_groups=int(groups), router_group_topk=int(kept))
    scale = _router_number(cfg, "routed_scaling_factor", origin, whole=False)
    if scale is not None:
        out["router_topk_scale"] = float(scale)
    return out


def _router_number(cfg: dict[str, Any], key: str, origin: str, whole: bool) -> float | None:
    """A router key's positive number (a whole one when ``whole``), None when absent."""
    value = cfg.get(key)
    if value is None:
        return None
    ok = isinstance(value, int) if whole else isinstance(value, (int, float))
    if not ok or isinstance(value, bool) or not 0 < value < 1e9:
        kind = "a positive integer" if whole else "a positive number"
        raise ModelError(f"{origin}: {key}: expected {kind}, got {value!r}")
    return float(value)
