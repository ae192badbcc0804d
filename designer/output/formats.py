"""Turn a solve (and its explanation) into the contract's JSON, CSV rows, a table and a paragraph."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

from designer.output import text as render
from designer.output.cells import read_row, text_row
from designer.question.fields import answer_question
from models.goodput import goodput, with_purchases
from models.pipeline import describe_stage_layers, split_options
from solvers import Scenario, SolveResult
from solvers.cloud_terms import rental_sentence
from solvers.columns import PLAN_COLUMNS


def _evidence():
    """models.evidence_range, imported on first use (it loads the performance model)."""
    # lazy: models.evidence_range loads numpy; commands that never solve do not
    from models import evidence_range as evidence

    return evidence


def _confidence():
    """designer.confidence (issue 35: how sure the ranking of the first two plans is)."""
    # lazy: designer.confidence and models.ranking (~13 ms) load with an answer, not at start-up
    from designer import confidence

    return confidence


CSV_COLUMNS = [*PLAN_COLUMNS, "top_binding"]
# each evidence column of the CSVs: the evidence object's key, and the end of its range
_EVIDENCE_CELLS: dict[str, tuple[str, int | None]] = {
    "evidence": ("status", None),
    "evidence_runs": ("runs", None),
    "evidence_mape_pct": ("mape_pct", None),
    "step_time_s_lo": ("step_time_s_range", 0),
    "step_time_s_hi": ("step_time_s_range", 1),
    "days_lo": ("days_range", 0),
    "days_hi": ("days_range", 1),
    # the rest of the contract's evidence object (added 2026-12-04, after the first seven)
    "evidence_stack": ("stack", None),
    "evidence_worst_pct": ("worst_pct", None),
    "evidence_error_lo_pct": ("error_lo_pct", None),
    "evidence_error_hi_pct": ("error_hi_pct", None),
    "cost_usd_lo": ("cost_usd_range", 0),
    "cost_usd_hi": ("cost_usd_range", 1),
    "evidence_basis": ("basis", None),
    "evidence_line": ("line", None),
}
EVIDENCE_COLUMNS = list(_EVIDENCE_CELLS)
"""Appended after the contract's columns (optimize, compare, sweep, explain CSVs): one per
key of the contract's evidence object, a range as its two ends."""


def question_dict(s: Scenario) -> dict[str, Any]:
    """The answer's ``question`` object (designer.question.fields declares its fields)."""
    return answer_question(s)


def result_dict(s: Scenario, res: SolveResult, binding: list | None, conflict) -> dict[str, Any]:
    best = res.best
    value = None
    if best is not None:
        value = float(best.objective)
    return {
        "status": res.status,
        "status_text": res.status_text,
        "objective": {"name": res.objective_name, "value": value, "unit": res.objective_unit},
        "solve": {
            "solver": res.solver,
            "wall_s": res.wall_s,
            "gap": res.gap,
            "proved": res.proved,
            "message": res.message or None,
        },
        "question": question_dict(s),
        "plans": [plan_entry(s, p, i + 1) for i, p in enumerate(res.plans)],
        "binding": [_plain(b.as_dict()) for b in (binding or [])],
        "conflict": _plain(conflict.as_dict()) if conflict is not None else None,
        "bom": bom_dict(best) if best is not None else None,
        "explanation": paragraph(s, res, binding, conflict),
        "batch_tokens": _batch_tokens(s, best),
        "ranking": _confidence().ranking_dict(res),
    }


def _batch_trade(s: Scenario, plan):
    """solvers.batch_trade.batch_trade, imported when a plan is rendered (it loads the
    performance model: commands that never solve stay light, tests/test_cli.py)."""
    # lazy: loads the performance model; commands that never solve stay light
    from solvers.batch_trade import batch_trade

    return batch_trade(s, plan)


def _batch_tokens(s: Scenario, best) -> dict[str, Any] | None:
    """The best plan's batch priced in tokens (null without a plan or with the model off)."""
    trade = None if best is None else _batch_trade(s, best)
    return None if trade is None else _plain(trade.as_dict())


# ---------------------------------------------------------------- evidence
def plan_evidence(s: Scenario, plan) -> dict[str, Any]:
    """The plan's evidence object: its GPU's measured runs and the ranges they imply."""
    return _plain(
        _evidence().plan_evidence(
            s.catalog, plan.evaluation, s.pricing, float(plan.cost_usd), s.stack
        )
    )


