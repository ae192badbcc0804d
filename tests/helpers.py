"""Helpers the test modules share (a plain module: test modules import it, never each other).

Fixtures live in conftest.py; these are functions and constants: calling the CLI like the
console script, importing a bench script, and the question and plan builders that more than
one test module draws from."""

from __future__ import annotations

import contextlib
import csv
import importlib.util
import math
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import replace
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest
from click.testing import CliRunner, Result

from designer.cli import cli, main
from designer.question.build import build_scenario
from models.feasibility import divisibility_violations
from models.layout import Assumptions
from models.transformer import TransformerSpec
from models.zoo import zoo
from solvers import Config
from solvers.plan import build_plan
from solvers.scenario import Scenario
from solvers.space import EVEN, Shape, pipeline_splits

# The library Scenario's defaults before issue 32 made them the CLI's (failures on, rented
# blocks under terms, 3 GB reserved and 5% headroom): the ideal model, renting any GPU count
# by the hour, the seed's memory rules. The tests written for those questions ask them so.
IDEAL = {
    "no_failures": True,
    "cloud_terms": False,
    "assumptions": Assumptions(),
    "batch_tokens_model": "off",
}


def ideal_scenario(**fields) -> Scenario:
    """A Scenario on IDEAL's settings unless ``fields`` sets them."""
    return Scenario(**{**IDEAL, **fields})


REPO = Path(__file__).resolve().parent.parent


def aws_block_days(days: float) -> int:
    """The days an AWS EC2 Capacity Block bills a job of ``days`` (the EC2 User Guide: 1-day
    increments up to 14 days, 7-day increments up to 182), written out here on its own so
    that the tests do not check models/rental.py against itself."""
    assert 0 < days <= 182, days
    return math.ceil(days) if days <= 14 else 14 + 7 * math.ceil((days - 14) / 7)


def run_main(capsys, args: list[str]) -> tuple[int, str, str]:
    """Call designer.cli.main like the console script; return (exit code, stdout, stderr)."""
    capsys.readouterr()  # only this call's output
    with pytest.raises(SystemExit) as info:
        main(args)
        raise SystemExit(0)  # main returns normally on success
    code = info.value.code
    code = 0 if code is None else code
    out, err = capsys.readouterr()
    return code, out, err


def run_cli(args: list[str]) -> Result:
    """Invoke the click group in-process (exceptions propagate: a traceback is a failure)."""
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def one_line(err: str) -> str:
    """The one line of an error on stderr, without a traceback."""
    assert "Traceback" not in err
    lines = err.strip("\n").split("\n")
    assert len(lines) == 1, f"stderr is not one line: {err!r}"
    return lines[0]


# The smallest optimize question the CLI tests run (llama2-7b, 20B tokens, a 1M ceiling).
TINY = [
    "optimize",
    "--model", "llama2-7b",
    "--gpu", "h100-sxm",
    "--tokens", "20B",
    "--max-batch-tokens", "1M",
    "--no-explain",
]  # fmt: skip


# A study of two budgets and two GPU types, about a second to sweep (the report tests).
SMALL_STUDY = """\
base:
  model: llama2-7b
  tokens: 20B
  max_batch_tokens: 1M
axes:
  budget: [300K, 1M]
  gpus: [[h100-sxm], [h200]]
"""


def load_bench(script: str, module_name: str) -> ModuleType:
    """Import a script of bench/ (not a package) as ``module_name``."""
    path = REPO / "bench" / script
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


# --- questions -------------------------------------------------------------------------------


