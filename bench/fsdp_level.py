"""The pytorch-fsdp2 stack profile's level: its compute_time_factor, fitted by source.

Usage: python bench/fsdp_level.py

The pytorch-fsdp2 profile (catalog/data/gpus.yaml) is megatron-core's with a micro-batch's
compute taking ``compute_time_factor`` times as long (catalog.specs.scaled_compute): one
constant for every GPU, its collectives and ZeRO-3 terms (overlap, per-micro-batch fp32
reduce-scatter, contention) as megatron-core's. The public PyTorch FSDP runs, by source
(every row evaluated as ZeRO-3 over its data-parallel ranks, the overlap terms on):

- olmo-core: the 16 OLMo-core README rows on H100 (allenai/OLMo-core README at
  e27ba74550f1, 2024-11-05; bench/fsdp_overlap.py olmo_core_runs: its scripts' layouts,
  8 and 64 GPUs assumed);
- torchtitan: the 22 FSDP2 rows of the layout sweeps (bench/data/ranking/layout_sweeps.csv,
  8 GB200, Baisya 2026-01-05) and the torchtitan rows of
  bench/data/published/extra_runs.csv on catalog GPUs (3 on A100, 2 on H200; its 33
  H100-96GB-HBM2e rows have no catalog GPU);
- fms-fsdp: the 8 rows of IBM's fms-fsdp README table (extra_runs.csv, H100 and A100;
  bench/fsdp_overlap.py fms_fsdp_runs).

A row's error is measured step / predicted step - 1 (the predicted throughput over the
measured: + the model too fast). The fit takes the factor on a grid of FACTOR_STEP that
minimises the mean, over the fitted sources, of each source's mean absolute error (each
source one vote, however many rows it has), on the fitted rows only (fit_mask): those
whose megatron-core base has measured runs of their GPU and precision (the level is a
ratio to that base; BF16 on Blackwell is extrapolated, so the GB200 sweep rows are scored,
not fitted) on a GPU without a pytorch-fsdp2 profile of its own (own_level: the A100's,
megatron-core's 2021-22 profile with FlashAttention-2's attention efficiency, set from
Dao 2023, not fitted). Printed: every source under megatron-core and under the catalog's
profile; the fit on all three sources (in-sample); each source held out (fitted on the
other two, scored on it: out-of-sample); OLMo-core held out by model size (fitted on the
other sizes' OLMo-core rows); and each GPU with a profile of its own checked on its rows
(own_check: its MAE there, at the common level and under megatron-core, and the factor a
fit on them would choose). The catalog's value is the fit on all three sources
(FIT_SOURCES), rounded to FACTOR_STEP.

Then two checks of the ZeRO-3 gather overlap (param_gather_overlap_fraction), which the
profile inherits from megatron-core: each source's error from issue 31's filing (the
megatron-core profile without the overlap, the per-micro-batch reduce-scatter or the
contention) to now, LLaMA-65B / OPT-175B (bench/fsdp_overlap.py RUNS) included; and the
overlap cross-validated: at each fraction of FRACTION_GRID the level is refitted, on all
three sources (in-sample) and on all but one (that source scored out of sample), so the
overlap is judged with its own level rather than against a level fitted without it.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))
sys.path.insert(0, str(BENCH))

import fsdp_overlap  # noqa: E402
import ranking  # noqa: E402

from calibration import published  # noqa: E402
from catalog import load_catalog  # noqa: E402
from catalog.catalog import Catalog  # noqa: E402
from catalog.specs import Calibration, scaled_compute  # noqa: E402
from models.evaluate import Hardware, evaluate  # noqa: E402
from models.evidence_rule import pair_evidence  # noqa: E402

FSDP2 = "pytorch-fsdp2"
FRACTION = "param_gather_overlap_fraction"
BASE = "megatron-core"
SOURCES = ("olmo-core", "torchtitan", "fms-fsdp")
FIT_SOURCES = SOURCES
FACTOR_STEP = 0.01
FACTOR_GRID = tuple(round(0.80 + FACTOR_STEP * i, 2) for i in range(121))  # 0.80 to 2.00


@dataclass(frozen=True)
class LevelRow:
    """One measured PyTorch FSDP run: its source, label, (measured, predicted) step
    seconds under a catalog whose pytorch-fsdp2 profile is in effect for it, GPU and
    precision."""

    source: str
    label: str
    steps: Callable[[Catalog], tuple[float, float]]
    gpu: str  # the catalog GPU it ran on
    precision: str

    def error(self, cat: Catalog) -> float:
        measured, predicted = self.steps(cat)
        return measured / predicted - 1.0


# the stack's own mechanisms, which every pytorch-fsdp2 profile sets over its megatron-core
# one whatever its level (catalog/data/gpus.yaml): with PP, torchtitan's stages keep their
# parameters unsharded across a step's micro-batches (models.memory.zero3_kept_bytes)
STACK_FIELDS = {"zero3_pp_unsharded_params": True}


def derived(gpu, factor: float, stack: bool = True) -> dict:
    """``gpu``'s megatron-core profile at ``factor`` (catalog.specs.scaled_compute), with
    the stack's mechanisms (STACK_FIELDS) when ``stack``: the catalog's derivation of the
    pytorch-fsdp2 profile; without them at factor 1, megatron-core's own profile."""
    fields = scaled_compute(gpu.stacks[BASE].model_dump(), factor)
    return fields | STACK_FIELDS if stack else fields


