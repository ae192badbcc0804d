"""Time a study on the local executor.

Usage: python bench/sweep_speed.py [--workers N] [--study FILE]
Runs examples/budgets-100.yaml (25 budgets x 4 GPU types; or --study, e.g.
examples/study-1000.yaml: 5 models x 10 GPU types x 10 budgets x 2 token counts)
into a temporary CSV and prints the wall time and the scenarios per second.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from designer import sweep  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--study", type=Path, default=ROOT / "examples" / "budgets-100.yaml")
    args = parser.parse_args()
    study_path = args.study.resolve()
    study = sweep.load_study(study_path)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.csv"
        start = time.perf_counter()
        cpu0 = _cpu_s()
        rows = sweep.run_study(study, str(study_path), out, False, args.workers)
        wall = time.perf_counter() - start
        cpu = _cpu_s() - cpu0
    ok = sum(1 for r in rows if r.get("status") == "optimal")
    infeasible = sum(1 for r in rows if r.get("status") == "infeasible")
    print(
        f"{len(rows)} scenarios ({ok} optimal, {infeasible} infeasible) in {wall:.1f} s with "
        f"{args.workers} workers: "
        f"{len(rows) / wall:.2f} scenarios/s; CPU {cpu:.1f} s in all (on {args.workers} idle "
        f"cores: about {cpu / args.workers:.1f} s)"
    )


def _cpu_s() -> float:
    """User and system CPU seconds of this process and its finished workers."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


if __name__ == "__main__":
    main()