def random_scenario(seed: int, cat) -> Scenario:
    """A small random question, a pure function of ``seed``.

    Batch ceilings stay at or under 4M tokens (1M for the cost objective, whose CP-SAT
    solve time grows with the ceiling) so that both solvers finish in about a second."""
    r = random.Random(seed)
    layers = r.choice([2, 3, 4, 6, 8, 9, 12, 16])
    hidden = r.choice([256, 512, 1024, 2048])
    heads = r.choice([8, 16])
    kv_heads = r.choice([k for k in (1, 2, 4, 8, 16) if heads % k == 0])
    spec = TransformerSpec(
        name=f"random-{seed}",
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        vocab=r.randint(1000, 50000),
        seq_len=r.choice([512, 1024, 2048]),
        gated_mlp=r.random() < 0.5,
    )
    tokens = 10 ** r.uniform(9, 11)
    gpus = tuple(r.sample(sorted(cat.gpus_for_sale()), r.choice([1, 2])))
    nics = tuple(r.sample(sorted(cat.nics), r.choice([1, 2])))
    kw: dict = {}
    if r.random() < 0.5:
        kw.update(
            objective="time",
            pricing=r.choice(["capex", "cloud"]),
            budget_usd=round(10 ** r.uniform(4.301, 6.301)),  # ~$20K .. ~$2M
        )
    else:
        kw.update(objective="cost", pricing="capex", deadline_days=r.randint(1, 200))
    if r.random() < 0.4:
        kw["max_gpus"] = r.choice([8, 16, 32, 64, 128, 256])
    max_batch = 2 ** r.randint(16, 22 if kw["objective"] == "time" else 20)
    kw["max_batch_tokens"] = max_batch
    if r.random() < 0.3:
        kw["min_batch_tokens"] = max_batch // r.choice([2, 4, 8])
    modes = ("none", "selective", "full")
    recompute = tuple(m for m in modes if r.random() < 0.6) or (r.choice(modes),)
    # the cluster around the GPUs: energy pricing, power and rack caps, small switches
    # (so that small clusters need two or three tiers), oversubscription, a lifetime
    if r.random() < 0.25:
        kw["pricing"] = "tco"
    if r.random() < 0.2:
        kw["power_cap_mw"] = r.choice([0.005, 0.02, 0.05, 0.2])
    if r.random() < 0.15:
        kw["max_racks"] = r.choice([1, 2, 4])
    if r.random() < 0.3:
        ports = r.choice([4, 6, 8, 16])
        cat = replace(
            cat,
            switches={n: sw.model_copy(update={"ports": ports}) for n, sw in cat.switches.items()},
        )
    if r.random() < 0.2:
        cat = cat.with_facility(oversubscription=r.choice([1.5, 2.0, 3.0]))
    if kw.get("pricing") == "tco" and r.random() < 0.4:
        cat = cat.with_facility(lifetime_years=r.choice([1.0, 4.0]))
    return ideal_scenario(
        spec=spec,
        catalog=cat,
        tokens=tokens,
        seq_len=spec.seq_len,
        gpus=gpus,
        nics=nics,
        micro_batches=(1, 2, 4),
        recompute_modes=recompute,
        **kw,
    )


# A model whose 61 layers split evenly over no pipeline depth but 1 and 61: the optimizer
# has to choose an uneven split (test_uneven_pipeline, test_decision_space).
PRIME = TransformerSpec(
    name="prime-61",
    layers=61,
    hidden=8192,
    heads=64,
    kv_heads=8,
    ffn_hidden=28672,
    gated_mlp=True,
    vocab=32000,
    seq_len=4096,
)


def prime_scenario(cat) -> Scenario:
    return ideal_scenario(
        spec=PRIME,
        catalog=cat,
        tokens=1e11,
        seq_len=4096,
        gpus=("h100-sxm",),
        nics=("cx7-400g",),
        objective="time",
        pricing="capex",
        budget_usd=3e6,
        max_batch_tokens=4 * 2**20,
        micro_batches=(1, 2, 4),
    )


# 128 experts of a 4K-wide model on 8-GPU rtx4090 servers at $4M: the best plan spreads EP
# over servers (test_moe_plan's NIC pricing; --ep-in-domain in test_ep_in_domain)
WIDE_MOE = TransformerSpec(
    name="wide-moe", layers=2, hidden=4096, heads=32, vocab=32000, seq_len=2048,
    experts=128, experts_per_token=8, expert_ffn_hidden=2048,
)  # fmt: skip