def own_level(cat: Catalog, name: str) -> bool:
    """Whether GPU ``name``'s pytorch-fsdp2 profile is not the common level's derivation
    (its megatron-core profile at the H100's factor, with the stack's mechanisms): a
    profile of its own (the A100's, catalog/data/gpus.yaml), which the common level's fit
    neither moves nor reads."""
    gpu = cat.gpu(name)
    common = derived(gpu, _catalog_factor(cat))
    return gpu.stacks[FSDP2].model_dump() != {**common, "note": gpu.stacks[FSDP2].note}


def with_level(
    cat: Catalog,
    factor: float,
    fraction: float | None = None,
    own: bool = True,
    stack: bool | None = None,
) -> Catalog:
    """``cat`` with every GPU's pytorch-fsdp2 profile re-derived from its megatron-core one
    at ``factor`` (the catalog's derivation: derived), except, with ``own``, a GPU with a
    profile of its own (own_level: kept), its param_gather_overlap_fraction at
    ``fraction`` when given (the catalog's otherwise). ``stack``: whether the derivation
    carries the stack's mechanisms (STACK_FIELDS); None, all but megatron-core's own
    profile, which ``own=False`` at factor 1 is on every GPU."""
    if stack is None:
        stack = own or factor != 1.0
    gpus = {}
    for name, gpu in cat.gpus.items():
        fields = (
            gpu.stacks[FSDP2].model_dump()
            if own and own_level(cat, name)
            else derived(gpu, factor, stack)
        )
        if fraction is not None:
            fields[FRACTION] = fraction
        gpus[name] = _with_fsdp2(gpu, fields)
    return replace(cat, gpus=gpus)


def _with_fsdp2(gpu, fields: dict):
    """``gpu`` with its pytorch-fsdp2 profile made of ``fields`` (its note kept)."""
    prof = Calibration.model_validate({**fields, "note": gpu.stacks[FSDP2].note})
    return gpu.model_copy(update={"stacks": {**gpu.stacks, FSDP2: prof}})


def _published_step(
    spec, layout, gpu: str, nic: str, nics: int, measured: float, framework: str = ""
):
    def steps(cat: Catalog) -> tuple[float, float]:
        hw = Hardware.from_catalog(cat.with_stack(FSDP2), gpu, nic, nics)
        hw = fsdp_overlap.source_profile(framework, hw)
        return measured, evaluate(spec, hw, layout).step_time_s

    return steps


def olmo_rows() -> list[LevelRow]:
    """The OLMo-core README rows: measured step = tokens a step / (tokens/s/GPU x GPUs)."""
    out = []
    for label, spec, lay, tps, _unit in fsdp_overlap.olmo_core_runs():
        measured = lay.global_batch * spec.seq_len / (tps * lay.num_gpus)
        out.append(
            LevelRow(
                "olmo-core",
                label,
                _published_step(spec, lay, "h100-sxm", "cx7-400g", 8, measured),
                "h100-sxm",
                lay.precision,
            )
        )
    return out


