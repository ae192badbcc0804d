"""The MoE layer's kernels measured on a GPU beside what models/expert.py prices them at.

Usage: python bench/moe_kernels.py [--data DIR]

Reads the measurements of bench/device/moe_kernels.py and bench/device/moe_layer.py
(DIR, default bench/data/device/h200-2026-12-04: one H200 SXM, PyTorch 2.11 with CUDA
13.0 and cuDNN 9.19, driver 580.159; DIR/environment.txt; two more runs of the same day
beside it, ``-run1`` and ``-run2``) and prints, for the catalog's GPU of that name (h200:
the H100's megatron-core profile on 4.8 TB/s of HBM):

1. **Ceilings**: the measured 8,192-cube bf16 matmul and device copy against the
   catalog's peak and bandwidth.
2. **Grouped GEMMs**: each model's routed expert GEMMs (up- and down-projection,
   forward and backward, G local experts of m rows) as PyTorch's grouped GEMM ran them,
   in TFLOP/s, beside the rate the model prices them at: the profile's dense rate
   (bf16 peak x ``matmul_efficiency``) x ``grouped_gemm_efficiency``'s roofline at m rows
   (its weight-gradient accumulation term off: the measured backward writes a bf16
   gradient), and their ratio.
3. **Layer pieces** at one micro-batch's T tokens on one EP rank: the router, the
   permutation (gather and the gather-sum unpermute of fused kernels), the expert
   MLPs (grouped GEMMs and SwiGLU), forward and backward, beside the model's
   ``permute_hbm_passes`` and routed GEMM seconds, and the permutation read as HBM passes
   of the k-expanded tokens (``permute_hbm_passes`` is 8); last, the unfused
   permutation's passes in each of the day's runs and their median,
   models.expert.UNFUSED_PERMUTE_HBM_PASSES.
4. **Attention**: causal attention forward and backward, FlashAttention-2 and cuDNN's
   fused kernels, beside the profile's fitted attention rate and
   HOPPER_FUSED_ATTENTION_SPEEDUP.

The GPU's numbers are evidence, not a fit: nothing here changes the catalog.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from functools import cache
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from catalog import load_catalog  # noqa: E402
from models import Layout  # noqa: E402
from models.expert import (  # noqa: E402
    HOPPER_FUSED_ATTENTION_SPEEDUP,
    PERMUTE_HBM_PASSES,
    UNFUSED_PERMUTE_HBM_PASSES,
    ExpertLayout,
    _efficiency_at,
    grouped_terms,
    permute_per_microbatch_s,
    rank_layers,
    ridge,
)
from models.step import matmul_efficiency  # noqa: E402
from models.zoo import moe_zoo  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "device" / "h200-2026-12-04"
# the same scripts run three times on the lent GPU that day (run1 and run2 by the scripts
# before two refactors that changed no measurement; DATA by the scripts as committed)
RUNS = (DATA, DATA.with_name(DATA.name + "-run1"), DATA.with_name(DATA.name + "-run2"))
GPU = "h200"
STACK = "megatron-core"
EXPERT_ROWS = (512, 1024, 2048, 4096)  # the grouped-GEMM rows printed per model
LOCAL_EXPERTS = 16


def read(data: Path, name: str) -> list[dict[str, str]]:
    with open(data / name, newline="") as fh:
        return list(csv.DictReader(fh))


@cache
def gpu():
    """The catalog's GPU of the measurements, under STACK (read once)."""
    return load_catalog().with_stack(STACK).gpu(GPU)


@cache
def zoo():
    """The MoE zoo by name (read once)."""
    return moe_zoo()


def priced_permute_s(model: str, tokens: int, seq_len: int = 4096) -> float:
    """models.expert.permute_per_microbatch_s of one MoE layer at ``tokens`` tokens (the
    fused kernels' passes), on GPU: its rank's seconds over its MoE layers."""
    spec = zoo()[model]
    mbs = tokens // seq_len
    layout = Layout(tp=1, pp=1, dp=1, micro_batch=mbs, global_batch=mbs, recompute="none")
    layers = max(m for _, m in rank_layers(spec, layout))
    return permute_per_microbatch_s(spec, layout, seq_len, gpu(), ExpertLayout()) / layers


def dense_rate_tflops(hidden: int) -> float:
    """The profile's dense bf16 GEMM rate: peak x matmul_efficiency (TP 1)."""
    g = gpu()
    return g.dense_bf16_tflops * matmul_efficiency(g, hidden, 1)


