"""The data cost of the batch size: tokens to train as a function of the global batch.

Sources:
- McCandlish, Kaplan, Amodei et al., "An Empirical Model of Large-Batch Training"
  (arXiv:1812.06162, 2018), section 2: the optimization steps S and training examples E
  that reach a given loss trade off as (S / S_min - 1)(E / E_min - 1) = 1, so that at
  batch B (E = B S) the examples needed are E(B) = E_min (1 + B / B_crit), with the
  critical batch B_crit = E_min / S_min (about the gradient noise scale). Training at
  B_crit takes 2 E_min examples and 2 S_min steps; above it, each doubling of the batch
  buys fewer saved steps for more examples.
- Bi et al. (DeepSeek-AI), "DeepSeek LLM: Scaling Open-Source Language Models with
  Longtermism" (arXiv:2401.02954, 2024), section 3.1: the near-optimal batch in
  tokens as a power law of the compute budget C in FLOPs, B_opt = 0.2920 C^0.3271 (fit
  from 1e17 to 3e20 FLOPs; their 7B and 67B runs, Table 2, took 2,304 and 4,608
  sequences of 4,096 tokens, within 3% of the fit: tests/test_batch_tokens.py).

The model here (``deepseek``, the default): the critical batch is DeepSeek's B_opt at
the question's compute C = 6 N D (seed E1, N the parameters a token uses: the active
ones of a mixture-of-experts model), and the question's ``tokens`` D is the data
needed at or below that batch. A plan at batch B needs D x max(1, (1 + B / B_crit) / 2)
tokens: McCandlish's E(B) normalised to 1 at B_crit, and no credit below it (the
question's data is not cut when a plan runs a smaller batch). The batch is counted in
whole sequences, and B_crit in whole sequences rounded down (at least one), so that the
float model and the CP-SAT model (solvers/cpsat/batch_tokens.py) read the same numbers.
``off``: the tokens do not depend on the batch (every release before issue 31).

Why DeepSeek's fit over Kaplan et al. 2020's B_crit(L) = B* / L^(1/alpha_B): Kaplan's
needs the loss in their tokenizer's nats, which a question does not carry (and a loss
model of its own); DeepSeek's needs only the compute a question fixes, was fit on a
modern decoder and data mix, and reproduces the batches its own 7B and 67B runs used.
"""

from __future__ import annotations

import math

from models.flops import training_flops_6nd
from models.moe import active_params
from models.transformer import TransformerSpec

MODELS = ("deepseek", "off")
DEFAULT_MODEL = "deepseek"
# DeepSeek LLM (Bi et al. 2024) section 3.1: B_opt = 0.2920 C^0.3271, tokens, C in FLOPs
DEEPSEEK_BATCH_COEF = 0.2920
DEEPSEEK_BATCH_EXPONENT = 0.3271
# the batch the model reaches before it refuses a plan, in critical batches: at 3 B_crit
# a plan needs twice the question's tokens. ASSUMPTION: past it McCandlish's hyperbola
# is an extrapolation no published run checks (README "Tokens that depend on the batch")
MAX_CRITICAL_BATCHES = 3.0


def deepseek_batch_tokens(compute_flops: float) -> float:
    """DeepSeek LLM's near-optimal batch in tokens at ``compute_flops`` (section 3.1)."""
    if compute_flops <= 0:
        raise ValueError("the compute budget must be positive")
    return DEEPSEEK_BATCH_COEF * compute_flops**DEEPSEEK_BATCH_EXPONENT


def token_params(spec: TransformerSpec) -> float:
    """The parameters one token uses (all of a dense model; a MoE model's active ones)."""
    if spec.is_dense:
        return float(spec.params())
    return float(active_params(spec))


def critical_batch_tokens(model: str, spec: TransformerSpec, tokens: float) -> float | None:
    """The critical batch in tokens for training ``spec`` on ``tokens`` (None: ``off``)."""
    if model == "off":
        return None
    if model != "deepseek":
        raise ValueError(f"unknown batch-tokens model {model!r}; one of {MODELS}")
    return deepseek_batch_tokens(training_flops_6nd(token_params(spec), tokens))


def critical_batch_sequences(critical_tokens: float, seq_len: int) -> int:
    """B_crit in whole sequences, rounded down, at least one."""
    return max(1, math.floor(critical_tokens / seq_len + 1e-9))


def token_multiplier(batch_sequences, critical_sequences: int | None):
    """Tokens needed at a batch of ``batch_sequences`` per question token:
    max(1, (1 + B / B_crit) / 2) (McCandlish et al.'s E(B) normalised at B_crit); 1 without
    a critical batch (None: the model off). Works on floats and numpy arrays alike."""
    if critical_sequences is None:
        return batch_sequences * 0 + 1.0
    ratio = (critical_sequences + batch_sequences) / (2.0 * critical_sequences)
    if hasattr(ratio, "clip"):
        return ratio.clip(min=1.0)
    return max(1.0, ratio)


def max_batch_tokens(critical_tokens: float, seq_len: int) -> float:
    """The largest batch the model admits, in tokens: MAX_CRITICAL_BATCHES critical batches
    (whole sequences, at least one)."""
    seqs = critical_batch_sequences(critical_tokens, seq_len)
    return float(max(1, math.floor(MAX_CRITICAL_BATCHES * seqs)) * seq_len)