def wide_moe_scenario(cat, **changes) -> Scenario:
    """WIDE_MOE's question (time under $4M, one GPU and NIC type, a narrow space)."""
    s = ideal_scenario(
        spec=WIDE_MOE,
        catalog=cat,
        seq_len=WIDE_MOE.seq_len,
        tokens=5e10,
        gpus=("rtx4090",),
        nics=("cx6-200g",),
        objective="time",
        pricing="capex",
        budget_usd=4e6,
        max_batch_tokens=2**21,
        micro_batches=(1, 2),
        recompute_modes=("none",),
    )
    return s.with_changes(**changes)


# --- plans to launch (test_launch_round_trip, test_launch_flags) -----------------------------


ZOO = sorted(zoo())
MEGATRON_CANNOT = {"bloom-176b": "ALiBi"}  # the one zoo model Megatron-LM has no flag for
SPLIT_OPTIONS = {"--pp", "--vp", "--first-stage-layers", "--last-stage-layers"}


def plan_of(model: str, shape: Shape, dp: int, microbatches: int, seq: int | None = None):
    scenario = build_scenario(
        model=model,
        tokens=1e12,
        seq_len=seq,
        gpus=(shape.gpu,),
        max_gpus=1_000_000,
        precision=shape.precision,
        ignore=("divisibility",),
    )
    nic = scenario.nics_for(shape.gpu)[0].name  # a NIC the server takes (Gaudi 3: its ports)
    counts = scenario.nic_counts(shape.gpu)
    return scenario, build_plan(scenario, Config(shape, nic, max(counts), dp, microbatches))


def zoo_plan(model: str):
    spec = zoo()[model]
    tp = 8 if spec.heads % 8 == 0 and spec.kv % 8 == 0 else 4
    layers = spec.layers
    pp = next(p for p in (8, 6, 5, 4, 3, 2) if layers % p == 0)
    return plan_of(model, Shape("h100-sxm", tp, 1, pp, 1, 1, "selective", "bf16"), 4, 2 * pp)


@cache
def random_plans() -> list[tuple]:
    """50 plans the optimizer could return (its shapes, with --ignore divisibility for the
    pipeline), a fixed seed; at least 15 with an uneven or layout-string split."""
    rng = random.Random(16)
    models = [m for m in ZOO if m not in MEGATRON_CANNOT]
    uneven, even = [], []
    while len(uneven) < 20 or len(even) < 30:
        model = rng.choice(models)
        spec = zoo()[model]
        tp = rng.choice([t for t in (1, 2, 4, 8) if spec.heads % t == 0 and spec.kv % t == 0])
        pp = rng.choice([1, 2, 3, 4, 5, 6, 7, 8, 12, 16])
        vp = rng.choice([1, 1, 2, 4]) if pp > 2 else 1
        splits = pipeline_splits(spec.layers, pp, vp)
        if not splits:
            continue
        split = rng.choice(splits)
        cp = rng.choice([1, 1, 2])
        shape = Shape(
            "h100-sxm",
            tp,
            cp,
            pp,
            vp,
            rng.choice([1, 2]),
            rng.choice(["none", "selective", "full"]),
            rng.choice(["bf16", "fp8"]),
            split,
        )
        replica = tp * cp * pp
        dp = rng.choice([d for d in range(1, 65) if (d * replica) % 8 == 0 or d * replica < 8])
        layout = shape.layout(dp, 2 * pp)
        if any(v.option not in SPLIT_OPTIONS for v in divisibility_violations(spec, layout, 4096)):
            continue
        # learned position tables are as long as the model's sequence: train at it
        seq = spec.seq_len if spec.position_embedding == "learned_absolute" else 4096
        entry = (model, shape, dp, 2 * pp, seq)
        bucket = uneven if split != EVEN or spec.layers % (pp * vp) else even
        if len(bucket) < (20 if bucket is uneven else 30):
            bucket.append(entry)
    return uneven + even