def plan_entry(s: Scenario, plan, rank: int) -> dict[str, Any]:
    """A plan's JSON object: the contract's columns, then its ``evidence``."""
    entry = _plain(plan.as_dict(rank))
    entry["evidence"] = plan_evidence(s, plan)
    return entry


def evidence_row(doc: dict[str, Any]) -> dict[str, Any]:
    """The CSV's evidence columns from an evidence object."""
    row = {}
    for column, (key, end) in _EVIDENCE_CELLS.items():
        row[column] = doc.get(key) if end is None else (doc.get(key) or [None, None])[end]
    return row


def _num(v: float | None) -> str:
    return "inf" if v is None else render.number(v, ".1f")


def span(rng: list | None) -> str:
    """``16.1-19.9``: a measured range (``-`` without one; ``inf`` for an unbounded end)."""
    return "-" if not rng else f"{_num(rng[0])}-{_num(rng[1])}"


def with_range(value: float, rng: list | None, digits: str = ".2f") -> str:
    """``17.83 (16.1-19.9)``: a prediction and the measured range its evidence implies."""
    text = f"{value:,{digits}}"
    if not rng:
        return text
    return f"{text} ({span(rng)})"


def gpu_label(gpu: str, doc: dict[str, Any]) -> str:
    """The GPU's name, tagged ``(thin)`` or ``(extrapolated)`` below the evidence rule's
    measured tier (models.evidence_rule)."""
    if doc["status"] != "measured":
        return f"{gpu} ({doc['status']})"
    return gpu


def evidence_cell(doc: dict[str, Any]) -> str:
    """The tables' evidence column: ``40 runs, 6.1%`` (mean error), ``5 runs/4 src/1 server,
    1.9%`` when no run spanned servers (models.evidence_rule), or ``no runs``."""
    if doc["status"] == "extrapolated":
        return "no runs" if not doc.get("runs") else f"other precision ({doc['runs']:,} runs)"
    runs = doc.get("precision_runs") or doc["runs"]
    sources = doc.get("sources") or []
    via = f"/{len(sources)} src" if sources else ""
    if doc.get("multi_server_runs") == 0:
        via += "/1 server"
    return f"{runs:,} runs{via}, {doc['mape_pct']:.1f}%"


def evidence_sentence(s: Scenario, doc: dict[str, Any], pricing: str | None = None) -> str:
    """One sentence: the evidence line and the measured step, days and cost it implies."""
    pricing = pricing or s.pricing
    head = f"Evidence ({doc['stack']} profile): {doc['line']}"
    parts = []
    step = doc.get("step_time_s_range")
    if step:
        parts.append(f"the step at {span(step)} s")
    days = doc.get("days_range")
    if days:
        parts.append(f"the time to train at {span(days)} days")
    cost = doc.get("cost_usd_range")
    if cost:
        if cost[1] is not None and abs(cost[1] - cost[0]) < 0.5:
            why = (
                "unchanged by the time"
                if pricing != "cloud"
                else "the same billed days at either end: a term's minimum or a reservation length"
            )
            parts.append(f"the cost at {render.usd(cost[0])} ({pricing}: {why})")
        else:
            hi = render.usd(cost[1]) if cost[1] is not None else "unbounded"
            parts.append(f"the cost at {render.usd(cost[0])}-{hi} ({pricing})")
    if not parts:
        return head + "."
    return f"{head}; those errors put {', '.join(parts)}."


def evidence_legend(s: Scenario) -> str:
    """The line under a plans table that says what its evidence columns mean."""
    return (
        f"evidence: measured training runs behind each GPU's {s.stack} profile and their mean "
        "step-time error; (lo-hi): the measured step and days those errors imply"
    )


def cluster_line(ev) -> str:
    """Fabric, racks and power of an evaluated plan, one line."""
    c = ev.cluster
    fabric = c.fabric
    tiers = " + ".join(f"{n:,}" for n in fabric.switches_per_tier) or "none"
    return (
        f"cluster: {render.count(c.servers, 'server')} in {render.count(c.racks, 'rack')}; "
        f"fabric {fabric.tiers} tier(s), "
        f"switches {tiers} ({c.switch.name}), {fabric.links:,} links; IT {c.it_power_w / 1000:,.0f} kW, "
        f"facility {c.facility_power_w / 1000:,.0f} kW (PUE {c.facility.pue:g})"
    )


