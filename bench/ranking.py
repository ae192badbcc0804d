"""Layout-ranking fidelity: does designer order layouts as the hardware did? (issue 35)

Usage: python bench/ranking.py [--groups] [--write-groups] [--write-confidence]

A group is a set of at least 3 measured runs of the same model on the same GPU type and
count, with the same global batch and sequence, that differ only in layout (TP, PP, CP,
VP, EP, micro-batch, recomputation). Groups are formed from the calibration and
independent sets already in the repo (bench/data/ranking/README.md lists the sources):

- vTrain multi-server (A100, 64-512 GPUs): per model, GPU count and global batch;
- vTrain single-server (A100, 1-8 GPUs): per model shape, GPU count and global batch;
- independent MoE runs (bench/data/published/moe_independent.csv): per model, GPU type and
  count, global batch, sequence, precision and source table (same commit);
- the published dense runs (bench/data/published): per model, GPU, precision, GPU count,
  batch and sequence (today no such group has 3 layouts: the rows are tuned recipes).

Each run is predicted by designer as the accuracy benchmarks do (calibration.vtrain for
vTrain under vtrain-2022, bench/moe_accuracy.py for the MoE rows, calibration.published for
the dense published rows, megatron-core) and by the constant-MFU baseline
(bench/mfu_baseline.py: one efficiency per stack, GPU and precision, fitted on the
calibration sets). Per group: Kendall's tau-b, top-1 regret, measured best in the top 3
(models/ranking.py states the tie rules: a constant-MFU predictor ties every layout of a
group, so its tau-b is 0, its regret the mean over the group and its top-3 rate
min(1, 3/n)).

--groups prints every group; --write-groups writes bench/data/ranking/groups.csv (the
members, their measured times and sources); --write-confidence writes
models/data/ranking_fidelity.yaml (the share of measured pairs designer orders right by
predicted margin, read by optimize --top K and explain).
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))
sys.path.insert(0, str(BENCH))

import mfu_baseline  # noqa: E402
import moe_accuracy  # noqa: E402

from calibration import published  # noqa: E402
from calibration.vtrain import VTRAIN_STACK, Row, predict, read_rows  # noqa: E402
from catalog import load_catalog  # noqa: E402
from catalog.catalog import Catalog  # noqa: E402
from models import flops  # noqa: E402
from models.evaluate import Hardware, evaluate  # noqa: E402
from models.layout import Layout  # noqa: E402
from models.ranking import (  # noqa: E402
    FIDELITY_FILE,
    best_in_top_k,
    kendall_tau_b,
    margin_bins,
    pair_margins,
    top1_regret,
)
from models.transformer import TransformerSpec  # noqa: E402
from models.zoo import moe_zoo  # noqa: E402

GROUPS_CSV = BENCH / "data" / "ranking" / "groups.csv"
SWEEPS_CSV = BENCH / "data" / "ranking" / "layout_sweeps.csv"
MIN_LAYOUTS = 3
MARGIN_EDGES = (0.0, 0.02, 0.05, 0.10, 0.20)
VTRAIN_URL = "https://github.com/VIA-Research/vTrain (bench/data/vtrain, MIT licence)"
VTRAIN_SOURCE = "vTrain (Bang et al., MICRO 2024) validation data, measured Megatron-LM on A100"
VTRAIN_ASSUMED = (
    "full recompute, 1F1B, no gradient bucketing, 800 Gb/s per server, vocabulary 50257 "
    "(bench/data/vtrain/README.md)"
)
COLUMNS = (
    "group", "set", "kind", "gpu", "precision", "num_gpus", "global_batch", "seq_len",
    "model", "layout", "measured_step_s", "source", "url", "date", "assumptions",
)  # fmt: skip


@dataclass(frozen=True)
class Member:
    """One measured layout of a group, with both predictions."""

    layout: str
    measured_s: float
    designer_s: float
    baseline_s: float
    source: str
    url: str
    date: str
    assumptions: str


@dataclass(frozen=True)
class Group:
    name: str
    set: str  # vtrain-multi, vtrain-single, moe-independent, published
    kind: str  # dense or moe
    gpu: str
    precision: str
    num_gpus: int
    global_batch: int
    seq_len: int
    model: str
    members: tuple[Member, ...]

    def column(self, attr: str) -> list[float]:
        return [getattr(m, attr) for m in self.members]


@dataclass(frozen=True)
class Scores:
    tau: float
    regret: float
    top3: float


def scores(group: Group, predictor: str) -> Scores:
    """The group's ranking metrics for ``predictor`` ('designer_s' or 'baseline_s')."""
    pred, meas = group.column(predictor), group.column("measured_s")
    return Scores(kendall_tau_b(pred, meas), top1_regret(pred, meas), best_in_top_k(pred, meas, 3))


