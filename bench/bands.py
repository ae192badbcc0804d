"""Do the printed error bands mean what they say? A backtest on left-out published runs.

Usage: python bench/bands.py [--by run|source] [--min-runs N] [--family dense|moe]

Every plan is read with the band of its platform, precision and model family, built to
hold about 80% of new runs' signed step-time errors (calibration/error_band.py: the 10th
and 90th percentiles at the positions i / (n + 1) from 9 runs, a prediction interval on
the log-ratios under 9), widened to contain zero (models/evidence_range.py, catalog
Evidence.bands). Here each published run the model evaluates (calibration/published.py)
is left out in turn, the band is rebuilt from the others of its group the same way, and
the run counts as covered when its own error falls inside: its measured step lies in the
range that band would have printed for it. ``--by source`` leaves out every run of the run's organisation at once
(organisations.csv), the harder test: a new source's runs are read with the others'
band. A band from fewer than ``--min-runs`` runs (default 2) is not built; such runs
are listed as uncovered-by-default under "no band".

``--family moe`` backtests the mixture-of-experts bands the same way: a MoE plan reads
its GPU's band of the scored MoE rows (python bench/moe_accuracy.py, all precisions:
catalog ``measured_moe``), so each row is left out of its GPU's group; its source is
the software its row measured (moe_accuracy.row_releases: Megatron-LM, the ModelZoo,
Pai-Megatron-Patch, ...).

Caveat: the profiles' constants were fitted on the calibration set (bench/calibrate.py),
so the errors themselves are in-sample for the fit; only the band is out of sample.
Prints one line per platform and precision (runs, runs with a band, covered, coverage)
and the total; the aim is 70-90% (80% in expectation for runs of one distribution:
tests/test_error_band.py checks it by simulation).
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from calibration import published  # noqa: E402
from calibration.error_band import error_band_pct  # noqa: E402
from catalog import load_catalog  # noqa: E402


@dataclass(frozen=True)
class Coverage:
    group: str
    runs: int
    banded: int  # runs for which a band could be built from the others
    covered: int

    @property
    def pct(self) -> float | None:
        return None if not self.banded else 100.0 * self.covered / self.banded


def covered(error_pct: float, others_pct: list[float]) -> bool:
    """Whether ``error_pct`` lies in the band the other runs give (widened to contain 0)."""
    lo, hi = error_band_pct(others_pct)
    return min(lo, 0.0) <= error_pct <= max(hi, 0.0)


def backtest(
    rows: list[tuple[str, str, float]], by: str = "run", min_runs: int = 2
) -> list[Coverage]:
    """Coverage per group of ``rows`` ``(group, organisation, error_pct)``: each left out
    (``by`` run) or with its organisation's runs (``by`` source)."""
    groups: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for group, org, err in rows:
        groups[group].append((org, err))
    out = []
    for group, items in sorted(groups.items()):
        banded = hit = 0
        for i, (org, err) in enumerate(items):
            others = [e for j, (o, e) in enumerate(items) if j != i and (by == "run" or o != org)]
            if len(others) < min_runs:
                continue
            banded += 1
            hit += covered(err, others)
        out.append(Coverage(group, len(items), banded, hit))
    return out


def published_rows() -> list[tuple[str, str, float]]:
    """(platform precision, organisation, signed error in percent) of every evaluated run."""
    catalog = load_catalog()
    runs, _ = published.read_runs(catalog)
    return [
        (p.run.group, p.run.organisation, 100.0 * p.error) for p in published.predict(runs, catalog)
    ]


def moe_rows() -> list[tuple[str, str, float]]:
    """(GPU, source, signed error in percent) of every scored MoE row (the groups of the
    catalog's measured_moe bands: one per GPU, all precisions)."""
    bench = str(Path(__file__).resolve().parent)
    if bench not in sys.path:
        sys.path.insert(0, bench)  # moe_accuracy imports its neighbours
    # lazy: the MoE scoring loads the MoE rows and models, which the dense backtest skips
    import moe_accuracy

    releases = moe_accuracy.row_releases()
    return [
        (f"{gpu} moe", releases.get(name, ("", "DeepSeek"))[1], 100.0 * (ratio - 1.0))
        for _, name, _, gpu, _, ratio in moe_accuracy.all_scored()
    ]


def report(cov: list[Coverage], by: str, what: str = "published runs") -> str:
    lines = [f"band coverage on left-out {what} (left out by {by}):"]
    for c in cov:
        pct = "no band" if c.pct is None else f"{c.pct:5.1f}%"
        lines.append(
            f"  {c.group:>16}: runs {c.runs:3d}  with a band {c.banded:3d}  "
            f"covered {c.covered:3d}  {pct}"
        )
    banded = sum(c.banded for c in cov)
    hit = sum(c.covered for c in cov)
    total = f"{100.0 * hit / banded:.1f}%" if banded else "no band"
    lines.append(
        f"  {'all':>16}: runs {sum(c.runs for c in cov):3d}  with a band {banded:3d}  "
        f"covered {hit:3d}  {total}"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--by", choices=("run", "source"), default="run")
    parser.add_argument("--min-runs", type=int, default=2)
    parser.add_argument("--family", choices=("dense", "moe"), default="dense")
    args = parser.parse_args()
    if args.family == "moe":
        cov = backtest(moe_rows(), args.by, args.min_runs)
        print(report(cov, args.by, "MoE rows"))
        return
    print(report(backtest(published_rows(), args.by, args.min_runs), args.by))


if __name__ == "__main__":
    main()