def goodput_sentence(ev) -> str:
    """What failures cost a plan, one sentence ('' for the ideal model or without tokens)."""
    run = ev.goodput
    if run is None:
        return ""
    every = run.checkpoint_interval_min
    ckpt = "" if every is None else f", a checkpoint every {render_minutes(every)}"
    share = run.lost_days / run.days * 100 if run.days > 0 else 0.0
    text = (
        f"Failures cost {run.lost_days:,.1f} days ({share:.1f}%): "
        f"{render.count(run.failures_expected, 'interruption')} "
        f"expected{ckpt}, goodput {run.goodput * 100:.1f}% of "
        f"{run.days:,.1f} days (ideal {run.ideal_days:,.1f}; --no-failures plans without them)"
    )
    model = ev.failure_model
    write_s = model.storage_s_times_g() / ev.layout.num_gpus if model is not None else 0.0
    if (
        model is not None
        and model.fixed_interval_s is not None
        and write_s > model.fixed_interval_s
    ):
        text += (
            f"; the storage writes a checkpoint in {write_s:,.0f} s, longer than the interval "
            "(the writes would queue: not modelled)"
        )
    if run.goodput < 0.5:  # Young/Daly's first order assumes a small lost share
        text += "; a first-order estimate, rough when failures take this large a share"
    return text + spares_clause(ev) + "."


def spares_clause(ev) -> str:
    """The hot spares and checkpoint storage a plan with failures buys and what they save,
    or the price of the options it does not buy (issue 18 item 4), or why one cannot help:
    '; it buys 41 hot spare servers (2 per 100, $11.97M), saving 4.7 days; not bought: 2
    GB/s of checkpoint storage per server (+$6.14M) would save 0.2 days'."""
    c, run = ev.cluster, ev.goodput
    model = ev.unpurchased_failure_model
    if run is None or model is None or model.rate_per_gpu_s <= 0:
        return ""
    fac, n = c.facility, ev.layout.num_gpus
    have_k = c.spares_per_100
    have_b = c.storage_gb_per_s or fac.checkpoint_storage_gb_per_s_per_server

    def days(spares: float, storage: float) -> float:
        return goodput(with_purchases(model, fac, spares, storage), n, run.ideal_days).days

    return _spares_part(c, days, have_k, have_b) + _storage_part(c, days, have_k, have_b)


def _spares_part(c, days, have_k: float, have_b: float) -> str:
    # lazy: models.cost loads numpy; commands that never solve do not
    from models.cost import server_usd, spare_servers

    fac, per_server = c.facility, server_usd(c.gpu)

    def what(k: float) -> tuple[int, float, float]:  # servers, USD, days saved
        count = int(spare_servers(c.servers, k))
        return count, count * per_server, days(0.0, have_b) - days(k, have_b)

    if have_k > 0:
        count, usd, saved = what(have_k)
        return (
            f"; it buys {count:,} hot spare server{'s' if count != 1 else ''} ({have_k:g} per "
            f"100, {render.usd(usd)}), saving {_saved(saved)}"
        )
    options = [(*what(k), k) for k in fac.hot_spare_options_per_100_servers if k > 0]
    best = max(options, key=lambda o: (round(o[2], 6), -o[1]), default=None)
    if best is None or best[2] < 0.05:
        return "; hot spare servers would save under 0.1 days (too few restarts to shorten)"
    count, usd, saved, k = best
    return (
        f"; not bought: {count:,} hot spare server{'s' if count != 1 else ''} ({k:g} per 100, "
        f"{render.usd(usd)}) would save {saved:,.1f} days ({render.usd(usd / saved)} a day)"
    )


def _saved(days: float) -> str:
    """What a purchase or a binding family's relaxation saves, in days, or in hours under a
    tenth of a day (either saves time, however little: solvers/purchase_rule.py,
    solvers/explain.py), never "0.0 days"."""
    if days < 0.1:
        return f"{days * 24:,.1f} hours"
    return f"{days:,.1f} days"


