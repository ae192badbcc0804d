"""ZeRO-3 / FSDP parameter all-gather overlap: the public FSDP runs with and without it.

Usage: python bench/fsdp_overlap.py

The step model charges ZeRO-3's per-micro-batch parameter all-gathers (forward and
backward) less what prefetching hides behind the micro-batch's own compute
(models.step.zero3_microbatch_s; the stack profile's param_gather_overlap_fraction).
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
8B and Qwen3-32B; measured layouts, predicted as bench/ranking.py does: under the
pytorch-fsdp2 profile, ranking.sweep_stack), with the mean absolute error of the step
time with the term on and off.

Then OLMo-core's published throughput table (allenai/OLMo-core README.md at e27ba74550f1,
2024-11-05, "Update throughput numbers" #81: https://github.com/allenai/OLMo-core/blob/
e27ba74550f12a685b95aded46c88f845a7e2d6d/README.md): tokens per second per device of its
official training scripts on "a cluster with NVIDIA H100 GPUs", 4,096-token sequences, BF16
and BF16/FP8 (torchao float8 matmuls). The layouts are the scripts' at that commit
(src/scripts/train/*.py): FSDP2 over every rank (DataParallelType.fsdp, no TP/PP/CP),
bf16 parameters, fp32 reduction, reshard after forward (every micro-batch gathers again:
nn/transformer/model.py apply_fsdp), no activation checkpointing; global batch
1,024 x 4,096 tokens (13B: 2,048 x 4,096) and rank micro-batch 8 / 2 / 2 / 1 sequences
(1B / 7B / Llama-8B / 13B). The models are the scripts' configs (nn/transformer/config.py:
olmo_1B = llama2_1B at 18 layers, olmo_7B, llama3_8B, olmo_13B; FFN int(8 h / 3) rounded
up to 256, Llama 3 x 1.3 to 1,024; dolma2 vocabulary 100,278 padded to 100,352).
The GPU count is not stated: [assumed] one node of 8 (internal/experiment.py launches
num_nodes=1, num_gpus=8 unless overridden), and, as a bound on a multi-node run, 8 nodes
of 8 (64 GPUs, gathers over the NICs). OLMo-core at that commit runs more than one node as
HSDP (internal/experiment.py: dp_mesh = init_hybrid_shard_mesh(), sharded within a node and
replicated across nodes), which the model does not express: the 64-GPU rows are full
sharding over the NICs, a bound, not OLMo-core's multi-node layout.

Then the contention of the hidden collectives (the profile's zero3_overlap_hbm_passes,
models.step.zero3_contention_s: NCCL's kernels stage what they receive in HBM, 2x to 3x
the bytes sent, NVIDIA/nccl#1428, and slow the compute they overlap) off and at the
catalog's 3 passes; the OLMo-core rows scaled by a PyTorch-stack level estimated
leave-one-size-out (each model size's rows by the median measured / predicted ratio of
the other three sizes' rows: not fitted on the rows it scores, and not in the catalog);
and the fms-fsdp rows of bench/data/published/extra_runs.csv (PyTorch FSDP +
torch.compile, IBM's README table), which bench/accuracy.py skips for want of a profile,
under ZeRO-3 with the overlap off and on.

Last, the pytorch-fsdp2 stack profile (megatron-core's with its compute slower by one
fitted level): every source's rows under megatron-core and under it, the fit in-sample,
each source held out and OLMo-core held out by model size (bench/fsdp_level.py).
"""

from __future__ import annotations

import csv
import statistics
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from calibration import published  # noqa: E402
from catalog import load_catalog  # noqa: E402
from catalog.catalog import Catalog  # noqa: E402
from models.evaluate import Hardware, evaluate  # noqa: E402
from models.layout import Layout  # noqa: E402
from models.transformer import TransformerSpec  # noqa: E402

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

