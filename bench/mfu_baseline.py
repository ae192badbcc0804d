"""A constant-MFU predictor, fitted on the calibration sets: the baseline designer must beat.

Usage: python bench/mfu_baseline.py        (the fitted efficiencies and both predictors' MAPE)

step time = model FLOPs per step / (GPUs x dense peak x efficiency), with ONE efficiency
per (software stack, GPU, precision): no communication, no pipeline bubble, no
recomputation, no memory. Model FLOPs are models.flops.model_flops_per_token (the 6N +
attention count, unpadded vocabulary) x global batch x sequence; dense peaks are the
catalog's. This is what llm-analysis with one efficiency per GPU and precision computes
(issue 35).

Fit: the efficiency that minimises the mean absolute percentage error over the group's
calibration runs. With x_i the run's achieved fraction of peak (model FLOPs / (GPUs x peak x
measured step)), the error of efficiency e is mean |x_i / e - 1| = mean x_i |1/e - 1/x_i|,
piecewise linear and convex in u = 1/e, minimised at the median of 1/x_i weighted by x_i.

Calibration sets, the same ones designer's profiles are fitted and checked on:
vTrain (bench/data/vtrain, A100, vtrain-2022: 1,549 runs) and the published runs
(bench/data/published/published_runs.csv and extra_runs.csv, megatron-core).
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from calibration import published  # noqa: E402
from calibration.vtrain import VTRAIN_GPU, VTRAIN_STACK, Row, predict, read_rows
from catalog import load_catalog  # noqa: E402
from catalog.catalog import Catalog  # noqa: E402
from models import flops  # noqa: E402
from models.transformer import TransformerSpec  # noqa: E402

Key = tuple[str, str, str]  # (stack, catalog GPU, precision)


@dataclass(frozen=True)
class Sample:
    """One calibration run as the baseline sees it."""

    key: Key
    model_flops: float  # per step
    gpus: int
    peak_tflops: float
    measured_s: float
    designer_s: float  # designer's prediction, for the side-by-side error
    origin: str  # "vtrain multi", "vtrain single", a published file name

    @property
    def achieved(self) -> float:
        """Fraction of peak the run achieved in model FLOPs."""
        return self.model_flops / (self.gpus * self.peak_tflops * 1e12 * self.measured_s)


def step_s(model_flops: float, gpus: int, peak_tflops: float, efficiency: float) -> float:
    """The constant-MFU step time (module docstring)."""
    return model_flops / (gpus * peak_tflops * 1e12 * efficiency)


def vtrain_spec(row: Row) -> TransformerSpec:
    """The vTrain row's model with GPT-2's unpadded vocabulary (model FLOPs do not count
    Megatron's padding, so equal models give equal FLOPs at any TP)."""
    return TransformerSpec(
        name=f"gpt-h{row.hidden}-l{row.layers}",
        layers=row.layers,
        hidden=row.hidden,
        heads=row.heads,
        vocab=50257,
        seq_len=row.seq_len,
        tied_embeddings=True,
    )


def vtrain_flops(row: Row) -> float:
    return (
        flops.model_flops_per_token(vtrain_spec(row), row.seq_len) * row.global_batch * row.seq_len
    )


def vtrain_samples(catalog: Catalog, name: str) -> list[Sample]:
    peak = catalog.gpu(VTRAIN_GPU).peak_tflops("bf16") or 0.0
    key = (VTRAIN_STACK, VTRAIN_GPU, "bf16")
    return [
        Sample(
            key,
            vtrain_flops(p.row),
            p.row.gpus,
            peak,
            p.row.measured_ms / 1e3,
            p.predicted_ms / 1e3,
            f"vtrain {name}",
        )  # fmt: skip
        for p in predict(read_rows(name), catalog)
    ]


def published_flops(run: published.PublishedRun) -> float:
    lay = run.layout
    return flops.model_flops_per_token(run.spec, run.seq_len) * lay.global_batch * run.seq_len


def published_samples(catalog: Catalog) -> list[Sample]:
    runs, _ = published.read_runs(catalog)
    out = []
    for p in published.predict(runs, catalog):
        r = p.run
        peak = catalog.gpu(r.gpu).peak_tflops(r.precision) or 0.0
        out.append(
            Sample(
                (published.MODERN_STACK, r.gpu, r.precision),
                published_flops(r),
                r.layout.num_gpus,
                peak,
                r.measured_step_s,
                p.predicted_step_s,
                r.origin,
            )  # fmt: skip
        )
    return out


def calibration_samples(catalog: Catalog) -> list[Sample]:
    return [
        *vtrain_samples(catalog, "multi"),
        *vtrain_samples(catalog, "single"),
        *published_samples(catalog),
    ]


def fit_efficiency(achieved: Sequence[float]) -> float:
    """The efficiency minimising the MAPE of runs at these achieved fractions (module
    docstring: the x-weighted median of 1/x)."""
    pts = sorted((1.0 / x, x) for x in achieved)
    half = sum(w for _, w in pts) / 2.0
    acc = 0.0
    for u, w in pts:
        acc += w
        if acc >= half:
            return 1.0 / u
    raise ValueError("no runs to fit")


def fit(samples: Sequence[Sample]) -> dict[Key, float]:
    """One efficiency per (stack, GPU, precision)."""
    by_key: dict[Key, list[float]] = defaultdict(list)
    for s in samples:
        by_key[s.key].append(s.achieved)
    return {k: fit_efficiency(v) for k, v in sorted(by_key.items())}


def baseline_s(sample: Sample, efficiencies: dict[Key, float]) -> float:
    return step_s(sample.model_flops, sample.gpus, sample.peak_tflops, efficiencies[sample.key])


def ape(predicted: float, measured: float) -> float:
    return abs(predicted - measured) / measured


def error_table(
    samples: Sequence[Sample], efficiencies: dict[Key, float]
) -> list[tuple[str, int, float, float]]:
    """Per calibration set (and platform for the published runs): runs, designer's MAPE and
    the baseline's MAPE."""
    sets: dict[str, list[Sample]] = defaultdict(list)
    for s in samples:
        label = s.origin if s.origin.startswith("vtrain") else f"{s.origin} {s.key[1]} {s.key[2]}"
        sets[label].append(s)
        if s.origin == published.FILES[0]:  # the released calibration set as a whole
            sets[f"{s.origin} all"].append(s)
    return [
        (
            label,
            len(ss),
            statistics.mean(ape(s.designer_s, s.measured_s) for s in ss),
            statistics.mean(ape(baseline_s(s, efficiencies), s.measured_s) for s in ss),
        )
        for label, ss in sorted(sets.items())
    ]


def main() -> None:
    samples = calibration_samples(load_catalog())
    eff = fit(samples)
    print("Constant-MFU baseline: one efficiency per (stack, GPU, precision), least MAPE:")
    for (stack, gpu, prec), e in eff.items():
        n = sum(s.key == (stack, gpu, prec) for s in samples)
        print(f"  {stack:14} {gpu:10} {prec:5} n={n:5d}  efficiency {e:.3f} of dense peak")
    print("MAPE on the calibration sets (designer | constant-MFU baseline):")
    for label, n, ours, base in error_table(samples, eff):
        print(f"  {label:44} n={n:5d}  designer {100 * ours:5.1f}%  baseline {100 * base:5.1f}%")


if __name__ == "__main__":
    main()
