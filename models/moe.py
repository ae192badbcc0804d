"""Mixture-of-experts and latent attention: parameter counts.

Issue 17 added mixture-of-experts (MoE) models, multi-head latent attention (MLA) and
multi-token prediction (MTP); the optimizer plans them end to end (EP and ETP decided
with the rest, solvers/space.py) and evaluate prices a given layout (models/expert.py).

Parameter counts, per layer (each matrix counted from its shape, as the released
checkpoints hold them; checked against DeepSeek-V3's 671,026,419,200):
- attention: the dense model's (models/transformer.py), or MLA as DeepSeek-V2/V3 build it
  (DeepSeek-AI 2024, DeepSeek-V2, section 2.1.2; DeepSeek-V3 Technical Report, section
  2.1.1): q_a h x q_lora_rank, its norm, q_b q_lora_rank x heads(qk + rope) (or one
  h x heads(qk + rope) without query compression), kv_a h x (kv_lora_rank + rope), its
  norm, kv_b kv_lora_rank x heads(qk + v), output heads*v x h;
- MLP: a dense layer's FFN (ffn_hidden); an MoE layer's router h x experts (a bias per
  expert with linear_bias, as GPT-OSS), ``experts`` routed experts of width
  ``expert_ffn_hidden`` and ``shared_experts`` shared ones of ``shared_expert_ffn_hidden``,
  each an MLP of two or three matrices (and biases with linear_bias), and with
  ``shared_expert_gate`` (Qwen2-MoE) the shared experts' h x 1 sigmoid gate; per token
  the router, top-k routed experts and the shared experts (and their gate) are active;
- layer i (from 0) is MoE when i >= dense_layers and (i - dense_layers + 1) is a multiple
  of moe_layer_every (transformers' Qwen2-MoE ``decoder_sparse_step`` and Llama 4
  ``interleave_moe_layer_step`` place them so: the n-th, 2n-th, ... layers);
- an MTP module (DeepSeek-V3 section 2.2; Megatron-Core's MultiTokenPredictionLayer):
  two input norms, the h x 2h projection, one transformer layer like the main model's
  last and a final norm; it shares the embedding and the output head. ``params()`` is
  the main model's (what the authors publish: DeepSeek-V3's 671B excludes the MTP
  module's 14B); ``mtp_params`` is the rest that training holds.
Qwen 3's query/key norms (qk_norm; OLMo 2's full-width ones, qk_norm_full) are counted
with the attention; Qwen3-Next's Gated DeltaNet layers and its attention output gate as
models/linear_attention.py counts them. Not counted:
DeepSeek-V3's per-expert router score bias (a buffer Megatron-LM does not train),
GPT-OSS's per-head attention sinks (under 0.001%).

Hugging Face config.json keys that look like MoE or MLA keys but that the importer
does not know are refused as well, never silently ignored (``MOE_LOOKING``).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING

from models import linear_attention

if TYPE_CHECKING:  # models.transformer imports this module (TransformerSpec.params)
    from models.transformer import TransformerSpec

# a config.json key that matches this and that the importer does not know is refused
MOE_LOOKING = re.compile(
    r"expert|moe|router|routed|lora_rank|nextn|mtp|sparse_step|topk|top_k|aux_loss"
    r"|capacity_factor|dense_replace|interleave|intermediate_size_mlp|mlp_only",
    re.IGNORECASE,
)

# ------------------------------------------------------------------ parameter counts


def mlp_params(spec: TransformerSpec, width: int) -> int:
    """One MLP (a dense FFN or one expert) of FFN width ``width``, with its biases."""
    weights = spec.mlp_matrices * spec.hidden * width
    biases = (spec.mlp_matrices - 1) * width + spec.hidden if spec.linear_bias else 0
    return weights + biases


def attention_params(spec: TransformerSpec) -> int:
    """One layer's attention projections with their biases (and MLA's latent norms)."""
    h = spec.hidden
    if not spec.is_mla:
        kv_width = spec.kv * spec.head_dim
        weights = 2 * h * spec.q_width + 2 * h * kv_width
        qkv = spec.q_width + 2 * kv_width
        biases = qkv + h if spec.linear_bias else qkv if spec.qkv_bias else 0
        gate = linear_attention.output_gate_params(spec)
        return weights + biases + spec.qk_norm_params + gate
    assert spec.kv_lora_rank and spec.qk_head_dim and spec.qk_rope_head_dim and spec.v_head_dim
    qk = spec.heads * (spec.qk_head_dim + spec.qk_rope_head_dim)
    if spec.q_lora_rank is None:
        q = h * qk
    else:
        q = h * spec.q_lora_rank + spec.q_lora_rank + spec.q_lora_rank * qk
    kv_a = h * (spec.kv_lora_rank + spec.qk_rope_head_dim) + spec.kv_lora_rank
    kv_b = spec.kv_lora_rank * spec.heads * (spec.qk_head_dim + spec.v_head_dim)
    out = spec.heads * spec.v_head_dim * h
    return q + kv_a + kv_b + out


def mean_attention_params(spec: TransformerSpec) -> float:
    """One layer's attention at the model's mean over its layers: the full-attention
    layers' ``attention_params`` and the Gated DeltaNet layers' (models.linear_attention);
    ``attention_params`` for every model without linear attention."""
    full = attention_params(spec)
    if not spec.has_linear_attention:
        return float(full)
    share = linear_attention.linear_share(spec)
    return full + share * (linear_attention.gdn_params(spec) - full)


def router_params(spec: TransformerSpec) -> int:
    """The router of one MoE layer: h x experts, and a bias per expert with linear_bias."""
    e = spec.experts or 0
    return spec.hidden * e + (e if spec.linear_bias else 0)


def expert_params(spec: TransformerSpec) -> int:
    """One routed expert."""
    return mlp_params(spec, spec.expert_ffn)


def shared_expert_params(spec: TransformerSpec) -> int:
    """All shared experts of one MoE layer, with their gate (``shared_expert_gate``: h
    weights, transformers' Qwen2MoeSparseMoeBlock shared_expert_gate, a bias-free
    Linear(hidden, 1) whose sigmoid scales the shared expert's output; modeling_qwen2_moe.py
    at commit 1c351314a42ac9aef3510fc536c18130d52be2ef)."""
    gate = spec.hidden if spec.shared_expert_gate else 0
    return spec.shared_experts * mlp_params(spec, spec.shared_expert_ffn) + gate


@lru_cache(maxsize=256)
def moe_layer_pattern(spec: TransformerSpec) -> tuple[bool, ...]:
    """Per layer, whether its MLP is MoE (module docstring: the n-th, 2n-th, ... after
    the leading dense layers)."""
    if not spec.is_moe:
        return (False,) * spec.layers
    d, n = spec.dense_layers, spec.moe_layer_every
    return tuple(i >= d and (i - d + 1) % n == 0 for i in range(spec.layers))


def moe_layers(spec: TransformerSpec) -> int:
    """Layers whose MLP is MoE."""
    return sum(moe_layer_pattern(spec))


def dense_layer_params(spec: TransformerSpec) -> int:
    """A layer with a dense MLP: attention, FFN, two norms (equals
    ``TransformerSpec.layer_params`` for a dense model)."""
    return attention_params(spec) + mlp_params(spec, spec.ffn) + 2 * spec.norm_params


def moe_layer_params(spec: TransformerSpec, active: bool = False) -> int:
    """An MoE layer: attention, two norms, router, shared experts and all routed experts
    (``active``: the top-k a token is routed to)."""
    routed = (spec.experts_per_token if active else spec.experts) or 0
    return (
        attention_params(spec)
        + 2 * spec.norm_params
        + router_params(spec)
        + routed * expert_params(spec)
        + shared_expert_params(spec)
    )


def _layers_params(spec: TransformerSpec, active: bool) -> int:
    moe = moe_layers(spec)
    dense = spec.layers - moe
    out = dense * dense_layer_params(spec) + moe * moe_layer_params(spec, active)
    n_linear = linear_attention.linear_layers(spec) if spec.has_linear_attention else 0
    return out + n_linear * (linear_attention.gdn_params(spec) - attention_params(spec))


def total_params(spec: TransformerSpec) -> int:
    """Every parameter of the main model (no MTP modules): layers, embedding, output
    projection, final norm."""
    return (
        _layers_params(spec, active=False)
        + spec.embedding_params()
        + spec.output_params()
        + spec.norm_params
    )


def active_params(spec: TransformerSpec, include_embedding: bool = True) -> int:
    """Parameters one token uses in the main model: each layer's attention and dense MLP,
    or its router, top-k routed and shared experts; the output head and final norm; and
    the input embedding unless ``include_embedding`` is false (a lookup, not a matmul:
    OpenAI's GPT-OSS card counts active parameters without it)."""
    head = spec.vocab * spec.hidden
    if include_embedding:
        embeddings = spec.embedding_params() + spec.output_params()
    else:
        embeddings = head
    return _layers_params(spec, active=True) + embeddings + spec.norm_params


def _mtp_layer_is_moe(spec: TransformerSpec) -> bool:
    """An MTP module's transformer layer is like the main model's last (Megatron-LM)."""
    return moe_layer_pattern(spec)[-1]


def mtp_module_params(spec: TransformerSpec, active: bool = False) -> int:
    """One MTP module: two input norms, the 2h -> h projection, one transformer layer and
    a final norm (the embedding and output head are the main model's)."""
    layer = moe_layer_params(spec, active) if _mtp_layer_is_moe(spec) else dense_layer_params(spec)
    return 3 * spec.norm_params + 2 * spec.hidden * spec.hidden + layer


def mtp_params(spec: TransformerSpec, active: bool = False) -> int:
    """All MTP modules (0 without MTP)."""
    return spec.mtp_layers * mtp_module_params(spec, active)


def training_params(spec: TransformerSpec) -> int:
    """What training holds: the main model and its MTP modules."""
    return spec.params() + mtp_params(spec)