# OLMo-core's official scripts at e27ba74550f1 (the module docstring): the throughput
# table's models at 4,096 tokens.
OLMO_CORE_URL = (
    "https://github.com/allenai/OLMo-core/blob/e27ba74550f12a685b95aded46c88f845a7e2d6d/README.md"
)
OLMO_CORE_COMMIT = "e27ba74550f12a685b95aded46c88f845a7e2d6d"
OLMO_CORE_DATE = "2024-11-05"
_DOLMA2_PADDED_VOCAB = 100_352  # 100,278 padded to a multiple of 128
_OLMO = dict(
    vocab=_DOLMA2_PADDED_VOCAB, seq_len=4096, gated_mlp=True, rope_base=500_000.0,
    norm_eps=1e-6,
)  # fmt: skip
OLMO_CORE_SPECS = {
    "1B": TransformerSpec(
        name="olmo-core-1b", layers=18, hidden=2048, heads=16, ffn_hidden=5632, qk_norm=True,
        **_OLMO,
    ),
    "7B": TransformerSpec(
        name="olmo-core-7b", layers=32, hidden=4096, heads=32, ffn_hidden=11008, qk_norm=True,
        **_OLMO,
    ),
    "8B": TransformerSpec(
        name="olmo-core-llama3-8b", layers=32, hidden=4096, heads=32, kv_heads=8,
        ffn_hidden=14336, **_OLMO,
    ),
    "13B": TransformerSpec(
        name="olmo-core-13b", layers=40, hidden=5120, heads=40, ffn_hidden=13824, qk_norm=True,
        **_OLMO,
    ),
}  # fmt: skip
# (size, script, rank micro-batch in sequences, global batch in sequences,
#  {precision: tokens/s/device}) as the README table and the scripts give them
OLMO_CORE_TABLE = [
    ("1B", "OLMo-1B.py", 8, 1024, {"bf16": 55_000.0, "fp8": 65_000.0}),
    ("7B", "OLMo-7B.py", 2, 1024, {"bf16": 10_000.0, "fp8": 13_000.0}),
    ("8B", "Llama-8B.py", 2, 1024, {"bf16": 9_500.0, "fp8": 12_500.0}),
    ("13B", "OLMo-13B.py", 1, 2048, {"bf16": 4_600.0, "fp8": 5_500.0}),
]
OLMO_CORE_GPU_COUNTS = (8, 64)  # [assumed]: one node (the launch default), eight nodes


def olmo_core_runs() -> list[tuple[str, TransformerSpec, Layout, float, str]]:
    """The OLMo-core table's rows on H100 as (label, spec, layout, reported, unit): FSDP2
    (ZeRO-3) over every GPU, no recomputation, at each assumed GPU count."""
    out = []
    for size, script, mb, gbs, reported in OLMO_CORE_TABLE:
        for precision, tps in reported.items():
            for gpus in OLMO_CORE_GPU_COUNTS:
                lay = Layout(
                    tp=1, pp=1, dp=gpus, micro_batch=mb, global_batch=gbs, zero=3,
                    recompute="none", precision=precision,
                )  # fmt: skip
                label = f"OLMo-core {size} {precision} ({script}), {gpus} H100, {int(lay.grad_accum)} x {mb}"
                out.append((label, OLMO_CORE_SPECS[size], lay, tps, "tokens/s/GPU"))
    return out


# fms-fsdp's README table (bench/data/published/extra_runs.csv, skipped by
# bench/accuracy.py as "stack fms-fsdp: no profile"): PyTorch FSDP + torch.compile, 2
# sequences of 4,096 per GPU a step (one micro-batch), on 96 H100 with 800 Gbps per node
# and 128 A100 with 400 Gbps per node, as the table prints: two NICs a server [assumed]
FMS_FSDP = "fms-fsdp"
FMS_FSDP_NICS = {"h100-sxm": ("cx7-400g", 2), "a100-80gb": ("cx6-200g", 2)}
# and its gradients reduced in bf16: mixed_precision=True (fms_fsdp/config/training.py)
# selects the bfSixteen policy, reduce_dtype=torch.bfloat16
# (fms_fsdp/policies/mixed_precision.py at ed74fd5, the README table's commit), where
# OLMo-core and torchtitan reduce in fp32 (the profile's zero3_microbatch_grad_reduce_bytes)
FMS_FSDP_REDUCE_BYTES = 2.0


def source_profile(framework: str, hw: Hardware) -> Hardware:
    """``hw`` with the reduction dtype of ``framework``'s runs: fms-fsdp's bf16
    (FMS_FSDP_REDUCE_BYTES); the profile's own otherwise."""
    if framework != FMS_FSDP:
        return hw
    return with_profile(hw, zero3_microbatch_grad_reduce_bytes=FMS_FSDP_REDUCE_BYTES)


