"""Gated DeltaNet's core measured on a GPU beside what models/expert.py prices it at.

Usage: python bench/gdn_kernels.py [--data DIR]

Reads the measurement of bench/device/gdn_kernels.py (DIR, default
bench/data/device/h200-2026-12-04-gdn: one H200 SXM, flash-linear-attention 0.4.0 on
Triton 3.6 and PyTorch 2.11; DIR/environment.txt) and prints:

1. Each piece of one Qwen3-Next layer's core between its projections (the convolution,
   the split with l2norm, heads repeated and gates, the chunked delta rule, the gated
   norm, and the whole chain) forward and forward + backward, at each micro-batch.
2. The line through the chain's two forward + backward times (1 x 4,096 and 4 x 4,096
   tokens): its fixed part per forward-equivalent and its per-token rate as a share of
   the catalog's bf16 peak, which models.expert takes as GDN_CORE_FIXED_S_PER_PASS and
   GDN_CORE_PEAK_SHARE (rounded as written there).
3. One layer's core at each micro-batch as models.expert prices it now
   (``gdn_chunk_per_microbatch_s``) and as it did before the measurement (the same FLOPs
   at the profile's attention rate, no fixed part).
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from catalog import load_catalog  # noqa: E402
from models import Layout  # noqa: E402
from models import linear_attention as la  # noqa: E402
from models.expert import ExpertLayout, gdn_chunk_per_microbatch_s  # noqa: E402
from models.zoo import moe_zoo  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "device" / "h200-2026-12-04-gdn"
MODEL = "qwen3-next-80b-a3b"
PASSES = 3.0  # forward + backward in forward-equivalents (models.expert)


def read(data: Path) -> dict[tuple[str, int], dict[str, float]]:
    """(piece, batch) -> its seq, ms and fb_ms."""
    with open(data / "gdn_kernels.csv") as fh:
        rows = [r for r in csv.DictReader(fh) if r["piece"] != "check"]
    keys = ("seq", "ms", "fb_ms")
    return {(r["piece"], int(r["batch"])): {k: float(r[k]) for k in keys} for r in rows}


def per_token_flops() -> float:
    """Megatron-LM's gdn_layer_flops terms of one token's forward: convolution and rule."""
    spec = moe_zoo()[MODEL]
    return la.gdn_conv_forward_per_token(spec) + la.gdn_chunk_forward_per_token(spec)


def line(rows: dict[tuple[str, int], dict[str, float]]) -> tuple[float, float]:
    """(fixed seconds per forward-equivalent, per-token rate as a share of the H200's bf16
    peak) of the chain's forward + backward through its two micro-batches."""
    (b1, one), (b4, four) = sorted((b, r) for (p, b), r in rows.items() if p == "core")
    t1, t4 = b1 * one["seq"], b4 * four["seq"]
    per_token_s = (four["fb_ms"] - one["fb_ms"]) / (t4 - t1) / 1e3
    fixed_s = one["fb_ms"] / 1e3 - per_token_s * t1
    flop_s = PASSES * per_token_flops() / per_token_s
    peak = load_catalog().gpu("h200").dense_bf16_tflops * 1e12
    return fixed_s / PASSES, flop_s / peak


def priced_ms(batch: int, seq: int, gpu: str = "h200") -> tuple[float, float]:
    """(now, before) milliseconds of one layer's core, forward + backward, at ``batch`` x
    ``seq`` tokens on the catalog's ``gpu``: gdn_chunk_per_microbatch_s of one rank of one
    linear layer; before, its FLOPs at the profile's attention rate."""
    spec, g = moe_zoo()[MODEL], load_catalog().gpu(gpu)
    layout = Layout(tp=1, pp=1, dp=1, micro_batch=batch, global_batch=batch)
    layers = 1.0 / la.linear_share(spec)  # one linear layer's share
    now = gdn_chunk_per_microbatch_s(spec, layout, seq, g, ExpertLayout(), layers)
    rate = g.dense_bf16_tflops * 1e12 * g.calibration.attention_efficiency
    before = batch * seq * PASSES * per_token_flops() / rate
    return now * 1e3, before * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA)
    args = ap.parse_args()
    print((args.data / "environment.txt").read_text().strip())
    rows = read(args.data)
    print("\none Qwen3-Next Gated DeltaNet layer's core, ms (forward; forward + backward):")
    for (piece, batch), r in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        print(f"  {piece:11s} {batch} x {r['seq']:.0f}: {r['ms']:7.3f}; {r['fb_ms']:7.3f}")
    fixed_s, share = line(rows)
    print(
        f"\nthe line through the chain's two points: {fixed_s * 1e3:.3f} ms fixed per"
        f" forward-equivalent, per token {share:.4f} of the bf16 peak"
        " (GDN_CORE_FIXED_S_PER_PASS, GDN_CORE_PEAK_SHARE)"
    )
    print("\none layer's core forward + backward, ms: measured; priced now; priced before")
    for (piece, batch), r in sorted(rows.items()):
        if piece == "core":
            now, before = priced_ms(batch, int(r["seq"]))
            print(f"  {batch} x {r['seq']:.0f}: {r['fb_ms']:.3f}; {now:.3f}; {before:.3f}")


if __name__ == "__main__":
    main()
