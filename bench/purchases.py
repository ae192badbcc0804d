"""Purchases that save no time (issue 31 item 3): bench/solver.py's suite, failures on.

Usage: python bench/purchases.py [--moe] [--phase-one] [--only NAME]

For each question of bench/solver.py's suite (``--moe``: its mixture-of-experts suite, and
the 405B $500M question of the issue in both), CP-SAT's plan and each hot spare or storage
purchase step it makes (an option against the next cheaper level of the same option) that
saves no more than solvers/purchase_rule.py's PURCHASE_TOLERANCE of the time. ``--phase-one`` answers as before
the rule (the time objective alone: the solver's second phase switched off), to count
what the rule removes. Prints one line per question and the count of plans with an idle
purchase; exits 0 either way (a measurement, not a check: tests/test_purchases.py checks).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import solvers.cpsat.solve as cpsat  # noqa: E402
from bench.solver import MOE_SUITE, SUITE, scenario  # noqa: E402
from solvers import solve_cpsat  # noqa: E402
from solvers.purchase_rule import idle_purchases  # noqa: E402

ISSUE_ROWS = [("405b-500M", "llama3-405b", 15e12, 500e6, None, "time", "capex")]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--moe", action="store_true")
    ap.add_argument("--phase-one", action="store_true")
    ap.add_argument("--only")
    args = ap.parse_args()
    if args.phase_one:
        cpsat.settle = lambda _s, plans, *_: plans  # the answers before the rule
    rows = (MOE_SUITE if args.moe else SUITE) + ISSUE_ROWS
    rows = [r for r in rows if args.only in (None, r[0])]
    idle_plans = 0
    for row in rows:
        s = scenario(row)
        res = solve_cpsat(s)
        if not res.plans:
            print(f"{row[0]:<24} {res.status}")
            continue
        plan = res.plans[0]
        cfg = plan.config
        idle = idle_purchases(s, plan)
        idle_plans += bool(idle)
        spent = ", ".join(f"{what} saves {days:.3f} d" for what, days in idle) or "-"
        print(
            f"{row[0]:<24} {plan.evaluation.time_to_train_days:9.2f} d  ${plan.cost_usd / 1e6:9.2f}M  "
            f"spares/100 {cfg.spares_per_100:g}  storage {cfg.storage_gb_per_s or 0:g} GB/s  "
            f"idle: {spent}"
        )
    label = "phase one only (before the rule)" if args.phase_one else "with the rule"
    print(f"{idle_plans} of {len(rows)} plans buy something that saves no time ({label})")


if __name__ == "__main__":
    main()