def fms_fsdp_runs(cat: Catalog) -> list[tuple[str, TransformerSpec, Layout, Hardware, float]]:
    """(label, spec, ZeRO-3 layout, hardware, measured step seconds) of the fms-fsdp rows, as
    bench/accuracy.py would read them (calibration.published.parse_row) but under ZeRO-3
    (its FSDP full shard; the 7B rows' HSDP, sharded within a node group, is evaluated as
    full sharding [assumed]), the NICs the table prints and its bf16 gradient reduction
    (FMS_FSDP_REDUCE_BYTES)."""
    return pytorch_fsdp_runs(cat, FMS_FSDP)


def pytorch_fsdp_runs(
    cat: Catalog, framework: str
) -> list[tuple[str, TransformerSpec, Layout, Hardware, float]]:
    """fms_fsdp_runs for the extra_runs.csv rows whose framework starts with ``framework``
    (torchtitan: its FSDP2 rows) on a catalog GPU; the NICs as bench/accuracy.py reads
    them (calibration.published.GPU_NAMES), the fms-fsdp rows' as their table prints."""
    path = published.DATA_DIR / "extra_runs.csv"
    with path.open(newline="", encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if r["framework"].startswith(framework)]
    out = []
    for row in rows:
        run = published.parse_row({**row, "framework": ""}, cat, path.name)
        if isinstance(run, published.Skipped) and "not in the catalog" in run.reason:
            continue  # torchtitan's H100-96GB-HBM2e rows
        assert isinstance(run, published.PublishedRun), run
        nic, nics = (
            FMS_FSDP_NICS[run.gpu] if framework == FMS_FSDP else (run.nic, run.nics_per_node)
        )
        hw = source_profile(framework, Hardware.from_catalog(cat, run.gpu, nic, nics))
        lay = replace(run.layout, zero=3)
        out.append((run.name, run.spec, lay, hw, run.measured_step_s))
    return out


def fms_fsdp_errors(cat: Catalog) -> list[tuple[str, float, float]]:
    """(label, error with the gather overlap off, on) of predicted over measured throughput
    (measured / predicted step) of the fms-fsdp rows under the catalog's profiles."""
    out = []
    for label, spec, lay, hw, measured in fms_fsdp_runs(cat):
        steps = [
            evaluate(spec, with_gather_overlap(hw, f), lay).step_time_s
            for f in (0.0, hw.gpu.calibration.param_gather_overlap_fraction)
        ]
        out.append((label, measured / steps[0] - 1, measured / steps[1] - 1))
    return out


def print_fms_fsdp(cat: Catalog) -> None:
    print(f"\n{FMS_FSDP} README table (PyTorch FSDP, extra_runs.csv), throughput error off / on")
    rows = fms_fsdp_errors(cat)
    for label, off, on in rows:
        print(f"{label:40} {off:+7.1%} {on:+7.1%}")
    free = fms_fsdp_errors(catalog_with(cat, zero3_overlap_hbm_passes=0.0))
    for name, r in (("", rows), (" without the contention", free)):
        print(
            f"{len(r)} rows{name}: mean absolute error {statistics.mean(abs(e[1]) for e in r):.1%} "
            f"off, {statistics.mean(abs(e[2]) for e in r):.1%} on; H100 only "
            f"{statistics.mean(abs(e[1]) for e in r if 'H100' in e[0]):.1%} / "
            f"{statistics.mean(abs(e[2]) for e in r if 'H100' in e[0]):.1%}"
        )


def with_gather_overlap(hw: Hardware, fraction: float) -> Hardware:
    """The hardware with its profile's param_gather_overlap_fraction at ``fraction`` (0: the
    charge before issue 31)."""
    return with_profile(hw, param_gather_overlap_fraction=fraction)


def with_profile(hw: Hardware, **fields: float) -> Hardware:
    """The hardware with its profile's ``fields`` replaced."""
    cal = hw.gpu.calibration.model_copy(update=fields)
    return Hardware(hw.gpu.with_calibration(cal), hw.nic, hw.nics_per_node, hw.switch, hw.facility)


def compare(hw: Hardware, runs) -> list[tuple[str, float, float, float, str]]:
    """(label, reported, predicted off, predicted on, unit) for each run on ``hw``."""
    off = with_gather_overlap(hw, 0.0)
    return [
        (label, reported, predicted(off, spec, lay, unit), predicted(hw, spec, lay, unit), unit)
        for label, spec, lay, reported, unit in runs
    ]


