"""Solver benchmark: CP-SAT against the exhaustive reference on a fixed suite.

Usage: python bench/solver.py [--exhaustive-timeout S] [--no-exhaustive] [--explain] [--only NAME]
                              [--repeat N] [--no-failures] [--search-work] [--moe]
                              [--batch-tokens]

Twelve-plus questions from 7B to 1T parameters and $1M to $5B over the whole
shipped catalog (``--moe``: seven mixture-of-experts questions instead, EP and ETP
decided with the rest). For each it prints the CP-SAT wall time (candidate
enumeration, model building and search; the median of --repeat solves), the
proven gap, the plan, the exhaustive solver's time on the same space (stopped
after the timeout) and whether both agree; with --explain, the time to price
the binding constraints. Every timed solve runs in a fresh child process, so
that neither solver inherits the other's warm caches. Medians and the worst
case close the report. Times are wall-clock on this machine; compare ratios
from one run.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from catalog import load_catalog  # noqa: E402
from models import batch_tokens  # noqa: E402
from models.layout import Assumptions  # noqa: E402
from models.transformer import TransformerSpec  # noqa: E402
from models.zoo import resolve_model  # noqa: E402
from solvers import Scenario, solve_cpsat, solve_exhaustive  # noqa: E402
from solvers.explain import binding_constraints  # noqa: E402
from solvers.scenario import DEFAULT_MAX_BATCH_TOKENS  # noqa: E402

GPT_1T = TransformerSpec(
    name="gpt-1t",
    layers=128,
    hidden=25600,
    heads=160,
    vocab=51200,
    seq_len=2048,
    published_params_b=1008,
)

# name, model, tokens, budget (USD), deadline (days), objective, pricing
SUITE = [
    ("7b-1M", "llama2-7b", 1e12, 1e6, None, "time", "capex"),
    ("8b-10M", "llama3-8b", 15e12, 10e6, None, "time", "capex"),
    ("13b-3M", "llama2-13b", 2e12, 3e6, None, "time", "capex"),
    ("15b-20M", "nemotron4-15b", 8e12, 20e6, None, "time", "capex"),
    ("70b-30M", "llama2-70b", 2e12, 30e6, None, "time", "capex"),
    ("70b-100M", "llama3-70b", 15e12, 100e6, None, "time", "capex"),
    ("175b-20M", "gpt3-175b", 300e9, 20e6, None, "time", "capex"),
    ("176b-50M", "bloom-176b", 366e9, 50e6, None, "time", "capex"),
    ("340b-300M", "nemotron4-340b", 9e12, 300e6, None, "time", "capex"),
    ("405b-1B", "llama3-405b", 15e12, 1e9, None, "time", "capex"),
    ("530b-200M", "mt-nlg-530b", 270e9, 200e6, None, "time", "capex"),
    ("1t-5B", "gpt-1t", 5e12, 5e9, None, "time", "capex"),
    ("70b-cost-30d", "llama2-70b", 2e12, None, 30.0, "cost", "capex"),
    ("405b-cloud-100M", "llama3-405b", 15e12, 100e6, None, "time", "cloud"),
]


# mixture-of-experts questions (issue 17 item 5; --moe): EP and ETP decided with the rest
MOE_SUITE = [
    ("deepseek-v3-100M", "deepseek-v3", 15e12, 100e6, None, "time", "capex"),
    ("mixtral-8x7b-5M", "mixtral-8x7b", 2e12, 5e6, None, "time", "capex"),
    ("mixtral-8x22b-20M", "mixtral-8x22b", 2e12, 20e6, None, "time", "capex"),
    ("qwen3-30b-a3b-3M", "qwen3-30b-a3b", 15e12, 3e6, None, "time", "capex"),
    ("qwen3-235b-50M", "qwen3-235b-a22b", 15e12, 50e6, None, "time", "capex"),
    ("maverick-cloud-50M", "llama4-maverick", 15e12, 50e6, None, "time", "cloud"),
    ("gpt-oss-120b-cost-60d", "gpt-oss-120b", 5e12, None, 60.0, "cost", "capex"),
]


def scenario(row, failures: bool = True) -> Scenario:
    """The suite's question; with failures, checkpoints and restarts (the CLI's default,
    models/goodput.py) unless ``failures`` is false (--no-failures: the ideal model)."""
    name, model, tokens, budget, deadline, objective, pricing, *batch_model = row
    batch = batch_model[0] if batch_model else "off"  # --batch-tokens: the CLI's default
    cat = load_catalog()
    spec = GPT_1T if model == "gpt-1t" else resolve_model(model)
    return Scenario(
        spec=spec,
        catalog=cat,
        tokens=tokens,
        seq_len=spec.seq_len,
        gpus=tuple(cat.gpus),
        nics=tuple(cat.nics),
        objective=objective,
        pricing=pricing,
        budget_usd=budget,
        deadline_days=deadline,
        no_failures=not failures,
        # the suite's question as before issue 32 made the CLI's defaults the library's:
        # hourly renting without terms, the seed's memory rules (nothing reserved, no headroom)
        cloud_terms=False,
        assumptions=Assumptions(),
        batch_tokens_model=batch,
        # with the model, its cap of 3 critical batches is the ceiling (the CLI's default)
        max_batch_tokens=DEFAULT_MAX_BATCH_TOKENS
        if batch == "off"
        else batch_tokens.max_batch_tokens(
            batch_tokens.critical_batch_tokens(batch, spec, tokens), spec.seq_len
        ),
    )


def _child(solver: str, row, queue, failures: bool = True) -> None:
    solve = solve_cpsat if solver == "cpsat" else solve_exhaustive
    s = scenario(row, failures)
    start = time.perf_counter()
    res = solve(s)
    queue.put((time.perf_counter() - start, res.best.objective if res.best else None))


def run_child(solver: str, row, timeout_s: float, failures: bool = True):
    """(seconds, objective) of one solve in a fresh child process, or (None, None) on timeout.

    Both solvers are timed this way, so that neither inherits the other's warm caches."""
    queue: mp.Queue = mp.Queue()
    proc = mp.Process(target=_child, args=(solver, row, queue, failures))
    proc.start()
    proc.join(timeout_s)
    if proc.is_alive():
        proc.terminate()
        proc.join()
        return None, None
    return queue.get() if not queue.empty() else (None, None)


