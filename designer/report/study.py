"""A sweep's results CSV as a report (designer.report.data.ReportData): the rows as written,
each scenario's winner, time against budget per GPU type, the cost-time Pareto front, win
shares under price uncertainty (designer.sweep.summary) and the prices at which a GPU type
won or lost. With the study file (beside the CSV, or ``--study``) the question, catalog
entries, bill of materials and step-time breakdowns are added, each plan re-evaluated on its
own scenario as ``designer sweep`` built it."""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path
from typing import Any

from designer import sweep
from designer.errors import UsageError
from designer.numbers import parse_quantity
from designer.output import formats as report
from designer.output import text as render
from designer.output.study_csv import STUDY_COLUMN
from designer.pricing import price_field
from designer.question.build import build_question
from designer.question.saved_answer import column_kind
from designer.report.catalog import catalog_entries
from designer.report.data import (
    ReportData,
    breakdown_entry,
    days,
    evaluated,
    pareto_front,
    plan_label,
    read_csv,
)
from designer.report.tables import axis_value

MAX_BREAKDOWN_PLANS = 12  # stacked bars on the page: the Pareto front's first plans
_SWEEP_KINDS: dict[str, type] = {"sample": int}  # the sweep's own numeric column


@functools.cache
def kind_of(column: str) -> type | None:
    """A results CSV column's type (int, float, bool; None: text), from the saved-answer
    schema that types every plan and evidence column (saved_answer.column_kind)."""
    return _SWEEP_KINDS.get(column) or column_kind(column)


def _cell(column: str, v: str) -> Any:
    """One cell as a Python value; ValueError naming the column where it is not one."""
    kind = kind_of(column)
    if kind is None:
        return v
    if kind is bool:
        if v not in ("True", "False"):
            raise ValueError(f"column {column}: {v!r} is not True or False")
        return v == "True"
    try:
        number = float(v)
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or (kind is int and number != int(number)):
        raise ValueError(f"column {column}: {v!r} is not a finite {kind.__name__}")
    return int(number) if kind is int else number


def typed(row: dict[str, str]) -> dict[str, Any]:
    """A CSV row with numbers and flags as Python values ("" -> None); ValueError naming
    the column of a cell that is not one."""
    out: dict[str, Any] = {}
    for k, v in row.items():
        out[k] = None if v == "" or v is None else _cell(k, v)
    if (
        out.get("evidence") is not None
    ):  # the plan entry's evidence object (designer.output.formats)
        out["evidence"] = {
            "status": out["evidence"],
            "runs": out.get("evidence_runs") or 0,
            "mape_pct": out.get("evidence_mape_pct"),
            "step_time_s_range": _range(out, "step_time_s"),
            "days_range": _range(out, "days"),
            "stack": out.get("evidence_stack"),
            "worst_pct": out.get("evidence_worst_pct"),
            "error_lo_pct": out.get("evidence_error_lo_pct"),
            "error_hi_pct": out.get("evidence_error_hi_pct"),
            "cost_usd_range": _range(out, "cost_usd"),
            "basis": out.get("evidence_basis"),
            "line": out.get("evidence_line"),
        }
    return out


def _range(row: dict[str, Any], name: str) -> list[Any] | None:
    lo, hi = row.get(f"{name}_lo"), row.get(f"{name}_hi")
    return None if lo is None else [lo, hi]


def axes_of(header: list[str]) -> list[str]:
    """The study's axes: the columns between ``scenario`` and ``status``."""
    return [c for c in header[1 : header.index("status")] if c not in ("sample", "price_scales")]


def _objective(rows: list[dict[str, Any]], study) -> str:
    if study is not None and study.base.objective:
        return str(study.base.objective)
    has_budget = any(r.get("budget") for r in rows) or (study and study.base.budget)
    has_deadline = any(r.get("deadline") for r in rows) or (study and study.base.deadline)
    return "cost" if has_deadline and not has_budget else "time"


