"""Predicted against measured step times on the calibration sets.

Usage: python bench/accuracy.py [--set multi|single|both|published|all] [--worst N]
                                [--plot FILE.png] [--twins] [--skipped] [--evidence]
vTrain (multi, single; 2022 Megatron on A100) under the vtrain-2022 profile:
the mean absolute percentage error, the worst rows and the error by model size,
GPU count and parallel layout; with --twins, the time ratios of twin runs
(calibration.vtrain.twin_pairs). Published runs (calibration/published.py) under
the megatron-core profile: the error per platform and precision, the worst rows,
and the rows that cannot be evaluated with their reasons (--skipped lists each).
--evidence prints the catalog's `measured:` blocks (catalog/data/gpus.yaml) that
these errors give; tests/test_accuracy.py checks the catalog against them.
--plot draws predicted against measured, one panel per platform and precision.
--baseline adds the constant-MFU baseline's MAPE beside designer's on every set
(bench/mfu_baseline.py: one efficiency per stack, GPU and precision, fitted on these sets).
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from calibration import published  # noqa: E402
from calibration.vtrain import mape, predict, read_rows, twin_pairs, vtrain_evidence
from catalog import load_catalog  # noqa: E402


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
    parser.add_argument(
        "--set", choices=("multi", "single", "both", "published", "all"), default="all"
    )
    parser.add_argument("--worst", type=int, default=3)
    parser.add_argument(
        "--plot", default=None, help="write a predicted-vs-measured scatter plot (PNG/SVG)"
    )
    parser.add_argument(
        "--twins", action="store_true", help="also compare twin runs (calibration.vtrain)"
    )
    parser.add_argument("--skipped", action="store_true", help="list every skipped row")
    parser.add_argument(
        "--evidence", action="store_true", help="print the catalog's measured: blocks"
    )
    parser.add_argument(
        "--write-catalog",
        action="store_true",
        help="with --evidence: write the blocks into catalog/data/gpus.yaml",
    )
    parser.add_argument(
        "--baseline", action="store_true", help="also the constant-MFU baseline's MAPE per set"
    )
    args = parser.parse_args()
    if args.baseline:
        baseline_report()
        return
    if args.evidence:
        blocks = evidence_blocks()
        if args.write_catalog:
            write_catalog_evidence(blocks)
        print(evidence_text(blocks), end="")
        return
    names = {
        "both": ("multi", "single"),
        "all": ("multi", "single"),
        "published": (),
    }.get(args.set, (args.set,))
    for name in names:
        report(name, args.worst)
        if args.twins:
            twins_report(name)
    if args.set in ("published", "all"):
        published_report(args.worst, args.skipped)
    if args.plot:
        scatter(names, args.plot, with_published=args.set in ("published", "all"))


def baseline_report() -> None:
    """designer's MAPE beside the fitted constant-MFU baseline's on every calibration set."""
    import mfu_baseline

    mfu_baseline.main()


def published_report(worst: int, list_skipped: bool) -> None:
    """Error per platform and precision on the published runs (megatron-core profile)."""
    catalog = load_catalog()
    runs, skipped = published.read_runs(catalog)
    preds = published.predict(runs, catalog)
    errors = [abs(p.error) for p in preds]
    print(
        f"published: {len(preds)} runs under {published.MODERN_STACK}, MAPE "
        f"{100 * mape(preds):.1f}%, median APE {100 * statistics.median(errors):.1f}%, "
        f"worst {100 * max(errors):.1f}%"
    )
    sections = (
        ("calibration set (published_runs.csv: the targets apply)", True),
        ("extra sources (extra_runs.csv)", False),
    )
    for title, shared in sections:
        subset = [p for p in preds if p.run.shared == shared]
        if not subset:
            continue
        print(f"  {title}:")
        for group, ps in sorted(published.by_group(subset).items()):
            print(
                f"    {group:>16}: n={len(ps):3d}  MAPE {100 * mape(ps):5.1f}%  "
                f"worst {100 * max(abs(p.error) for p in ps):5.1f}%  "
                f"mean signed {100 * sum(p.error for p in ps) / len(ps):+5.1f}%"
            )
    for p in sorted(preds, key=lambda p: -abs(p.error))[:worst]:
        lay = p.run.layout
        print(
            f"    worst: {p.run.name} (tp{lay.tp} pp{lay.pp} cp{lay.cp} vp{lay.vp} dp{lay.dp} "
            f"mb{lay.micro_batch} gb{lay.global_batch}): measured {p.run.measured_step_s:.2f} s, "
            f"predicted {p.predicted_step_s:.2f} s ({100 * p.error:+.1f}%)"
        )
    reasons = defaultdict(list)
    for s in skipped:
        reasons[s.reason].append(s)
    print(f"  not evaluated: {len(skipped)} rows")
    for reason, rows in sorted(reasons.items(), key=lambda kv: -len(kv[1])):
        print(f"    {len(rows):3d}  {reason}")
        if list_skipped:
            for s in rows:
                print(f"           {s.gpu}: {s.name}")


def evidence_blocks() -> dict[str, list[str]]:
    """Per GPU, the YAML lines of its catalog measured: block, from the calibration sets'
    errors."""
    catalog = load_catalog()
    by_gpu: dict[str, dict] = defaultdict(dict)
    for gpu, ev in published.published_evidence(catalog).items():
        by_gpu[gpu][published.MODERN_STACK] = ev
    gpu, stack, ev = vtrain_evidence(catalog)
    by_gpu[gpu][stack] = ev
    blocks = {}
    for gpu in sorted(by_gpu):
        lines = ["    measured:"]
        for stack, e in sorted(by_gpu[gpu].items()):
            lines.append(f"      {stack}:")
            for key, value in e.model_dump().items():
                if key == "releases" and not value:
                    continue
                if isinstance(value, str):
                    text = f'"{value}"'
                elif isinstance(value, tuple):
                    text = "[" + ", ".join(value) + "]"
                elif isinstance(value, dict):
                    text = _flow_mapping(value)
                else:
                    text = str(value)
                lines.append(f"        {key}: {text}")
        blocks[gpu] = lines
    return blocks


def _flow_mapping(value: dict) -> str:
    """A nested mapping of names to counts (or number pairs) as one YAML flow line, names
    quoted."""

    def flow(v) -> str:
        if isinstance(v, dict):
            return _flow_mapping(v)
        if isinstance(v, tuple | list):
            return "[" + ", ".join(str(x) for x in v) + "]"
        return str(v)

    return "{" + ", ".join(f'"{k}": {flow(v)}' for k, v in value.items()) + "}"


def evidence_text(blocks: dict[str, list[str]]) -> str:
    """The blocks as they sit under each GPU's entry in catalog/data/gpus.yaml."""
    return "".join(f"  {gpu}:\n" + "\n".join(lines) + "\n" for gpu, lines in blocks.items())


