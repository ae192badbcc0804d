"""Predicted against measured Megatron iteration times (vTrain calibration set).

Usage: python bench/accuracy.py [--set multi|single|both] [--worst N] [--plot FILE.png] [--twins]
Prints the mean absolute percentage error, the worst rows and the error by
model size, GPU count and parallel layout; with --twins, the time ratios of
twin runs (designer.validation.twin_pairs), measured and predicted. Data and setting: designer/validation.py.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from catalog import load_catalog  # noqa: E402
from designer.validation import mape, predict, read_rows, twin_pairs  # noqa: E402


def group_report(title: str, preds, key) -> None:
    groups = defaultdict(list)
    for p in preds:
        groups[key(p.row)].append(p)
    print(f"  by {title}:")
    for k in sorted(groups):
        ps = groups[k]
        print(
            f"    {str(k):>14}: n={len(ps):4d}  MAPE {100 * mape(ps):5.1f}%  "
            f"worst {100 * max(abs(p.error) for p in ps):5.1f}%"
        )


def report(name: str, worst: int) -> float:
    preds = predict(read_rows(name), load_catalog())
    errors = [abs(p.error) for p in preds]
    print(
        f"{name}: {len(preds)} runs, MAPE {100 * mape(preds):.1f}%, median APE "
        f"{100 * statistics.median(errors):.1f}%, worst {100 * max(errors):.1f}%"
    )
    for p in sorted(preds, key=lambda p: -abs(p.error))[:worst]:
        r = p.row
        print(
            f"    worst: h={r.hidden} L={r.layers} s={r.seq_len} gpus={r.gpus} tp={r.tp} pp={r.pp} dp={r.dp} "
            f"mb={r.micro_batch} gb={r.global_batch}: measured {r.measured_ms:,.0f} ms, "
            f"predicted {p.predicted_ms:,.0f} ms ({100 * p.error:+.1f}%)"
        )
    if name == "multi":
        group_report("model size (B params)", preds, lambda r: r.params_b)
    else:
        group_report("hidden size", preds, lambda r: r.hidden)
    group_report("GPUs", preds, lambda r: r.gpus)
    group_report("tp/pp", preds, lambda r: f"tp{r.tp}/pp{r.pp}")
    return mape(preds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--set", choices=("multi", "single", "both"), default="both")
    parser.add_argument("--worst", type=int, default=3)
    parser.add_argument(
        "--plot", default=None, help="write a predicted-vs-measured scatter plot (PNG/SVG)"
    )
    parser.add_argument(
        "--twins", action="store_true", help="also compare twin runs (designer.validation)"
    )
    args = parser.parse_args()
    names = ("multi", "single") if args.set == "both" else (args.set,)
    for name in names:
        report(name, args.worst)
        if args.twins:
            twins_report(name)
    if args.plot:
        scatter(names, args.plot)


def twins_report(name: str) -> None:
    """Measured and predicted time ratios of twin runs (lower TP / higher TP)."""
    rows = read_rows(name)
    predicted = {id(p.row): p.predicted_ms for p in predict(rows, load_catalog())}
    pairs = twin_pairs(rows)
    print(f"  twins ({len(pairs)} pairs; same work and sends per GPU, lower TP first):")
    for lo, hi in sorted(pairs, key=lambda ab: -ab[0].measured_ms / ab[1].measured_ms):
        measured = lo.measured_ms / hi.measured_ms
        model = predicted[id(lo)] / predicted[id(hi)]
        print(
            f"    h={lo.hidden} pp={lo.pp} gb={lo.global_batch}: tp{lo.tp} mb{lo.micro_batch} "
            f"{lo.measured_ms:,.0f} ms / tp{hi.tp} mb{hi.micro_batch} {hi.measured_ms:,.0f} ms: "
            f"measured {measured:.2f}, predicted {model:.2f}"
        )


def scatter(names, path: str) -> None:
    """Predicted against measured iteration time, log-log, one colour per set."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    catalog = load_catalog()
    fig, ax = plt.subplots(figsize=(6, 6))
    lo, hi = float("inf"), 0.0
    for name, colour in zip(names, ("#4c72b0", "#dd8452"), strict=False):
        preds = predict(read_rows(name), catalog)
        xs = [p.row.measured_ms for p in preds]
        ys = [p.predicted_ms for p in preds]
        lo, hi = min(lo, *xs, *ys), max(hi, *xs, *ys)
        ax.scatter(
            xs, ys, s=8, alpha=0.6, color=colour, label=f"{name} (MAPE {100 * mape(preds):.1f}%)"
        )
    ax.plot([lo, hi], [lo, hi], color="grey", linewidth=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured iteration time (ms)")
    ax.set_ylabel("predicted iteration time (ms)")
    ax.set_title("vTrain A100 calibration set")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


if __name__ == "__main__":
    main()