def print_comparison(rows) -> None:
    w = max(len(r[0]) for r in rows)
    print(f"{'run':{w}} {'reported':>9} {'off':>8} {'err':>7} {'on':>8} {'err':>7}")
    for label, reported, before, after, unit in rows:
        print(
            f"{label:{w}} {reported:9.0f} {before:8.0f} {before / reported - 1:+7.1%} "
            f"{after:8.0f} {after / reported - 1:+7.1%}  ({unit})"
        )
    mape_off = statistics.mean(abs(r[2] / r[1] - 1) for r in rows)
    mape_on = statistics.mean(abs(r[3] / r[1] - 1) for r in rows)
    print(f"{len(rows)} rows: mean absolute error {mape_off:.1%} off, {mape_on:.1%} on")


def olmo_groups(rows) -> dict[str, list[tuple[str, float, float, float, str]]]:
    """The OLMo-core rows by assumed GPU count and precision (one group: the four model
    sizes of one table column on one cluster size)."""
    groups: dict[str, list] = {}
    for row in rows:
        gpus = row[0].split(", ")[1].split(" ")[0]
        precision = row[0].split(" ")[2]
        groups.setdefault(f"{gpus} H100 {precision}", []).append(row)
    return groups


def print_olmo_groups(rows) -> None:
    """Per group: mean signed and absolute error off and on, and the absolute error once
    the group's median ratio (the stack's level: OLMo-core's FSDP2 + torch.compile against
    the megatron-core profile) is taken out, which is what the term can move."""
    print(
        f"{'group':18} {'bias off':>9} {'bias on':>8} {'MAE off':>8} {'MAE on':>7} "
        f"{'level-free off':>15} {'on':>6}"
    )
    for name, grp in olmo_groups(rows).items():
        off = [r[2] / r[1] - 1 for r in grp]
        on = [r[3] / r[1] - 1 for r in grp]
        keyed = [(name, r[0], r[1], r[3], r[2]) for r in grp]
        print(
            f"{name:18} {statistics.mean(off):+9.1%} {statistics.mean(on):+8.1%} "
            f"{statistics.mean(map(abs, off)):8.1%} {statistics.mean(map(abs, on)):7.1%} "
            f"{_within_group_error(keyed, 4):15.1%} {_within_group_error(keyed, 3):6.1%}"
        )


SWEEP_FRACTIONS = (0.0, 0.25, 0.5, 0.75, 1.0)


def fraction_sweep(a100: Hardware, h100: Hardware) -> list[tuple[float, float, float, float]]:
    """(fraction, OLMo-core 8-GPU level-free error, OLMo-core 8-GPU mean absolute error,
    LLaMA/OPT rows' mean absolute error) at each SWEEP_FRACTIONS value: what a calibrated
    fraction would trade (the LLaMA/OPT layouts are assumed, the OLMo-core GPU count too)."""
    runs = [r for r in olmo_core_runs() if r[2].num_gpus == OLMO_CORE_GPU_COUNTS[0]]
    out = []
    for f in SWEEP_FRACTIONS:
        olmo = compare(with_gather_overlap(h100, f), runs)
        paper = compare(with_gather_overlap(a100, f), RUNS)
        level_free = statistics.mean(
            _within_group_error([(name, r[0], r[1], r[3], r[2]) for r in grp], 3)
            for name, grp in olmo_groups(olmo).items()
        )
        out.append(
            (
                f,
                level_free,
                statistics.mean(abs(r[3] / r[1] - 1) for r in olmo),
                statistics.mean(abs(r[3] / r[1] - 1) for r in paper),
            )
        )
    return out


def print_fraction_sweep(a100: Hardware, h100: Hardware) -> None:
    print(
        f"\n{'fraction':>8} {'OLMo-core 8 H100 level-free':>28} {'MAE':>6} "
        f"{'LLaMA/OPT rows MAE':>19}"
    )
    for f, level_free, mae, paper in fraction_sweep(a100, h100):
        print(f"{f:8.2f} {level_free:28.1%} {mae:6.1%} {paper:19.1%}")


