"""Turn a solve (and its explanation) into the contract's JSON, CSV rows, a table and a paragraph."""

from __future__ import annotations

import csv
import io
from typing import Any

from designer import render
from solvers import PLAN_COLUMNS, Scenario, SolveResult

CSV_COLUMNS = [*PLAN_COLUMNS, "top_binding"]


def question_dict(s: Scenario) -> dict[str, Any]:
    return {
        "model": s.spec.name,
        "params": s.spec.params(),
        "tokens": s.tokens,
        "seq_len": s.seq_len,
        "objective": s.objective,
        "pricing": s.pricing,
        "budget_usd": s.budget_usd,
        "deadline_days": s.deadline_days,
        "max_gpus": s.max_gpus,
        "max_batch_tokens": s.max_batch_tokens,
        "min_batch_tokens": s.min_batch_tokens,
        "gpus": list(s.gpus),
        "nics": list(s.nics),
        "precisions": list(s.precisions),
        "ignored_constraints": sorted(s.disabled),
    }


def result_dict(s: Scenario, res: SolveResult, binding: list | None, conflict) -> dict[str, Any]:
    best = res.best
    value = None
    if best is not None:
        value = float(best.objective)
    return {
        "status": res.status,
        "objective": {"name": res.objective_name, "value": value, "unit": res.objective_unit},
        "solve": {"solver": res.solver, "wall_s": res.wall_s, "gap": res.gap},
        "question": question_dict(s),
        "plans": [_plain(p.as_dict(i + 1)) for i, p in enumerate(res.plans)],
        "binding": [_plain(b.as_dict()) for b in (binding or [])],
        "conflict": _plain(conflict.as_dict()) if conflict is not None else None,
        "explanation": paragraph(s, res, binding, conflict),
    }


def _plain(obj: Any) -> Any:
    """numpy scalars to Python numbers, recursively (stable JSON and CSV)."""
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_plain(v) for v in obj]
    if hasattr(obj, "item") and not isinstance(obj, (str, bytes)):
        return obj.item()
    return obj


def top_binding(binding: list | None) -> str:
    for b in binding or []:
        if b.binding:
            return b.constraint
    return ""


def csv_text(res: SolveResult, binding: list | None) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for i, p in enumerate(res.plans):
        row = _plain(p.as_dict(i + 1))
        row["top_binding"] = top_binding(binding) if i == 0 else ""
        writer.writerow(row)
    return out.getvalue()


def _days(d: float) -> str:
    return f"{d:,.1f} days"


def paragraph(s: Scenario, res: SolveResult, binding: list | None, conflict) -> str:
    if res.best is None:
        if conflict is None:
            return (
                "No plan satisfies the question."
                if res.status == "infeasible"
                else ("No plan was found within the time limit.")
            )
        if not conflict.constraints:
            return (
                "No plan satisfies the question, and no single family of constraints is to blame."
            )
        names = " and ".join(conflict.constraints)
        fixes = "; or ".join(f.change for f in conflict.fixes)
        return f"Nothing fits: {names} cannot all hold. Smallest fixes: {fixes}."
    p = res.best
    ev, lay, cfg = p.evaluation, p.evaluation.layout, p.config
    layout = f"TP {lay.tp} x PP {lay.pp}" + (f" ({lay.vp} virtual)" if lay.vp > 1 else "")
    layout += (f" x CP {lay.cp}" if lay.cp > 1 else "") + f" x DP {lay.dp}"
    head = (
        f"Best plan: {lay.num_gpus:,} x {ev.gpu} in {ev.nodes:,} servers with {cfg.nics_per_node} x {cfg.nic} "
        f"each, {layout}, micro-batch {lay.micro_batch}, {cfg.microbatches} micro-batches per step "
        f"(global batch {lay.global_batch:,}). It trains {s.spec.name} on {render.si(s.tokens)} tokens in "
        f"{_days(ev.time_to_train_days)} for {render.usd(p.cost_usd)} ({s.pricing})"
        f"{'' if res.status == 'optimal' else f', best found (gap {100 * (res.gap or 0):.2g}%)'}."
    )
    binds = [b for b in binding or [] if b.binding]
    if not binding:
        return head
    unit = res.objective_unit
    if binds:
        parts = []
        for b in binds[:3]:
            gain = (
                _days(b.improvement_if_relaxed)
                if unit == "days"
                else render.usd(b.improvement_if_relaxed)
            )
            parts.append(f"{b.constraint} ({b.detail}; {b.relaxation} would save {gain})")
        head += " It is limited by " + ", then ".join(parts) + "."
    loose = [b for b in binding if not b.binding and b.slack is not None]
    if loose:
        head += (
            " Not limiting: " + "; ".join(f"{b.constraint} ({b.detail})" for b in loose[:4]) + "."
        )
    return head


def plans_table(res: SolveResult) -> str:
    rows = []
    for i, p in enumerate(res.plans):
        ev, lay, cfg = p.evaluation, p.evaluation.layout, p.config
        rows.append(
            (
                i + 1,
                ev.gpu,
                lay.num_gpus,
                ev.nodes,
                f"{cfg.nics_per_node}x{cfg.nic}",
                f"{lay.tp}/{lay.pp}/{lay.dp}/{lay.cp}/{lay.vp}",
                lay.micro_batch,
                cfg.microbatches,
                lay.recompute,
                f"{ev.memory.total:.1f}/{ev.memory.capacity:.0f}",
                float(ev.step_time_s),
                float(ev.time_to_train_days),
                render.usd(p.cost_usd),
                f"{100 * float(ev.mfu):.1f}%",
            )
        )
    return render.table(
        [
            "#",
            "gpu",
            "gpus",
            "servers",
            "nics/server",
            "tp/pp/dp/cp/vp",
            "mb",
            "accum",
            "recompute",
            "mem_gb",
            "step_s",
            "days",
            "cost",
            "mfu",
        ],
        rows,
    )


def binding_table(binding: list, unit: str = "") -> str:
    rows = []
    for b in binding:
        gain = b.improvement_if_relaxed
        rows.append(
            (
                b.constraint,
                "yes" if b.binding else "no",
                b.detail,
                b.relaxation,
                f"{gain:,.3g}" if gain else "-",
                f"{b.improvement_pct:.1f}%" if gain else "-",
            )
        )
    return render.table(
        ["constraint", "binding", "on this plan", "relaxation", "improvement", "%"], rows
    )
