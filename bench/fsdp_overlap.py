"""ZeRO-3 / FSDP parameter all-gather overlap: the public FSDP runs with and without it.

Usage: python bench/fsdp_overlap.py

The step model charges ZeRO-3's per-micro-batch parameter all-gathers (forward and
backward) less what prefetching hides behind the micro-batch's own compute
(models.step.zero3_gather_exposed_s; the stack profile's param_gather_overlap_fraction).
None of the calibration set's runs is evaluated under ZeRO-3 (bench/accuracy.py --skipped:
the FSDP stacks have no profile, OPT-175B's layout is not given), so this script evaluates
the FSDP runs of public reports on the layouts stated below, under the megatron-core
profile, with the fraction as the catalog has it and at 0 (the charge before issue 31):

- LLaMA-65B (Touvron et al. 2023, "LLaMA", section 2.4): 380 tokens/s/GPU on 2,048
  A100-80GB, 4M-token batches of 2,048-token sequences. Layout [assumed]: TP 8 (the
  paper's "model parallelism"), ZeRO-3 over DP 256, one micro-batch of 8 sequences a step
  (2,048 sequences / 256); the issue's example runs the same batch as 8 micro-batches of 1.
- OPT-175B (Zhang et al. 2022, "OPT", section 2.4; bench/data/published row "OPT-175B"):
  "up to 147 TFLOP/s per GPU" on 992 A100-80GB, FSDP with Megatron-LM TP, 2M-token
  batches. Layout [assumed]: TP 8, DP 124, 992 sequences a step (8 per DP rank) as 1 to 8
  micro-batches; full recomputation (metaseq's activation checkpointing).

The reported figures are what the runs achieved; the layouts are guesses, so the rows show
how the overlap term moves the prediction, not a fit (the fraction is not fitted on them).

Then the measured ZeRO-3 runs in the repo: the FSDP2 rows of the layout sweeps
(bench/data/ranking/layout_sweeps.csv: torchtitan on 8 GB200 of one NVL72 rack, Llama 3.1
8B and Qwen3-32B; measured layouts, predicted as bench/ranking.py does), with the mean
absolute error of the step time with the term on and off.
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from catalog import load_catalog  # noqa: E402
from catalog.catalog import Catalog  # noqa: E402
from designer import published  # noqa: E402
from models.evaluate import Hardware, evaluate  # noqa: E402
from models.layout import Layout  # noqa: E402
from models.spec import TransformerSpec  # noqa: E402

LLAMA_65B = TransformerSpec(
    name="llama-65b", layers=80, hidden=8192, heads=64, ffn_hidden=22016, vocab=32000,
    seq_len=2048, gated_mlp=True,
)  # fmt: skip
OPT_175B = TransformerSpec(
    name="opt-175b", layers=96, hidden=12288, heads=96, vocab=50272, seq_len=2048,
)  # fmt: skip

# (label, spec, layout, reported value, unit)
RUNS = [
    *(
        (
            f"LLaMA-65B TP 8 ZeRO-3 DP 256, {8 // mb} micro-batch(es) of {mb}",
            LLAMA_65B,
            Layout(tp=8, pp=1, dp=256, micro_batch=mb, global_batch=2048, zero=3),
            380.0,
            "tokens/s/GPU",
        )
        for mb in (8, 4, 2, 1)
    ),
    *(
        (
            f"OPT-175B TP 8 ZeRO-3 DP 124, {8 // mb} micro-batch(es) of {mb}",
            OPT_175B,
            Layout(tp=8, pp=1, dp=124, micro_batch=mb, global_batch=992, zero=3, recompute="full"),
            147.0,
            "TFLOP/s/GPU",
        )
        for mb in (8, 4, 2, 1)
    ),
]


def predicted(hw: Hardware, spec: TransformerSpec, layout: Layout, unit: str) -> float:
    ev = evaluate(spec, hw, layout)
    if unit == "tokens/s/GPU":
        return ev.tokens_per_s / layout.num_gpus
    return ev.model_tflops_per_gpu


def without_overlap(cat: Catalog) -> Catalog:
    """The catalog with every profile's param_gather_overlap_fraction at 0 (before issue 31)."""
    gpus = {}
    for name, gpu in cat.gpus.items():
        stacks = {
            k: v.model_copy(update={"param_gather_overlap_fraction": 0.0})
            for k, v in gpu.stacks.items()
        }
        gpus[name] = gpu.model_copy(update={"stacks": stacks})
    return replace(cat, gpus=gpus)