# ------------------------------------------------------------------ vTrain groups
def _vtrain_layout(r: Row) -> str:
    return f"tp{r.tp} pp{r.pp} dp{r.dp} mb{r.micro_batch}"


def vtrain_groups(catalog: Catalog, name: str, eff: dict) -> list[Group]:
    """The vTrain set ``name`` (multi or single) grouped by model, GPUs and global batch."""
    peak = catalog.gpu(mfu_baseline.VTRAIN_GPU).peak_tflops("bf16") or 0.0
    key = (VTRAIN_STACK, mfu_baseline.VTRAIN_GPU, "bf16")
    by: dict[tuple, list] = defaultdict(list)
    for p in predict(read_rows(name), catalog):
        r = p.row
        by[(r.hidden, r.layers, r.heads, r.seq_len, r.gpus, r.global_batch)].append(p)
    out = []
    for (h, layers, heads, seq, gpus, gb), preds in sorted(by.items()):
        if len(preds) < MIN_LAYOUTS:
            continue
        members = tuple(
            Member(
                _vtrain_layout(p.row),
                p.row.measured_ms / 1e3,
                p.predicted_ms / 1e3,
                mfu_baseline.step_s(mfu_baseline.vtrain_flops(p.row), gpus, peak, eff[key]),
                VTRAIN_SOURCE,
                VTRAIN_URL,
                "2024",
                VTRAIN_ASSUMED,
            )  # fmt: skip
            for p in preds
        )
        model = f"gpt h{h} L{layers} a{heads}"
        out.append(
            Group(
                f"vtrain-{name} {model} {gpus}xA100 gb{gb}",
                f"vtrain-{name}",
                "dense",
                mfu_baseline.VTRAIN_GPU,
                "bf16",
                gpus,
                gb,
                seq,
                model,
                members,
            )  # fmt: skip
        )
    return out


# ------------------------------------------------------------------ MoE groups
def _moe_layout(row: dict[str, str]) -> str:
    parts = [f"{k}{row[k]}" for k in ("tp", "pp", "ep", "etp", "cp", "vp", "dp")]
    extra = f"mb{row['micro_batch']} rc:{row['recompute']} {row['dispatcher']}"
    return " ".join(parts) + f" {extra} overlap:{row['ep_overlap']} zero{row['zero']}"


def shared_profile_efficiency(catalog: Catalog, eff: dict, gpu: str, prec: str) -> float | None:
    """The constant-MFU efficiency of (stack, gpu, precision): its own fit, else the fit of a
    GPU with the same peak whose megatron-core profile this one reuses (the H800 keeps the
    H100's profile and peak: no dense calibration run is on it); None when neither exists.
    Inside a group the baseline's order does not depend on it (equal FLOPs tie every
    layout); it sets the baseline's printed step only."""
    key = (published.MODERN_STACK, gpu, prec)
    if key in eff:
        return eff[key]
    own = catalog.gpu(gpu)
    for (stack, other, p), e in sorted(eff.items()):
        if stack != published.MODERN_STACK or p != prec or other not in catalog.gpus:
            continue
        them = catalog.gpu(other)
        same_profile = them.stacks.get(stack) == own.stacks.get(stack) is not None
        if same_profile and them.peak_tflops(prec) == own.peak_tflops(prec):
            return e
    return None