def _key(objective: str):
    if objective == "cost":
        return lambda r: (r["cost_usd"], r["time_to_train_days"])
    return lambda r: (r["time_to_train_days"], r["cost_usd"])


def _groups(rows: list[dict[str, Any]], axes: list[str]) -> dict[tuple, list[dict[str, Any]]]:
    """The rows by scenario: one group per setting of the axes other than the GPU types'
    (``gpus``) and per sample, in the CSV's order."""
    others = [a for a in axes if a != "gpus"] + (["sample"] if rows and "sample" in rows[0] else [])
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(tuple(r.get(a) for a in others), []).append(r)
    return groups


def winners(rows: list[dict[str, Any]], axes: list[str], objective: str) -> list[dict[str, Any]]:
    """Each scenario's best plan across the GPU-type axis (``gpus``): one row per setting of
    the other axes (and sample), in the CSV's order."""
    return [min(g, key=_key(objective)) for g in _groups(rows, axes).values()]


def unanswered(rows: list[dict[str, Any]], axes: list[str]) -> list[dict[str, Any]]:
    """The scenarios no GPU type has a plan for (every row of their group without one):
    one row each (the first), with ``statuses``, its rows' statuses (infeasible, error,
    ...)."""
    out = []
    for group in _groups(rows, axes).values():
        if all(r.get("time_to_train_days") is None for r in group):
            statuses = sorted({str(r.get("status") or "no plan") for r in group})
            out.append({**group[0], "statuses": statuses})
    return out


def budget_curves(rows: list[dict[str, Any]], axes: list[str]) -> list[dict[str, Any]]:
    """Time to train against budget, one series per GPU type (and per value of the other
    axes): [{name, points: [{budget_usd, days, cost_usd, label}]}]; a scenario without a
    budget (the axis value null: an empty cell) has no point."""
    if "budget" not in axes:
        return []
    others = [a for a in axes if a not in ("budget", "gpus")]
    series: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if r.get("budget") is None:  # a scenario without a budget (an axis value null)
            continue
        name = r["gpu"] + "".join(f", {a} {r.get(a)}" for a in others)
        point = {"budget_usd": parse_quantity(r["budget"]), **_point(r)}
        series.setdefault(name, []).append(point)
    return [
        {"name": n, "points": sorted(pts, key=lambda p: p["budget_usd"])}
        for n, pts in sorted(series.items())
    ]


def _point(r: dict[str, Any]) -> dict[str, Any]:
    return {
        "days": r["time_to_train_days"],
        "cost_usd": r["cost_usd"],
        "gpu": r["gpu"],
        "label": r["label"],
    }