def extra_rows(cat: Catalog, framework: str, source: str) -> list[LevelRow]:
    """extra_runs.csv rows of ``framework`` on catalog GPUs, as ZeRO-3
    (bench/fsdp_overlap.py pytorch_fsdp_runs: their NICs as it reads them)."""
    return [
        LevelRow(
            source,
            label,
            _published_step(
                spec, lay, hw.gpu.name, hw.nic.name, hw.nics_per_node, measured, framework
            ),
            hw.gpu.name,
            lay.precision,
        )
        for label, spec, lay, hw, measured in fsdp_overlap.pytorch_fsdp_runs(cat, framework)
    ]


def sweep_level_rows() -> list[LevelRow]:
    """The layout sweeps' FSDP2 rows (ZeRO-3), predicted as bench/ranking.py does."""

    def steps_of(row: dict[str, str]) -> Callable[[Catalog], tuple[float, float]]:
        return lambda cat: ranking.sweep_step_s(row, cat)[:2]

    return [
        LevelRow(
            "torchtitan",
            f"{r['model']} s{r['seq_len']} {ranking._sweep_layout_name(r)}",
            steps_of(r),
            published.GPU_NAMES[r["gpu"]][0],
            r["precision"],
        )
        for r in ranking.sweep_rows()
        if int(r["zero"]) >= 3
    ]


def level_rows(cat: Catalog) -> list[LevelRow]:
    """Every source's rows (SOURCES)."""
    return [
        *olmo_rows(),
        *sweep_level_rows(),
        *extra_rows(cat, "torchtitan", "torchtitan"),
        *extra_rows(cat, fsdp_overlap.FMS_FSDP, "fms-fsdp"),
    ]


def source_mae(errors: Iterable[tuple[str, float]]) -> dict[str, float]:
    """Each source's mean absolute error of (source, error) pairs."""
    by: dict[str, list[float]] = {}
    for source, err in errors:
        by.setdefault(source, []).append(abs(err))
    return {s: statistics.mean(v) for s, v in by.items()}


def errors_at(
    cat: Catalog,
    rows: list[LevelRow],
    factor: float,
    fraction: float | None = None,
    own: bool = True,
) -> list[tuple[str, float]]:
    """(source, error) of each row with the pytorch-fsdp2 profile at ``factor`` (and its
    gather overlap at ``fraction`` when given; with_level's ``own``)."""
    c = with_level(cat, factor, fraction, own)
    return [(r.source, r.error(c)) for r in rows]


def base_measured(cat: Catalog, row: LevelRow) -> bool:
    """Whether megatron-core has measured runs of ``row``'s GPU and precision (its tier is
    not extrapolated: models.evidence_rule). The level is a ratio to that profile, so a
    row on an extrapolated base (GB200 BF16) would fit the base's own error into it."""
    evidence = cat.gpu(row.gpu).measured.get(BASE)
    return pair_evidence(row.gpu, evidence, row.precision).tier != "extrapolated"


def fit_mask(cat: Catalog, rows: list[LevelRow]) -> list[bool]:
    """The rows the common level is fitted on: a measured base (base_measured) and no
    profile of their GPU's own (own_level). The others are scored, not fitted."""
    return [base_measured(cat, r) and not own_level(cat, r.gpu) for r in rows]


ErrorTable = dict[float, list[tuple[str, float]]]


def error_table(cat: Catalog, rows: list[LevelRow], fraction: float | None = None) -> ErrorTable:
    """errors_at for every FACTOR_GRID value: each row evaluated once per factor, so every
    fit of a subset of the rows reads it instead of evaluating again."""
    return {f: errors_at(cat, rows, f, fraction) for f in FACTOR_GRID}


def _objective(errors: Iterable[tuple[str, float]]) -> float:
    """The fit's objective: the mean over the rows' sources of each source's mean absolute
    error (each source one vote, however many rows it has)."""
    return statistics.mean(source_mae(errors).values())


def _fit_table(table: ErrorTable, keep: list[bool]) -> tuple[float, float]:
    """(factor, objective) minimising the objective over the rows ``keep`` marks."""
    best = min(
        (_objective(e for e, k in zip(errs, keep, strict=True) if k), f)
        for f, errs in table.items()
    )
    return best[1], best[0]


