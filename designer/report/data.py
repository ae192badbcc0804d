"""`designer report`'s one data structure, built from a saved answer (``optimize --json`` or
``explain --json`` output, or a question file answered as ``designer explain`` would), a
``compare --json`` result or a sweep's results CSV.

The page (designer.report.html) and the workbook (designer.report.xlsx) only lay out what
this module returns: every number here is one the CLI already prints (the answer's plan
entries, binding constraints, bill of materials and paragraph, designer.output.formats) or one the
library computes for it (a saved plan re-evaluated for its step-time breakdown, as
``designer explain`` re-evaluates a saved plan; a study's win shares from designer.sweep).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from catalog.files import MAX_RESULTS_BYTES, check_input
from designer.errors import UsageError
from designer.output import formats as report
from designer.output import text as render
from designer.output.cells import read_row
from designer.question.build import _from_answer, _saved_config
from designer.report.catalog import catalog_entries
from solvers.plan import build_plan

PLAN_FIELDS = (
    *("rank", "gpu", "num_gpus", "nodes", "gpus_per_node", "tp", "pp", "dp", "cp", "vp"),
    *("micro_batch", "grad_accum", "global_batch", "recompute", "sequence_parallel", "zero"),
    *("precision", "nic", "nics_per_node", "memory_gb_per_gpu", "step_time_s"),
    *("time_to_train_days", "cost_usd", "mfu"),
)
"""A plan's contract columns (../shared/CLI-CONTRACT.md), in the tables' order."""


@dataclass
class ReportData:
    """What a report shows. ``plans``: the answer's plan entries (contract columns, evidence,
    ``label`` for hover text; compare's ``status`` and ``top_binding``); ``binding``: the
    best plan's constraints; ``bom``: the featured plan's bill of materials (report.bom_dict);
    ``breakdown``: [{label, parts: {part: seconds}}]; ``study``: a sweep's rows and views."""

    kind: str  # "answer", "compare" or "study"
    source: str
    title: str
    recommendation: str
    objective: dict[str, Any] = field(default_factory=dict)
    plans: list[dict[str, Any]] = field(default_factory=list)
    binding: list[dict[str, Any]] = field(default_factory=list)
    bom: dict[str, Any] | None = None
    bom_plan: str = ""
    other_boms: list[dict[str, Any]] = field(default_factory=list)  # compare: {gpu, plan, bom}
    breakdown: list[dict[str, Any]] = field(default_factory=list)
    question: dict[str, Any] | None = None
    catalog: list[dict[str, Any]] = field(default_factory=list)
    study: dict[str, Any] | None = None
    breakeven: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    moe: bool = False  # a mixture-of-experts model: the layouts show EP and ETP
    alternatives: list[dict[str, Any]] = field(default_factory=list)  # beyond the evidence rule


def days(v: Any) -> str:
    """Days to read, as the CLI writes them (three figures below one day; ``-`` for none)."""
    return "-" if v is None else render.number(float(v), ".1f")


def plan_label(p: dict[str, Any]) -> str:
    """The plan behind a point, one line: GPUs, servers, NICs, layout, days and cost."""
    if p.get("num_gpus") in (None, ""):
        return f"{p.get('gpu')}: no plan ({p.get('status') or 'infeasible'})"
    layout = f"TP {p['tp']} PP {p['pp']} DP {p['dp']}"
    for degree in ("cp", "vp", "ep", "etp"):  # shown when not 1 (ep, etp: MoE plans)
        if p.get(degree) not in (None, "") and int(p[degree]) > 1:
            layout += f" {degree.upper()} {p[degree]}"
    servers = "" if p.get("nodes") is None else f" in {render.count(int(p['nodes']), 'server')}"
    cost = p.get("cost_usd")
    return (
        f"{int(p['num_gpus']):,} x {p['gpu']}{servers} "
        f"({p['nics_per_node']} x {p['nic']}), {layout}, micro-batch {p['micro_batch']} "
        f"x {p['grad_accum']}, {p['recompute']} recompute; "
        f"{days(p.get('time_to_train_days'))} days, {render.usd(cost)}"
    )