def moe_groups(catalog: Catalog, eff: dict) -> list[Group]:
    """Scorable rows of moe_independent.csv from one source table, same model, GPUs, batch,
    sequence and precision; the baseline's efficiency is the GPU's own or that of the GPU
    whose profile it reuses (shared_profile_efficiency); a GPU with neither has no baseline
    to compare with, and its groups are left out."""
    scored, _ = moe_accuracy.score_independent(moe_accuracy.independent_rows())
    by: dict[tuple, list] = defaultdict(list)
    for row, pred, meas, _parts in scored:
        key = tuple(row[k] for k in ("model", "gpu", "num_gpus", "global_batch", "seq_len",
                                     "precision", "url"))  # fmt: skip
        by[key].append((row, pred, meas))
    out = []
    for (model, gpu, n, gb, seq, prec, _url), rows in sorted(by.items()):
        e = shared_profile_efficiency(catalog, eff, gpu, prec)
        if len(rows) < MIN_LAYOUTS or e is None:
            continue
        spec = moe_zoo()[model]
        model_flops = flops.moe_model_flops_per_token(spec, int(seq)) * int(gb) * int(seq)
        peak = catalog.gpu(gpu).peak_tflops(prec) or 0.0
        members = tuple(
            Member(
                _moe_layout(row),
                meas,
                pred,
                mfu_baseline.step_s(model_flops, int(n), peak, e),
                row["source"],
                row["url"],
                row["date"],
                row["notes"],
            )  # fmt: skip
            for row, pred, meas in rows
        )
        out.append(
            Group(
                f"moe {model} {n}x{gpu} gb{gb} s{seq} {prec}",
                "moe-independent",
                "moe",
                gpu,
                prec,
                int(n),
                int(gb),
                int(seq),
                model,
                members,
            )  # fmt: skip
        )
    return out


# ------------------------------------------------------------------ published dense groups
def _published_layout(run: published.PublishedRun) -> str:
    lay = run.layout
    return (f"tp{lay.tp} pp{lay.pp} cp{lay.cp} vp{lay.vp} dp{lay.dp} mb{lay.micro_batch} "
            f"rc:{lay.recompute}")  # fmt: skip


def published_groups(catalog: Catalog, eff: dict) -> list[Group]:
    """Dense published runs of one model on one GPU type, count, precision, batch and
    sequence with at least 3 layouts."""
    runs, _ = published.read_runs(catalog)
    by: dict[tuple, list] = defaultdict(list)
    for p in published.predict(runs, catalog):
        r, lay = p.run, p.run.layout
        s = r.spec
        key = (r.gpu, r.precision, s.layers, s.hidden, s.heads, r.seq_len, lay.num_gpus,
               lay.global_batch)  # fmt: skip
        by[key].append(p)
    out = []
    for (gpu, prec, layers, hidden, heads, seq, n, gb), preds in sorted(by.items()):
        if len({_published_layout(p.run) for p in preds}) < MIN_LAYOUTS:
            continue
        peak = catalog.gpu(gpu).peak_tflops(prec) or 0.0
        e = eff[(published.MODERN_STACK, gpu, prec)]
        members = tuple(
            Member(
                _published_layout(p.run),
                p.run.measured_step_s,
                p.predicted_step_s,
                mfu_baseline.step_s(mfu_baseline.published_flops(p.run), n, peak, e),
                p.run.source,
                "",
                "",
                "; ".join(p.run.assumed),
            )  # fmt: skip
            for p in preds
        )
        model = f"L{layers} h{hidden} a{heads}"
        out.append(Group(f"published {model} {n}x{gpu} gb{gb} {prec}", "published", "dense",
                         gpu, prec, n, gb, seq, model, members))  # fmt: skip
    return out


