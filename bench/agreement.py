"""CP-SAT against the exhaustive solver on random full-size questions (run by hand).

Usage: python bench/agreement.py [--first N] [--count N] [--top K]

The CI's differential test (tests/test_solvers.py) draws 200 small questions so
that both solvers finish in about a second. This draws zoo models, budgets
from $1M to $300M or deadlines of 15 to 120 days, capex, cloud or TCO
pricing, and 2 to all GPU types of the shipped catalog, and checks that the
two solvers return the same top K objectives (to the documented rounding,
1e-3 relative). Each question is a pure function of its seed. Prints one line
per question and the number of mismatches; exits 1 if there is one.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from catalog import load_catalog  # noqa: E402
from models import zoo  # noqa: E402
from solvers import Scenario, solve_cpsat, solve_exhaustive  # noqa: E402


def question(seed: int, cat, models) -> Scenario:
    r = random.Random(seed)
    spec = models[r.choice(sorted(models))]
    kw: dict = {}
    objective = r.choice(["time", "time", "cost"])
    if objective == "time":
        kw["budget_usd"] = 10 ** r.uniform(6, 8.5)
    else:
        kw["deadline_days"] = r.choice([15, 30, 60, 120])
    if r.random() < 0.3:
        kw["max_gpus"] = r.choice([256, 1024, 4096])
    gpus = tuple(r.sample(sorted(cat.gpus), r.choice([2, 4, len(cat.gpus)])))
    return Scenario(
        spec=spec,
        catalog=cat,
        tokens=10 ** r.uniform(11, 13),
        seq_len=spec.seq_len,
        gpus=gpus,
        nics=tuple(cat.nics),
        objective=objective,
        pricing=r.choice(["capex", "capex", "cloud", "tco"]),
        **kw,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--count", type=int, default=40)
    parser.add_argument("--top", type=int, default=2)
    args = parser.parse_args()
    cat, models = load_catalog(), zoo()
    mismatches = 0
    for seed in range(args.first, args.first + args.count):
        s = question(seed, cat, models)
        start = time.perf_counter()
        got = solve_cpsat(s, top_k=args.top)
        cp_s = time.perf_counter() - start
        start = time.perf_counter()
        ref = solve_exhaustive(s, top_k=args.top)
        ex_s = time.perf_counter() - start
        a = [p.objective for p in got.plans]
        b = [p.objective for p in ref.plans]
        ok = len(a) == len(b) and all(
            abs(x - y) <= 1e-3 * abs(y) for x, y in zip(a, b, strict=True)
        )
        mismatches += not ok
        print(
            f"{seed:4d} {s.spec.name:15} {s.objective:4} {s.pricing:5} {len(s.gpus):2d} GPU types "
            f"{got.status:10} {'agree' if ok else 'MISMATCH'}  cpsat {cp_s:6.2f} s  "
            f"exhaustive {ex_s:6.1f} s  {[f'{x:.6g}' for x in a]}",
            flush=True,
        )
    print(f"\n{args.count} questions, top {args.top}: {mismatches} mismatches")
    sys.exit(1 if mismatches else 0)


if __name__ == "__main__":
    main()