def predicted(hw: Hardware, spec: TransformerSpec, layout: Layout, unit: str) -> float:
    ev = evaluate(spec, hw, layout)
    if unit == "tokens/s/GPU":
        return ev.tokens_per_s / layout.num_gpus
    return ev.model_tflops_per_gpu


def without_overlap(cat: Catalog) -> Catalog:
    """The catalog with every profile's param_gather_overlap_fraction at 0 (before issue 31)."""
    return catalog_with(cat, param_gather_overlap_fraction=0.0)


def catalog_with(cat: Catalog, **fields: float) -> Catalog:
    """The catalog with ``fields`` replaced in every GPU's every stack profile."""
    gpus = {}
    for name, gpu in cat.gpus.items():
        stacks = {k: v.model_copy(update=fields) for k, v in gpu.stacks.items()}
        gpus[name] = gpu.model_copy(update={"stacks": stacks})
    return replace(cat, gpus=gpus)


# the per-micro-batch gradient reduce-scatter (models.step.zero3_microbatch_s):
# off (the gradients reduced once a step, before it) and in fp32 (OLMo-core's and
# torchtitan's FSDP2 reduce_dtype=float32): bytes per parameter
GRAD_REDUCE_BYTES = (0.0, 4.0)


def grad_reduce_summary(cat: Catalog) -> list[tuple[float, dict[str, tuple[float, float]]]]:
    """At each GRAD_REDUCE_BYTES value, (gather overlap off, on) of: the 16 OLMo-core rows'
    mean absolute error and mean level-free error (per group, as print_olmo_groups), the
    LLaMA/OPT rows' mean absolute error, the torchtitan ZeRO-3 sweeps' mean absolute error
    and their error within each model and sequence."""
    out = []
    for nbytes in GRAD_REDUCE_BYTES:
        c = catalog_with(cat, zero3_microbatch_grad_reduce_bytes=nbytes)
        olmo = compare(Hardware.from_catalog(c, "h100-sxm"), olmo_core_runs())
        paper = compare(Hardware.from_catalog(c, "a100-80gb"), RUNS)
        sweeps = sweep_errors(c)
        level_free = [
            statistics.mean(
                _within_group_error([(n, r[0], r[1], r[which], 0) for r in grp], 3)
                for n, grp in olmo_groups(olmo).items()
            )
            for which in (2, 3)
        ]
        out.append(
            (
                nbytes,
                {
                    "OLMo-core MAE": _mae_pair(olmo),
                    "OLMo-core level-free": (level_free[0], level_free[1]),
                    "LLaMA/OPT MAE": _mae_pair(paper),
                    "torchtitan MAE": (
                        statistics.mean(abs(r[4] / r[2] - 1) for r in sweeps),
                        statistics.mean(abs(r[3] / r[2] - 1) for r in sweeps),
                    ),
                    "torchtitan level-free": (
                        _within_group_error(sweeps, 4),
                        _within_group_error(sweeps, 3),
                    ),
                },
            )
        )
    return out


def _mae_pair(rows) -> tuple[float, float]:
    """Mean absolute error of compare() rows with the gather overlap off and on."""
    return (
        statistics.mean(abs(r[2] / r[1] - 1) for r in rows),
        statistics.mean(abs(r[3] / r[1] - 1) for r in rows),
    )


def _print_off_on(setting: str, summary: list[tuple[float, dict[str, tuple[float, float]]]]):
    """One row a setting's value: each set's error with the gather overlap off / on."""
    width = len(setting)
    names = list(summary[0][1])
    print(f"{setting:>{width}} " + " ".join(f"{n + ' off/on':>30}" for n in names))
    for value, figures in summary:
        cells = " ".join(f"{f'{a:.1%} / {b:.1%}':>30}" for a, b in figures.values())
        print(f"{value:{width}g} {cells}")


def print_grad_reduce_summary(cat: Catalog) -> None:
    print(
        "\nper-micro-batch gradient reduce-scatter (zero3_microbatch_grad_reduce_bytes) x "
        "gather overlap (param_gather_overlap_fraction 0 / catalog)"
    )
    _print_off_on("bytes/param", grad_reduce_summary(cat))


# the contention of the collectives each micro-batch hides (models.step.zero3_contention_s):
# off, and the catalog's 3 HBM passes per byte sent (NVIDIA/nccl#1428)
CONTENTION_PASSES = (0.0, 3.0)