def assert_solvers_agree(ref, got, rel_tol: float = 1e-3) -> list:
    """The differential tests' check: CP-SAT (``got``) and the exhaustive solver (``ref``)
    agree on feasibility and, within ``rel_tol`` (CP-SAT's integer units), on the optimum,
    CP-SAT proves it, and every plan passes the float model. Returns the plans checked."""
    import math

    assert ref.status in ("optimal", "infeasible")
    assert (got.status == "infeasible") == (ref.status == "infeasible"), (got.status, ref.status)
    if ref.status == "infeasible":
        assert not got.plans
        return []
    want, have = ref.plans[0].objective, got.plans[0].objective
    assert math.isclose(have, want, rel_tol=rel_tol), (have, want, got.plans[0].config)
    assert got.status == "optimal", (got.status, got.gap)
    for plan in got.plans + ref.plans:
        assert plan.feasible, plan.violations
    return got.plans + ref.plans


# Issue 20's sweep and CLI questions (tests/test_sweep.py, test_outputs.py, test_interrupts.py,
# test_limits.py and others): a two-scenario study, a small optimize question, refusals.
SMALL = (
    "base:\n  model: {model}\n  tokens: 100B\n  max_batch_tokens: 1M\n  gpus: [h100-sxm]\n"
    "axes:\n  budget: [1M, 2M]\n"
)
OPTIMIZE = ["optimize", "--gpu", "h100-sxm", "--tokens", "20B", "--budget", "1M"]
OPTIMIZE += ["--max-batch-tokens", "1M", "--no-explain"]
SPEC = '{"layers": 2, "hidden": 256, "heads": 8, "vocab": 1000, "seq_len": 512}'


def study(tmp_path: Path, name: str = "small.yaml", model: str = "llama2-7b") -> Path:
    path = tmp_path / name
    path.write_text(SMALL.format(model=model))
    return path


def sweep(capsys, study_file: Path, out: Path, *more: str) -> tuple[int, str, str]:
    return run_main(capsys, ["sweep", str(study_file), "--csv", str(out), "--workers", "1", *more])


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def refused(capsys, args: list[str], *words: str) -> str:
    """The command exits 2 with one line naming every word."""
    code, _, err = run_main(capsys, args)
    line = one_line(err)
    assert code == 2, err
    for w in words:
        assert w in line, line
    assert "internal error" not in line
    return line


def _sweep_process(study_file: Path, out: Path, workers: int) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "designer", "sweep", str(study_file), "--csv", str(out)]
    cmd += ["--resume", "--workers", str(workers)]
    return subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True
    )


def _started_sweep(tmp_path: Path) -> tuple[Path, Path, subprocess.Popen]:
    """A 30-scenario study swept on two workers (its own session), once 2 rows are written."""
    s, out = tmp_path / "med.yaml", tmp_path / "c.csv"
    budgets = ", ".join(f"{b}M" for b in range(1, 31))
    s.write_text(SMALL.format(model="llama2-7b").replace("[1M, 2M]", f"[{budgets}]"))
    proc = _sweep_process(s, out, 2)
    deadline = time.time() + 120
    while len(out.read_text().splitlines() if out.exists() else []) < 3:
        if time.time() > deadline or proc.poll() is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"the sweep wrote no rows: {proc.communicate()[1]}")
        time.sleep(0.02)
    return s, out, proc


OPTIMIZE_SLOW = ["optimize", "--deadline", "60d", "--pricing", "tco", "--model", "llama3-405b"]
OPTIMIZE_SLOW += ["--evidence", "any", "--precision", "any", "--top", "20", "--no-explain"]
# the larger space it was timed on (CP across servers, the default before 2026-12-05), and
# more virtual stages: about 6.5 s of CPU on an idle machine, where the default space takes 3.6
OPTIMIZE_SLOW += ["--cp-across-servers", "--max-virtual-stages", "8"]


# --- one plan in the CP-SAT model (test_cpsat_time, test_cpsat_cost, test_cpsat_cluster, ...)


