"""The constraint families: one module each, collected here into one registry.

Every module in this package that defines ``FAMILY`` (a solvers.families.base.Family)
joins ``REGISTRY``, ordered by its ``position``: adding a family is adding a module
(README "Adding a constraint family"). ``REGISTRY`` replaces the lists the solvers
kept before (the family names, the structural tuples, the relaxations, the slack and
fix if-chains, the plan's limit checks)."""

from __future__ import annotations

import importlib
import pkgutil

from solvers.families.base import Family


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


def nic_dominance(scenario) -> bool:
    """Renting, and no active family breaks the fastest-NIC-in-every-slot dominance
    (rented GPU-hours do not charge for NICs, more bandwidth never slows a step)."""
    return scenario.pricing == "cloud" and all(
        f.keeps_nic_dominance for f in REGISTRY if f.active(scenario)
    )


def needs_cluster(scenario) -> bool:
    """Whether CP-SAT needs the cluster's terms: a priced cluster or an active family on it."""
    return scenario.pricing != "cloud" or any(
        f.needs_cluster for f in REGISTRY if f.active(scenario)
    )


__all__ = [
    "BY_NAME",
    "NAMES",
    "REGISTRY",
    "SHAPE_RULES",
    "Family",
    "needs_cluster",
    "nic_dominance",
]
