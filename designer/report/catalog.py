"""The catalog entries a report's plans use (GPU, NIC, switch, facility), with the prices,
sources and dates ``designer catalog show NAME`` prints for them (designer.output.catalog_doc)."""

from __future__ import annotations

import re
from typing import Any

from designer.output.catalog_doc import catalog_entry

_KEPT = re.compile(r"(price|usd|source|date|pue|kwh|power)")
"""The fields a buyer checks: prices, their sources and dates, power."""


def flat_fields(d: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """(dotted key, value) of every price, source, date and power field, nested ones too
    (a GPU's server), the performance-model profiles left out."""
    out: list[tuple[str, Any]] = []
    for key, value in d.items():
        if key in ("stacks", "measured", "calibration"):
            continue
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out += flat_fields(value, f"{name}.")
        elif _KEPT.search(key) and value is not None:
            out.append((name, value))
    return out


def catalog_entries(catalog, plans: list) -> list[dict[str, Any]]:
    """One entry per catalog item the plans use (evaluated plans, solvers.plan.Plan), GPUs
    first, then NICs, switches and the facility: {kind, name, title, fields}."""
    wanted: dict[tuple[str, str], None] = {}
    for plan in plans:
        ev = plan.evaluation
        wanted[("GPU", ev.gpu)] = None
        wanted[("NIC", ev.nic)] = None
        wanted[("switch", ev.cluster.switch.name)] = None
    order = {"GPU": 0, "NIC": 1, "switch": 2}
    keys = sorted(wanted, key=lambda k: (order[k[0]], k[1]))
    out = []
    for kind, name in [*keys, ("facility", "facility")]:
        d = catalog_entry(catalog, name)
        out.append(
            {
                "kind": kind,
                "name": name,
                "title": d.get("display_name") or name,
                "fields": flat_fields(d),
            }
        )
    return out
