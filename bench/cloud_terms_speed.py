"""Rented questions' time, this tree against another revision (the cost objective now
solves every rental term that another does not undercut: solvers/cloud_terms.py).

Usage: python bench/cloud_terms_speed.py [--against REV] [--repeat N]

Each ``designer optimize`` runs in a fresh process, the two trees interleaved
(bench/side_by_side.py): the cheapest-by-deadline questions (300 days: on demand and a
year's reservation solved; 30 days: on demand only) and a budget question (every term,
as before), each with its explanation off and on. The ratio is the figure to compare.
"""

from __future__ import annotations

import argparse

from side_by_side import compare

QUESTIONS = [
    ["optimize", "--deadline", "300", "--pricing", "cloud"],
    ["optimize", "--deadline", "30", "--pricing", "cloud"],
    ["optimize", "--budget", "3M", "--pricing", "cloud"],
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--against", default=None, help="a git revision to time beside")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    commands = [[*q, flag] for q in QUESTIONS for flag in ("--no-explain", "--explain")]
    compare(commands, args.against, args.repeat)


if __name__ == "__main__":
    main()
