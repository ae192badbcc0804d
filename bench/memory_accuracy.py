"""Predicted memory per GPU against Megatron-LM's published formulas and published runs.

Usage: python bench/memory_accuracy.py [--published | --measured]
--published: the published runs (calibration/published.py) that the memory model says
would not fit in their GPUs, although they ran, for 0, 1 and 2 bytes per parameter of
FP8 weight copies (Assumptions.fp8_weight_cache_bytes); the memory model's signed error on
every run with a measured peak, by stack (the Megatron-Core rows of bench/data/published
with peak_memory_gb, the PyTorch FSDP rows of bench/data/memory), with the planning
default reserved memory; and, for each reserved memory and headroom, how many of the
published runs it would refuse and how many measured peaks it covers (the evidence
behind designer.question.fields.DEFAULT_HEADROOM).
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
--measured: predicted peak memory of the most loaded GPU against the measured peaks of
bench/data/memory/measured_peaks.csv (torchtitan runs published with their full
configuration by torchtitan's benchmarks/ files and torchao's float8 training
benchmarks; source, commit and date per row; README.md next to it), in GB (1e9
bytes; torchtitan reports GiB, converted): signed error per row and the median
absolute error, for the tensor-only model (runtime_reserved_gb 0) and with the
planning default designer.question.build.DEFAULT_RESERVED_GB. torchtitan logs the caching
allocator's peak *reserved* bytes (torch.cuda.memory_stats "reserved_bytes.all.peak",
which includes allocator fragmentation but not the CUDA context or NCCL's own buffers,
both allocated outside PyTorch's allocator).
"""

from __future__ import annotations

import csv
import math
import statistics
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
from models.transformer import TransformerSpec  # noqa: E402

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
    from calibration.published import MODERN_ASSUMPTIONS, read_runs, runs_over_memory
    from catalog import load_catalog

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
    peak_error_check()
    # the planning defaults (designer.question.build): every run here ran, so a run the planner
    # refuses is a plan it would wrongly call infeasible (the price of the safety margin)
    from solvers.scenario import DEFAULT_HEADROOM, DEFAULT_RESERVED_GB

    errors = {stack: [r.error_pct for r in rows] for stack, rows in peak_errors().items()}
    print(
        "\nreserved GB, headroom: runs that ran but are refused (planning default marked *); "
        "measured peaks the margin covers (error >= -headroom)"
    )
    for reserved, headroom in (
        (0.0, 0.0), (2.0, 0.05), (3.0, 0.0), (3.0, 0.05), (3.0, 0.10), (3.0, 0.12), (4.0, 0.1),
    ):  # fmt: skip
        a = MODERN_ASSUMPTIONS.model_copy(
            update={"runtime_reserved_gb": reserved, "memory_headroom_fraction": headroom}
        )
        over = runs_over_memory(runs, catalog, a)
        mark = "*" if (reserved, headroom) == (DEFAULT_RESERVED_GB, DEFAULT_HEADROOM) else " "
        covered = (
            ""
            if reserved != DEFAULT_RESERVED_GB
            else "; covered: "
            + ", ".join(
                f"{stack} {sum(e >= -100 * headroom for e in errs)} of {len(errs)}"
                for stack, errs in errors.items()
            )
        )
        print(
            f"  {mark} {reserved:3g} GB, {headroom:4.0%}: {len(over)} of {len(runs)} refused{covered}"
        )


def peak_errors() -> dict[str, list[MeasuredComparison]]:
    """The memory model's signed error on every run with a measured peak, with the planning
    default reserved memory and no headroom, by stack: the Megatron-Core runs of
    bench/data/published (rows with peak_memory_gb that calibration.published reads; the
    planner's own stack) and the PyTorch FSDP runs of bench/data/memory."""
    import csv as _csv

    from calibration.published import DATA_DIR, FILES, MODERN_ASSUMPTIONS, MODERN_STACK, read_runs
    from catalog import load_catalog
    from models.evaluate import Hardware, evaluate
    from solvers.scenario import DEFAULT_RESERVED_GB

    catalog = load_catalog()
    peaks: dict[str, float] = {}
    for name in FILES:
        with (DATA_DIR / name).open(newline="", encoding="utf-8") as fh:
            for row in _csv.DictReader(fh):
                if (row.get("peak_memory_gb") or "").strip():
                    peaks[row["name"]] = float(row["peak_memory_gb"])
    a = MODERN_ASSUMPTIONS.model_copy(update={"runtime_reserved_gb": DEFAULT_RESERVED_GB})
    cat, megatron = catalog.with_stack(MODERN_STACK), []
    for run in read_runs(catalog)[0]:
        if run.name in peaks:
            hw = Hardware.from_catalog(cat, run.gpu, run.nic, run.nics_per_node)
            ev = evaluate(run.spec, hw, run.layout, run.seq_len, assumptions=a)
            lay = f"tp{run.layout.tp} pp{run.layout.pp} dp{run.layout.dp}"
            megatron.append(
                MeasuredComparison(
                    run.name, run.spec.name, run.gpu, lay, peaks[run.name], ev.memory.total
                )
            )
    return {"megatron-core": megatron, "pytorch-fsdp": compare_measured(DEFAULT_RESERVED_GB)}


