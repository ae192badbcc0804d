"""Start-up time of commands that never solve, side by side with another revision.

Usage: python bench/startup.py [--against REF] [--repeat N]

Runs ``designer --help``, ``designer catalog`` and ``designer models`` N times each
in fresh processes, alternating between this tree and, with ``--against``, a
temporary git worktree of REF (e.g. 225e902, before OR-Tools was imported lazily),
so that both see the same machine load. Prints the median wall time of each and
the ratio. Machines are noisy: compare the ratio, not the seconds.
"""

from __future__ import annotations

import argparse

from side_by_side import compare

COMMANDS = [["--help"], ["catalog"], ["models"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--against", default=None, help="a git revision to compare with")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    compare(COMMANDS, args.against, args.repeat)


if __name__ == "__main__":
    main()
