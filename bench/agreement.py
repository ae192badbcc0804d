"""CP-SAT against the exhaustive solver on random questions (run by hand).

Usage: python bench/agreement.py [--first N] [--count N] [--top K]
       python bench/agreement.py --full [--first N] [--count 200] [--jobs 2] [--out FILE]
                                 [--no-exhaustive] [--effort 100] [--wall 600] [--toys]
       python bench/agreement.py --top-ratio [--count 20]

Default: 40 full-size questions of a narrow kind (zoo models, budgets from $1M
to $300M or deadlines of 15 to 120 days, capex, cloud or TCO pricing, 2 to all
GPU types), the two best plans of each.

``--full``: questions drawn from every option the CLI accepts (full_question:
capex, cloud or TCO pricing with a lifetime, PUE and electricity price; power
and rack caps; overall and per-type GPU caps; ``--ignore`` of any family;
precision bf16, fp8 or any; both stacks; sequence lengths of 2K to 128K;
batch ceilings and floors; top-K up to 10; budgets of $100K to $1B and
deadlines of 2 to 2,000 days). Each question is built by the CLI's own
build_scenario and is a pure function of its seed; the CI differential test
(tests/test_agreement_full.py) draws from the same generator with small models.
For each question: CP-SAT's time (one worker), whether it proved its answer, the
exhaustive solver's time, and whether both return the same top-K objective
values (1e-3 relative: ties may pick different shapes) and, where two plans tie on the
objective, the same secondary key (solvers/tie_rule.py: the days of a cost question's
plan, the cost of a time question's; ``secondary_agree``). CP-SAT is limited by its
deterministic time (``--effort``, EFFORT units a question, a share a shape under
top-K: solvers/cpsat/solve.py Resolve), not by the wall clock, so that whether a
question is proved does not depend on how busy the machine is; ``--wall`` is only a
backstop, and a question that reaches it is reported as not proved (``wall``). ``--jobs`` runs that
many questions side by side (one core each); ``--out`` writes one CSV row per
question. The summary gives agreement, proofs, CP-SAT's median and worst time
and the slowest questions, and how many plans (either solver's) buy a hot spare or
checkpoint storage that saves no time (solvers/purchase_rule.py: none should). Exits 1 on
a mismatch, a missing proof or such a purchase.

``--no-exhaustive`` (with ``--full``): CP-SAT alone (times and proofs), in minutes.

``--toys`` (with ``--full``): toy models 8 to 8,192 wide with sequences of 8 to 100 tokens
(_toy_spec), the full option space scaled down as ``small``: where the CP-SAT model's
integer domains are most stretched (a time per sequence x the batch's excess past the
critical batch leaves int64: solvers/cpsat/batch_tokens.py).

``--top-ratio``: for each question (objective as drawn, K forced), CP-SAT's
``--top 10`` time against its ``--top 1`` time, measured back to back in one
process; prints the median ratio.
"""

from __future__ import annotations

import argparse
import csv
import random
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from catalog import load_catalog  # noqa: E402
from designer.question.build import build_scenario  # noqa: E402
from models import zoo  # noqa: E402
from models.layout import Assumptions  # noqa: E402
from models.transformer import TransformerSpec  # noqa: E402
from solvers import FAMILIES, Scenario, solve_cpsat, solve_exhaustive  # noqa: E402
from solvers.cpsat.solve import Resolve, resolve_cpsat  # noqa: E402
from solvers.purchase_rule import idle_purchases  # noqa: E402
from solvers.tie_rule import FLOAT_TIE, secondary  # noqa: E402

REL_TOL = 1e-3
# two plans whose objectives differ by at most this (relative) are tied on it, and the tie
# rule's secondary key must then agree (secondary_agree): solvers/tie_rule.py's
TIE_TOL = FLOAT_TIE
# --full: CP-SAT's deterministic time per question (machine- and load-independent; the
# slowest shapes of seed 189's top 7 take about 2 units each, tests/test_agreement_full.py),
# and the wall clock's backstop (seconds) past which a question is reported as not proved
EFFORT = 100.0
WALL_BACKSTOP_S = 600.0
SEQ_LENS = (2048, 4096, 8192, 16384, 32768, 65536, 131072)


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
    gpus = tuple(r.sample(sorted(cat.gpus_for_sale()), r.choice([2, 4, len(cat.gpus_for_sale())])))
    return Scenario(
        spec=spec,
        catalog=cat,
        tokens=10 ** r.uniform(11, 13),
        seq_len=spec.seq_len,
        gpus=gpus,
        nics=tuple(cat.nics),
        objective=objective,
        pricing=r.choice(["capex", "capex", "cloud", "tco"]),
        # the library's defaults before issue 32 (the CLI's since): the ideal model, hourly
        # renting without terms, the seed's memory rules; kept so each seed asks what it did
        no_failures=True,
        cloud_terms=False,
        assumptions=Assumptions(),
        **kw,
    )


