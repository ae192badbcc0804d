"""Wall time of explaining infeasible questions, side by side with another revision.

Usage: python bench/explain.py [--against REF] [--repeat N]

Each question below has no plan; ``designer optimize`` proves it and explains the
conflict with its smallest fixes (exit 1). Issue 22's target: under 5 s each.
"""

from __future__ import annotations

import argparse

from side_by_side import compare

COMMANDS = [
    ["optimize", "--model", "llama3-405b", "--budget", "100K"],
    [
        "optimize",
        "--model",
        "llama3-405b",
        "--budget",
        "100K",
        "--evidence",
        "any",
        "--precision",
        "any",
    ],
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--against", default=None, help="a git revision to compare with")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    compare(COMMANDS, args.against, args.repeat, ok_codes=(1,))


if __name__ == "__main__":
    main()
