"""optimize --from-megatron: the imported layout next to the optimizer's plan for the same
model, GPU type, GPU count and global batch, and what the optimizer would change."""

from __future__ import annotations

from typing import Any

from designer.errors import UsageError
from designer.launch.megatron_import import OPTION, ImportedRun
from designer.output import text as render
from designer.output.formats import _plain
from models import Evaluation, Hardware, evaluate
from solvers import PLAN_COLUMNS, Plan, Scenario
from solvers.plan import cost_usd

DEFAULT_GPU = "h100-sxm"  # evaluate's default
# optimize options the imported command decides (a clash is a usage error)
FIXED = {
    "model": "--model",
    "seq_len": "--seq-len",
    "max_gpus": "--max-gpus",
    "max_batch_tokens": "--max-batch-tokens",
    "min_batch_tokens": "--min-batch-tokens",
}
# the plan columns the diff compares: the layout and hardware, then the outcomes
OUTCOMES = ("memory_gb_per_gpu", "step_time_s", "time_to_train_days", "cost_usd", "mfu")
# the goodput columns (models/goodput.py) follow from the GPU count and the time to train
GOODPUT = ("ideal_time_days", "goodput", "failures_expected", "checkpoint_interval_min")
# the purchases (solvers/purchases.py) are the optimizer's decisions; an imported run has none
PURCHASES = ("hot_spares_per_100", "hot_spare_servers", "checkpoint_storage_gb_per_s_per_server")
# the rental term a cloud plan is paid under (solvers/cloud_terms.py): an outcome of renting
RENTAL = ("cloud_term",)
# the tokens the batch needs (models/batch_tokens.py): the command's batch is the plan's
BATCH_TOKENS = ("effective_tokens", "critical_batch_tokens")
SETTINGS = tuple(
    c
    for c in PLAN_COLUMNS
    if c
    not in ("rank", "gpu", "gpus_per_node", *OUTCOMES, *GOODPUT, *PURCHASES, *RENTAL, *BATCH_TOKENS)
)


def question_for(run: ImportedRun, question: dict[str, Any], explicit: set[str]) -> dict[str, Any]:
    """optimize's question with the command's model, GPU count and batch fixed, and its
    precision and dispatcher unless the options give them."""
    for key, option in FIXED.items():
        if key in explicit:
            raise UsageError(f"{option}: comes from the Megatron command with {OPTION}; drop it")
    gpus = tuple(question.get("gpus") or ())
    if len(gpus) > 1:
        raise UsageError(f"--gpu: give one GPU type with {OPTION} (the command runs on one)")
    batch_tokens = float(run.layout.global_batch * run.seq_len)
    q = dict(question)
    q.update(
        model=run.spec,
        seq_len=run.seq_len,
        gpus=gpus or (DEFAULT_GPU,),
        max_gpus=run.world_size,
        max_batch_tokens=batch_tokens,
        min_batch_tokens=batch_tokens,
    )
    if "tokens" not in explicit and run.tokens is not None:
        q["tokens"] = run.tokens
    if "precision" not in explicit:
        q["precision"] = run.layout.precision
    if "dispatcher" not in explicit and run.dispatch_per_domain:
        q["dispatcher"] = "deepep"  # the command's DeepEP / HybridEP dispatch
    return q


def refusal(err: UsageError, run: ImportedRun) -> UsageError | None:
    """A refusal of the question question_for built, as the user can act on it: the batch
    floor is the command's global batch, not an option to lower (giving it is refused), so
    a floor the batch-tokens model refuses (designer.question.build) names the command's
    batch and the fixes left. None: ``err`` stands as it is."""
    if err.option != FIXED["min_batch_tokens"]:
        return None
    what = err.detail.split(";")[0].removeprefix("the floor ")  # without the option's fix
    gb, seq = run.layout.global_batch, run.seq_len
    return UsageError(
        f"the command's global batch ({gb:,} x {seq:,} = {gb * seq:,} tokens) {what}; pass "
        "--batch-tokens-model off to plan at it, or import a smaller --global-batch-size",
        OPTION,
    )