def _small_spec(r: random.Random, seed: int) -> TransformerSpec:
    heads = r.choice([8, 16])
    return TransformerSpec(
        name=f"random-{seed}",
        layers=r.choice([2, 3, 4, 6, 8, 9, 12, 16]),
        hidden=r.choice([256, 512, 1024, 2048]),
        heads=heads,
        kv_heads=r.choice([k for k in (1, 2, 4, 8, 16) if heads % k == 0]),
        vocab=r.randint(1000, 50000),
        seq_len=2048,
        gated_mlp=r.random() < 0.5,
    )


def _toy_spec(r: random.Random, seed: int) -> TransformerSpec:
    """A toy model: widths of 8 to 8,192 with sequences of a few tokens, some MoE, where the
    CP-SAT model's integer domains are most stretched (tests/test_agreement_toys.py's kind)."""
    hidden = r.choice([8, 16, 24, 64, 1024, 8192])
    heads = r.choice([h for h in (1, 2, 4, 8) if hidden % h == 0])
    fields: dict[str, Any] = dict(
        name=f"toy-{seed}",
        layers=r.choice([1, 2, 3, 4]),
        hidden=hidden,
        heads=heads,
        kv_heads=r.choice([k for k in (1, 2, 4, 8) if heads % k == 0]),
        ffn_hidden=r.choice([1, 8, hidden, 4 * hidden]),
        gated_mlp=r.random() < 0.5,
        vocab=r.choice([8, 11, 257, 256000]),
        seq_len=r.choice([8, 9, 64, 100]),
    )
    if r.random() < 0.3:
        fields |= dict(experts=r.choice([2, 4, 8]), experts_per_token=r.randint(1, 2))
        fields["expert_ffn_hidden"] = 8
    return TransformerSpec(**fields)