def sweep_errors(cat: Catalog) -> list[tuple[str, str, float, float, float]]:
    """(group, layout, measured, predicted on, predicted off) step seconds of the sweeps'
    ZeRO-3 rows; a group is one model at one sequence length."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import ranking  # noqa: PLC0415 (bench/ranking.py, a script beside this one)

    off = without_overlap(cat)
    out = []
    for row in ranking.sweep_rows():
        if int(row["zero"]) < 3:
            continue
        measured, on, _ = ranking.sweep_step_s(row, cat)
        _, before, _ = ranking.sweep_step_s(row, off)
        group = f"{row['model']} s{row['seq_len']}"
        out.append((group, ranking._sweep_layout_name(row), measured, on, before))
    return out


def _within_group_error(rows, which: int) -> float:
    """Mean |ratio / the group's median ratio - 1| of predicted over measured (column
    ``which``): the error once each group's level (the stack's bias) is taken out."""
    groups: dict[str, list[float]] = {}
    for row in rows:
        groups.setdefault(row[0], []).append(row[which] / row[2])
    errs = [
        abs(r / statistics.median(ratios) - 1)
        for ratios in groups.values()
        if len(ratios) > 1
        for r in ratios
    ]
    return statistics.mean(errs)


def print_groups(rows) -> None:
    """Per group (model, sequence length, PP 1 or more): the mean signed error (the stack's
    bias: every row is predicted fast), the mean absolute error, off and on. A term that only
    hides time moves a group biased fast further from the measurement whatever its merit;
    torchtitan's FSDP2 keeps the parameters gathered across a step's micro-batches when PP
    is on (reshard_after_forward "default": False with PP), so its gathers are per step,
    fewer than the per-micro-batch charge the term discounts."""
    groups: dict[str, list[tuple[float, float]]] = {}
    for group, layout, meas, on, off in rows:
        pp = "pp1" if " pp1 " in f" {layout} " else "pp>1"
        groups.setdefault(f"{group} {pp}", []).append((off / meas - 1, on / meas - 1))
    print(f"{'group':34} {'runs':>4} {'bias off':>9} {'bias on':>8} {'MAE off':>8} {'MAE on':>7}")
    for name, errs in groups.items():
        print(
            f"{name:34} {len(errs):4d} {statistics.mean(e[0] for e in errs):+9.1%} "
            f"{statistics.mean(e[1] for e in errs):+8.1%} "
            f"{statistics.mean(abs(e[0]) for e in errs):8.1%} "
            f"{statistics.mean(abs(e[1]) for e in errs):7.1%}"
        )


def print_sweeps(cat: Catalog) -> None:
    rows = sweep_errors(cat)
    print(f"\nmeasured ZeRO-3 runs (layout sweeps, {published.MODERN_STACK} profile), step s")
    print(f"{'run':82} {'measured':>8} {'off':>7} {'err':>7} {'on':>7} {'err':>7}")
    for group, layout, meas, on, off in rows:
        print(
            f"{group + ' ' + layout:82} {meas:8.3f} {off:7.3f} {off / meas - 1:+7.1%} "
            f"{on:7.3f} {on / meas - 1:+7.1%}"
        )
    print_groups(rows)
    mape_off = statistics.mean(abs(r[4] / r[2] - 1) for r in rows)
    mape_on = statistics.mean(abs(r[3] / r[2] - 1) for r in rows)
    print(f"{len(rows)} runs: mean absolute error {mape_off:.1%} off, {mape_on:.1%} on")
    print(
        f"within each model and sequence (its median bias taken out): "
        f"{_within_group_error(rows, 4):.2%} off, {_within_group_error(rows, 3):.2%} on"
    )


def main() -> None:
    cat = load_catalog()
    hw = Hardware.from_catalog(cat, "a100-80gb")
    cal = hw.gpu.calibration
    off = Hardware(
        hw.gpu.with_calibration(cal.model_copy(update={"param_gather_overlap_fraction": 0.0})),
        hw.nic,
        hw.nics_per_node,
        hw.switch,
        hw.facility,
    )
    print(
        f"a100-80gb megatron-core profile, param_gather_overlap_fraction "
        f"{cal.param_gather_overlap_fraction:g} (on) vs 0 (off)"
    )
    print(f"{'run':58} {'reported':>9} {'off':>8} {'err':>7} {'on':>8} {'err':>7}")
    for label, spec, layout, reported, unit in RUNS:
        before = predicted(off, spec, layout, unit)
        after = predicted(hw, spec, layout, unit)
        print(
            f"{label:58} {reported:9.0f} {before:8.0f} {before / reported - 1:+7.1%} "
            f"{after:8.0f} {after / reported - 1:+7.1%}  ({unit})"
        )
    print_sweeps(cat)


if __name__ == "__main__":
    main()