# ------------------------------------------------------------------ layout sweeps
def sweep_rows(path: Path = SWEEPS_CSV) -> list[dict[str, str]]:
    """The transcribed layout sweeps (bench/data/ranking/layout_sweeps.csv)."""
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def sweep_spec(row: dict[str, str]) -> TransformerSpec:
    """The row's model, from its published configuration (the row's columns)."""
    num = {k: int(row[k]) for k in ("layers", "hidden", "heads", "kv_heads", "head_dim",
                                    "ffn_hidden", "vocab", "seq_len")}  # fmt: skip
    return TransformerSpec(
        name=row["model"].replace(" ", "-"),
        gated_mlp=row["gated_mlp"] == "yes",
        tied_embeddings=row["tied_embeddings"] == "yes",
        position_embedding=row["position_embedding"],  # type: ignore[arg-type]
        normalization=row["normalization"],  # type: ignore[arg-type]
        linear_bias=row["linear_bias"] == "yes",
        **num,
    )


def sweep_layout(row: dict[str, str]) -> Layout:
    """Megatron terms of a sweep row: DP = FSDP shards x replicas (HSDP), global batch =
    local batch x DP, ZeRO stage as given (3 for FSDP2)."""
    dp = int(row["dp_shard"]) * int(row["dp_replicate"])
    return Layout(
        tp=int(row["tp"]),
        pp=int(row["pp"]),
        dp=dp,
        cp=int(row["cp"]),
        micro_batch=int(row["micro_batch"]),
        global_batch=int(row["local_batch"]) * dp,
        recompute=row["recompute"],
        zero=int(row["zero"]),
        precision=row["precision"],
    )


def _sweep_layout_name(row: dict[str, str]) -> str:
    return (f"tp{row['tp']} pp{row['pp']} cp{row['cp']} fsdp{row['dp_shard']} "
            f"rep{row['dp_replicate']} lb{row['local_batch']} mb{row['micro_batch']} "
            f"rc:{row['recompute']} zero{row['zero']}")  # fmt: skip


FSDP_STACK = "pytorch-fsdp2"


def sweep_stack(row: dict[str, str]) -> str:
    """The stack profile a sweep row is predicted under: pytorch-fsdp2 for its FSDP2 rows
    (ZeRO-3: torchtitan's), megatron-core for the others (DDP and TE rows)."""
    return FSDP_STACK if int(row["zero"]) >= 3 else published.MODERN_STACK


def sweep_step_s(row: dict[str, str], catalog: Catalog) -> tuple[float, float, int]:
    """Measured and designer's step time of a sweep row, and its tokens per step. The
    measured time is tokens / (tokens/s per GPU x GPUs); a row with TFLOP/s per GPU only
    is turned into tokens/s with designer's model FLOPs per token (the group shares it)."""
    spec, layout = sweep_spec(row), sweep_layout(row)
    seq, n = int(row["seq_len"]), int(row["num_gpus"])
    tokens = layout.global_batch * seq
    rate = float(row["tokens_per_s_per_gpu"] or 0.0)
    if not rate:
        rate = float(row["tflops_per_gpu"]) * 1e12 / flops.model_flops_per_token(spec, seq)
    gpu, nic, nics = published.GPU_NAMES[row["gpu"]]
    cat = catalog.with_stack(sweep_stack(row))
    hw = Hardware.from_catalog(cat, gpu, nic, nics)
    ev = evaluate(spec, hw, layout, seq, assumptions=published.MODERN_ASSUMPTIONS)
    return tokens / (rate * n), ev.step_time_s, tokens