def _storage_part(c, days, have_k: float, have_b: float) -> str:
    # lazy: models.cost loads numpy; commands that never solve do not
    from models.cost import storage_upgrade_usd

    fac = c.facility
    base = fac.checkpoint_storage_gb_per_s_per_server
    if have_b > base:
        usd = storage_upgrade_usd(fac, have_b) * c.servers
        saved = days(have_k, base) - days(have_k, have_b)
        return (
            f"; it buys {have_b:g} GB/s of checkpoint storage per server against the facility's "
            f"{base:g} ({render.usd(usd)}), saving {_saved(saved)}"
        )
    options = [
        (days(have_k, base) - days(have_k, b), storage_upgrade_usd(fac, b) * c.servers, b)
        for b in fac.checkpoint_storage_options_gb_per_s_per_server
        if b > base
    ]
    fast = max(options, key=lambda o: (round(o[0], 6), -o[1]), default=None)
    if fast is None or fast[0] < 0.05:
        return (
            f"; checkpoint storage faster than {base:g} GB/s per server would save under 0.1 "
            "days (the write does not set the interval, and the reload is short)"
        )
    return (
        f"; not bought: {fast[2]:g} GB/s of checkpoint storage per server instead of {base:g} "
        f"(+{render.usd(fast[1])}) would save {fast[0]:,.1f} days"
    )


def render_minutes(minutes: float) -> str:
    """Minutes as a short duration: 18 s, 12 min, 2.5 h."""
    if minutes < 1:
        return f"{minutes * 60:.0f} s"
    if minutes < 120:
        return f"{minutes:,.0f} min"
    return f"{minutes / 60:,.1f} h"


def bom_dict(plan) -> dict[str, Any]:
    """The best plan's bill of materials, its power and racks; the total is the plan's capex."""
    cluster = plan.evaluation.cluster
    lines = [line.as_dict() for line in cluster.bom()]
    return {
        "lines": lines,
        "total_usd": cluster.capex_usd,
        **_plain(plan.evaluation.power_dict()),
    }


def bom_csv_text(plan) -> str:
    """One row per BOM line, then a total row equal to the plan's capex."""
    out = io.StringIO()
    cols = ["item", "quantity", "unit_usd", "extended_usd", "source"]
    writer = csv.DictWriter(out, fieldnames=cols, lineterminator="\n")
    writer.writeheader()
    cluster = plan.evaluation.cluster
    for line in cluster.bom():
        row = line.as_dict()
        row["unit_usd"] = f"{row['unit_usd']:.2f}"
        row["extended_usd"] = f"{row['extended_usd']:.2f}"
        writer.writerow(text_row(row))
    writer.writerow(
        {"item": "total (capex)", "extended_usd": f"{cluster.capex_cents / 100:.2f}", "source": ""}
    )
    return out.getvalue()


def _plain(obj: Any) -> Any:
    """numpy scalars to Python numbers, recursively (stable JSON and CSV)."""
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_plain(v) for v in obj]
    if hasattr(obj, "item") and not isinstance(obj, (str, bytes)):
        return obj.item()
    return obj


def plan_rows(csv_path) -> list[dict[str, str]]:
    """The rows of a results CSV that have a plan."""
    with open(csv_path, newline="", encoding="utf-8") as fh:
        return [read_row(r) for r in csv.DictReader(fh) if r.get("time_to_train_days")]


def top_binding(binding: list | None) -> str:
    for b in binding or []:
        if b.binding:
            return b.constraint
    return ""


def csv_text(res: SolveResult, binding: list | None, s: Scenario) -> str:
    """One row per plan: the contract's columns, then the evidence columns."""
    return plans_csv([(p, res.status_text) for p in res.plans], binding, s)


def plans_csv(plans: list[tuple[Any, str]], binding: list | None, s: Scenario) -> str:
    """One row per (plan, status text); the first plan's row names the top binding."""
    out = io.StringIO()
    cols = [*CSV_COLUMNS, *EVIDENCE_COLUMNS, "status"]
    writer = csv.DictWriter(out, fieldnames=cols, lineterminator="\n")
    writer.writeheader()
    for i, (p, status) in enumerate(plans):
        row = _plain(p.as_dict(i + 1))
        row["top_binding"] = top_binding(binding) if i == 0 else ""
        row.update(evidence_row(plan_evidence(s, p)))
        row["status"] = status
        writer.writerow(text_row(row))
    return out.getvalue()


def _days(d: float) -> str:
    return f"{d:,.1f} days"


