"""Hugging Face config.json -> TransformerSpec.

Keys read: the shape (Llama-family ``num_hidden_layers``, ``hidden_size``,
``num_attention_heads``, ``num_key_value_heads``, ``head_dim``,
``intermediate_size``, ``vocab_size``; GPT-2 ``n_layer``, ``n_embd``, ``n_head``,
``n_inner``), ``tie_word_embeddings`` (absent: the family's default, e.g. Gemma ties),
``rope_theta``, ``rope_scaling``, ``partial_rotary_factor``, ``rms_norm_eps`` /
``layer_norm_eps``, ``attention_bias``, ``mlp_bias``, ``attention_dropout``,
``hidden_dropout`` / ``resid_pdrop`` and ``hidden_act`` / ``hidden_activation``
(transformers' config classes, e.g. LlamaConfig, Gemma2Config, Qwen2Config).

The training sequence length is never ``max_position_embeddings`` (the longest
context the released model supports, 131,072 for Llama 3.1): it is the length the
family was pre-trained with (models/data/hf_families.yaml, with sources), or the
stated default there; --seq-len overrides it.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from models.errors import ModelError
from models.moe import refuse_hf_moe

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
# families whose MLP is gated (transformers' modeling code: gate_proj/up_proj/down_proj)
GATED_TYPES = {
    "llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "phi3", "olmo2",
}  # fmt: skip
# families with biases on q, k and v only (Qwen2Attention: q/k/v_proj bias=True, o_proj none)
QKV_BIAS_TYPES = {"qwen2"}


@cache
def families() -> dict[str, Any]:
    """models/data/hf_families.yaml: pre-training lengths, tie defaults, activations."""
    text = (resources.files("models") / "data" / "hf_families.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def family(cfg: dict[str, Any]) -> dict[str, Any] | None:
    """The first families rule that matches the config's model_type (and `when` values)."""
    kind = cfg.get("model_type") or ("gpt2" if "n_layer" in cfg else None)
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
    for key in ("low_freq_factor", "high_freq_factor", "original_max_position_embeddings"):
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


def hf_fields(cfg: dict[str, Any], origin: str) -> dict[str, Any]:
    """The spec's fields for a config.json (validated by the caller)."""
    refuse_hf_moe(cfg, origin)
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
    act_name, activation = _activation(cfg, origin)
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
        kind = cfg.get("model_type")
        fields["gated_mlp"] = "intermediate_size" in cfg and (
            kind in GATED_TYPES or act_name in {"silu", "swiglu", "gelu_pytorch_tanh"}
        )
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
    for hf_key, ours in (
        ("attention_dropout", "attention_dropout"),
        ("attn_pdrop", "attention_dropout"),
        ("hidden_dropout", "hidden_dropout"),
        ("resid_pdrop", "hidden_dropout"),
    ):
        if cfg.get(hf_key) is not None:
            fields[ours] = float(cfg[hf_key])
    name = cfg.get("_name_or_path") or Path(origin).parent.name or "hf-model"
    fields["name"] = str(name)
    return fields
