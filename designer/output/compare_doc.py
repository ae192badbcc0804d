"""`designer compare`'s JSON object, CSV and text: one row per GPU type (per plan with
--top K), best first. A row without a plan carries the evidence a plan on its GPU would
(the question's precision, judged by the evidence rule); the answer says which GPU types
the evidence rule left out of a whole-catalog question and how to include them."""

from __future__ import annotations

import csv
import io
from typing import Any

from designer.output import text as render
from designer.output.cells import text_row
from designer.output.formats import (
    CSV_COLUMNS,
    EVIDENCE_COLUMNS,
    _plain,
    evidence_cell,
    evidence_legend,
    evidence_row,
    gpu_label,
    layout_cell,
    layout_head,
    paragraph,
    plan_entry,
    plan_evidence,
    question_dict,
    with_range,
)
from models.evidence_rule import RULE_TEXT, TIERS
from solvers import Scenario
from solvers.columns import PLAN_COLUMNS
from solvers.result import merged_gap


def _evidence():
    """models.evidence_range, imported on first use (it loads the performance model)."""
    # lazy: models.evidence_range loads numpy; commands that never solve do not
    from models import evidence_range as evidence

    return evidence


def gpu_evidence(s: Scenario, gpu: str, precision: str | None = None) -> dict[str, Any]:
    """A GPU's evidence object without a plan (ranges null), in ``precision`` when given."""
    family = "moe" if s.spec.is_moe else "dense"
    return _plain(_evidence().gpu_evidence(s.catalog, gpu, s.stack, precision, family))


def planless_evidence(s: Scenario, gpu: str) -> dict[str, Any]:
    """The evidence a plan on ``gpu`` would carry: in the question's precision (of several,
    --precision any, the best-evidenced one the search tried on it), judged by the evidence
    rule, as a plan's is (formats.plan_evidence)."""
    tried = [p for p in s.precisions if (gpu, p) not in s.unmeasured] or list(s.precisions)
    docs = [gpu_evidence(s, gpu, p) for p in tried]
    return min(docs, key=lambda d: TIERS.index(d["status"]) if d["status"] in TIERS else 9)


def row_evidence(s: Scenario, row) -> dict[str, Any]:
    """A compare row's evidence object: its plan's, else its GPU's (planless_evidence)."""
    best = row.result.best
    return plan_evidence(s, best) if best is not None else planless_evidence(s, row.gpu)


def _solve(rows) -> dict[str, Any]:
    """The JSON's ``solve``: the first row's solver, the total time, whether the first
    plan is proved best across the GPU types, and the gap when known (null otherwise, as
    optimize reports it): the best plan against the least bound of the types' searches
    (solvers.result.merged_gap, as a rented question's parts merge), proved when every
    type is (a gap of 0 does not settle the tie rule's second key: solvers/exhaustive.py)."""
    results = [r.result for r in rows]
    ok = [r for r in results if r.best is not None]
    gap = merged_gap(results, min(float(r.best.objective) for r in ok)) if ok else None
    proved = bool(ok) and all(r.status in ("optimal", "infeasible") for r in results)
    return {
        "solver": rows[0].result.solver if rows else "cpsat",
        "wall_s": sum(r.result.wall_s for r in rows),
        "gap": 0.0 if proved else gap,
        "proved": proved,
    }


def rows_settled(rows) -> bool:
    """Whether every GPU type's search ended with a plan or a proof of none (a type whose
    time ran out first, ``unknown``, may hold a better plan: no gap can be given)."""
    return all(r.result.status != "unknown" for r in rows)


def _status(rows) -> str:
    ok = [r for r in rows if r.result.best is not None]
    if ok:
        return "optimal" if _solve(rows)["proved"] else "feasible"
    return "infeasible" if rows_settled(rows) else "unknown"