def model_grouped_tflops(model: str, rows: float) -> float:
    """The rate the model prices a routed GEMM of ``rows`` rows per local expert at, forward
    and backward, with the bf16 weight gradient the device scripts write (no fp32
    accumulation: ``wgrad_accumulation_bytes`` None)."""
    spec = zoo()[model]
    layout = Layout(tp=1, pp=1, dp=1, micro_batch=1, global_batch=1, recompute="none")
    ex = ExpertLayout(wgrad_accumulation_bytes=None)
    terms = grouped_terms(spec, layout, 4096, ex)._replace(rows=float(rows))
    return dense_rate_tflops(spec.hidden) * _efficiency_at(terms, ridge(gpu(), "bf16"))


def ceilings(kernels: list[dict[str, str]]) -> dict[str, float]:
    g = gpu()
    out = {}
    for r in kernels:
        if r["model"] == "matmul-8192":
            out["tflops"] = float(r["tflops"])
        elif r["model"] == "copy-4GiB":
            out["tb_per_s"] = float(r["tb_per_s"])
    print(
        f"ceilings on {GPU}: bf16 matmul {out['tflops']:.0f} TFLOP/s "
        f"({out['tflops'] / g.dense_bf16_tflops:.0%} of the catalog's "
        f"{g.dense_bf16_tflops:.0f}); copy {out['tb_per_s']:.2f} TB/s "
        f"({out['tb_per_s'] / g.memory_bw_tb_per_s:.0%} of {g.memory_bw_tb_per_s})"
    )
    return out


def grouped_rates(kernels: list[dict[str, str]], g: int = LOCAL_EXPERTS) -> list[tuple]:
    """(model, m, measured TFLOP/s, model TFLOP/s) of the up- and down-projections
    together (FLOPs over the summed forward + backward times), grouped kind, g experts."""
    by_key: dict[tuple[str, int], list[dict[str, str]]] = {}
    for r in kernels:
        if r["kind"] == "grouped" and int(r["g"]) == g:
            by_key.setdefault((r["model"], int(r["m"])), []).append(r)
    out = []
    for (model, m), rs in sorted(by_key.items()):
        if model not in zoo() or len(rs) != 2:
            continue
        flops = sum(3 * 2.0 * g * m * int(r["k"]) * int(r["n"]) for r in rs)
        seconds = sum(float(r["fb_ms"]) for r in rs) / 1e3
        out.append((model, m, flops / seconds / 1e12, model_grouped_tflops(model, m)))
    return out


def report_grouped(rates: list[tuple]) -> None:
    print(
        f"\ngrouped GEMMs, {LOCAL_EXPERTS} local experts, forward + backward, TFLOP/s "
        "(measured / priced):"
    )
    for model in dict.fromkeys(r[0] for r in rates):
        cells = [
            f"m {m}: {meas:.0f} / {mod:.0f}"
            for mo, m, meas, mod in rates
            if mo == model and m in EXPERT_ROWS
        ]
        print(f"  {model:20s} " + "   ".join(cells))
    ratios = [mod / meas for _, m, meas, mod in rates if m >= 1024]
    print(
        f"  priced / measured at m >= 1,024: median {statistics.median(ratios):.2f} "
        f"(range {min(ratios):.2f}-{max(ratios):.2f})"
    )


def layer_rows(layer: list[dict[str, str]], tokens: int = 16384) -> dict[tuple, dict]:
    """(model, ep) -> {piece: forward + backward ms} at ``tokens`` tokens."""
    out: dict[tuple, dict] = {}
    for r in layer:
        if int(r["tokens"]) == tokens:
            key = (r["model"], int(r["ep"]))
            out.setdefault(key, dict(r))[r["piece"]] = float(r["fb_ms"])
    return out


def permute_passes(row: dict, unpermute: str, copy_tb_per_s: float) -> float:
    """The measured permutation forward and backward (``permute`` and the ``unpermute``
    piece: ``unpermute_scatter``, Megatron-Core's unfused scatter-add, or
    ``unpermute_gather``, the gather-sum of v0.9's and the fused kernels' order) in HBM
    passes over the k-expanded tokens at the measured copy rate."""
    one_pass = int(row["tokens"]) * int(row["k"]) * int(row["h"]) * 2
    seconds = (row["permute"] + row[unpermute]) / 1e3
    return seconds / (one_pass / (copy_tb_per_s * 1e12))


def unfused_passes(layer: list[dict[str, str]], tb_per_s: float) -> float:
    """The median over the measured models and EP degrees at 16,384 tokens of
    Megatron-Core's unfused permutation (index_select, and the scatter-add unpermute), in
    HBM passes at ``tb_per_s``, to one decimal: at the catalog's bandwidth (the unit
    models.expert prices passes in), models.expert.UNFUSED_PERMUTE_HBM_PASSES."""
    rows = layer_rows(layer).values()
    return round(
        statistics.median(permute_passes(r, "unpermute_scatter", tb_per_s) for r in rows), 1
    )


