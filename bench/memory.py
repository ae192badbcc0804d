"""Predicted memory per GPU against Megatron-LM's published formulas and published runs.

Usage: python bench/memory.py [--published]
--published: the published runs (designer/published.py) that the memory model says
would not fit in their GPUs, although they ran, for 0, 1 and 2 bytes per parameter of
FP8 weight copies (Assumptions.fp8_weight_cache_bytes), and how many the planning
defaults' reserved memory and headroom (designer.questions) would refuse.
For the four GPT configurations of Korthikanti et al. 2022 ("Reducing
Activation Recomputation in Large Transformer Models", Table 3: 22B, 175B,
530B, 1T; sequence 2,048, TP 8) at micro-batch 1, prints models/memory.py's
weights + gradients + optimizer and activations of the most loaded GPU next to
Megatron-LM's own estimate (megatron/training/theoretical_memory_usage.py,
which implements the paper's Table 2), and the per-layer activation bytes of
Table 2 for the 175B model. Nothing here is fitted: this is an independent
check of the formulas. Known gaps, which the model leaves to explicit
assumptions (models.layout.Assumptions): Megatron keeps fp32 gradients (18
bytes per parameter, the seed's rule is 16: set grad_bytes=4), adds 5% to
activations for temporaries in its no-SP estimate, and neither counts the
CUDA context, NCCL buffers or allocator fragmentation (runtime_reserved_gb,
memory_overhead_fraction; `designer evaluate --reserved-gb --memory-overhead`).
No measured peak with its full configuration (sequence length, recomputation,
optimizer) was found in public material, so none is compared.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from models.layout import Assumptions, Layout  # noqa: E402
from models.memory import (  # noqa: E402
    activation_bytes_per_layer,
    logits_gb,
    model_state_gb,
    stage_activation_gb,
    stage_params,
)
from models.spec import TransformerSpec  # noqa: E402

SEQ = 2048
VOCAB = 51200
# name: (hidden, heads, layers, tp, pp), Korthikanti et al. 2022, Table 3
KORTHIKANTI = {
    "22B": (6144, 64, 48, 8, 1),
    "175B": (12288, 96, 96, 8, 8),
    "530B": (20480, 128, 105, 8, 35),
    "1T": (25600, 160, 128, 8, 64),
}


def gpt(name: str) -> TransformerSpec:
    h, a, L, _, _ = KORTHIKANTI[name]
    return TransformerSpec(
        name=f"gpt-{name}",
        layers=L,
        hidden=h,
        heads=a,
        vocab=VOCAB,
        seq_len=SEQ,
        tied_embeddings=True,
    )


def layout(name: str, micro_batch: int = 1) -> Layout:
    _, _, _, tp, pp = KORTHIKANTI[name]
    return Layout(
        tp=tp,
        pp=pp,
        dp=1,
        micro_batch=micro_batch,
        global_batch=micro_batch * 4 * pp,  # enough micro-batches to fill the pipeline
        recompute="selective",
        sequence_parallel=True,
        zero=0,
    )


def megatron_weight_and_optimizer_bytes(spec: TransformerSpec, tp: int, pp: int) -> float:
    """compute_weight_and_optimizer_memory: most loaded shard x 18 bytes (no distributed optimizer)."""
    h, L = spec.hidden, spec.layers
    layer = 2 * h * (spec.ffn + 2) + 2 * h * h * 2  # MLP + 2 LayerNorms + attention (no GQA)
    block = layer * L + 2 * h  # final LayerNorm
    embedding = h * spec.vocab
    shard = (block / pp + embedding) / tp
    return shard * 18


def megatron_activation_bytes(
    spec: TransformerSpec, tp: int, pp: int, micro_batch: int, microbatches: int
) -> float:
    """compute_activation_memory (sequence parallel + selective recomputation), first stage."""
    s, b, h = SEQ, micro_batch, spec.hidden
    act = s * b * h * (18 + 4 * spec.ffn / h) * spec.layers
    act += 8 * s * b * pp + s * b * h * pp  # embedding input and dropout, p in flight
    if pp > 1:
        act *= min(1, microbatches / pp)
    else:
        act += s * b * h * 4 * (1 + spec.vocab / h)  # output layer input and fp32 logits
    return act / tp


@dataclass(frozen=True)
class Comparison:
    name: str
    ours_states_gb: float
    megatron_states_gb: float
    ours_activations_gb: float
    megatron_activations_gb: float


def compare(name: str, micro_batch: int = 1) -> Comparison:
    spec, lay = gpt(name), layout(name, micro_batch)
    a = Assumptions(grad_bytes=4.0)  # Megatron's fp32 gradient buffer (18 bytes per parameter)
    # Megatron reports the first stage (embedding + p micro-batches in flight)
    w, g, o = model_state_gb(stage_params(spec, lay, "first"), lay, a)
    acts = stage_activation_gb(spec, lay, SEQ, "first") + logits_gb(spec, lay, SEQ, "first")
    states = w + g + o
    m = math.ceil(lay.grad_accum)
    return Comparison(
        name,
        states,
        megatron_weight_and_optimizer_bytes(spec, lay.tp, lay.pp) / 1e9,
        acts,
        megatron_activation_bytes(spec, lay.tp, lay.pp, micro_batch, m) / 1e9,
    )


def table2_per_layer(tp: int = 8, micro_batch: int = 1) -> dict[str, tuple[float, float]]:
    """Per-layer activation bytes of the 175B model: models.memory against Table 2."""
    spec = gpt("175B")
    s, b, h, a = SEQ, micro_batch, spec.hidden, spec.heads
    sbh = s * b * h
    attn = 5 * a * s / h
    cases = {
        "no parallelism": (1, False, "none", sbh * (34 + attn)),
        "tensor parallel": (tp, False, "none", sbh * (10 + 24 / tp + attn / tp)),
        "tensor + sequence parallel": (tp, True, "none", sbh * (34 + attn) / tp),
        "tensor parallel + selective": (tp, False, "selective", sbh * (10 + 24 / tp)),
        "tensor + sequence parallel + selective": (tp, True, "selective", sbh * 34 / tp),
        "full recompute": (tp, False, "full", 2 * sbh),
    }
    return {
        label: (activation_bytes_per_layer(spec, s, b, t, sp, rc), ref)
        for label, (t, sp, rc, ref) in cases.items()
    }


def main() -> None:
    print("Per-layer activations, 175B (s=2048, b=1, t=8), MB: models.memory vs Table 2")
    for label, (ours, ref) in table2_per_layer().items():
        print(f"  {label:40s} {ours / 1e6:9.1f} {ref / 1e6:9.1f}")
    print("\nMost loaded GPU, GB (micro-batch 1, SP + selective, 18 bytes/param):")
    print(f"  {'model':6s} {'states':>8s} {'Megatron':>9s} {'activations':>12s} {'Megatron':>9s}")
    for name in KORTHIKANTI:
        c = compare(name)
        print(
            f"  {c.name:6s} {c.ours_states_gb:8.2f} {c.megatron_states_gb:9.2f} "
            f"{c.ours_activations_gb:12.2f} {c.megatron_activations_gb:9.2f}"
        )


def published_check() -> None:
    from catalog import load_catalog
    from designer.published import MODERN_ASSUMPTIONS, read_runs, runs_over_memory

    catalog = load_catalog()
    runs, _ = read_runs(catalog)
    for cache in (0.0, 1.0, 2.0):
        a = MODERN_ASSUMPTIONS.model_copy(update={"fp8_weight_cache_bytes": cache})
        over = runs_over_memory(runs, catalog, a)
        print(
            f"fp8_weight_cache_bytes {cache:g}: {len(over)} of {len(runs)} runs predicted not to fit"
        )
        for run, gb, cap in over:
            print(f"    {run.name}: {gb:.0f} of {cap:.0f} GB")
    # the planning defaults (designer.questions): every run here ran, so a run the planner
    # refuses is a plan it would wrongly call infeasible (the price of the safety margin)
    from designer.questions import DEFAULT_HEADROOM, DEFAULT_RESERVED_GB

    print("\nreserved GB, headroom: runs that ran but are refused (planning default marked *)")
    for reserved, headroom in ((0.0, 0.0), (2.0, 0.05), (3.0, 0.0), (3.0, 0.05), (4.0, 0.1)):
        a = MODERN_ASSUMPTIONS.model_copy(
            update={"runtime_reserved_gb": reserved, "memory_headroom_fraction": headroom}
        )
        over = runs_over_memory(runs, catalog, a)
        mark = "*" if (reserved, headroom) == (DEFAULT_RESERVED_GB, DEFAULT_HEADROOM) else " "
        print(f"  {mark} {reserved:3g} GB, {headroom:4.0%}: {len(over)} of {len(runs)} refused")


if __name__ == "__main__":
    if "--published" in sys.argv[1:]:
        published_check()
    else:
        main()
