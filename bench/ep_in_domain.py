"""What keeping the EP group inside one scale-up domain costs (--ep-in-domain).

Usage: python bench/ep_in_domain.py [--repeat N] [--gpu NAME ...]

DeepSeek-V3 on 15T tokens at $100M, on each GPU type, with and without
``--ep-in-domain``: each ``designer optimize --json`` runs in a fresh process; the
table gives the best plan (GPUs, TP/PP/DP/EP/ETP, scale-up domains one EP group
spans), its days and cost, what the explanation says relaxing ep_domain saves, and
the median wall and CPU seconds over ``--repeat`` runs (README "Mixture-of-experts").
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

from side_by_side import ROOT

QUESTION = ["--model", "deepseek-v3", "--tokens", "15T", "--budget", "100M"]
GPUS = ("h100-sxm", "mi300x", "gb200")


def optimize(args: list[str]) -> tuple[dict, float, float]:
    """The answer of ``designer optimize ARGS --json`` and its wall and CPU seconds."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "designer", "optimize", *args, "--json"],
        cwd=ROOT,
        env=env,
        check=False,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise SystemExit(f"designer optimize {' '.join(args)}: {done.stderr[-300:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(done.stdout), wall, cpu


def row(gpu: str, asked: bool, doc: dict, walls: list[float], cpus: list[float]) -> str:
    from catalog import load_catalog
    from models.expert import ExpertLayout, ep_ranks_in_domain

    timing = f"{statistics.median(walls):6.2f} {statistics.median(cpus):6.2f}"
    option = "on " if asked else "off"
    if not doc["plans"]:
        return f"{gpu:9} {option} {'infeasible':54} {timing}"
    p = doc["plans"][0]
    per_domain = ep_ranks_in_domain(load_catalog().gpu(gpu), ExpertLayout(p["ep"], p["etp"]))
    spans = -(-p["ep"] // per_domain)  # scale-up domains one EP group spans
    layout = f"{p['tp']}/{p['pp']}/{p['dp']}/{p['ep']}/{p['etp']}"
    saves = next((b for b in doc["binding"] if b["constraint"] == "ep_domain"), None)
    gain = (
        "-" if saves is None or not saves["binding"] else f"{saves['improvement_if_relaxed']:.1f}"
    )
    return (
        f"{gpu:9} {option} {p['num_gpus']:6,} {layout:>15} {spans:5} "
        f"{p['time_to_train_days']:7.1f} {p['cost_usd'] / 1e6:7.2f}M {gain:>6} {timing}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--gpu", action="append", default=None)
    args = ap.parse_args()
    print("gpu       req   gpus  tp/pp/dp/ep/etp spans    days     cost  saves   wall    cpu")
    for gpu in args.gpu or GPUS:
        for asked in (False, True):
            cmd = [*QUESTION, "--gpu", gpu, *(["--ep-in-domain"] if asked else [])]
            runs = [optimize(cmd) for _ in range(args.repeat)]
            walls, cpus = [r[1] for r in runs], [r[2] for r in runs]
            print(row(gpu, asked, runs[0][0], walls, cpus), flush=True)


if __name__ == "__main__":
    main()