def fit(cat: Catalog, rows: list[LevelRow], fraction: float | None = None) -> tuple[float, float]:
    """(factor, objective): the FACTOR_GRID value minimising the mean over the sources of
    each source's mean absolute error on the fitted rows (fit_mask)."""
    return _fit_table(error_table(cat, rows, fraction), fit_mask(cat, rows))


def _held_out_table(
    table: ErrorTable, rows: list[LevelRow], key: Callable[[LevelRow], str], mask: list[bool]
):
    """Per value of ``key``: the factor fitted on the other values' fitted rows, and the
    mean absolute error there of every row of that value (fitted or scored only)."""
    out = {}
    for value in sorted({key(r) for r in rows}):
        keep = [m and key(r) != value for r, m in zip(rows, mask, strict=True)]
        factor, _ = _fit_table(table, keep)
        test = [abs(e) for (_, e), r in zip(table[factor], rows, strict=True) if key(r) == value]
        out[value] = (factor, statistics.mean(test))
    return out


def held_out(
    cat: Catalog,
    rows: list[LevelRow],
    key: Callable[[LevelRow], str],
    fraction: float | None = None,
):
    """Per value of ``key``: (its rows' factor fitted without them, their mean absolute
    error at it)."""
    return _held_out_table(error_table(cat, rows, fraction), rows, key, fit_mask(cat, rows))


# the gather overlap fractions cross-validated (fraction_cv), and the ZeRO-3 charge as it
# stood when issue 31 was filed: no overlap, no per-micro-batch reduce-scatter, no contention
FRACTION_GRID = tuple(round(0.05 * i, 2) for i in range(21))
AT_FILING = {
    FRACTION: 0.0,
    "zero3_microbatch_grad_reduce_bytes": 0.0,
    "zero3_overlap_hbm_passes": 0.0,
}


@dataclass(frozen=True)
class FractionFit:
    """The level fitted with the gather overlap at ``fraction``: in-sample (factor, each
    source's MAE) and each source held out ({source: (factor fitted without it, its MAE)})."""

    fraction: float
    factor: float
    in_sample: dict[str, float]
    held_out: dict[str, tuple[float, float]]

    @property
    def held_out_mean(self) -> float:
        return statistics.mean(m for _, m in self.held_out.values())


def fraction_fit(cat: Catalog, rows: list[LevelRow], fraction: float) -> FractionFit:
    """The level refitted at one overlap fraction, in-sample and by source held out."""
    table, mask = error_table(cat, rows, fraction), fit_mask(cat, rows)
    factor, _ = _fit_table(table, mask)
    return FractionFit(
        fraction,
        factor,
        source_mae(table[factor]),
        _held_out_table(table, rows, lambda r: r.source, mask),
    )


def fraction_cv(cat: Catalog, rows: list[LevelRow], fractions=FRACTION_GRID) -> list[FractionFit]:
    """fraction_fit at every fraction: which overlap the runs support out of sample (each
    source scored at the level fitted on the other sources, at the same fraction)."""
    return [fraction_fit(cat, rows, f) for f in fractions]


def paper_mae(cat: Catalog) -> float:
    """The LLaMA-65B / OPT-175B rows' mean absolute error (bench/fsdp_overlap.py RUNS:
    2022-23 FSDP, layouts assumed) on ``cat``'s A100 profile as given."""
    rows = fsdp_overlap.compare(Hardware.from_catalog(cat, "a100-80gb"), fsdp_overlap.RUNS)
    return fsdp_overlap._mae_pair(rows)[1]


def since_filing(cat: Catalog, rows: list[LevelRow]) -> dict[str, dict[str, float]]:
    """Each source's mean absolute error (LLaMA/OPT too) in four settings: at filing
    (megatron-core, AT_FILING), megatron-core now, pytorch-fsdp2 with the overlap off (its
    level refitted at fraction 0) and pytorch-fsdp2 as the catalog has it."""
    filing = fsdp_overlap.catalog_with(cat, **AT_FILING)
    off = fit(cat, rows, 0.0)[0]
    ours = _catalog_factor(cat)
    settings = {
        "at filing": (
            errors_at(filing, rows, 1.0, own=False),
            paper_mae(filing.with_stack(BASE)),
        ),
        "megatron-core now": (
            errors_at(cat, rows, 1.0, own=False),
            paper_mae(cat.with_stack(BASE)),
        ),
        f"{FSDP2} overlap off": (
            errors_at(cat, rows, off, 0.0),
            paper_mae(with_level(cat, off, 0.0).with_stack(FSDP2)),
        ),
        f"{FSDP2} (catalog)": (errors_at(cat, rows, ours), paper_mae(cat.with_stack(FSDP2))),
    }
    return {
        name: {**source_mae(errors), "LLaMA/OPT": paper}
        for name, (errors, paper) in settings.items()
    }