def conflict_sentence(
    constraints: list[str],
    changes: list[str],
    complete: bool = True,
    cores: list[tuple[list[str], list[str]]] | None = None,
) -> str:
    """What the explanation found (the conflicting families and each fix's change), and,
    when one of its tests ran out of time, that the conflict may not be minimal and a fix
    missing (--time-limit). The answer's paragraph and the report's page say it alike.
    ``cores``: (families, changes) of each of several conflicts, in the order their fixes
    apply (solvers.explain.Conflict.cores), when there are more than one."""
    cut = (
        ""
        if complete
        else " (The explanation ran out of time on some of its tests: the conflict may not be "
        "minimal and a fix may be missing; raise --time-limit.)"
    )
    if not constraints:
        if cut:
            return "No plan satisfies the question." + cut
        return "No plan satisfies the question, and no single family of constraints is to blame."
    if cores and len(cores) > 1:
        return _cores_sentence(cores) + cut
    names = " and ".join(constraints)
    if not changes:
        blame = "alone rules out" if len(constraints) == 1 else "together rule out"
        return (
            f"Nothing fits: {names} {blame} every plan, and no relaxation within the "
            "explanation's search (each family's limit, e.g. 64 x the GPU memory) makes one fit."
            + cut
        )
    lead = "alone rules out every plan" if len(constraints) == 1 else "cannot all hold"
    label = "Smallest fix" if len(changes) == 1 else "Smallest fixes"
    return f"Nothing fits: {names} {lead}. {label}: {'; or '.join(changes)}.{cut}"


def _cores_sentence(cores: list[tuple[list[str], list[str]]]) -> str:
    """Several conflicts, each needing a change: one fix of each, applied in turn (each
    later conflict's fixes hold with the first fix of every earlier one applied)."""

    def blame(names: list[str]) -> str:
        if len(names) == 1:
            return f"{names[0]} alone rules out every plan"
        return f"{' and '.join(names)} cannot all hold"

    lead = ", and ".join(blame(names) for names, _ in cores)
    steps = []
    for i, (names, changes) in enumerate(cores):
        if not changes:
            steps.append(
                f"no relaxation within the explanation's search fixes {' and '.join(names)}"
            )
            break
        step = ", or ".join(changes)
        if i:
            step = (
                "then, with the first of those, " if len(cores[i - 1][1]) > 1 else "then "
            ) + step
        steps.append(step)
    return (
        f"Nothing fits: {lead}; each needs a change. Smallest fixes, together: {'; '.join(steps)}."
    )


