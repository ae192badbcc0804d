"""Fit the catalog's calibration constants on a calibration set.

Usage:
  python bench/calibrate.py [--iterations N]
      the vtrain-2022 profile (A100) on the vTrain set: the mean of the multi-server
      and single-server MAPE;
  python bench/calibrate.py --set published --gpu GPU [--fields F,F,...] [--iterations N]
      the megatron-core profile of GPU on its published runs
      (bench/data/published, calibration/published.py): their MAPE plus the excess
      over 25% of the worst row of the shared calibration set;
      --fields limits the fit to some constants (the others stay as shipped, e.g.
      the software mechanisms fitted on H100 when a platform has few runs);
      --hold-out-organisations also fits on each organisation's runs left out
      (organisations.csv) and scores them at that fit (out-of-sample).
Nelder-Mead over the constants of catalog.Calibration, starting from the shipped
values; prints the fitted block to paste into catalog/data/gpus.yaml. Only the
calibration sets are used, never the held-out sources (DEVELOPERS guide).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from calibration import published as pub  # noqa: E402
from calibration.vtrain import mape, predict, read_rows, vtrain_hardware  # noqa: E402
from catalog import load_catalog  # noqa: E402

FIELDS = (
    "matmul_efficiency",
    "matmul_half_width",
    "elementwise_passes",
    "kernel_overhead_us_per_layer",
    "host_issue_us_per_layer",
    "scale_up_bus_efficiency",
    "network_bus_efficiency",
    "collective_latency_us",
    "pp_sync_us_per_send",
)
MODERN_FIELDS = (
    "matmul_efficiency",
    "attention_efficiency",
    "fp8_matmul_efficiency",
    "elementwise_passes",
    "fp8_cast_passes",
    "kernel_overhead_us_per_layer",
    "host_issue_us_per_layer",
    "scale_up_bus_efficiency",
    "network_bus_efficiency",
    "collective_latency_us",
    "tp_overlap_fraction",
    "pp_overlap_fraction",
    "grad_overlap_fraction",
)
BOUNDS = {
    "attention_efficiency": (0.05, 1.0),
    "fp8_matmul_efficiency": (0.05, 1.0),
    "fp8_cast_passes": (0.0, 20.0),
    "tp_overlap_fraction": (0.0, 1.0),
    "pp_overlap_fraction": (0.0, 1.0),
    "grad_overlap_fraction": (0.0, 1.0),
    "matmul_efficiency": (0.05, 1.0),
    "matmul_half_width": (0.0, 5000.0),
    "elementwise_passes": (0.0, 20.0),
    "kernel_overhead_us_per_layer": (0.0, 5000.0),
    "host_issue_us_per_layer": (0.0, 5000.0),
    "scale_up_bus_efficiency": (0.05, 1.0),
    "network_bus_efficiency": (0.05, 1.0),
    "collective_latency_us": (0.0, 2000.0),
    "pp_sync_us_per_send": (0.0, 20000.0),
}


def objective_factory():
    catalog = load_catalog()
    base_hw = vtrain_hardware(catalog)
    multi, single = read_rows("multi"), read_rows("single")

    def hardware(x):
        values = {f: float(np.clip(v, *BOUNDS[f])) for f, v in zip(FIELDS, x, strict=True)}
        cal = base_hw.gpu.calibration.model_copy(update=values)
        gpu = base_hw.gpu.with_calibration(cal)
        return dataclasses.replace(base_hw, gpu=gpu), values

    def objective(x):
        hw, _ = hardware(x)
        return 0.5 * (mape(predict(multi, catalog, hw)) + mape(predict(single, catalog, hw)))

    start = np.array([getattr(base_hw.gpu.calibration, f) for f in FIELDS], dtype=float)
    return objective, hardware, start


def start_point(start: np.ndarray, seed: str) -> np.ndarray:
    """``start`` with FIELD=VALUE pairs of ``seed`` (comma-separated) put in: a constant
    shipped at 0 (a mechanism switched off) needs a non-zero start for the simplex."""
    x = start.copy()
    for pair in filter(None, seed.split(",")):
        field, value = pair.split("=")
        x[FIELDS.index(field)] = float(value)
    return x


def published_objective_factory(
    gpu_name: str, fields: tuple[str, ...], organisations: frozenset[str] | None = None
):
    """Objective on the published runs of one GPU under the megatron-core profile (those
    of ``organisations`` only, where given)."""
    catalog = load_catalog().with_stack(pub.MODERN_STACK)
    runs = [
        r
        for r in pub.read_runs(catalog)[0]
        if r.gpu == gpu_name and (organisations is None or r.organisation in organisations)
    ]
    if not runs:
        raise SystemExit(f"--gpu: no published runs for {gpu_name}")
    base = catalog.gpu(gpu_name)

    def fitted_catalog(x):
        values = {f: float(np.clip(v, *BOUNDS[f])) for f, v in zip(fields, x, strict=True)}
        return with_fitted(catalog, gpu_name, values), values

    def objective(x):
        cat, _ = fitted_catalog(x)
        preds = pub.predict(runs, cat, pub.MODERN_STACK)
        shared = [abs(p.error) for p in preds if p.run.shared] or [0.0]
        return mape(preds) + max(0.0, max(shared) - 0.25)

    start = np.array([getattr(base.calibration, f) or 0.5 for f in fields], dtype=float)
    return objective, fitted_catalog, start


def with_fitted(catalog, gpu_name: str, values: dict[str, float]):
    """``catalog`` with GPU's calibration (its megatron-core profile) set to ``values``."""
    base = catalog.gpu(gpu_name)
    gpu = base.with_calibration(base.calibration.model_copy(update=values))
    return dataclasses.replace(catalog, gpus={**catalog.gpus, gpu_name: gpu})