def price_wins(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per GPU type whose price was drawn or scaled: the highest multiplier of its catalog
    price at which it won a scenario and the lowest at which it lost one (a break-even lies
    between them when the first is below the second)."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        scales = json.loads(r.get("price_scales") or "{}")
        for gpu, k in scales.items():
            e = out.setdefault(gpu, {"gpu": gpu, "won_up_to": None, "lost_from": None, "n": 0})
            e["n"] += 1
            if r["gpu"] == gpu:
                e["won_up_to"] = max(k, e["won_up_to"] or k)
            else:
                e["lost_from"] = min(k, e["lost_from"] or k)
    for e in out.values():
        lo, hi = e["won_up_to"], e["lost_from"]
        e["clean"] = lo is not None and hi is not None and lo < hi
    return sorted(out.values(), key=lambda e: e["gpu"])


def price_points(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each plan's price multipliers and winner (the break-even chart's points)."""
    return [
        {"scales": json.loads(r["price_scales"]), **_point(r)}
        for r in rows
        if r.get("price_scales")
    ]


MAX_REPORT_ROWS = 100_000
"""The most rows of a results CSV a report reads (a study's default --max-scenarios): the
page and workbook hold about 25 KB of memory per row (150,000 rows took 3.8 GB and 100 s)."""


def _study(path: Path, given: Path | None, rows: list[dict[str, str]], notes: list[str]):
    """The study file that wrote the CSV (``given``, or STUDY.yaml/.yml beside it), or None."""
    candidates = [given] if given else [path.with_suffix(s) for s in (".yaml", ".yml")]
    for cand in candidates:
        if cand is None or not cand.is_file():
            if given:
                raise UsageError(f"{given}: no such file", "--study")
            continue
        study = sweep.load_study(cand)
        key = sweep.digest(study, str(cand))
        if rows and rows[0].get(STUDY_COLUMN) not in (None, "", key):
            if given:
                raise UsageError(
                    f"{given} did not write {path} (another study hash); pass its own study",
                    "--study",
                )
            notes.append(f"{cand} is not the study that wrote this CSV; not used")
            continue
        return study, cand
    if not given:
        notes.append(
            "no study file beside the CSV (pass --study STUDY.yaml): the question, catalog "
            "entries, bill of materials and step-time breakdown are left out"
        )
    return None, None


def study_scenario(study, origin: Path, row: dict[str, Any], ids: dict[str, dict[str, Any]]):
    """The scenario that produced ``row`` at catalog prices (designer.sweep.run_one then
    scales the prices by the row's ``price_scales``)."""
    values = ids.get(row["scenario"])
    if values is None:
        return None
    question = study.base.model_copy(update=sweep._question_values(values))
    return build_question(question, str(origin), origin.parent)


def _rows(path: Path, raw: list[dict[str, str]]) -> list[dict[str, Any]]:
    """The CSV's rows typed; exit 2 naming the file and row where one is not as written."""
    rows = []
    for i, r in enumerate(raw, start=2):
        try:
            if None in r:  # csv.DictReader's key for cells past the header's columns
                extra = r[None]  # type: ignore[index]
                raise ValueError(
                    f"{len(r) - 1 + len(extra)} cells, more than the header's {len(r) - 1} columns"
                )
            row = typed(r)
            _check_plan_cells(row)
            json.loads(row.get("price_scales") or "{}")
            if row.get("budget") is not None:  # the budget chart's x
                try:
                    parse_quantity(row["budget"])
                except ValueError as err:
                    raise ValueError(f"column budget: {err}") from err
        except (ValueError, TypeError) as err:
            raise UsageError(
                f"{path}: line {i} is not as designer sweep writes it ({err}); rerun the sweep",
                "FILE",
            ) from err
        rows.append(row)
    return rows


PLAN_CELLS = ("gpu", "cost_usd")
"""The cells a row with a plan (a time to train) needs besides it: the report's charts,
Pareto front and winners read them (an empty one was a TypeError)."""


def _check_plan_cells(row: dict[str, Any]) -> None:
    """ValueError naming the column of a plan row's empty PLAN_CELLS cell."""
    if row.get("time_to_train_days") is None:
        return
    for column in PLAN_CELLS:
        if row.get(column) is None:
            raise ValueError(f"column {column}: empty in a row with a time to train")


def study_report(path: Path, study_file: Path | None) -> ReportData:
    """A sweep's results CSV (optionally with its study file) as a report."""
    header, raw = read_csv(path)
    if "scenario" not in header or header.index("status") < 1:
        raise UsageError(
            f"{path}: not a sweep's results CSV (no scenario column); for compare or "
            "optimize, pass their --json output",
            "FILE",
        )
    if len(raw) > MAX_REPORT_ROWS:
        raise UsageError(
            f"{path}: {len(raw):,} rows, more than the {MAX_REPORT_ROWS:,} a report holds "
            "(about 25 KB of memory each); report a part of it, e.g. one GPU type's rows",
            "FILE",
        )
    data = ReportData(kind="study", source=str(path), title="", recommendation="")
    study, origin = _study(path, study_file, raw, data.notes)
    if study is not None and len(raw) > sweep.scenario_count(study):
        raise UsageError(
            f"{path}: {len(raw):,} rows, more than the {sweep.scenario_count(study):,} "
            f"scenarios of {origin}: rows were added or repeated; rerun the sweep",
            "FILE",
        )
    axes = axes_of(header)
    rows = _rows(path, raw)
    plans = [r for r in rows if r.get("time_to_train_days") is not None]
    for r in plans:
        r["label"] = plan_label(r)
    objective = _objective(rows, study)
    front = pareto_front(plans)
    wins = winners(plans, axes, objective)
    missing = unanswered(rows, axes)
    shares = sweep.summary(path) if "sample" in header and plans else {}
    data.study = {
        "axes": axes,
        "columns": header,
        "rows": rows,
        "objective": objective,
        "winners": wins,
        "unanswered": missing,
        "pareto": front,
        "budget_curves": budget_curves(plans, axes),
        "win_shares": shares,
        "price_wins": price_wins(plans) if "price_scales" in header else [],
        "price_points": price_points(plans) if "price_scales" in header else [],
        "catalog_prices": {},
        "errors": [r for r in rows if r.get("status") == "error"],
    }
    data.objective = {"name": "time_to_train" if objective == "time" else "cost"}
    data.objective["unit"] = "days" if objective == "time" else "USD"
    featured = _featured(plans, shares, objective)
    data.plans = [{**r, "rank": i + 1} for i, r in enumerate(front)]
    data.title = _title(study, path, len(rows))
    data.moe = any(int(r.get("ep") or 1) > 1 or int(r.get("etp") or 1) > 1 for r in plans)
    if study is not None and origin is not None:
        _with_study(data, study, origin, front, featured)
    data.recommendation = study_sentence(data, plans, featured)
    return data


def _featured(plans, shares, objective: str) -> dict[str, Any] | None:
    """The plan the bill of materials shows: the best plan of the GPU type that wins most
    often under uncertainty, else the best plan of the study."""
    if not plans:
        return None
    pool = plans
    if shares:
        top = max(shares, key=lambda g: shares[g]["win_share"])
        pool = [r for r in plans if r["gpu"] == top]
    return min(pool, key=_key(objective))


def _title(study, path: Path, n: int) -> str:
    """``llama2-7b on 1T tokens: 8 scenarios over budget, gpus``; the model and the tokens
    only where no axis sweeps them (the base question's would be none of the scenarios')."""
    if study is None:
        return f"Study {path.name}: {n:,} scenarios"
    base, axes = study.base, study.axes
    head = []
    if "model" not in axes:
        head.append(str(base.model))
    if "tokens" not in axes:
        tokens = base.tokens
        head.append(f"{render.si(tokens) if isinstance(tokens, int | float) else tokens} tokens")
    return f"{' on '.join(head) or 'Study'}: {n:,} scenarios over {', '.join(axes)}"


def _with_study(data: ReportData, study, origin: Path, front, featured) -> None:
    """The question, catalog entries, BOM and breakdowns that need the study file."""
    ids = {sweep.scenario_id(v): v for v in sweep.scenarios(study)}
    data.question = {
        "study": str(origin),
        **{f"base.{k}": v for k, v in study.base.model_dump(exclude_defaults=True).items()},
        **{f"axes.{k}": v for k, v in study.axes.items()},
    }
    if study.uncertainty is not None:
        data.question["uncertainty"] = study.uncertainty.model_dump()
    built = []
    wanted = front[:MAX_BREAKDOWN_PLANS]
    if featured is not None and featured not in wanted:
        wanted = [featured, *wanted]
    catalog = None
    for r in wanted:
        base = study_scenario(study, origin, r, ids)
        if base is None:
            continue
        catalog = catalog or base.catalog
        scenario = sweep._with_prices(base, json.loads(r.get("price_scales") or "{}"))
        b = evaluated(scenario, r, str(data.source), f"scenario {r['scenario']}", csv=True)
        if b is None:
            continue
        built.append(b)
        if r in front:
            data.breakdown.append(breakdown_entry(f"{r['gpu']} {render.usd(r['cost_usd'])}", b, r))
        if r is featured:
            data.bom = report.bom_dict(b)
            data.bom_plan = f"scenario {r['scenario']}: {r['label']}"
            if r.get("price_scales"):
                data.bom_plan += f" (that sample's price multipliers: {r['price_scales']})"
    if catalog is not None:
        data.catalog = catalog_entries(catalog, built)
        field = price_field(study.base.pricing or "capex")
        data.study["catalog_prices"] = {  # type: ignore[index]
            g: getattr(catalog.gpus[g], field) for g in catalog.gpus
        }


def study_sentence(data: ReportData, plans: list[dict[str, Any]], featured) -> str:
    """The study's answer in one paragraph: who wins where, the Pareto front, the featured plan."""
    st = data.study or {}
    if not plans:
        return f"No scenario of the {len(st.get('rows', [])):,} has a plan{_why(st)}."
    parts = []
    shares = st["win_shares"]
    if shares:
        order = sorted(shares, key=lambda g: -shares[g]["win_share"])
        parts.append(
            "Under price uncertainty, "
            + ", ".join(
                f"{g} wins {100 * shares[g]['win_share']:.0f}% of samples "
                f"(median {shares[g]['days_p50']:,.1f} days, {render.usd(shares[g]['cost_p50'])})"
                for g in order
            )
            + "."
        )
    else:
        parts.append(_winner_counts(st))
    front = st["pareto"]
    ends = [f"{days(p['time_to_train_days'])} days for {render.usd(p['cost_usd'])}" for p in front]
    if len(front) == 1:
        parts.append(f"The cost-time Pareto front is one plan: {ends[0]}.")
    else:
        parts.append(
            f"The cost-time Pareto front has {len(front):,} plans, from {ends[0]} to {ends[-1]}."
        )
    if featured is not None:
        parts.append(f"Featured plan: {featured['label']}.")
    return " ".join(parts)


def _winner_counts(st: dict[str, Any]) -> str:
    """``1 of 4 scenarios has a plan; 3 have none (infeasible: budget 50K, ...). The fastest
    GPU type per scenario: h100-sxm in 1 of 4.``: every scenario counted, those without a
    plan named."""
    counts: dict[str, int] = {}
    for w in st["winners"]:
        counts[w["gpu"]] = counts.get(w["gpu"], 0) + 1
    what = "fastest" if st["objective"] == "time" else "cheapest"
    missing = st.get("unanswered") or []
    n = len(st["winners"]) + len(missing)
    text = ""
    if missing:
        has = "has" if len(st["winners"]) == 1 else "have"
        text = (
            f"{len(st['winners']):,} of {n:,} scenarios {has} a plan; {len(missing):,} "
            f"{'has' if len(missing) == 1 else 'have'} none{_why(st)}. "
        )
    return (
        text
        + f"The {what} GPU type per scenario: "
        + ", ".join(
            f"{g} in {c:,} of {n:,}" for g, c in sorted(counts.items(), key=lambda x: -x[1])
        )
        + "."
    )


MAX_NAMED = 10
"""The scenarios without a plan the paragraph names (the rest counted)."""


def _why(st: dict[str, Any]) -> str:
    """`` (infeasible: budget 50K, deadline 5d; ...)``: the statuses of the scenarios
    without a plan and their settings of the axes."""
    missing = st.get("unanswered") or []
    if not missing:
        return ""
    axes = [a for a in st["axes"] if a != "gpus"]
    statuses = sorted({x for m in missing for x in m["statuses"]})
    named = [
        ", ".join(f"{a} {axis_value(m.get(a))}" for a in axes) or f"scenario {m.get('scenario')}"
        for m in missing[:MAX_NAMED]
    ]
    more = f"; and {len(missing) - MAX_NAMED:,} more" if len(missing) > MAX_NAMED else ""
    return f" ({' or '.join(statuses)}: {'; '.join(named)}{more})"