def peak_error_check() -> None:
    """Print the memory model's error on the runs with measured peaks (the evidence behind
    designer.question.build.DEFAULT_HEADROOM)."""
    print("\nmemory model (+ the planning default reserved GB, no headroom) on measured peaks:")
    for stack, rows in peak_errors().items():
        for r in rows if stack == "megatron-core" else []:
            print(
                f"    {r.id}: measured {r.measured_gb:.1f} GB, predicted {r.predicted_gb:.1f} GB, {r.error_pct:+.1f}%"
            )
        worst = min(r.error_pct for r in rows)
        print(
            f"  {stack}: {len(rows)} runs, median |error| {median_abs_error_pct(rows):.1f}%, "
            f"mean {statistics.mean(r.error_pct for r in rows):+.1f}%, worst under-prediction "
            f"{worst:+.1f}% ({sum(r.error_pct < 0 for r in rows)} under-predicted)"
        )


MEASURED_CSV = Path(__file__).resolve().parent / "data" / "memory" / "measured_peaks.csv"
GIB = 2**30
MEASURED_REQUIRED = (
    "id",
    "source_repo",
    "source_file",
    "source_commit",
    "date",
    "model",
    "gpu",
    "tp",
    "pp",
    "vp",
    "dp",
    "cp",
    "micro_batch",
    "global_batch",
    "seq_len",
    "recompute",
    "zero",
    "precision",
    "weight_bytes",
    "grad_bytes",
    "optimizer_bytes",
    "measured_gib",
    "metric",
)


def read_measured(path: Path = MEASURED_CSV) -> list[dict[str, str]]:
    """The measured-peak rows; raises ValueError naming the row and field if one is empty."""
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for i, row in enumerate(rows, start=2):
        for field in MEASURED_REQUIRED:
            if not (row.get(field) or "").strip():
                raise ValueError(f"{path.name}:{i}: {field} is empty")
    return rows


def measured_layout(row: dict[str, str]) -> Layout:
    """The run's layout in the model's terms: FSDP (fully_shard) is ZeRO-3 over DP x CP,
    torchtitan's TP shards the norms' sequence (sequence parallel), 'selective' is
    torchtitan's per-op SAC, local batch / PP micro-batches is the micro-batch."""
    return Layout(
        tp=int(row["tp"]),
        pp=int(row["pp"]),
        dp=int(row["dp"]),
        cp=int(row["cp"]),
        vp=int(row["vp"]),
        micro_batch=int(row["micro_batch"]),
        global_batch=int(row["global_batch"]),
        recompute=row["recompute"],
        zero=int(row["zero"]),
        precision=row["precision"],
    )


def measured_assumptions(row: dict[str, str], reserved_gb: float = 0.0) -> Assumptions:
    """Per-row bytes per parameter (torchtitan FSDP2 with bf16 compute keeps the fp32
    parameter, its fp32 gradient and Adam's two fp32 moments sharded: 4 + 4 + 8), FlashAttention
    (SDPA), and no FP8 weight cache (Float8 with FSDP float8 all-gather casts the
    sharded weights each forward and keeps no copy between steps); torchtitan's FSDP2 as
    the pytorch-fsdp2 profile has it (models.evaluate.with_profile): fp32 gradient
    reduction (mixed_precision_reduce float32), and with PP each stage's parameters kept
    unsharded across the step's micro-batches (apply_fsdp: reshard_after_forward is not
    pp_enabled), its gradients accumulated unsharded in fp32 (models.memory.zero3_kept_bytes)."""
    return Assumptions(
        weight_bytes=float(row["weight_bytes"]),
        grad_bytes=float(row["grad_bytes"]),
        optimizer_bytes=float(row["optimizer_bytes"]),
        flash_attention=True,
        fp8_weight_cache_bytes=0.0,
        runtime_reserved_gb=reserved_gb,
        zero3_microbatch_grad_reduce_bytes=4.0,
        zero3_pp_unsharded_params=True,
    )


@dataclass(frozen=True)
class MeasuredComparison:
    id: str
    model: str
    gpu: str
    layout: str
    measured_gb: float
    predicted_gb: float
    states_gb: float = 0.0  # weights + gradients + optimizer
    activations_gb: float = 0.0
    other_gb: float = 0.0  # fp32 logits + reserved

    @property
    def error_pct(self) -> float:
        """Signed: positive when the model predicts more than was measured."""
        return 100.0 * (self.predicted_gb - self.measured_gb) / self.measured_gb