def search_work(rows, failures: bool) -> None:
    """CP-SAT's deterministic time and branches per question, summed over its solves in
    this process: the search's work, independent of the machine's load."""
    from ortools.sat.python import cp_model

    work = {"det": 0.0, "branches": 0}
    plain = cp_model.CpSolver.solve

    def counted(self, model, *args, **kwargs):
        status = plain(self, model, *args, **kwargs)
        work["det"] += self.deterministic_time
        work["branches"] += self.num_branches
        return status

    cp_model.CpSolver.solve = counted  # type: ignore[method-assign]
    print(f"{'scenario':16} {'det_time':>9} {'branches':>9} {'status':>8}  objective")
    for row in rows:
        work.update(det=0.0, branches=0)
        res = solve_cpsat(scenario(row, failures), time_limit_s=600)
        obj = float(res.best.objective) if res.best else None
        print(f"{row[0]:16} {work['det']:9.3f} {work['branches']:9,} {res.status:>8}  {obj!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--exhaustive-timeout", type=float, default=600.0)
    parser.add_argument("--no-exhaustive", action="store_true")
    parser.add_argument("--explain", action="store_true")
    parser.add_argument("--only", default=None)
    parser.add_argument("--moe", action="store_true", help="the mixture-of-experts suite")
    parser.add_argument(
        "--search-work",
        action="store_true",
        help="print CP-SAT's deterministic time and branches per question (load-independent)",
    )
    parser.add_argument(
        "--no-failures",
        action="store_true",
        help="the ideal model (before issue 18), not the expected run with failures",
    )
    parser.add_argument(
        "--batch-tokens",
        action="store_true",
        help="tokens that depend on the batch (models/batch_tokens.py; the CLI's default)",
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="CP-SAT solves per question (the median is reported)"
    )
    args = parser.parse_args()
    suite = MOE_SUITE if args.moe else SUITE
    rows = [r for r in suite if args.only is None or r[0] == args.only]
    if args.batch_tokens:
        rows = [(*r, "deepseek") for r in rows]
    if args.search_work:
        search_work(rows, not args.no_failures)
        return
    cp_times, explain_ratios, speedups = [], [], []
    print(
        f"{'scenario':16} {'cpsat_s':>8} {'gap':>5} {'gpus':>7} {'plan':34} {'exh_s':>9} {'agree':>5} {'ratio':>7}"
        + ("  explain_s  x_solve" if args.explain else "")
    )
    for row in rows:
        failures = not args.no_failures
        runs = [run_child("cpsat", row, 600.0, failures)[0] for _ in range(max(1, args.repeat))]
        if any(t is None for t in runs):
            raise SystemExit(f"{row[0]}: CP-SAT did not finish within 600 s")
        cp_s = statistics.median(runs)
        cp_times.append(cp_s)
        s = scenario(row, failures)
        res = solve_cpsat(s, time_limit_s=600)  # the plan, and the explanations' input
        best = res.best
        plan = (
            "-"
            if best is None
            else (
                f"{best.evaluation.gpu} tp{best.evaluation.layout.tp} pp{best.evaluation.layout.pp} "
                f"dp{best.evaluation.layout.dp} {best.config.nics_per_node}x{best.config.nic}"
                + (
                    f" ep{best.evaluation.ep} etp{best.evaluation.etp}"
                    if best.evaluation.moe
                    else ""
                )
            )
        )
        gpus = best.num_gpus if best else 0
        exh_s, agree, ratio = None, "-", "-"
        if not args.no_exhaustive:
            exh_s, exh_obj = run_child("exhaustive", row, args.exhaustive_timeout, failures)
            if exh_s is not None:
                ok = (exh_obj is None and best is None) or (
                    best is not None
                    and exh_obj is not None
                    and abs(best.objective - exh_obj) <= 1e-3 * abs(exh_obj)
                )
                agree = "yes" if ok else "NO"
                ratio = f"{exh_s / cp_s:.1f}x"
                speedups.append((gpus, exh_s / cp_s))
            else:
                ratio = f">{args.exhaustive_timeout / cp_s:.0f}x"
                speedups.append((gpus, args.exhaustive_timeout / cp_s))
        gap = "-" if res.gap is None else f"{100 * res.gap:.1f}%"
        exh_txt = (
            f">{args.exhaustive_timeout:.0f}"
            if (exh_s is None and not args.no_exhaustive)
            else ("-" if exh_s is None else f"{exh_s:.2f}")
        )
        line = f"{row[0]:16} {cp_s:8.2f} {gap:>5} {gpus:7,} {plan:34} {exh_txt:>9} {agree:>5} {ratio:>7}"
        if args.explain and best is not None:
            start = time.perf_counter()
            binding_constraints(s, best, res.candidates)
            ex_s = time.perf_counter() - start
            explain_ratios.append(ex_s / cp_s)
            line += f"  {ex_s:9.2f}  {ex_s / cp_s:6.1f}x"
        print(line, flush=True)
    print(
        f"\nCP-SAT: median {statistics.median(cp_times):.2f} s, worst {max(cp_times):.2f} s over {len(cp_times)} scenarios"
    )
    big = [r for g, r in speedups if g >= 10_000]
    if big:
        print(
            f"at 10,000+ GPUs CP-SAT is at least {min(big):.0f}x faster than exhaustive ({len(big)} scenarios)"
        )
    if explain_ratios:
        print(
            f"explanation: median {statistics.median(explain_ratios):.1f}x, worst {max(explain_ratios):.1f}x the solve time"
        )


if __name__ == "__main__":
    main()
