"""Floating-point work of training.

Sources:
- seed E1 / Kaplan et al. 2020: training FLOPs ~= 6 x parameters x tokens.
- Narayanan et al., "Efficient Large-Scale Language Model Training on GPU
  Clusters Using Megatron-LM" (SC'21), appendix: per iteration
  72*B*s*L*h^2*(1 + s/(6h) + V/(12*L*h)) model FLOPs for a GPT layer, which is
  3 x the forward pass of 2 FLOPs per multiply-add: per token and layer
  2 x (layer matmul weights) + 4*s*h for the attention scores and values, plus
  2*V*h for the logits. Written here per token from the actual matrix sizes so
  that GQA and gated MLPs are counted exactly; it equals the paper's formula for
  its architecture. Recomputation adds one forward of the layers (full) or of
  the attention scores and values (selective, Korthikanti et al. 2022).
"""

from __future__ import annotations

from models.spec import TransformerSpec


def training_flops_6nd(params: float, tokens: float) -> float:
    """Seed E1: 6 x parameters x tokens (2 forward + 4 backward)."""
    return 6.0 * params * tokens


def layer_forward_flops_per_token(spec: TransformerSpec, seq_len: int) -> float:
    """One layer's forward FLOPs per token: matmuls plus attention scores and values."""
    return 2.0 * spec.layer_matmul_params() + attention_forward_flops_per_token(spec, seq_len)


def attention_forward_flops_per_token(spec: TransformerSpec, seq_len: int) -> float:
    """Q K^T and A V: 2 x 2*s*h FLOPs per token (Megatron counts the full, unmasked square)."""
    return 4.0 * seq_len * spec.hidden


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