def compare_measured(
    reserved_gb: float = 0.0, path: Path = MEASURED_CSV
) -> list[MeasuredComparison]:
    """models.memory.memory_per_gpu for every row of the measured-peak file."""
    from catalog import load_catalog
    from models.memory import memory_per_gpu
    from models.zoo import zoo

    catalog, models = load_catalog(), zoo()
    out = []
    for row in read_measured(path):
        spec, lay = models[row["model"]], measured_layout(row)
        capacity = float(row["capacity_gb"] or catalog.gpu(row["gpu"]).memory_gb)
        seq = int(row["seq_len"])
        mem = memory_per_gpu(spec, lay, seq, capacity, measured_assumptions(row, reserved_gb))
        desc = (
            f"tp{lay.tp} pp{lay.pp}{f'x{lay.vp}' if lay.vp > 1 else ''} fsdp{lay.dp} cp{lay.cp} "
            f"mb{lay.micro_batch} s{seq} {lay.recompute} {lay.precision}"
        )
        out.append(
            MeasuredComparison(
                row["id"],
                row["model"],
                row["gpu"],
                desc,
                float(row["measured_gib"]) * GIB / 1e9,
                mem.total,
                mem.weights + mem.gradients + mem.optimizer,
                mem.activations,
                mem.other,
            )
        )
    return out


def median_abs_error_pct(rows: list[MeasuredComparison]) -> float:
    return statistics.median(abs(r.error_pct) for r in rows)


def measured_check() -> None:
    from solvers.scenario import DEFAULT_RESERVED_GB

    tensors = compare_measured(0.0)
    planned = compare_measured(DEFAULT_RESERVED_GB)
    print(
        "Measured peak (torchtitan max reserved, GiB -> GB) vs models.memory, most loaded GPU\n"
        f"  predicted: tensors only; +{DEFAULT_RESERVED_GB:g} GB: with the planning default "
        "reserved memory (designer.question.build.DEFAULT_RESERVED_GB)"
    )
    print(
        f"  {'id':26s} {'model':11s} {'layout':44s} {'measured':>8s} {'predicted':>9s} "
        f"{'error':>7s} {f'+{DEFAULT_RESERVED_GB:g} GB':>8s} {'error':>7s} "
        f"{'states':>6s} {'acts':>5s} {'logits':>6s}"
    )
    for t, p in zip(tensors, planned, strict=True):
        print(
            f"  {t.id:26s} {t.model:11s} {t.layout:44s} {t.measured_gb:8.1f} "
            f"{t.predicted_gb:9.1f} {t.error_pct:+6.1f}% {p.predicted_gb:8.1f} {p.error_pct:+6.1f}% "
            f"{t.states_gb:6.1f} {t.activations_gb:5.1f} {t.other_gb:6.1f}"
        )
    print(
        f"median absolute error over {len(tensors)} runs: tensors only "
        f"{median_abs_error_pct(tensors):.1f}%, +{DEFAULT_RESERVED_GB:g} GB reserved "
        f"{median_abs_error_pct(planned):.1f}%"
    )
    groups = {
        "FSDP, selective (per-op SAC)": lambda r: "selective" in r.layout,
        "FSDP (+TP), full AC, no PP": lambda r: "full" in r.layout and " pp1 " in r.layout,
        "FSDP + TP + PP, full AC": lambda r: "full" in r.layout and " pp1 " not in r.layout,
    }
    for label, member in groups.items():
        part = [r for r in tensors if member(r)]
        if part:
            errors = ", ".join(f"{r.error_pct:+.0f}" for r in part)
            print(f"  {label}: {len(part)} runs, median |error| {median_abs_error_pct(part):.1f}%")
            print(f"    signed errors %: {errors}")
    # A term torchtitan's code shows and the model leaves out (a diagnostic, not a fit):
    # the loss upcasts the bf16 logits and its log-softmax keeps an fp32 output whose fp32
    # gradient and input gradient coexist in backward (~12 bytes per logit, the model
    # counts 4). (With PP, FSDP's unsharded stage parameters and fp32 gradients, once this
    # diagnostic's second term, are the model's own: models.memory.zero3_kept_bytes.)
    diag = [100.0 * (t.predicted_gb + 2.0 * t.other_gb - t.measured_gb) / t.measured_gb
            for t in tensors]  # fmt: skip
    print(
        "diagnostic, tensors only + logits at 12 bytes: "
        f"median |error| {statistics.median(abs(d) for d in diag):.1f}%\n"
        f"    signed errors % (rows in order): {', '.join(f'{d:+.0f}' for d in diag)}"
    )
    mean_t = statistics.mean(r.error_pct for r in tensors)
    mean_p = statistics.mean(r.error_pct for r in planned)
    print(
        f"mean signed error: tensors only {mean_t:+.1f}%, +{DEFAULT_RESERVED_GB:g} GB {mean_p:+.1f}%"
    )


if __name__ == "__main__":
    if "--published" in sys.argv[1:]:
        published_check()
    elif "--measured" in sys.argv[1:]:
        measured_check()
    else:
        main()