def pareto_front(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The plans no other plan beats on both time and cost, fastest first."""
    front: list[dict[str, Any]] = []
    for r in sorted(rows, key=lambda r: (r["time_to_train_days"], r["cost_usd"])):
        if not front or r["cost_usd"] < front[-1]["cost_usd"]:
            front.append(r)
    return front


def answer_scenario(path: Path, doc: dict[str, Any]):
    scenario, _ = _from_answer(doc, str(path))
    return scenario


def evaluated(scenario, plan: dict[str, Any], origin: str, where: str, csv: bool = False):
    """A saved plan entry re-evaluated on its question (as ``designer explain`` does), or
    None when it no longer fits it."""
    config = _saved_config(plan, f"{origin}: {where}", csv)
    built = build_plan(scenario, config)
    return built if built.feasible else None


def breakdown_entry(label: str, built, plan: dict[str, Any]) -> dict[str, Any]:
    """A plan's exposed step time per part (models.step.StepBreakdown), seconds; ``plan``:
    its entry (the hover text names it)."""
    parts = {k: float(v) for k, v in built.evaluation.breakdown.as_dict().items()}
    return {
        "label": label,
        "plan": plan_label(plan),
        "parts": parts,
        "step_time_s": float(built.evaluation.step_time_s),
    }


def _with_labels(plans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The plans with their hover label (and their rank, where a hand-made answer has none)."""
    return [
        {**p, "rank": p.get("rank") or i + 1, "label": plan_label(p)} for i, p in enumerate(plans)
    ]


def _title(scenario, what: str) -> str:
    """``llama2-70b on 2T tokens: what`` (the question as read, so ``tokens: "2T"`` too)."""
    return f"{scenario.spec.name} on {render.si(scenario.tokens)} tokens: {what}"


def _plans_evaluated(scenario, path: Path, data: ReportData) -> list:
    """Each plan re-evaluated (None where it has none, or no longer fits); a note when the
    model now predicts another step time than the saved one."""
    data.moe = bool(scenario.spec.is_moe)
    built = []
    for i, p in enumerate(data.plans):
        b = None
        if p.get("num_gpus") not in (None, ""):
            b = evaluated(scenario.with_changes(gpus=(p["gpu"],)), p, str(path), f"plans[{i}]")
        if b is None and p.get("num_gpus") not in (None, ""):
            data.notes.append(f"plan {p['rank']} no longer fits its question; not broken down")
        elif (
            b is not None
            and p.get("step_time_s") is not None
            and abs(float(b.evaluation.step_time_s) - float(p["step_time_s"]))
            > 1e-6 * float(p["step_time_s"])
        ):
            data.notes.append(
                f"plan {p['rank']}: this version of the designer predicts a step of "
                f"{float(b.evaluation.step_time_s):.3f} s (saved: {float(p['step_time_s']):.3f} s); "
                "the breakdown is today's"
            )
        built.append(b)
    data.catalog = catalog_entries(scenario.catalog, [b for b in built if b is not None])
    return built


def answer_report(path: Path, doc: dict[str, Any]) -> ReportData:
    """An ``optimize``/``explain --json`` answer: its paragraph, plans, binding constraints,
    bill of materials and the plans beyond the evidence rule as saved; each plan
    re-evaluated for its step-time breakdown."""
    scenario = answer_scenario(path, doc)
    data = ReportData(
        kind="answer",
        source=str(path),
        title=_title(scenario, _goal(scenario)),
        recommendation=str(doc.get("explanation") or conflict_sentence(doc.get("conflict"))),
        objective=dict(doc.get("objective") or {}),
        plans=_with_labels(doc["plans"]),
        binding=list(doc.get("binding") or []),
        bom=doc.get("bom"),
        question=doc["question"],
        alternatives=[
            {**a, "plan": {**a["plan"], "label": plan_label(a["plan"])}}
            for a in doc.get("alternatives") or []
        ],
    )
    built = _plans_evaluated(scenario, path, data)
    data.breakdown = [
        breakdown_entry(f"#{p['rank']} {p['gpu']}", b, p)
        for p, b in zip(data.plans, built, strict=True)
        if b is not None
    ]
    if data.plans and data.bom is None and built and built[0] is not None:
        data.bom = report.bom_dict(built[0])  # an answer saved before the BOM was in it
    data.bom_plan = data.plans[0]["label"] if data.plans else ""
    return data


def _goal(scenario) -> str:
    if scenario.objective == "cost":
        return f"cheapest plan by {days(scenario.deadline_days)} days"
    budget = scenario.budget_usd
    return "fastest plan" + (f" under {render.usd(float(budget))}" if budget else "")


def conflict_sentence(conflict: dict[str, Any] | None) -> str:
    """An infeasible answer's conflict as designer.output.formats.paragraph words it."""
    if not conflict:
        return "No plan satisfies the question."
    changes = [f["change"] for f in conflict.get("fixes") or []]
    complete = conflict.get("complete", True) is not False
    cores = [
        (list(c.get("constraints") or []), [f["change"] for f in c.get("fixes") or []])
        for c in conflict.get("cores") or []
    ]
    return report.conflict_sentence(
        list(conflict.get("constraints") or []), changes, complete, cores
    )


def compare_report(path: Path, doc: dict[str, Any]) -> ReportData:
    """A ``compare --json`` result: one plan per GPU type, best first; the best plan's
    binding constraints; each plan's bill of materials and breakdown re-evaluated."""
    question = doc["question"]
    scenario = answer_scenario(path, doc)
    data = ReportData(
        kind="compare",
        source=str(path),
        title=_title(scenario, _goal(scenario) + ", one GPU type at a time"),
        recommendation="",
        objective=dict(doc.get("objective") or {}),
        plans=_with_labels(doc["plans"]),
        binding=list(doc.get("binding") or []),
        question=question,
    )
    built = _plans_evaluated(scenario, path, data)
    data.breakdown = [
        breakdown_entry(p["gpu"], b, p) for p, b in zip(data.plans, built, strict=True) if b
    ]
    first = next((i for i, b in enumerate(built) if b is not None), None)
    if first is not None:
        data.bom = report.bom_dict(built[first])
        data.bom_plan = data.plans[first]["label"]
    data.other_boms = [
        {"gpu": p["gpu"], "plan": p["label"], "bom": report.bom_dict(b)}
        for i, (p, b) in enumerate(zip(data.plans, built, strict=True))
        if b is not None and i != first
    ]
    data.recommendation = compare_sentence(data.plans, doc.get("conflict"))
    return data


def compare_sentence(plans: list[dict[str, Any]], conflict: dict[str, Any] | None = None) -> str:
    """compare's answer in one paragraph: the best GPU type, the runners-up, the rest (none
    answering: the conflict and its smallest fix, as the JSON holds them)."""
    ok = [p for p in plans if p.get("num_gpus") not in (None, "")]
    if not ok:
        tried = ", ".join(str(p.get("gpu")) for p in plans)
        text = "No GPU type answers the question" + (f" ({tried} tried)." if tried else ".")
        return text + (" " + conflict_sentence(conflict) if conflict else "")
    best = ok[0]
    text = f"Best GPU type: {best['gpu']}, {best['label']}"
    if best.get("top_binding"):
        text += f" (limited first by {best['top_binding']})"
    text += "."
    if (best.get("evidence") or {}).get("line"):
        text += f" Evidence ({best['evidence'].get('stack')} profile): {best['evidence']['line']}."
    others = [
        f"{p['gpu']} {days(p.get('time_to_train_days'))} days for {render.usd(p.get('cost_usd'))}"
        for p in ok[1:]
    ]
    if others:
        text += " Runners-up: " + "; ".join(others) + "."
    none = [p["gpu"] for p in plans if p not in ok]
    if none:
        text += f" No plan on {', '.join(none)}."
    return text


def breakeven_report(path: Path, doc: dict[str, Any]) -> ReportData:
    """A ``breakeven --json`` result: the price, and the two plans it compares (the saved
    result holds no question: no bill of materials, breakdown or catalog entries)."""
    try:
        sides = [(doc["gpu"], doc["plans"]["gpu"]), (doc["against"], doc["plans"]["against"])]
        plans = [{**p, "rank": i + 1} for i, (_, p) in enumerate(sides) if p]
        entry = {k: doc[k] for k in ("gpu", "against", "pricing", "catalog_price_usd")}
    except (KeyError, TypeError) as err:
        raise UsageError(f"{path}: not a breakeven --json result ({err})", "FILE") from err
    entry["breakeven_price_usd"] = doc.get("breakeven_price_usd")
    entry["wins_at_catalog_price"] = doc.get("wins_at_catalog_price")
    data = ReportData(
        kind="breakeven",
        source=str(path),
        title=f"Break-even price of {doc['gpu']} against {doc['against']}",
        recommendation=breakeven_sentence(entry, _with_labels(plans)),
        objective=dict(doc.get("objective") or {}),
        plans=_with_labels(plans),
        breakeven=[entry],
    )
    data.notes.append("a breakeven result saves no question: no bill of materials or breakdown")
    return data


def breakeven_sentence(e: dict[str, Any], plans: list[dict[str, Any]]) -> str:
    """designer.output.breakeven_doc's first line, then the two plans."""
    price, base = e["breakeven_price_usd"], e["catalog_price_usd"]
    unit = "per GPU-hour" if e["pricing"] == "cloud" else "per GPU"
    if price is None:
        text = f"{e['gpu']} does not win against {e['against']} even at 1/1000 of its price."
    else:
        text = (
            f"{e['gpu']} wins the job against {e['against']} at or below "
            f"{render.usd(price)} {unit} (catalog {render.usd(base)}, "
            f"{100 * (price / base - 1):+.1f}%)."
        )
    return text + "".join(f" {p['gpu']}: {p['label']}." for p in plans)


def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """A results CSV's header and rows (exit 2 naming the file if it is not one)."""
    check_input(path, UsageError, "a results CSV", MAX_RESULTS_BYTES, "FILE")
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            rows = [read_row(r) for r in reader]
            header = list(reader.fieldnames or [])
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise UsageError(f"{path}: cannot read it as a CSV ({err})", "FILE") from err
    missing = [c for c in ("status", "gpu", "time_to_train_days", "cost_usd") if c not in header]
    if missing:
        raise UsageError(
            f"{path}: not a results CSV (no {', '.join(missing)} column); pass the CSV "
            "that designer sweep, compare --csv or optimize --csv wrote",
            "FILE",
        )
    return header, rows
