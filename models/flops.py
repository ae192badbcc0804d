"""Floating-point work of training.

Sources:
- seed E1 / Kaplan et al. 2020: training FLOPs ~= 6 x parameters x tokens.
- Narayanan et al., "Efficient Large-Scale Language Model Training on GPU
  Clusters Using Megatron-LM" (SC'21), appendix: per iteration
  72*B*s*L*h^2*(1 + s/(6h) + V/(12*L*h)) model FLOPs for a GPT layer, which is
  3 x the forward pass of 2 FLOPs per multiply-add: per token and layer
  2 x (layer matmul weights) + 4*s*h for the attention scores and values, plus
  2*V*h for the logits. Written here per token from the actual matrix sizes so
  that GQA, gated MLPs and a query width other than h are counted exactly (the
  scores and values are 4*s x heads x head_dim: Megatron-LM's query_projection_size,
  h when head_dim is h / heads); it equals the paper's formula for its architecture. Recomputation adds one forward of the layers (full) or of
  the attention scores and values (selective, Korthikanti et al. 2022).
"""

from __future__ import annotations

from models import linear_attention as la
from models import moe
from models.transformer import TransformerSpec


def training_flops_6nd(params: float, tokens: float) -> float:
    """Seed E1: 6 x parameters x tokens (2 forward + 4 backward)."""
    return 6.0 * params * tokens


def layer_forward_flops_per_token(spec: TransformerSpec, seq_len: int) -> float:
    """One layer's forward FLOPs per token: matmuls plus attention scores and values."""
    return 2.0 * spec.layer_matmul_params() + attention_forward_flops_per_token(spec, seq_len)


def attention_forward_flops_per_token(spec: TransformerSpec, seq_len: int) -> float:
    """Q K^T and A V: 2 x 2*s*q FLOPs per token over the full, unmasked square (Narayanan et
    al. SC'21), q the query width heads x head_dim (Megatron-LM training.py
    ``transformer_flops``: ``query_projection_size``; models.expert's
    attention_core_forward_per_token). It is 4*s*h when head_dim is h / heads, as in
    every dense zoo model; until 2026-12-05 it was 4*s*h for any head_dim (Qwen3-32B, 64
    heads of 128 over h 5,120: 5/8 of its scores and values)."""
    return 4.0 * seq_len * spec.q_width


def attention_core_forward_per_token(spec: TransformerSpec, seq_len: int) -> float:
    """Q K^T and A V over the full square (the planner's convention): 2 s x (query-key
    width + value width), multi-head latent attention's widths where used; 4 s x heads x
    head_dim for grouped-query heads, as attention_forward_flops_per_token (models.expert
    prices a MoE / MLA model's attention with it)."""
    if spec.is_mla:
        assert spec.qk_head_dim and spec.qk_rope_head_dim and spec.v_head_dim
        qk = spec.heads * (spec.qk_head_dim + spec.qk_rope_head_dim)
        return 2.0 * seq_len * (qk + spec.heads * spec.v_head_dim)
    return 4.0 * seq_len * spec.q_width


def attention_core_causal_forward_per_token(spec: TransformerSpec, seq_len: int) -> float:
    """The attention core's FLOPs that run per token and layer, the mean over the layers:
    the causal half of ``attention_core_forward_per_token`` (FlashAttention skips the
    masked blocks, as models/step.py prices it) on the full-attention layers only (linear
    attention's layers have no s x s core: models.linear_attention)."""
    return 0.5 * attention_core_forward_per_token(spec, seq_len) * (1.0 - la.linear_share(spec))


def logit_forward_flops_per_token(spec: TransformerSpec) -> float:
    return 2.0 * spec.vocab * spec.hidden


def model_flops_per_token(spec: TransformerSpec, seq_len: int) -> float:
    """Forward + backward (3 x forward) model FLOPs per token, no recomputation."""
    fwd = spec.layers * layer_forward_flops_per_token(
        spec, seq_len
    ) + logit_forward_flops_per_token(spec)
    return 3.0 * fwd


def recompute_flops_per_token(spec: TransformerSpec, seq_len: int, recompute: str) -> float:
    """Extra forward work of activation recomputation, per token."""
    if recompute == "full":
        return spec.layers * layer_forward_flops_per_token(spec, seq_len)
    if recompute == "selective":
        return spec.layers * attention_forward_flops_per_token(spec, seq_len)
    return 0.0


def megatron_flops_per_iteration(spec: TransformerSpec, batch: int, seq_len: int) -> float:
    """Narayanan et al. (SC'21) closed form without recomputation, for GPT-shaped layers."""
    s, h, L, V = seq_len, spec.hidden, spec.layers, spec.vocab
    return 72.0 * batch * s * L * h * h * (1 + s / (6 * h) + V / (12 * L * h))


# ------------------------------------------------------------------ mixture-of-experts