def _catalog_factor(cat: Catalog) -> float:
    """The catalog's common compute_time_factor: the H100's (own_factor)."""
    return own_factor(cat, "h100-sxm")


def print_fraction_cv(cat: Catalog, rows: list[LevelRow]) -> None:
    fits = fraction_cv(cat, rows)
    ours = cat.gpu("h100-sxm").stacks[FSDP2].param_gather_overlap_fraction
    print(
        f"\n{FRACTION} cross-validated: at each fraction the level refitted on all sources "
        "(in-sample) and on all but one (that source's MAE out of sample)"
    )
    print(f"{'fraction':>8} {'factor':>6} " + " ".join(f"{s + ' in/out':>22}" for s in SOURCES)
          + f" {'mean out':>8}")  # fmt: skip
    for ff in fits:
        cells = " ".join(
            f"{f'{ff.in_sample[s]:.1%} / {ff.held_out[s][1]:.1%}':>22}" for s in SOURCES
        )
        print(f"{ff.fraction:8.2f} {ff.factor:6.2f} {cells} {ff.held_out_mean:8.1%}")
    best = min(fits, key=lambda ff: ff.held_out_mean)
    at = next(ff for ff in fits if ff.fraction == ours)
    print(
        f"best out of sample: {best.fraction:.2f} ({best.held_out_mean:.1%}); the catalog's "
        f"{ours:.2f}: {at.held_out_mean:.1%}; off (0): {fits[0].held_out_mean:.1%}"
    )


def print_since_filing(cat: Catalog, rows: list[LevelRow]) -> None:
    table = since_filing(cat, rows)
    names = [*SOURCES, "LLaMA/OPT"]
    print("\nmean absolute error by source, from issue 31's filing to now")
    print(f"{'setting':28} " + " ".join(f"{n:>11}" for n in names))
    for setting, maes in table.items():
        print(f"{setting:28} " + " ".join(f"{maes[n]:11.1%}" for n in names))


def own_fields(cat: Catalog, name: str) -> dict:
    """The fields GPU ``name``'s own pytorch-fsdp2 profile sets over its megatron-core
    profile at its own factor (the A100's attention_efficiency)."""
    gpu = cat.gpu(name)
    ours = gpu.stacks[FSDP2].model_dump()
    scaled = derived(gpu, own_factor(cat, name))
    return {k: v for k, v in ours.items() if k != "note" and v != scaled.get(k)}


def own_factor(cat: Catalog, name: str) -> float:
    """The compute_time_factor of GPU ``name``'s pytorch-fsdp2 profile: megatron-core's
    GEMM efficiency over pytorch-fsdp2's, to FACTOR_STEP."""
    stacks = cat.gpu(name).stacks
    return round(stacks[BASE].matmul_efficiency / stacks[FSDP2].matmul_efficiency, 2)


def with_own_factor(cat: Catalog, name: str, factor: float) -> Catalog:
    """``cat`` with GPU ``name``'s own profile re-derived at ``factor`` (its own fields
    kept): what a fit of that GPU's level would move."""
    gpu = cat.gpu(name)
    fields = derived(gpu, factor) | own_fields(cat, name)
    return replace(cat, gpus={**cat.gpus, name: _with_fsdp2(gpu, fields)})


def own_check(cat: Catalog, rows: list[LevelRow], name: str) -> dict[str, float]:
    """A GPU with a profile of its own, checked on its rows (set, not fitted): their MAE
    under megatron-core, at the common level, under its own profile, and the factor a fit
    of its own level on them would choose (with its MAE there)."""
    mine = [r for r in rows if r.gpu == name]
    if not mine:
        return {}
    common = with_level(cat, _catalog_factor(cat), own=False)

    def mae(c: Catalog) -> float:
        return statistics.mean(abs(r.error(c)) for r in mine)

    table = {f: [(r.source, r.error(with_own_factor(cat, name, f))) for r in mine]
             for f in FACTOR_GRID}  # fmt: skip
    best, obj = _fit_table(table, [True] * len(mine))
    return {
        "rows": len(mine),
        "megatron-core": mae(with_level(cat, 1.0, own=False)),
        "common": mae(common),
        "own": mae(cat),
        "own_factor": own_factor(cat, name),
        "fit_factor": best,
        "fit_objective": obj,
    }