def contention_summary(cat: Catalog) -> list[tuple[float, dict[str, tuple[float, float]]]]:
    """At each CONTENTION_PASSES value, (gather overlap off, on) of the 16 OLMo-core rows'
    mean absolute error, the 8 one-node rows' and the LLaMA/OPT rows'."""
    out = []
    for passes in CONTENTION_PASSES:
        c = catalog_with(cat, zero3_overlap_hbm_passes=passes)
        olmo = compare(Hardware.from_catalog(c, "h100-sxm"), olmo_core_runs())
        paper = compare(Hardware.from_catalog(c, "a100-80gb"), RUNS)
        node = [r for r in olmo if f", {OLMO_CORE_GPU_COUNTS[0]} H100" in r[0]]
        out.append(
            (
                passes,
                {
                    "OLMo-core MAE": _mae_pair(olmo),
                    "OLMo-core 8 H100 MAE": _mae_pair(node),
                    "LLaMA/OPT MAE": _mae_pair(paper),
                },
            )
        )
    return out


def leave_one_size_out(rows) -> list[tuple[str, float, float]]:
    """(label, error with the overlap on, error once scaled by a PyTorch-stack level) of the
    OLMo-core compare() rows: each size's rows scaled by the median measured / predicted
    ratio of the other three sizes' rows (the level of OLMo-core's FSDP2 + torch.compile
    stack against the megatron-core profile, estimated without the rows it scores)."""
    size = {r[0]: r[0].split(" ")[1] for r in rows}
    out = []
    for r in rows:
        level = statistics.median(o[1] / o[3] for o in rows if size[o[0]] != size[r[0]])
        out.append((r[0], r[3] / r[1] - 1, level * r[3] / r[1] - 1))
    return out


def print_contention(cat: Catalog) -> None:
    print(
        "\ncontention of the hidden collectives (zero3_overlap_hbm_passes) x gather overlap "
        "(param_gather_overlap_fraction 0 / catalog)"
    )
    _print_off_on("passes", contention_summary(cat))
    rows = leave_one_size_out(compare(Hardware.from_catalog(cat, "h100-sxm"), olmo_core_runs()))
    print("\nOLMo-core rows, overlap on, with a stack level estimated leave-one-size-out")
    for label, on, scaled in rows:
        print(f"{label:52} {on:+7.1%} {scaled:+7.1%}")
    print(
        f"{len(rows)} rows: mean absolute error {statistics.mean(abs(r[1]) for r in rows):.1%} "
        f"on, {statistics.mean(abs(r[2]) for r in rows):.1%} with the level"
    )


def ranking_stack() -> str:
    """The profile bench/ranking.py predicts the sweeps' ZeRO-3 rows under."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import ranking  # noqa: PLC0415 (bench/ranking.py, a script beside this one)

    return ranking.sweep_stack({"zero": "3"})


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
    is on (reshard_after_forward "default": False with PP), so its gathers are per step
    (the profile's zero3_pp_unsharded_params, models.step.zero3_gathers_once), and the term
    discounts that one gather only."""
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
    print(f"\nmeasured ZeRO-3 runs (layout sweeps, {ranking_stack()} profile), step s")
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
    print(
        f"a100-80gb megatron-core profile, param_gather_overlap_fraction "
        f"{hw.gpu.calibration.param_gather_overlap_fraction:g} (on) vs 0 (off)"
    )
    print_comparison(compare(hw, RUNS))
    h100 = Hardware.from_catalog(cat, "h100-sxm")
    print(
        f"\nOLMo-core README throughput table ({OLMO_CORE_COMMIT[:12]}, {OLMO_CORE_DATE}), "
        f"h100-sxm megatron-core profile, fraction "
        f"{h100.gpu.calibration.param_gather_overlap_fraction:g} (on) vs 0 (off)"
    )
    olmo = compare(h100, olmo_core_runs())
    print_comparison(olmo)
    print_olmo_groups(olmo)
    print_fraction_sweep(hw, h100)
    print_sweeps(cat)
    print_grad_reduce_summary(cat)
    print_contention(cat)
    print_fms_fsdp(cat)
    import fsdp_level  # lazy: bench/fsdp_level.py imports this script (its rows)

    fsdp_level.print_report(cat, fsdp_level.level_rows(cat))


if __name__ == "__main__":
    main()
