"""Scale-out fabric sizing: a rail-optimised fat tree built from one switch model.

Rules (NVIDIA DGX SuperPOD B200 reference architecture, NDR InfiniBand, 1 SU =
32 eight-GPU servers; ``../shared/reference/hardware/catalog_network.csv``):

* One server, or the servers of one scale-up domain (an NVL72 rack's 18 four-GPU
  trays; models/scaleup.py domain_servers): no fabric, since models/step.py
  (step_from_coefficients) keeps every transfer of a job that fits one domain off the
  NICs. Every endpoint (server NIC) fits one switch: one tier.
* Otherwise NIC k of every server goes to a leaf of rail k ("rail-optimised"):
  leaves = rails x ceil(servers / leaf_down), where a leaf of radix k gives
  ``leaf_down = floor(k x o / (o + 1))`` ports to servers and the rest upward at
  oversubscription o (down:up, 1 = non-blocking).
* Leaf-to-spine links U = ceil(endpoints / o); tiers above the leaves are
  non-blocking: a middle tier has ceil(U / (k/2)) switches (half their ports
  down), the top tier ceil(U / k) (every port down).
* The number of tiers T is the smallest that fits: a two-tier tree needs at most
  k leaves and k/2 spines (each spine reaches every leaf); a T-tier tree at most
  (k/2)^(T-1) top switches.

Check (tests/test_fabric.py): 4 SU = 1,024 GPUs -> 32 leaf + 16 spine; 16 SU =
4,096 GPUs -> 128 leaf + 128 spine + 64 core, as in the reference design.

The functions take numpy arrays of server counts so that the exhaustive solver
sizes thousands of candidate clusters at once; the scalar ``size_fabric`` is the
same code on one value. The CP-SAT model (solvers/cpsat/cluster.py) encodes
these very rules.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np


def oversubscription_ratio(oversubscription: float) -> Fraction:
    """Down:up ratio at the leaf as an exact fraction (both solvers use the same one)."""
    return Fraction(oversubscription).limit_denominator(100)


def leaf_down_ports(radix: int, oversubscription: float) -> int:
    """Leaf ports facing servers: floor(k x o / (o + 1)); k/2 when non-blocking."""
    o = oversubscription_ratio(oversubscription)
    return max(1, math.floor(radix * o / (o + 1)))


def uplinks(endpoints, oversubscription: float):
    """Leaf-to-spine links: ceil(endpoints / o) = ceil(endpoints x q / p) for o = p/q."""
    o = oversubscription_ratio(oversubscription)
    return -(-endpoints * o.denominator // o.numerator)


def tier_fits(tiers: int, leaves, up, radix: int):
    """Whether a ``tiers``-tier tree (tiers >= 2) holds ``leaves`` leaves and ``up`` uplinks."""
    half = radix // 2
    top = -(-up // radix)
    if tiers == 2:
        return (leaves <= radix) & (top <= half)
    return top <= half ** (tiers - 1)


@dataclass(frozen=True)
class FabricSize:
    """Switches per tier (leaf first) and links per tier boundary (server-leaf first)."""

    tiers: int
    switches_per_tier: tuple[int, ...]
    links_per_tier: tuple[int, ...]

    @property
    def switches(self) -> int:
        return sum(self.switches_per_tier)

    @property
    def links(self) -> int:
        return sum(self.links_per_tier)


def _tree_parts(servers, rails: int, radix: int, oversubscription: float):
    """(endpoints, leaves, leaf uplinks, switches of a middle tier, of the top tier);
    works on numpy arrays and on plain integers."""
    endpoints = servers * rails
    leaves = rails * (-(-servers // leaf_down_ports(radix, oversubscription)))
    up = uplinks(endpoints, oversubscription)
    return endpoints, leaves, up, -(-up // (radix // 2)), -(-up // radix)


def fabric_counts(
    servers: np.ndarray,
    rails: int,
    radix: int,
    oversubscription: float,
    domain_servers: int = 1,
):
    """(tiers, switches, links) for each server count, ``rails`` NICs per server; none for
    at most ``domain_servers`` servers (one scale-up domain: module docstring)."""
    servers = np.asarray(servers, dtype=np.int64)
    endpoints, leaves, up, mid, top = _tree_parts(servers, rails, radix, oversubscription)
    fabric = servers > max(1, domain_servers)
    tiers = np.where(fabric, np.where(endpoints <= radix, 1, 0), 0)
    switches = np.where(tiers == 1, 1, 0)
    links = np.where(tiers == 1, endpoints, 0)
    t = 2  # a radix of at least 4 makes (k/2)^(t-1) grow, so every tree fits eventually
    while np.any((tiers == 0) & fabric):
        new = (tiers == 0) & fabric & tier_fits(t, leaves, up, radix)
        tiers = np.where(new, t, tiers)
        switches = np.where(new, leaves + (t - 2) * mid + top, switches)
        links = np.where(new, endpoints + (t - 1) * up, links)
        t += 1
    return tiers, switches, links


def size_fabric(
    servers: int,
    rails: int,
    radix: int,
    oversubscription: float = 1.0,
    domain_servers: int = 1,
) -> FabricSize:
    """The fat tree for ``servers`` servers with ``rails`` NICs each, none for at most
    ``domain_servers`` (one scale-up domain; module docstring)."""
    if servers <= max(1, domain_servers) or rails <= 0:
        return FabricSize(0, (), ())
    endpoints = servers * rails
    if endpoints <= radix:
        return FabricSize(1, (1,), (endpoints,))
    tiers = int(fabric_counts(np.array([servers]), rails, radix, oversubscription)[0][0])
    _, leaves, up, mid, top = _tree_parts(servers, rails, radix, oversubscription)
    switches = (leaves,) + (mid,) * (tiers - 2) + (top,)
    links = (endpoints,) + (up,) * (tiers - 1)
    return FabricSize(tiers, switches, links)