def imported_evaluation(scenario: Scenario, run: ImportedRun) -> Evaluation:
    """The command's layout on the question's GPU (default NIC unless one --nic is given),
    with its gradient bytes (fp32 unless --grad-reduce-in-bf16), as evaluate counts them
    (its CP ranks where Megatron-LM's rank order puts them, across servers if they do:
    evaluate --from-megatron's default; the optimized plan keeps the question's rule)."""
    nic = scenario.nics[0] if len(scenario.nics) == 1 else None
    hw = Hardware.from_catalog(scenario.catalog, scenario.gpus[0], nic)
    a = run.assumptions(
        scenario.assumptions.model_copy(
            update={
                "batch_ceiling_tokens": scenario.max_batch_tokens,
                "batch_floor_tokens": scenario.min_batch_tokens,
                "cp_across_servers": True,
            }
        )
    )
    ex = run.experts()  # its EP, ETP and MoE mechanisms, as evaluate --from-megatron prices them
    failures = scenario.failure_model(hw.gpu.name)
    # the tokens its batch needs (models/batch_tokens.py), as the optimized plan is charged
    tokens = scenario.tokens * scenario.token_multiplier(run.layout.global_batch)
    ev = evaluate(scenario.spec, hw, run.layout, scenario.seq_len, tokens, a, ex, failures=failures)
    ev.extra["cost_usd"] = cost_usd(ev, scenario.pricing)
    ev.extra["gpus_per_node"] = hw.gpu.server.gpus_per_server
    if scenario.spec.is_moe:  # the command's dispatcher, in the plan column's terms
        ev.extra["dispatcher"] = "deepep" if ex.dispatch_per_domain else "alltoall"
    return ev


def row(ev: Evaluation) -> dict[str, Any]:
    """An evaluation in the plan columns (as Plan.as_dict writes them)."""
    d = ev.as_dict()
    return {
        **d["layout"],
        "num_gpus": d["num_gpus"],
        "nodes": d["nodes"],
        "memory_gb_per_gpu": d["memory_gb"]["total"],
        "step_time_s": d["step_time_s"],
        "time_to_train_days": d["time_to_train_days"],
        "cost_usd": ev.extra.get("cost_usd"),
        "mfu": d["mfu"],
        "dispatcher": ev.extra.get("dispatcher"),
    }


def changes(imported: Evaluation, plan: Plan) -> list[dict[str, Any]]:
    """Every layout setting the optimizer changed, then the outcomes (always listed)."""
    a, b = row(imported), plan.as_dict(1)
    out = [{"setting": k, "imported": a[k], "optimized": b[k]} for k in SETTINGS if a[k] != b[k]]
    out += [{"setting": k, "imported": a[k], "optimized": b[k]} for k in OUTCOMES]
    return out


def as_dict(run: ImportedRun, imported: Evaluation, plan: Plan | None) -> dict[str, Any]:
    """The `from_megatron` object added to optimize --json."""
    return {
        "command": run.as_dict(),
        "evaluation": imported.as_dict(),
        "cost_usd": imported.extra["cost_usd"],
        "max_gpus": run.world_size,
        "exact_gpu_count": False,  # the optimizer caps the GPU count; it cannot require it
        "diff": changes(imported, plan) if plan is not None else [],
    }


def text(run: ImportedRun, imported: Evaluation, plan: Plan | None) -> str:
    lay = imported.layout
    lines = [
        f"Imported Megatron-LM command: {run.world_size:,} GPUs ({run.nnodes} x "
        f"{run.nproc_per_node}), tp {lay.tp} pp {lay.pp} dp {lay.dp} cp {lay.cp} vp {lay.vp}, "
        f"micro-batch {lay.micro_batch}, global batch {lay.global_batch:,}, seq {run.seq_len:,}; "
        f"on {imported.gpu}: step {imported.step_time_s:.2f} s, "
        f"{render.number(float(imported.time_to_train_days or 0), '.1f')} days, "
        f"{render.usd(imported.extra['cost_usd'])}, "
        f"MFU {100 * imported.mfu:.1f}%"
        + ("" if imported.feasible else " - INFEASIBLE: ")
        + "; ".join(f"{v.constraint}: {v.detail}" for v in imported.violations),
    ]
    lines += [f"  note: {n}" for n in run.notes]
    if plan is None:
        return "\n".join(lines)
    n = plan.num_gpus
    if n < run.world_size:
        lines.append(
            f"The optimizer may use at most the command's {run.world_size:,} GPUs (it cannot "
            f"require exactly that many); it chose {n:,}."
        )
    lines.append("")
    lines.append(
        render.table(
            ["setting", "imported", "optimized"],
            [
                (
                    d["setting"],
                    _fmt(d["setting"], d["imported"]),
                    _fmt(d["setting"], d["optimized"]),
                )
                for d in changes(imported, plan)
            ],
        )
    )
    return "\n".join(lines)


def _fmt(setting: str, value: Any) -> str:
    if setting == "cost_usd":
        return render.usd(value)
    if setting == "mfu":
        return f"{100 * value:.1f}%"
    return render.fmt(value)


def report(scenario: Scenario, run: ImportedRun, best: Plan | None) -> tuple[dict[str, Any], str]:
    """optimize --from-megatron's additions: the JSON's ``from_megatron`` and the paragraph
    before the plan (the imported layout next to the plan, and what would change)."""
    imported = imported_evaluation(scenario, run)
    doc = {"from_megatron": _plain(as_dict(run, imported, best))}
    return doc, text(run, imported, best)
