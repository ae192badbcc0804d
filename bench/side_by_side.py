"""Time designer commands in fresh processes, this tree against another git revision.

The two trees alternate, command by command, so that both see the same machine load;
the ratio is the figure to compare (machines are noisy), the seconds are context.
"""

from __future__ import annotations

import contextlib
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_once(tree: Path, args: list[str], ok_codes: tuple[int, ...] = (0,)) -> float:
    """Wall seconds of ``python -m designer ARGS`` in ``tree`` (exit code checked)."""
    return run_timed(tree, args, ok_codes)[0]


def run_timed(tree: Path, args: list[str], ok_codes: tuple[int, ...] = (0,)) -> tuple[float, float]:
    """Wall and CPU seconds (user + system, the process and its children) of
    ``python -m designer ARGS`` in ``tree``: on a loaded machine the CPU time
    says what the command costs, the wall time what a user waits."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "designer", *args],
        cwd=tree,
        env=env,
        check=False,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    # exit 1 is also an internal error's code: the one line says which
    if done.returncode not in ok_codes or "internal error" in done.stderr:
        raise SystemExit(
            f"designer {' '.join(args)} exited {done.returncode} in {tree}: {done.stderr[-300:]}"
        )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


@contextlib.contextmanager
def worktree(rev: str) -> Iterator[Path]:
    """A detached git worktree of ``rev`` in a temporary folder, removed afterwards."""
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(base), rev],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        try:
            yield base
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(base)],
                cwd=ROOT,
                check=False,
                capture_output=True,
            )


def compare(
    commands: list[list[str]],
    against: str | None,
    repeat: int,
    ok_codes: tuple[int, ...] = (0,),
) -> None:
    """Run every command ``repeat`` times in each tree, interleaved; print the medians of
    the wall time and of the CPU time (user + system), and their ratios."""
    with contextlib.ExitStack() as stack:
        trees = {"this tree": ROOT}
        if against:
            trees[against] = stack.enter_context(worktree(against))
        times: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for _ in range(repeat):
            for cmd in commands:
                for name, tree in trees.items():
                    took = run_timed(tree, cmd, ok_codes)
                    times.setdefault((name, " ".join(cmd)), []).append(took)
    print(f"median of {repeat} fresh processes each (s; wall, then CPU):")
    for cmd in commands:
        key = " ".join(cmd)
        here = times[("this tree", key)]
        wall = statistics.median(w for w, _ in here)
        cpu = statistics.median(c for _, c in here)
        walls = [w for w, _ in here]
        line = (
            f"designer {key}\n    this tree {wall:.3f} (range {min(walls):.3f}-{max(walls):.3f})"
            f", CPU {cpu:.2f}"
        )
        if against:
            there = times[(against, key)]
            wall_b = statistics.median(w for w, _ in there)
            cpu_b = statistics.median(c for _, c in there)
            line += (
                f"  {against} {wall_b:.3f}, CPU {cpu_b:.2f}"
                f"  ratio {wall / wall_b:.2f} (CPU {cpu / cpu_b:.2f})"
            )
        print(line)