def report_layer(layer: list[dict[str, str]], copy_tb_per_s: float) -> None:
    g = gpu()
    print(
        "\none EP rank's MoE layer at 16,384 tokens, forward + backward, ms "
        "(measured; priced fused):"
    )
    print(
        f"  {'model':20s} {'ep':>3s} {'m':>6s}  {'router':>6s}  {'permute':>15s}  "
        f"{'experts':>15s}  {'layer':>6s}  passes unfused / gather"
    )
    for (model, ep), row in sorted(layer_rows(layer).items()):
        if model not in zoo():
            continue
        spec = zoo()[model]
        t, k, m = int(row["tokens"]), int(row["k"]), int(row["rows"])
        priced_permute = priced_permute_s(model, t)
        flops = 3 * 2.0 * t * k * spec.hidden * spec.expert_ffn * spec.mlp_matrices
        priced_experts = flops / (model_grouped_tflops(model, m) * 1e12)
        scatter = permute_passes(row, "unpermute_scatter", copy_tb_per_s)
        gather = permute_passes(row, "unpermute_gather", copy_tb_per_s)
        print(
            f"  {model:20s} {ep:3d} {m:6d}  {row['router']:6.2f}  "
            f"{row['permute'] + row['unpermute_scatter']:6.2f}; {priced_permute * 1e3:6.2f}  "
            f"{row['experts']:6.2f}; {priced_experts * 1e3:6.2f}  {row['layer']:6.2f}  "
            f"{scatter:5.1f} / {gather:5.1f}"
        )
    print(
        f"  Megatron-Core's unfused permutation (PyTorch's index_select and scatter-add): "
        f"median {unfused_passes(layer, g.memory_bw_tb_per_s)} HBM passes at the catalog's "
        f"{g.memory_bw_tb_per_s} TB/s (UNFUSED_PERMUTE_HBM_PASSES "
        f"{UNFUSED_PERMUTE_HBM_PASSES}), {unfused_passes(layer, copy_tb_per_s)} at the "
        f"measured copy rate; the fused kernels priced at PERMUTE_HBM_PASSES "
        f"{PERMUTE_HBM_PASSES:g}"
    )


def attention_rates(kernels: list[dict[str, str]]) -> dict[tuple[str, int], float]:
    """(backend, sequence) -> forward + backward TFLOP/s (causal FLOPs, 3.5 forwards)."""
    return {
        (r["model"], int(r["m"])): float(r["fb_tflops"])
        for r in kernels
        if r["kind"] == "attention"
    }


def report_attention(rates: dict[tuple[str, int], float]) -> list[float]:
    g = gpu()
    fitted = g.dense_bf16_tflops * g.calibration.attention_efficiency
    print("\ncausal attention, 2 x 32 heads of 128, forward + backward, TFLOP/s:")
    speedups = []
    for seq in sorted({s for _, s in rates}):
        fa2, cudnn = rates[("flash_attention", seq)], rates[("cudnn_attention", seq)]
        speedups.append(cudnn / fa2)
        print(
            f"  seq {seq:5d}: FlashAttention-2 {fa2:.0f}, cuDNN fused {cudnn:.0f} "
            f"(x{cudnn / fa2:.2f})"
        )
    print(
        f"  the profile's fitted attention rate {fitted:.0f}; "
        f"HOPPER_FUSED_ATTENTION_SPEEDUP {HOPPER_FUSED_ATTENTION_SPEEDUP}"
    )
    return speedups


def unfused_passes_over_runs(runs: tuple[Path, ...] = RUNS) -> tuple[list[float], float]:
    """Each run's ``unfused_passes`` at the catalog's bandwidth and their median:
    models.expert.UNFUSED_PERMUTE_HBM_PASSES."""
    bw = gpu().memory_bw_tb_per_s
    each = [unfused_passes(read(run, "moe_layer.csv"), bw) for run in runs]
    return each, statistics.median(each)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA)
    args = ap.parse_args()
    print((args.data / "environment.txt").read_text().strip())
    kernels = read(args.data, "moe_kernels.csv")
    top = ceilings(kernels)
    report_grouped(grouped_rates(kernels))
    report_layer(read(args.data, "moe_layer.csv"), top["tb_per_s"])
    report_attention(attention_rates(kernels))
    each, median = unfused_passes_over_runs()
    print(
        f"\nunfused permutation over the day's {len(each)} runs: "
        f"{', '.join(f'{p:g}' for p in each)} passes; median {median:g} "
        f"(UNFUSED_PERMUTE_HBM_PASSES {UNFUSED_PERMUTE_HBM_PASSES:g})"
    )


if __name__ == "__main__":
    main()