def moe_flops_terms_per_token(spec: TransformerSpec, seq_len: int) -> dict[str, float]:
    """Training (forward + backward, 3 x forward) model FLOPs per token, term by term, as
    Megatron-LM's ``num_floating_point_operations`` counts them (megatron/training/
    training.py, ``transformer_flops``, at commit 000c4ac24f61159c138b0975def722c65245983c):

    - every GEMM costs 2 FLOPs per multiply-add, three times (forward, weight gradient,
      data gradient): 6 x its weights per token;
    - MLP: the dense layers' FFN, and per MoE layer the top-k routed experts and the
      shared experts (``expert_ffn_hidden``, ``shared_experts x shared_expert_ffn_hidden``),
      gated MLPs 3 matrices, plain 2;
    - MTP modules (``mtp_layers``) add that many transformer layers, MoE when the main
      model's last layer is, their norms and 2h x h projection (Megatron counts
      6 x (3h + 2h^2) each) and one more output-layer pass each;
    - attention projections: Q, K, V and output for multi-head / grouped-query attention;
      for MLA the q and kv down- and up-projections (with Megatron's +1 per latent rank
      for the latent norms), the rotary key projection h x rope and the output;
    - core attention: Q K^T and A V over the causal half of the s x s scores, 6 x
      (s x Q width / 2 + s x V width / 2) per token and layer (at this commit Megatron
      halves the square; the dense planner's ``model_flops_per_token`` counts the full
      square of Narayanan et al. SC'21 and is unchanged);
    - logits: 6 x h x vocab per pass;
    - Gated DeltaNet layers (``full_attention_every`` > 1, models/linear_attention.py) as
      Megatron-LM's ``gdn_layer_flops`` at d98e8a64dd counts them: their projections in
      ``attention_projections``, no attention core, and the terms ``gdn_conv`` and
      ``gdn_chunk``; a gated attention's output gate (``attention_output_gate``: h x
      heads x head_dim more query projection, Megatron's ``gate_projection_size``) is
      ``attention_output_gate``.

    ``router`` (6 x h x experts per MoE layer) is reported but not in ``megatron`` (the
    commit leaves it out); ``total`` includes it. Biases and norms other than MTP's are
    not counted (nor does Megatron count them).
    """
    h, s = spec.hidden, seq_len
    m = spec.mlp_matrices
    pattern = moe.moe_layer_pattern(spec)
    mtp = spec.mtp_layers
    last_moe = bool(pattern[-1])
    moe_n = sum(pattern) + (mtp if last_moe else 0)
    dense_n = spec.layers - sum(pattern) + (0 if last_moe else mtp)
    n_layers = spec.layers + mtp
    k = spec.experts_per_token or 0
    if spec.is_mla:
        assert spec.kv_lora_rank and spec.qk_head_dim and spec.qk_rope_head_dim
        assert spec.v_head_dim
        qk = spec.heads * (spec.qk_head_dim + spec.qk_rope_head_dim)
        v = spec.heads * spec.v_head_dim
        q_term = h * qk if spec.q_lora_rank is None else spec.q_lora_rank * (h + qk + 1)
        kv_term = spec.kv_lora_rank * (h + spec.heads * (spec.qk_head_dim + spec.v_head_dim) + 1)
        projections = q_term + kv_term + h * spec.qk_rope_head_dim + v * h
        core = s * qk / 2 + s * v / 2
    else:
        kv_width = spec.kv * spec.head_dim
        projections = 2 * h * spec.q_width + 2 * h * kv_width
        core = s * spec.q_width  # (s x q / 2) for the scores and (s x q / 2) for A V
    n_linear = la.linear_layers(spec) if spec.has_linear_attention else 0
    n_full = n_layers - n_linear
    terms = {
        "dense_mlp": 6.0 * dense_n * m * h * spec.ffn,
        "routed_experts": 6.0 * moe_n * k * m * h * spec.expert_ffn,
        "shared_experts": 6.0 * moe_n * spec.shared_experts * m * h * spec.shared_expert_ffn,
        "attention_projections": 6.0 * (n_full * projections)
        + 6.0 * n_linear * la.gdn_projection_params(spec),
        "attention_core": 6.0 * n_full * core,
        "attention_output_gate": 3.0 * n_full * la.output_gate_params(spec) * 2,
        "gdn_conv": 3.0 * n_linear * la.gdn_conv_forward_per_token(spec),
        "gdn_chunk": 3.0 * n_linear * la.gdn_chunk_forward_per_token(spec),
        "mtp_projection": 6.0 * mtp * (3 * h + 2 * h * h),
        "logits": 6.0 * h * spec.vocab * (mtp + 1),
        "router": 6.0 * moe_n * h * (spec.experts or 0),
    }
    terms["megatron"] = sum(v for key, v in terms.items() if key != "router")
    terms["total"] = terms["megatron"] + terms["router"]
    return terms


def moe_model_flops_per_token(spec: TransformerSpec, seq_len: int) -> float:
    """Training model FLOPs per token of a MoE / MLA / MTP model (or a dense one), router
    included: ``moe_flops_terms_per_token(...)["total"]``."""
    return moe_flops_terms_per_token(spec, seq_len)["total"]
