"""A lower bound on a (GPU, precisions) question's objective before its shapes exist.

optimize's alternatives (designer/alternatives.py) solve each pair the evidence rule kept
out, skipping those whose shapes' valid lower bounds cannot beat the answer; this bound,
read from the catalog and the question alone, lets a pair be skipped before its shapes
are enumerated (issue 34).

Time objective, MoE / MLA / MTP models (the ``moe_gemm_per_microbatch_s`` path): every
shape's GEMM bound (solvers.screen.bounds.gemm_lower_bound) is sequences x G f(b d) /
(b d) with d <= the most GPUs of the type / (TP CP PP) (dp_bounds), f >= 1
(models.batch_tokens.token_multiplier) and G the slowest pipeline rank's GEMM time, at
least the mean over the ranks. The ranks' work sums to b / (TP CP) times the work of
one sequence on one rank holding every layer (models.expert: a rank's FLOPs are its
tokens b s / (TP CP) times its layers' per-token FLOPs, and the ranks share the layers),
priced at no less than that one-rank layout's rates: TP 1 (the widest GEMMs: the
matmul efficiency eff_max w / (w + w_half) only falls with TP) and grouped-GEMM
efficiency 1 (it is m / (m + ...) <= 1). So G / b >= G_1 / (TP CP PP) with G_1 that
layout's GEMM time at the cheapest recompute mode and precision, and every shape's bound
is at least sequences x G_1 / (the most GPUs). Models with linear attention are not
bounded here (0): their chunk time's split over the ranks is not the layers' share.
"""

from __future__ import annotations

import math

from models.expert import ExpertLayout, moe_gemm_per_microbatch_s
from models.layout import Layout
from models.linear_attention import linear_share
from models.units import days_from_seconds
from solvers.screen.bounds import BoundTerms

RECOMPUTE_MODES = ("none", "selective", "full")
MARGIN = 1e-9  # relative: the shapes' bounds multiply the same terms in another order


def pair_lower_bound(terms: BoundTerms, gpu_name: str, precisions: tuple[str, ...]) -> float:
    """A value no plan of ``terms``' question on ``gpu_name`` in ``precisions`` beats, and
    at most every shape's GEMM bound (module docstring; tests/test_pair_bound.py): days
    under the time objective; 0 where it does not apply (the cost objective, a dense
    model, linear attention, cloud rental terms); inf when no GPU of the type fits."""
    s = terms.scenario
    spec = s.spec
    if s.objective != "time" or spec.is_dense or linear_share(spec) > 0:
        return 0.0
    most_gpus = terms.of(gpu_name).dp_limits[3]
    if most_gpus < 1:
        return math.inf
    gpu = s.catalog.gpu(gpu_name)
    runs = [p for p in precisions if gpu.peak_tflops(p) is not None]  # others have no shape
    if not runs:
        return math.inf
    ex = ExpertLayout(1, 1, grouped_gemm_half_tokens=0.0)  # grouped-GEMM efficiency 1
    one_rank = min(
        moe_gemm_per_microbatch_s(spec, _one_rank(p, rc), s.seq_len, gpu, ex)
        for p in runs
        for rc in RECOMPUTE_MODES
    )
    return days_from_seconds(s.sequences * one_rank / most_gpus) * (1 - MARGIN)


def _one_rank(precision: str, recompute: str) -> Layout:
    """One sequence on one GPU holding every layer (TP, CP, PP, DP and micro-batch 1)."""
    return Layout(1, 1, 1, 1, 1, recompute=recompute, precision=precision)