def compare_dict(s: Scenario, rows, conflict=None, left_out=None) -> dict[str, Any]:
    """optimize's object with one plan per GPU type, best first, each with status and top
    binding (a type without a plan: every plan key null, its GPU's evidence); ``conflict`` (designer.compare.compare_conflict) when no type has a plan;
    ``left_out`` (designer.compare.left_out): the GPU types the evidence rule kept out."""
    plans = []
    for rank, row in enumerate(rows, start=1):
        best = row.result.best
        if best is not None:
            entry = plan_entry(s, best, rank)
        else:  # every plan key, null: a type without a plan has the rows' keys too
            entry = {**dict.fromkeys(PLAN_COLUMNS), "rank": rank, "gpu": row.gpu}
            entry["evidence"] = planless_evidence(s, row.gpu)
        entry["status"] = row.result.status
        entry["top_binding"] = row.top_binding or None
        plans.append(entry)
    first = rows[0].result if rows else None
    ok = [r for r in rows if r.result.best is not None]
    return {
        "status": _status(rows),
        "objective": {
            "name": first.objective_name if first else None,
            "value": float(ok[0].result.best.objective) if ok else None,
            "unit": first.objective_unit if first else None,
        },
        "solve": _solve(rows),
        "question": question_dict(s),
        "plans": plans,
        "binding": [_plain(b.as_dict()) for b in (ok[0].binding or [])] if ok else [],
        "conflict": conflict.as_dict() if conflict is not None else None,
        "left_out": left_out,
    }


def compare_csv(rows, s: Scenario) -> str:
    """One row per GPU type: the contract's columns, ``status``, then the evidence."""
    out = io.StringIO()
    cols = [*CSV_COLUMNS, "status", *EVIDENCE_COLUMNS]
    writer = csv.DictWriter(out, fieldnames=cols, lineterminator="\n")
    writer.writeheader()
    for rank, row in enumerate(rows, start=1):
        best = row.result.best
        entry = _plain(best.as_dict(rank)) if best else {"rank": rank, "gpu": row.gpu}
        entry["top_binding"] = row.top_binding
        entry["status"] = row.result.status
        entry.update(evidence_row(row_evidence(s, row)))
        writer.writerow(text_row(entry))
    return out.getvalue()


def _table_row(rank: int, row, s: Scenario) -> tuple:
    doc = row_evidence(s, row)
    best = row.result.best
    if best is None:
        blank = ("-",) * 8
        return (rank, gpu_label(row.gpu, doc), row.result.status, *blank, evidence_cell(doc))
    ev, lay, cfg = best.evaluation, best.evaluation.layout, best.config
    return (
        rank,
        gpu_label(row.gpu, doc),
        row.result.status,
        lay.num_gpus,
        ev.nodes,
        f"{cfg.nics_per_node}x{cfg.nic}",
        layout_cell(ev),
        with_range(float(ev.time_to_train_days or 0.0), doc["days_range"]),
        render.usd(best.cost_usd),
        f"{100 * float(ev.mfu):.1f}%",
        row.top_binding or "-",
        evidence_cell(doc),
    )


def compare_table(rows, s: Scenario) -> str:
    what = "fastest under the budget" if s.objective == "time" else "cheapest by the deadline"
    head = ["#", "gpu", "status", "gpus", "servers", "nics/server", layout_head(s)]
    head += ["days", "cost", "mfu", "top binding", "evidence"]
    table_rows = [_table_row(rank, row, s) for rank, row in enumerate(rows, start=1)]
    return "\n".join(
        [
            f"{s.spec.name} on {render.si(s.tokens)} tokens, {what}, one GPU type at a time:",
            "",
            render.table(head, table_rows),
            evidence_legend(s),
        ]
    )


def left_out_text(left_out: dict[str, Any] | None) -> str:
    """One line: how many GPU types the evidence rule kept out and which --evidence level
    includes them (as optimize's "Beyond the evidence rule" section words the rule); ''
    when none was."""
    if not left_out:
        return ""
    level, gpus, thin = left_out["evidence"], left_out["gpus"], left_out["thin"]
    n = len(gpus)
    how = f"--evidence any adds {'it' if n == 1 else f'all {n}'}"
    if thin:
        how = f"--evidence thin adds {', '.join(thin)}; {how}"
    return (
        f"Beyond the evidence rule (--evidence {level} searched only the pairs it admits; "
        f"{RULE_TEXT}): {n} GPU type{'s' if n != 1 else ''} left out ({', '.join(gpus)}); "
        f"{how}."
    )


def compare_text(s: Scenario, rows, conflict=None, left_out=None) -> str:
    """The table, the conflict when no GPU type has a plan, and the evidence rule's line."""
    parts = [compare_table(rows, s)]
    if conflict is not None:
        parts.append(paragraph(s, rows[0].result, None, conflict))
    return "\n".join(filter(None, [*parts, left_out_text(left_out)]))