def fit_published(
    gpu_name: str,
    fields: tuple[str, ...],
    iterations: int,
    organisations: frozenset[str] | None = None,
) -> tuple[dict[str, float], float, float]:
    """(fitted values, start objective, fitted objective) of ``fields`` on GPU's published
    runs (of ``organisations`` only, where given): Nelder-Mead from the shipped values,
    three restarts (it stalls in many dimensions)."""
    objective, fitted, start = published_objective_factory(gpu_name, fields, organisations)
    start_value = objective(start)
    for _ in range(3):
        start, value = nelder_mead(objective, start, iterations)
    return fitted(start)[1], start_value, value


def held_out_by_organisation(
    gpu_name: str, fields: tuple[str, ...], iterations: int
) -> dict[str, tuple[dict[str, float], float, float]]:
    """Per organisation with published runs on GPU (when another has runs too): the
    ``fields`` fitted on the other organisations' runs (fit_published), and its own runs'
    MAPE and mean signed error at that fit (out-of-sample)."""
    catalog = load_catalog().with_stack(pub.MODERN_STACK)
    runs = [r for r in pub.read_runs(catalog)[0] if r.gpu == gpu_name]
    orgs = {r.organisation for r in runs}
    out = {}
    for org in sorted(orgs) if len(orgs) > 1 else ():
        values, _, _ = fit_published(gpu_name, fields, iterations, frozenset(orgs - {org}))
        cat = with_fitted(catalog, gpu_name, values)
        preds = pub.predict([r for r in runs if r.organisation == org], cat, pub.MODERN_STACK)
        out[org] = (values, mape(preds), sum(p.error for p in preds) / len(preds))
    return out


def nelder_mead(f, x0, iterations, step=0.25):
    n = len(x0)
    simplex = [x0] + [x0 + np.eye(n)[i] * (step * x0[i] if x0[i] else step) for i in range(n)]
    values = [f(x) for x in simplex]
    for _ in range(iterations):
        order = np.argsort(values)
        simplex = [simplex[i] for i in order]
        values = [values[i] for i in order]
        centroid = np.mean(simplex[:-1], axis=0)
        worst = simplex[-1]
        xr = centroid + (centroid - worst)
        fr = f(xr)
        if fr < values[0]:
            xe = centroid + 2 * (centroid - worst)
            fe = f(xe)
            simplex[-1], values[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = xr, fr
        else:
            xc = centroid + 0.5 * (worst - centroid)
            fc = f(xc)
            if fc < values[-1]:
                simplex[-1], values[-1] = xc, fc
            else:
                best = simplex[0]
                simplex = [best + 0.5 * (x - best) for x in simplex]
                values = [values[0]] + [f(x) for x in simplex[1:]]
    i = int(np.argmin(values))
    return simplex[i], values[i]


def print_published_fit(gpu: str, field_list: str, iterations: int, hold_out: bool) -> None:
    """The fit of ``field_list`` (comma-separated) on GPU's published runs, printed as the
    block to paste; with ``hold_out``, each organisation's runs scored at the fit on the
    others' (held_out_by_organisation)."""
    fields = tuple(f for f in field_list.split(",") if f)
    unknown = [f for f in fields if f not in BOUNDS]
    if unknown:
        raise SystemExit(f"--fields: unknown {unknown}; choose from {sorted(BOUNDS)}")
    values, start_value, value = fit_published(gpu, fields, iterations)
    print(f"start: objective {100 * start_value:.2f}%")
    print(f"fitted: objective {100 * value:.2f}%")
    for field in fields:
        print(f"        {field}: {values[field]:.4g}")
    if not hold_out:
        return
    print("each organisation held out (fitted on the others' runs, scored on its own)")
    for org, (held, err, bias) in held_out_by_organisation(gpu, fields, iterations).items():
        fitted = ", ".join(f"{f} {v:.4g}" for f, v in held.items())
        print(f"  {org:14} {fitted}: MAPE {100 * err:.1f}%, mean signed {100 * bias:+.1f}%")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--set", choices=("vtrain", "published"), default="vtrain")
    parser.add_argument("--gpu", default="h100-sxm", help="with --set published")
    parser.add_argument("--fields", default=",".join(MODERN_FIELDS), help="with --set published")
    parser.add_argument(
        "--start", default="", help="vtrain: FIELD=VALUE,... to start from instead of the shipped"
    )
    parser.add_argument(
        "--hold-out-organisations",
        action="store_true",
        help="with --set published: also fit without each organisation's runs, score them",
    )
    args = parser.parse_args()
    if args.set == "published":
        print_published_fit(args.gpu, args.fields, args.iterations, args.hold_out_organisations)
        return
    objective, hardware, start = objective_factory()
    start = start_point(start, args.start)
    print(f"start: mean MAPE {100 * objective(start):.2f}%")
    best, value = nelder_mead(objective, start, args.iterations)
    _, values = hardware(best)
    print(f"fitted: mean MAPE {100 * value:.2f}%")
    for field in FIELDS:
        print(f"      {field}: {values[field]:.4g}")


if __name__ == "__main__":
    main()
