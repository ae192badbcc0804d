"""The constraint families: one module each, collected here into one registry.

Every module in this package that defines ``FAMILY`` (a solvers.families.base.Family)
joins ``REGISTRY``, ordered by its ``position``: adding a family is adding a module
(README "Adding a constraint family"). ``REGISTRY`` replaces the lists the solvers
kept before (the family names, the structural tuples, the relaxations, the slack and
fix if-chains, the plan's limit checks).

``active(s, name)`` and ``enforced(s)`` say which families a question enforces; they
live here, with the registry, so solvers.scenario imports no family (the families import
the scenario, the solvers import both: tests/test_import_cycles.py).

May import: catalog/, models/ and solvers/' bottom floors (scenario, decisions, purchases,
intmath, limits); what a family needs of the solver (solve, presolve, memory scaling) is
handed in by the caller, never imported from solvers/cpsat/, solvers/screen/ or
solvers/explain.py."""

from __future__ import annotations

import importlib
import pkgutil
import weakref
from typing import TYPE_CHECKING

from solvers.families.base import Family

if TYPE_CHECKING:
    from solvers.scenario import Scenario


def _discover() -> tuple[Family, ...]:
    found = []
    for info in pkgutil.iter_modules(__path__):
        if info.name == "base":
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        family = getattr(module, "FAMILY", None)
        if isinstance(family, Family):
            found.append(family)
    return tuple(sorted(found, key=lambda f: f.position))


REGISTRY: tuple[Family, ...] = _discover()
BY_NAME: dict[str, Family] = {f.name: f for f in REGISTRY}
NAMES: tuple[str, ...] = tuple(f.name for f in REGISTRY)
SHAPE_RULES: tuple[Family, ...] = tuple(f for f in REGISTRY if f.shape_rule)
_NAME_SET = frozenset(NAMES)


def enforced(s: Scenario) -> frozenset[str]:
    """The names of the families question ``s`` enforces. A name in ``s.disabled`` that is
    no family is refused here. A pure function of the frozen question, asked hundreds of
    times per solve (every ``active``): kept by the question's identity while it lives
    (_ENFORCED), never written on the question."""
    found = _ENFORCED.get(id(s))
    if found is not None and found[0]() is s:
        return found[1]
    if not s.disabled <= _NAME_SET:
        raise ValueError(f"unknown constraint families {sorted(set(s.disabled) - _NAME_SET)}")
    names = frozenset([f.name for f in REGISTRY if f.active(s)])
    key = id(s)

    def forget(_: object) -> None:
        _ENFORCED.pop(key, None)

    _ENFORCED[key] = (weakref.ref(s, forget), names)
    return names


# enforced's answers by the question's id, each with a weak reference that drops it when the
# question is collected (so an id reused by a later question never finds a stale answer)
_ENFORCED: dict[int, tuple[weakref.ref, frozenset[str]]] = {}


def active(s: Scenario, family: str) -> bool:
    """Whether question ``s`` enforces a constraint family (and has its limit set)."""
    if family in enforced(s):
        return True
    if family not in BY_NAME:
        raise KeyError(family)
    return False


def nic_dominance(scenario) -> bool:
    """Renting, and no active family breaks the fastest-NIC-in-every-slot dominance
    (rented GPU-hours do not charge for NICs, more bandwidth never slows a step)."""
    return scenario.pricing == "cloud" and all(
        f.keeps_nic_dominance for f in REGISTRY if f.name in enforced(scenario)
    )


def needs_cluster(scenario) -> bool:
    """Whether CP-SAT needs the cluster's terms: a priced cluster or an active family on it."""
    return scenario.pricing != "cloud" or any(
        f.needs_cluster for f in REGISTRY if f.name in enforced(scenario)
    )


__all__ = [
    "BY_NAME",
    "NAMES",
    "REGISTRY",
    "SHAPE_RULES",
    "Family",
    "active",
    "enforced",
    "needs_cluster",
    "nic_dominance",
]
