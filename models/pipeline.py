"""Pipeline-parallel arithmetic: bubble, micro-batches in flight, stage counts.

Sources: Huang et al. 2019 (GPipe) and Narayanan et al. SC'21 (1F1B and the
interleaved schedule): bubble fraction (p-1)/(v*m); with 1F1B the first stage
holds p micro-batches. The seed article (E4) counts a simpler schedule in
which a micro-batch waits 2N-2 rounds and up to 2N-1 are held; the designer
models 1F1B, which holds N.
"""

from __future__ import annotations

import math


def bubble_fraction(pp: int, microbatches: float, vp: int = 1) -> float:
    """Idle fraction relative to the useful work: (p-1)/(v*m)."""
    return (pp - 1) / (vp * microbatches)


def in_flight_microbatches(pp: int, vp: int, num_microbatches: float) -> float:
    """Micro-batches whose activations the first stage holds at once (1F1B, interleaved).

    1F1B: min(p, m). Interleaved with v chunks: times 1 + (p-1)/(p*v)
    (Megatron-LM theoretical_memory_usage.py)."""
    if pp == 1:
        return 1.0
    held = min(float(pp), float(num_microbatches))
    if vp > 1:
        held *= 1.0 + (pp - 1) / (pp * vp)
    return held


def article_held_microbatches(stages: int) -> int:
    """Seed E4's count for its schedule: up to 2N-1 micro-batches held."""
    return 2 * stages - 1


def naive_recompute_layer_forwards(layers: int) -> int:
    """Seed E4: recomputing every layer's forward from the start for each backward
    step costs 1 + 2 + ... + L layer-forwards."""
    return layers * (layers + 1) // 2


def stages_needed(layers: int, layers_per_gpu: int, tp: int = 1) -> int:
    """Seed E7: stages when each GPU holds ``layers_per_gpu`` layers and a TP group of
    ``tp`` GPUs holds ``tp`` times as many."""
    return math.ceil(layers / (layers_per_gpu * tp))