def full_question(seed: int, small: bool = False, toy: bool = False) -> tuple[dict[str, Any], int]:
    """The keyword arguments of designer.question.build.build_scenario for one random question
    over every option the CLI accepts, and its top K; a pure function of ``seed``.

    ``small``: a small random model (layers up to 16, hidden up to 2,048), one or two GPU
    types and limits scaled down, so that the exhaustive solver takes about a second
    (the CI's sample); every other option is drawn exactly as at full size.

    ``toy``: drawn as ``small`` but with a toy model at its own sequence length of a few
    tokens (_toy_spec) and 1e8 to 1e12 tokens, so that batches reach past the critical
    batch."""
    r = random.Random(seed)
    cat = load_catalog()
    kw: dict[str, Any] = {"evidence": "any"}
    small = small or toy
    if small:
        kw["model"] = _toy_spec(r, seed) if toy else _small_spec(r, seed)
        kw["tokens"] = 10 ** (r.uniform(8, 12) if toy else r.uniform(9, 11))
        kw["seq_len"] = kw["model"].seq_len if toy else r.choice(SEQ_LENS[:3])
        kw["gpus"] = tuple(r.sample(sorted(cat.gpus_for_sale()), r.choice([1, 2])))
        budget_exp, deadline_exp, power_exp = (4.0, 6.0), (-0.5, 2.0), (-2.5, -0.5)
        caps = (8, 16, 64, 256)
    else:
        kw["model"] = r.choice(sorted(zoo()))
        kw["tokens"] = 10 ** r.uniform(10.5, 13.2)
        kw["seq_len"] = r.choice(SEQ_LENS)
        kw["gpus"] = tuple(r.sample(sorted(cat.gpus_for_sale()), r.choice([1, 1, 2, 2, 3])))
        budget_exp, deadline_exp, power_exp = (5.0, 9.0), (0.3, 3.3), (-1.5, 2.0)
        caps = (64, 512, 4096, 32768)
    if r.random() < 0.3:  # NICs some drawn GPU's server takes (others are the CLI's exit 2)
        pool = sorted({n.name for g in kw["gpus"] for n in cat.nics_for(cat.gpu(g))})
        kw["nics"] = tuple(r.sample(pool, min(len(pool), r.choice([1, 2]))))
    kind = r.random()
    if kind < 0.5:  # fastest under a budget
        kw["budget"] = 10 ** r.uniform(*budget_exp)
        kw["objective"] = "time"
    elif kind < 0.85:  # cheapest by a deadline
        kw["deadline"] = 10 ** r.uniform(*deadline_exp)
        kw["objective"] = "cost"
    else:  # both limits
        kw["budget"] = 10 ** r.uniform(*budget_exp)
        kw["deadline"] = 10 ** r.uniform(*deadline_exp)
        kw["objective"] = r.choice(["time", "cost"])
    kw["pricing"] = r.choice(["capex", "cloud", "tco"])
    if r.random() < 0.5:
        kw["lifetime_years"] = r.choice([1.0, 3.0, 4.0, 5.0, 7.0])
    if r.random() < 0.4:
        kw["pue"] = round(r.uniform(1.05, 1.6), 3)
    if r.random() < 0.4:
        kw["usd_per_kwh"] = round(r.uniform(0.03, 0.3), 4)
    if r.random() < 0.2:
        kw["power_cap"] = 10 ** r.uniform(*power_exp)
    if r.random() < 0.15:
        kw["max_racks"] = r.choice([1, 2, 8, 32, 256])
    if r.random() < 0.2:
        kw["max_gpus"] = r.choice(caps)
    if r.random() < 0.15:
        kw["gpu_caps"] = {r.choice(kw["gpus"]): r.choice(caps)}
    if r.random() < 0.35:
        # small: not the batch ceiling, without which the reference solver enumerates up to
        # 20M (d, m) pairs per NIC option (minutes); the full-size benchmark draws it
        pool = [f for f in FAMILIES if not small or f != "batch_ceiling"]
        kw["ignore"] = (pool[(seed + r.randrange(3)) % len(pool)],)  # every family, in turn
    kw["precision"] = r.choice(["bf16", "bf16", "bf16", "fp8", "any"])
    if r.random() < 0.1:
        kw["stack"] = "vtrain-2022"
    seq = kw["seq_len"]
    if small:  # a ceiling of at most 4M tokens bounds the reference solver's (d, m) pairs
        kw["max_batch_tokens"] = max(seq, 2 ** r.randint(16, 22))
    elif r.random() < 0.3:
        kw["max_batch_tokens"] = max(seq, r.choice([2**20, 2**22, 2**26]))
    ceiling = kw.get("max_batch_tokens", 16 * 2**20)
    if r.random() < 0.15:
        kw["min_batch_tokens"] = max(seq, ceiling // r.choice([2, 4, 8]))
    if r.random() < 0.1:
        kw["dp_overlap"] = round(r.uniform(0.0, 1.0), 2)
    if kw["objective"] == "time" and "budget" not in kw:
        kw["budget"] = 10 ** r.uniform(*budget_exp)
    top_k = 1 if r.random() < 0.5 else r.randint(2, 10)
    # options added later draw from their own stream, so the earlier draws stay as they were
    later = random.Random(f"{seed}:later")
    if later.random() < 0.1:
        kw["max_virtual_stages"] = later.choice([1, 8, 12])
    # failures (issue 18; on by default): the ideal model, larger rates (so that small
    # clusters feel them) or a fixed checkpoint interval, from a stream of their own
    failures = random.Random(f"{seed}:goodput")
    if failures.random() < 0.2:
        kw["no_failures"] = True
    elif failures.random() < 0.3:
        kw["failure_scale"] = failures.choice([10.0, 100.0, 1000.0])
    if failures.random() < 0.15:
        kw["checkpoint_every"] = failures.choice([1.0, 10.0, 60.0])
    # tokens that depend on the batch (issue 31; on by default): off in one question of five
    if random.Random(f"{seed}:batch_tokens").random() < 0.2:
        kw["batch_tokens_model"] = "off"
    # CP across servers (the contract keeps TP x CP in one domain; --cp-across-servers lets
    # CP leave it): in half the questions, from a stream of its own
    if random.Random(f"{seed}:cp_across").random() < 0.5:
        kw["cp_across_servers"] = True
    return kw, top_k


def describe(kw: dict[str, Any], top_k: int) -> str:
    """The question as designer optimize options (to rerun it by hand)."""
    parts = []
    for key, value in kw.items():
        if key == "evidence":
            parts.append(f"--evidence {value}")
        elif key == "model":
            parts.append(f"--model {value if isinstance(value, str) else value.name}")
        elif key in ("gpus", "nics", "ignore"):
            flag = {"gpus": "--gpu", "nics": "--nic", "ignore": "--ignore"}[key]
            parts.extend(f"{flag} {v}" for v in value)
        elif key == "gpu_caps":
            parts.extend(f"--gpu-cap {g}={c}" for g, c in value.items())
        elif isinstance(value, bool):
            parts.append(f"--{key.replace('_', '-')}" if value else "")
        elif isinstance(value, float):
            parts.append(f"--{key.replace('_', '-')} {value:.6g}")
        else:
            parts.append(f"--{key.replace('_', '-')} {value}")
    if top_k > 1:
        parts.append(f"--top {top_k}")
    return " ".join(parts)


def agree(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(
        abs(x - y) <= REL_TOL * abs(y) for x, y in zip(a, b, strict=True)
    )


def secondary_agree(a: list[Any], b: list[Any], objective: str) -> bool:
    """Whether the plans ``a`` and ``b`` (best first) agree on the tie rule's secondary key
    wherever they tie on the objective (solvers/tie_rule.py: the faster of two equally cheap
    plans, the cheaper of two equally fast ones): a solver that returned an equally good plan
    worse on the secondary key broke the rule (the cost objective's CP-SAT did, 2.5x slower
    at the same cost, before its second phase)."""
    for x, y in zip(a, b, strict=False):
        if abs(x.objective - y.objective) > TIE_TOL * abs(y.objective):
            continue  # not a tie: the objectives' own comparison (agree) decides
        u, v = secondary(x, objective), secondary(y, objective)
        if u != v and not abs(u - v) <= REL_TOL * abs(v):
            return False
    return True


def run_full(
    seed: int,
    effort: float = EFFORT,
    wall_s: float = WALL_BACKSTOP_S,
    exhaustive: bool = True,
    toys: bool = False,
) -> dict[str, Any]:
    """One question: CP-SAT under ``effort`` units of deterministic time (``wall_s``: the
    backstop; a question that reaches it is not proved, ``wall``), and the reference.
    ``toys``: full_question's toy models."""
    kw, top_k = full_question(seed, toy=toys)
    row: dict[str, Any] = {"seed": seed, "question": describe(kw, top_k), "top": top_k}
    try:
        s = build_scenario(**kw)
    except Exception as err:  # a question the CLI refuses (exit 2) is not a solver question
        row.update(
            status="refused", error=str(err), agree=True, proved=True, cpsat_s=0.0, wall=False
        )
        return row
    start = time.perf_counter()
    try:
        got = resolve_cpsat(s, Resolve(effort=effort), top_k=top_k, time_limit_s=wall_s)
    except Exception as err:  # a crash is a failure of this question, not of the run
        row.update(
            status="error", error=repr(err), agree=False, proved=False, cpsat_s=0.0, wall=False
        )
        return row
    row["cpsat_s"] = time.perf_counter() - start
    row["wall"] = row["cpsat_s"] >= wall_s  # the backstop, not the effort, ended it
    # plans buying a spare or storage that saves no time (solvers/purchase_rule.py): none
    row["idle"] = sum(bool(idle_purchases(s, p)) for p in got.plans)
    a = [p.objective for p in got.plans]
    row.update(
        status=got.status,
        proved=got.status in ("optimal", "infeasible") and not row["wall"],
        agree=True,
        cpsat=";".join(f"{x:.6g}" for x in a),
        exhaustive_s=0.0,
    )
    if exhaustive:
        start = time.perf_counter()
        ref = solve_exhaustive(s, top_k=top_k)
        row["exhaustive_s"] = time.perf_counter() - start
        row["idle"] += sum(bool(idle_purchases(s, p)) for p in ref.plans)
        b = [p.objective for p in ref.plans]
        row["agree"] = agree(a, b) and (got.status == "infeasible") == (ref.status == "infeasible")
        row["secondary_agree"] = secondary_agree(got.plans, ref.plans, s.objective)
        row["agree"] = row["agree"] and row["secondary_agree"]
        row["exhaustive"] = ";".join(f"{x:.6g}" for x in b)
        row["cpsat_2nd"] = ";".join(f"{secondary(p, s.objective):.6g}" for p in got.plans)
        row["exhaustive_2nd"] = ";".join(f"{secondary(p, s.objective):.6g}" for p in ref.plans)
    return row


def _agreement(row: dict[str, Any]) -> str:
    if row["agree"]:
        return "agree"
    return "MISMATCH" if row.get("secondary_agree", True) else "MISMATCH (secondary)"


def _proof(row: dict[str, Any]) -> str:
    if row["proved"]:
        return "proved"
    return "NOT PROVED (wall)" if row["wall"] else "NOT PROVED"


def main_full(args) -> None:
    seeds = range(args.first, args.first + args.count)
    rows: list[dict[str, Any]] = []
    work = partial(
        run_full,
        effort=args.effort,
        wall_s=args.wall,
        exhaustive=not args.no_exhaustive,
        toys=args.toys,
    )
    print(
        f"CP-SAT limited to {args.effort:g} units of deterministic time a question "
        f"(a 1/K share a shape under top-K), wall backstop {args.wall:g} s",
        flush=True,
    )
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for row in pool.map(work, seeds):
            rows.append(row)
            print(
                f"{row['seed']:4d} {row['status']:10} "
                f"{_agreement(row)} {_proof(row)} "
                f"idle {row.get('idle', 0)}  cpsat {row['cpsat_s']:6.2f} s  "
                f"exhaustive {row.get('exhaustive_s', 0.0):6.1f} s  {row['question']}",
                flush=True,
            )
    if args.out:
        with open(args.out, "w", newline="", encoding="utf-8") as fh:
            fields = sorted({k for r in rows for k in r})
            writer = csv.DictWriter(fh, fieldnames=fields)
            writer.writeheader()
            writer.writerows(rows)
    solved = [r for r in rows if r["status"] != "refused"]
    times = [r["cpsat_s"] for r in solved]
    bad = [r for r in rows if not r["agree"]]
    second = [r for r in bad if not r.get("secondary_agree", True)]
    unproved = [r for r in rows if not r["proved"]]
    idle = sum(r.get("idle", 0) for r in rows)
    print(
        f"\n{len(rows)} questions ({len(rows) - len(solved)} refused by the CLI), "
        f"{len(bad)} mismatches ({len(second)} on the secondary key only), {len(unproved)} not proved within {args.effort:g} units of "
        f"deterministic time ({sum(r['wall'] for r in rows)} stopped by the {args.wall:g} s "
        f"wall backstop), {idle} plans buying a spare or storage that saves no time"
    )
    for r in bad + [r for r in unproved if r["agree"]]:
        print(f"  seed {r['seed']}: {'' if r['agree'] else _agreement(r)} {_proof(r)}")
        if not r.get("secondary_agree", True):
            print(f"    secondary: cpsat {r['cpsat_2nd']}, exhaustive {r['exhaustive_2nd']}")
    if times:
        print(
            f"CP-SAT: median {statistics.median(times):.2f} s, worst {max(times):.2f} s "
            f"({args.jobs} questions side by side, one core each)"
        )
        print("slowest questions (CP-SAT s, exhaustive s, question):")
        for r in sorted(solved, key=lambda r: -r["cpsat_s"])[:5]:
            print(
                f"  {r['cpsat_s']:6.2f} {r['exhaustive_s']:7.1f}  seed {r['seed']}: {r['question']}"
            )
    sys.exit(1 if bad or unproved or idle else 0)


def main_top_ratio(args) -> None:
    ratios = []
    for seed in range(args.first, args.first + args.count):
        kw, _ = full_question(seed)
        try:
            s = build_scenario(**kw)
        except Exception:
            continue
        solve_cpsat(s)  # warm: the space and its coefficients, as a repeated question has
        t1 = time.perf_counter()
        one = solve_cpsat(s, top_k=1)
        t1 = time.perf_counter() - t1
        t10 = time.perf_counter()
        ten = solve_cpsat(s, top_k=10)
        t10 = time.perf_counter() - t10
        if not one.plans:
            continue
        ratios.append(t10 / t1)
        print(
            f"{seed:4d} top 1 {t1:6.2f} s  top 10 {t10:6.2f} s ({len(ten.plans)} plans)  ratio {t10 / t1:5.1f}"
        )
    print(
        f"\n{len(ratios)} feasible questions: --top 10 / --top 1 median {statistics.median(ratios):.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--count", type=int, default=None)
    parser.add_argument("--top", type=int, default=2)
    parser.add_argument("--full", action="store_true", help="the whole option space")
    parser.add_argument("--top-ratio", action="store_true", help="--top 10 against --top 1")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", default=None, help="--full: one CSV row per question")
    parser.add_argument(
        "--toys", action="store_true", help="--full: toy models of few-token sequences"
    )
    parser.add_argument(
        "--no-exhaustive", action="store_true", help="--full: CP-SAT's times and proofs only"
    )
    parser.add_argument(
        "--effort", type=float, default=EFFORT, help="--full: CP-SAT's deterministic time"
    )
    parser.add_argument(
        "--wall", type=float, default=WALL_BACKSTOP_S, help="--full: wall-clock backstop (s)"
    )
    args = parser.parse_args()
    if args.full:
        args.count = 200 if args.count is None else args.count
        main_full(args)
        return
    if args.top_ratio:
        args.count = 20 if args.count is None else args.count
        main_top_ratio(args)
        return
    args.count = 40 if args.count is None else args.count
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
        ok = agree(a, b) and secondary_agree(got.plans, ref.plans, s.objective)
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