def _sweep_group(rows: list[dict[str, str]], catalog: Catalog, eff: dict) -> Group:
    """One sweep group. Its members differ in global batch, so each member's measured and
    predicted times are scaled to the first member's tokens per step (time per token)."""
    first = rows[0]
    gpu, prec = published.GPU_NAMES[first["gpu"]][0], first["precision"]
    seq, n = int(first["seq_len"]), int(first["num_gpus"])
    timed = [(row, *sweep_step_s(row, catalog)) for row in rows]
    ref_tokens = timed[0][3]
    peak = catalog.gpu(gpu).peak_tflops(prec) or 0.0
    # no calibration fit on this GPU and precision: any one efficiency ties the group alike
    e = eff.get((published.MODERN_STACK, gpu, prec), statistics.median(eff.values()))
    base = mfu_baseline.step_s(flops.model_flops_per_token(sweep_spec(first), seq) * ref_tokens,
                               n, peak, e)  # fmt: skip
    members = tuple(
        Member(
            _sweep_layout_name(row),
            meas * ref_tokens / tokens,
            pred * ref_tokens / tokens,
            base,
            row["source"],
            row["url"],
            row["date"],
            f"{row['assumptions']}; time per step of {ref_tokens} tokens (per-token comparison)",
        )  # fmt: skip
        for row, meas, pred, tokens in timed
    )
    gb = ref_tokens // seq
    name = f"sweep {first['model']} {n}x{gpu} s{seq} {prec} ({first['variant']})"
    return Group(name, "sweeps", "dense", gpu, prec, n, gb, seq, first["model"], members)


def sweep_groups(catalog: Catalog, eff: dict, path: Path = SWEEPS_CSV) -> list[Group]:
    """Rows of layout_sweeps.csv with equal model, GPU type and count, sequence,
    precision, software variant and source URL, at least MIN_LAYOUTS of them."""
    by: dict[tuple, list[dict[str, str]]] = defaultdict(list)
    for row in sweep_rows(path):
        key = tuple(row[k] for k in ("model", "gpu", "num_gpus", "seq_len", "precision",
                                     "variant", "url"))  # fmt: skip
        by[key].append(row)
    return [_sweep_group(rows, catalog, eff) for _key, rows in sorted(by.items())
            if len({_sweep_layout_name(r) for r in rows}) >= MIN_LAYOUTS]  # fmt: skip


def all_groups(catalog: Catalog | None = None) -> list[Group]:
    catalog = catalog or load_catalog()
    eff = mfu_baseline.fit(mfu_baseline.calibration_samples(catalog))
    return [
        *vtrain_groups(catalog, "multi", eff),
        *vtrain_groups(catalog, "single", eff),
        *moe_groups(catalog, eff),
        *published_groups(catalog, eff),
        *sweep_groups(catalog, eff),
    ]


# ------------------------------------------------------------------ reports
def summary(groups: Sequence[Group], predictor: str) -> dict[str, float]:
    """Median tau-b, median top-1 regret, mean top-3 rate (the fraction of groups whose
    measured best is in the top 3, expected under ties) and the mean regret."""
    sc = [scores(g, predictor) for g in groups]
    return {
        "groups": len(sc),
        "tau_median": statistics.median(s.tau for s in sc),
        "regret_median": statistics.median(s.regret for s in sc),
        "regret_mean": statistics.mean(s.regret for s in sc),
        "top3_rate": statistics.mean(s.top3 for s in sc),
    }


def _line(label: str, groups: Sequence[Group]) -> Iterable[str]:
    for predictor, name in (("designer_s", "designer"), ("baseline_s", "constant-MFU")):
        s = summary(groups, predictor)
        yield (f"  {label:18} {name:13} groups {s['groups']:3d}  tau-b median "
               f"{s['tau_median']:+.2f}  regret median {100 * s['regret_median']:5.1f}% "
               f"(mean {100 * s['regret_mean']:5.1f}%)  best in top 3 "
               f"{100 * s['top3_rate']:5.1f}%")  # fmt: skip