def print_own_checks(cat: Catalog, rows: list[LevelRow]) -> None:
    for name in sorted({r.gpu for r in rows if own_level(cat, r.gpu)}):
        c = own_check(cat, rows, name)
        fields = ", ".join(f"{k} {v}" for k, v in own_fields(cat, name).items())
        print(
            f"{name}: a profile of its own (factor {c['own_factor']:.2f}, {fields}; set, not "
            f"fitted): its {c['rows']} rows' MAE {c['own']:.1%}, against {c['common']:.1%} at "
            f"the common level and {c['megatron-core']:.1%} under {BASE}; a fit of its "
            f"factor on them would choose {c['fit_factor']:.2f} ({c['fit_objective']:.1%})"
        )


def olmo_size(row: LevelRow) -> str:
    """The model size of an OLMo-core row ('1B', '7B', '8B', '13B')."""
    return row.label.split(" ")[1]


def print_report(cat: Catalog, rows: list[LevelRow]) -> None:
    factor = _catalog_factor(cat)
    base = errors_at(cat, rows, 1.0, own=False)  # megatron-core's profile
    ours = errors_at(cat, rows, factor)
    print(
        f"\n{FSDP2} profile: compute_time_factor {factor:.2f} (catalog), "
        "error = predicted / measured throughput - 1"
    )
    print(f"{'source':12} {'rows':>4} {BASE + ' MAE':>18} {FSDP2 + ' MAE':>18} {'bias':>7}")
    for s in SOURCES:
        b = [e for src, e in base if src == s]
        o = [e for src, e in ours if src == s]
        mae_b, mae_o = statistics.mean(map(abs, b)), statistics.mean(map(abs, o))
        print(f"{s:12} {len(o):4d} {mae_b:18.1%} {mae_o:18.1%} {statistics.mean(o):+7.1%}")
    print(
        f"{'LLaMA/OPT':12} {len(fsdp_overlap.RUNS):4d} {paper_mae(cat.with_stack(BASE)):18.1%} "
        f"{paper_mae(cat.with_stack(FSDP2)):18.1%}  (2022-23 FSDP, layouts assumed: not fitted)"
    )
    fitted = [r for r in rows if r.source in FIT_SOURCES]
    f_all, obj = fit(cat, fitted)
    mask = fit_mask(cat, fitted)
    counts = ", ".join(
        f"{s} {sum(m for r, m in zip(fitted, mask, strict=True) if r.source == s)}"
        for s in FIT_SOURCES
    )
    print(
        f"fit on {', '.join(FIT_SOURCES)} (in-sample): factor {f_all:.2f}, "
        f"mean of the sources' MAE on the fitted rows {obj:.1%}; fitted rows ({counts}): "
        "a measured megatron-core base and no GPU profile of its own; the others scored only"
    )
    print("each source held out (fitted on the others, scored on it: out-of-sample)")
    for s, (f, mae) in held_out(cat, rows, lambda r: r.source).items():
        print(f"  {s:12} factor {f:.2f}  MAE {mae:.1%}")
    olmo = [r for r in rows if r.source == "olmo-core"]
    sizes = held_out(cat, olmo, olmo_size)
    print("OLMo-core rows, each model size held out (fitted on the other sizes' rows)")
    for s, (f, mae) in sizes.items():
        print(f"  {s:12} factor {f:.2f}  MAE {mae:.1%}")
    print(f"  all {len(olmo)} rows: MAE {statistics.mean(m for _, m in sizes.values()):.1%}")
    print_own_checks(cat, rows)


def main() -> None:
    cat = load_catalog()
    rows = level_rows(cat)
    print_report(cat, rows)
    print_since_filing(cat, rows)
    print_fraction_cv(cat, rows)


if __name__ == "__main__":
    main()