def solve_at(scenario: Scenario, cfg: Config, **build_kw):
    """CP-SAT's model of ``scenario`` over ``cfg``'s shape with every decision fixed to
    ``cfg`` (NICs, DP degree, micro-batches, purchases), solved: the model's values for one
    plan, to compare with the float model's (solvers/plan.py build_plan). Returns the status,
    the solver, the formulation and ``value(name)`` of a variable named in the model."""

    from solvers.cpsat.model import build
    from solvers.space import enumerate_candidates
    from solvers.stop import stoppable_solver

    cands = [c for c in enumerate_candidates(scenario) if c.shape == cfg.shape]
    form = build(scenario, cands, **build_kw)
    md = form.model
    md.add(form.x[0] == 1)
    md.add(form.nic_lits[cfg.nic] == 1)
    md.add(form.nics == cfg.nics_per_node)
    md.add(form.dp == cfg.dp)
    md.add(form.m == cfg.microbatches)
    if form.spare_lits:
        md.add(form.spare_lits[cfg.spares_per_100] == 1)
    if form.storage_lits:
        base = scenario.catalog.facility.checkpoint_storage_gb_per_s_per_server
        md.add(form.storage_lits[cfg.storage_gb_per_s or base] == 1)
    md.minimize(form.objective)
    solver = stoppable_solver()  # never CP-SAT's own SIGINT handler
    solver.parameters.num_workers = 1
    status = solver.solve(md)
    names = [v.name for v in md.proto.variables]

    def value(name: str) -> int:
        return int(solver.value(md.get_int_var_from_proto_index(names.index(name))))

    return status, solver, form, value


# A 6-layer model with a critical batch of 163 sequences at 1B tokens (DeepSeek's fit), cheap
# enough that the exhaustive solver answers in a fraction of a second (test_cpsat_batch_tokens,
# test_cpsat_purchases)
SMALL_BATCH = TransformerSpec(
    name="small-batch", layers=6, hidden=768, heads=12, kv_heads=12, vocab=16000, seq_len=1024
)


def small_batch_scenario(cat, **changes) -> Scenario:
    """SMALL_BATCH's question: the fastest plan under $1M of H100s, the ideal model."""
    base = dict(
        spec=SMALL_BATCH,
        catalog=cat,
        tokens=1e9,
        seq_len=1024,
        gpus=("h100-sxm",),
        nics=("cx7-400g",),
        budget_usd=1e6,
        max_batch_tokens=2**22,
    )
    return ideal_scenario(**{**base, **changes})


def variants(scenario: Scenario, plan, dps=(0.5, 2.0), ms=(0.5, 2.0)) -> list:
    """``plan`` and plans of its shape at other DP degrees and micro-batch counts (rebuilt by
    the float model; some break a limit): the points where CP-SAT's model and the float
    model are compared."""
    cfg = plan.config
    out = [plan]
    for f in dps:
        dp = max(cfg.shape.dp_step, int(cfg.dp * f) // cfg.shape.dp_step * cfg.shape.dp_step)
        out.append(build_plan(scenario, replace(cfg, dp=dp)))
    for f in ms:
        out.append(
            build_plan(scenario, replace(cfg, microbatches=max(1, int(cfg.microbatches * f))))
        )
    return out


def hard_knapsack():
    """A seeded 0-1 knapsack with 40 constraints over 300 items: CP-SAT needs far longer
    than any test waits to prove it (the interrupt and stop tests search it)."""
    import random

    from ortools.sat.python import cp_model

    rng = random.Random(1)
    md = cp_model.CpModel()
    xs = [md.new_bool_var(f"x{i}") for i in range(300)]
    for _ in range(40):
        md.add(sum(rng.randint(1, 100) * x for x in xs) <= 5000)
    md.maximize(sum(rng.randint(1, 100) * x for x in xs))
    return md


class StopAfter:
    """solvers.exhaustive.time_up stopping each solve before its (n + 1)-th shape: a time
    limit's early stop without a clock (a solve is told apart by its start). ``per_solve``:
    one n per solve in the order they start (cloud terms: one solve per term); None: never
    stops that one."""

    def __init__(self, *per_solve: int | None) -> None:
        self.per_solve = per_solve
        self.calls: dict[float, int] = {}  # checks so far, by solve (its start), in order

    def __call__(self, start: float, time_limit_s: float | None) -> bool:
        self.calls[start] = self.calls.get(start, 0) + 1
        which = min(list(self.calls).index(start), len(self.per_solve) - 1)
        n = self.per_solve[which]
        return n is not None and self.calls[start] > n