def report(groups: Sequence[Group], show_groups: bool) -> None:
    gpus = sorted({g.gpu for g in groups})
    kinds = sorted({g.kind for g in groups})
    print(f"{len(groups)} groups of >= {MIN_LAYOUTS} measured layouts, "
          f"{sum(len(g.members) for g in groups)} runs; GPUs {', '.join(gpus)}; "
          f"{' and '.join(kinds)}")  # fmt: skip
    sets: dict[str, list[Group]] = defaultdict(list)
    for g in groups:
        sets[g.set].append(g)
    for name, gs in sorted(sets.items()):
        print("\n".join(_line(name, gs)))
    for gpu in gpus:
        print("\n".join(_line(f"on {gpu}", [g for g in groups if g.gpu == gpu])))
    print("\n".join(_line("all groups", groups)))
    if show_groups:
        for g in groups:
            d, b = scores(g, "designer_s"), scores(g, "baseline_s")
            print(f"  {g.name}: n={len(g.members)} designer tau {d.tau:+.2f} regret "
                  f"{100 * d.regret:.1f}% top3 {d.top3:.2f} | baseline tau {b.tau:+.2f} "
                  f"regret {100 * b.regret:.1f}%")  # fmt: skip
            for m in sorted(g.members, key=lambda m: m.measured_s):
                print(f"      {m.layout:60} measured {m.measured_s:9.3f} s  designer "
                      f"{m.designer_s:9.3f} s")  # fmt: skip


def confidence_bins(groups: Sequence[Group]):
    margins = [mp for g in groups for mp in pair_margins(g.column("designer_s"),
                                                         g.column("measured_s"))]  # fmt: skip
    return margin_bins(margins, MARGIN_EDGES)


def write_confidence(groups: Sequence[Group], path: Path = FIDELITY_FILE) -> None:
    bins = confidence_bins(groups)
    lines = [
        "# Share of measured layout pairs (same model, GPUs and batch) that designer orders",
        "# as measured, by the predicted margin between them (slower / faster - 1).",
        "# Written by: python bench/ranking.py --write-confidence (do not edit by hand).",
        "source: python bench/ranking.py --write-confidence "
        f"({len(groups)} groups, {sum(b.pairs for b in bins)} pairs)",
        "bins:",
    ]
    for b in bins:
        high = "null" if b.high == float("inf") else f"{b.high}"
        lines.append(f"  - {{low: {b.low}, high: {high}, pairs: {b.pairs}, "
                     f"ordered_right: {b.ordered_right:.3f}}}")  # fmt: skip
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def group_rows(groups: Sequence[Group]) -> list[dict[str, str]]:
    """The CSV rows of bench/data/ranking/groups.csv: one per member."""
    rows = []
    for g in groups:
        for m in g.members:
            values = (g.name, g.set, g.kind, g.gpu, g.precision, g.num_gpus, g.global_batch,
                      g.seq_len, g.model, m.layout, f"{m.measured_s:.6g}", m.source, m.url,
                      m.date, m.assumptions)  # fmt: skip
            rows.append(dict(zip(COLUMNS, map(str, values), strict=True)))
    return rows


def write_groups(groups: Sequence[Group], path: Path = GROUPS_CSV) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(group_rows(groups))


def main(argv: Sequence[str] | None = None, out: Callable[[str], None] = print) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--groups", action="store_true", help="print every group")
    parser.add_argument("--write-groups", action="store_true", help=f"write {GROUPS_CSV.name}")
    parser.add_argument("--write-confidence", action="store_true",
                        help="write models/data/ranking_fidelity.yaml")  # fmt: skip
    args = parser.parse_args(argv)
    groups = all_groups()
    report(groups, args.groups)
    print("  pairs ordered right by designer, by predicted margin:")
    for b in confidence_bins(groups):
        print(f"    [{100 * b.low:4.0f}%, {100 * b.high:4.0f}%): {b.pairs:6d} pairs, "
              f"{100 * b.ordered_right:5.1f}% right")  # fmt: skip
    if args.write_groups:
        write_groups(groups)
    if args.write_confidence:
        write_confidence(groups)


if __name__ == "__main__":
    main()