def paragraph(s: Scenario, res: SolveResult, binding: list | None, conflict) -> str:
    if res.best is None:
        if conflict is None:
            return (
                "No plan satisfies the question."
                if res.status == "infeasible"
                else ("No plan was found within the time limit.")
            )
        changes = [f.change for f in conflict.fixes]
        cores = [
            (list(c.constraints), [f.change for f in c.fixes])
            for c in getattr(conflict, "cores", ())
        ]
        return conflict_sentence(
            list(conflict.constraints), changes, getattr(conflict, "complete", True), cores
        )
    p = res.best
    ev, lay, cfg = p.evaluation, p.evaluation.layout, p.config
    layout = f"TP {lay.tp} x PP {lay.pp}" + (f" ({lay.vp} virtual)" if lay.vp > 1 else "")
    layout += (f" x CP {lay.cp}" if lay.cp > 1 else "") + f" x DP {lay.dp}"
    if ev.moe:
        layout += f", EP {ev.ep} x ETP {ev.etp}"
    if lay.uneven:
        layout += (
            f" (uneven pipeline: {describe_stage_layers(ev.stage_layers)}, {split_options(lay)})"
        )
    label = "The saved plan" if res.solver == "given plan" else "Best plan"
    doc = plan_evidence(s, p)
    head = (
        f"{label}: {lay.num_gpus:,} x {gpu_label(ev.gpu, doc)} in {render.count(ev.nodes, 'server')} with {cfg.nics_per_node} x {cfg.nic} "
        f"each, {layout}, micro-batch {lay.micro_batch}, "
        f"{render.count(cfg.microbatches, 'micro-batch', 'micro-batches')} per step "
        f"(global batch {lay.global_batch:,}). It trains {s.spec.name} on {render.si(s.tokens)} tokens in "
        f"{_days(float(ev.time_to_train_days or 0.0))} for {render.usd(p.cost_usd)} ({s.pricing})"
        f"{'' if res.proved else f'; not proved optimal: {res.status_text}'}."
    )
    gp = goodput_sentence(ev)
    rent = rental_sentence(s, p)  # a rented plan's term and block (solvers/cloud_terms.py)
    trade = _batch_trade(s, p)  # the batch's tokens, priced (solvers/batch_trade.py)
    tail = (" " + gp if gp else "") + (" " + rent if rent else "")
    tail += (" " + trade.sentence() if trade else "") + " " + evidence_sentence(s, doc)
    binds = [b for b in binding or [] if b.binding]
    if not binding:
        return head + tail
    unit = res.objective_unit
    if binds:
        parts = []
        for b in binds[:3]:
            gain = (
                _saved(b.improvement_if_relaxed)  # binding: it saves time, however little
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
    return head + tail


def layout_head(s: Scenario) -> str:
    """The layout column's heading: EP and ETP too for a mixture-of-experts model."""
    return "tp/pp/dp/cp/vp/ep/etp" if s.spec.is_moe else "tp/pp/dp/cp/vp"


def layout_cell(ev) -> str:
    lay = ev.layout
    cell = f"{lay.tp}/{lay.pp}/{lay.dp}/{lay.cp}/{lay.vp}"
    return f"{cell}/{ev.ep}/{ev.etp}" if ev.moe else cell


def plans_table(res: SolveResult, s: Scenario) -> str:
    """The plans, one a row, with the measured ranges of step and days and the evidence."""
    rows = []
    for i, p in enumerate(res.plans):
        ev, lay, cfg = p.evaluation, p.evaluation.layout, p.config
        doc = plan_evidence(s, p)
        step = float(ev.step_time_s)
        days = float(ev.time_to_train_days or 0.0)
        rows.append(
            (
                i + 1,
                gpu_label(ev.gpu, doc),
                lay.num_gpus,
                ev.nodes,
                f"{cfg.nics_per_node}x{cfg.nic}",
                layout_cell(ev),
                lay.micro_batch,
                cfg.microbatches,
                lay.recompute,
                f"{ev.memory.total:.1f}/{ev.memory.usable:.0f}",
                with_range(step, doc["step_time_s_range"]),
                with_range(days, doc["days_range"]),
                render.usd(p.cost_usd),
                f"{100 * float(ev.mfu):.1f}%",
                evidence_cell(doc),
            )
        )
    return render.table(
        [
            "#",
            "gpu",
            "gpus",
            "servers",
            "nics/server",
            layout_head(s),
            "mb",
            "accum",
            "recompute",
            "mem_gb",
            "step_s",
            "days",
            "cost",
            "mfu",
            "evidence",
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
                "yes" if b.binding else ("no" if b.decided else "unproved"),
                b.detail,
                b.relaxation,
                f"{gain:,.3g}" if gain else "-",
                f"{b.improvement_pct:.1f}%" if gain else "-",
            )
        )
    head = f"improvement ({unit})" if unit else "improvement"
    return render.table(["constraint", "binding", "on this plan", "relaxation", head, "%"], rows)


# ---------------------------------------------------------------- optimize's text, a sweep's summary
def answer_text(
    s: Scenario,
    res: SolveResult,
    binding: list | None,
    conflict,
    extra_text: str | None = None,
    notes: Sequence[str] = (),
) -> str:
    """optimize's and explain's text: the paragraph, the plans, the binding constraints and
    the solver's status (``extra_text`` first: what --from-megatron would change; ``notes``,
    sections before the status: e.g. designer.alternatives)."""
    parts = [extra_text, ""] if extra_text else []
    parts.append(paragraph(s, res, binding, conflict))
    if res.plans:
        parts += ["", plans_table(res, s), cluster_line(res.plans[0].evaluation)]
        parts.append(evidence_legend(s))
        parts += filter(None, [_confidence().ranking_text(res)])
    if binding:
        parts += ["", binding_table(binding, res.objective_unit)]
    for note in notes:
        parts += ["", note]
    parts.append(f"\n{res.solver}: {res.status_text} in {res.wall_s:.2f} s")
    if res.message:
        parts.append(f"{res.solver}: {res.message}")
    return "\n".join(parts)


def summary_table(stats: dict[str, dict[str, float]]) -> str:
    """A Monte-Carlo study per GPU type: wins, their share, days and cost percentiles."""
    rows = [
        (
            g,
            int(v["wins"]),
            f"{100 * v['win_share']:.0f}%",
            v["days_p10"],
            v["days_p50"],
            v["days_p90"],
            render.usd(v["cost_p50"]),
        )
        for g, v in stats.items()
    ]
    cols = ["gpu", "wins", "win_share", "days_p10", "days_p50", "days_p90", "cost_p50"]
    return render.table(cols, rows)
