"""Fit the catalog's calibration constants on the vTrain calibration set.

Usage: python bench/calibrate.py [--iterations N]
Minimises the mean of the multi-server and single-server mean absolute
percentage errors with Nelder-Mead over the constants of catalog.Calibration,
starting from the shipped values, and prints the fitted block to paste into
catalog/data/gpus.yaml. Only the calibration set is used (DEVELOPERS guide).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from catalog import load_catalog  # noqa: E402
from designer.validation import mape, predict, read_rows, vtrain_hardware  # noqa: E402

FIELDS = (
    "matmul_efficiency",
    "matmul_half_width",
    "elementwise_passes",
    "kernel_overhead_us_per_layer",
    "host_issue_us_per_layer",
    "scale_up_bus_efficiency",
    "network_bus_efficiency",
    "collective_latency_us",
)
BOUNDS = {
    "matmul_efficiency": (0.05, 1.0),
    "matmul_half_width": (0.0, 5000.0),
    "elementwise_passes": (0.0, 20.0),
    "kernel_overhead_us_per_layer": (0.0, 5000.0),
    "host_issue_us_per_layer": (0.0, 5000.0),
    "scale_up_bus_efficiency": (0.05, 1.0),
    "network_bus_efficiency": (0.05, 1.0),
    "collective_latency_us": (0.0, 2000.0),
}


def objective_factory():
    catalog = load_catalog()
    base_hw = vtrain_hardware(catalog)
    multi, single = read_rows("multi"), read_rows("single")

    def hardware(x):
        values = {f: float(np.clip(v, *BOUNDS[f])) for f, v in zip(FIELDS, x, strict=True)}
        cal = base_hw.gpu.calibration.model_copy(update=values)
        gpu = base_hw.gpu.model_copy(update={"calibration": cal})
        return dataclasses.replace(base_hw, gpu=gpu), values

    def objective(x):
        hw, _ = hardware(x)
        return 0.5 * (mape(predict(multi, catalog, hw)) + mape(predict(single, catalog, hw)))

    start = np.array([getattr(base_hw.gpu.calibration, f) for f in FIELDS], dtype=float)
    return objective, hardware, start


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iterations", type=int, default=300)
    args = parser.parse_args()
    objective, hardware, start = objective_factory()
    print(f"start: mean MAPE {100 * objective(start):.2f}%")
    best, value = nelder_mead(objective, start, args.iterations)
    _, values = hardware(best)
    print(f"fitted: mean MAPE {100 * value:.2f}%")
    for field in FIELDS:
        print(f"      {field}: {values[field]:.4g}")


if __name__ == "__main__":
    main()