def write_catalog_evidence(blocks: dict[str, list[str]], key: str = "measured") -> None:
    """Replace (or add, before ``stacks:``) each GPU's ``key:`` block in
    catalog/data/gpus.yaml, in place: the block runs to the GPU's next key, so a
    ``measured_moe:`` block after ``measured:`` (bench/moe_accuracy.py) is kept."""
    path = Path(__file__).resolve().parent.parent / "catalog" / "data" / "gpus.yaml"
    doc = path.read_text(encoding="utf-8")
    for gpu, lines in blocks.items():
        entry = doc.index(f"\n  {gpu}:\n")
        stacks = doc.index("    stacks:\n", entry)
        old = doc.find(f"    {key}:\n", entry, stacks)
        start = end = stacks
        if old != -1:
            nxt = re.compile(r"^    \S", re.M).search(doc, old + 1)
            start, end = old, nxt.start() if nxt else stacks
        doc = doc[:start] + "\n".join(lines) + "\n" + doc[end:]
    path.write_text(doc, encoding="utf-8")


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


def scatter(names, path: str, with_published: bool = True) -> None:
    """Predicted against measured step time, log-log: one panel per vTrain set and per
    platform and precision of the published runs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter

    catalog = load_catalog()
    panels = []
    for name in names:
        preds = predict(read_rows(name), catalog)
        panels.append(
            (
                f"vTrain {name} (A100, vtrain-2022)",
                [p.row.measured_ms / 1e3 for p in preds],
                [p.predicted_ms / 1e3 for p in preds],
                mape(preds),
            )
        )
    if with_published:
        runs, _ = published.read_runs(catalog)
        for group, ps in sorted(published.by_group(published.predict(runs, catalog)).items()):
            panels.append(
                (
                    f"{group} (megatron-core)",
                    [p.run.measured_step_s for p in ps],
                    [p.predicted_step_s for p in ps],
                    mape(ps),
                )
            )
    cols = 3
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 4 * rows), squeeze=False)
    for ax, (title, xs, ys, err) in zip(axes.flat, panels, strict=False):
        lo, hi = min(*xs, *ys), max(*xs, *ys)
        ax.scatter(xs, ys, s=8, alpha=0.6, color="#4c72b0")
        ax.plot([lo, hi], [lo, hi], color="grey", linewidth=1)
        for factor in (0.9, 1.1):
            ax.plot([lo, hi], [lo * factor, hi * factor], color="grey", linewidth=0.5, ls="--")
        ax.set_xscale("log")
        ax.set_yscale("log")
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            axis.set_minor_formatter(NullFormatter())
            axis.set_major_formatter(FormatStrFormatter("%g"))
        ax.set_title(f"{title}\nn={len(xs)}, MAPE {100 * err:.1f}%", fontsize=9)
        ax.set_xlabel("measured step (s)")
        ax.set_ylabel("predicted step (s)")
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


if __name__ == "__main__":
    main()
