"""CP-SAT terms for the cluster around the GPUs: fabric, racks, power and energy.

The rules are models/fabric.py's and models/cost.py's, encoded exactly: every
ceiling is a pair of linear inequalities with a constant divisor, the number of
tiers is a literal per NIC type and tier count, and switch and link counts are
the step functions of servers and NICs per server that the float model
computes. A tier count above the smallest that fits is admitted (it only adds
switches, links, cost and power, so no optimum ever uses it); the plan is
re-evaluated with the float model's smallest tree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ortools.sat.python import cp_model

from models import cost as cost_model
from models.fabric import leaf_down_ports, oversubscription_ratio
from models.scaleup import domain_servers
from solvers.intmath import INT_LIMIT, ceil_by, times
from solvers.intmath import hi as hi_of
from solvers.scenario import Scenario


@dataclass
class ClusterTerms:
    capex_cents: cp_model.LinearExprT  # switches, links and racks (GPUs, servers, NICs elsewhere)
    capex_hi_cents: int  # an upper bound of capex_cents
    it_power_w: cp_model.IntVar
    racks: cp_model.IntVar
    tier_literals: list[cp_model.IntVar]  # per NIC type, fewest tiers first (search order)
    tiers: dict[str, dict[int, cp_model.IntVar]]  # NIC type -> tier count -> literal


@dataclass
class _Fabric:
    """One NIC type's fabric: its capex and switch power terms and their upper bounds."""

    capex: Any  # a linear expression in cents
    capex_hi: int
    power: Any  # a linear expression in W
    power_hi: int
    tiers: dict[int, cp_model.IntVar]


def _fabric(
    md: cp_model.CpModel,
    scenario: Scenario,
    name: str,
    lit: cp_model.IntVar,
    multi: cp_model.IntVar,
    nodes: cp_model.IntVar,
    rails: cp_model.IntVar,
    ends: cp_model.IntVar,
) -> _Fabric:
    """The fat tree of NIC type ``name`` (models/fabric.py): leaves per rail, uplinks, middle
    and top switches, the tier count as literals, switch and link counts."""
    cat, fac = scenario.catalog, scenario.catalog.facility
    nic = cat.nic(name)
    switch = cat.switch_for(nic)
    k, half = switch.ports, switch.ports // 2
    ratio = oversubscription_ratio(fac.oversubscription)
    p, q = ratio.numerator, ratio.denominator
    down = leaf_down_ports(k, fac.oversubscription)
    on = md.new_bool_var(f"fabric[{name}]")  # this NIC type, more than one scale-up domain
    md.add_bool_and([lit, multi]).only_enforce_if(on)
    md.add_bool_or([~lit, ~multi, on])
    servers = md.new_int_var(0, hi_of(nodes), f"servers_on[{name}]")
    md.add(servers == nodes).only_enforce_if(lit)
    md.add(servers == 0).only_enforce_if(~lit)
    per_rail = ceil_by(md, f"leaves_per_rail[{name}]", servers, hi_of(servers), down)
    leaves = times(md, f"leaves[{name}]", rails, per_rail)
    up = ceil_by(md, f"uplinks[{name}]", q * ends, q * hi_of(ends), p)
    top = ceil_by(md, f"top_switches[{name}]", up, hi_of(up), k)
    mid = ceil_by(md, f"middle_switches[{name}]", up, hi_of(up), half)
    t_max = 2
    while -(-hi_of(up) // k) > half ** (t_max - 1):
        t_max += 1
    tier = {t: md.new_bool_var(f"tiers[{name}]={t}") for t in range(1, t_max + 1)}
    md.add(sum(tier.values()) == on)
    sw_hi = hi_of(leaves) + (t_max - 2) * hi_of(mid) + hi_of(top) + 1
    links_hi = hi_of(ends) + (t_max - 1) * hi_of(up)
    sw = md.new_int_var(0, sw_hi, f"switches[{name}]")
    links = md.new_int_var(0, links_hi, f"links[{name}]")
    md.add(sw == 0).only_enforce_if(~on)
    md.add(links == 0).only_enforce_if(~on)
    # one switch holds every endpoint
    md.add(ends <= k).only_enforce_if(tier[1])
    md.add(sw == 1).only_enforce_if(tier[1])
    md.add(links == ends).only_enforce_if(tier[1])
    for t in range(2, t_max + 1):
        # a t-tier tree: leaves, t-2 middle tiers, a top tier (models/fabric.py)
        if t == 2:
            md.add(leaves <= k).only_enforce_if(tier[t])
        md.add(top <= half ** (t - 1)).only_enforce_if(tier[t])
        md.add(sw == leaves + (t - 2) * mid + top).only_enforce_if(tier[t])
        md.add(links == ends + (t - 1) * up).only_enforce_if(tier[t])
    sw_cents = cost_model.usd_to_cents_up(switch.price_usd)
    return _Fabric(
        sw_cents * sw + cost_model.link_cents(nic) * links,
        sw_cents * sw_hi + cost_model.link_cents(nic) * links_hi,
        cost_model.switch_power_w(switch) * sw,
        sw_hi * cost_model.switch_power_w(switch),
        tier,
    )


def _racks(
    md: cp_model.CpModel,
    scenario: Scenario,
    gpu_lit: dict[str, cp_model.IntVar],
    rails_of: dict[str, cp_model.IntVar],
    nodes: cp_model.IntVar,
) -> cp_model.IntVar:
    """racks >= ceil(servers / servers per rack); servers per rack falls as a server's NICs
    draw more (models/cost.py). A lower bound suffices: racks only add cost and count
    against --max-racks, so no optimum takes more than it needs."""
    cat, fac = scenario.catalog, scenario.catalog.facility
    racks = md.new_int_var(0, hi_of(nodes), "racks")
    nics_w = md.new_int_var(
        0,
        sum(cost_model.nic_power_w(cat.nic(n)) * hi_of(rails_of[n]) for n in rails_of),
        "nics_power_per_server_w",
    )
    md.add(nics_w == sum(cost_model.nic_power_w(cat.nic(n)) * v for n, v in rails_of.items()))
    possible_w = sorted(
        {
            k * cost_model.nic_power_w(cat.nic(n))
            for n in rails_of
            for k in range(1, hi_of(rails_of[n]) + 1)
        }
    )
    for g, g_lit in gpu_lit.items():
        spr_of = {w: cost_model.servers_per_rack(cat.gpu(g), fac, w) for w in possible_w}
        for v in sorted(set(spr_of.values()), reverse=True):
            w_v = min(w for w in possible_w if spr_of[w] <= v)  # spr falls as w grows
            if w_v == possible_w[0]:
                md.add(v * racks >= nodes).only_enforce_if(g_lit)
                continue
            at_least = md.new_bool_var(f"nics_power>={w_v}[{g}]")
            md.add(nics_w <= w_v - 1).only_enforce_if(~at_least)
            md.add(v * racks >= nodes).only_enforce_if([g_lit, at_least])
    return racks


def add_cluster_terms(
    md: cp_model.CpModel,
    scenario: Scenario,
    nodes: cp_model.IntVar,
    nodes_of: dict[str, cp_model.IntVar],
    gpu_lit: dict[str, cp_model.IntVar],
    nic_lits: dict[str, cp_model.IntVar],
    rails_of: dict[str, cp_model.IntVar],
    nics_of: dict[str, cp_model.IntVar],
) -> ClusterTerms:
    """Fabric per NIC type (``rails_of``/``nics_of`` are 0 unless that type is chosen) when
    the servers are more than one scale-up domain of the chosen GPU type holds
    (models/scaleup.py domain_servers, models/fabric.py), racks per GPU type, IT power."""
    cat = scenario.catalog
    fac = cat.facility
    multi = md.new_bool_var("several_domains")
    for g, g_lit in gpu_lit.items():
        alone = domain_servers(cat.gpu(g))
        md.add(nodes >= alone + 1).only_enforce_if([multi, g_lit])
        md.add(nodes <= alone).only_enforce_if([~multi, g_lit])
    fabrics = {
        name: _fabric(md, scenario, name, lit, multi, nodes, rails_of[name], nics_of[name])
        for name, lit in nic_lits.items()
    }
    tiers = {name: f.tiers for name, f in fabrics.items()}
    tier_literals = [lit for f in fabrics.values() for lit in f.tiers.values()]
    racks = _racks(md, scenario, gpu_lit, rails_of, nodes)
    capex_terms = [f.capex for f in fabrics.values()]
    capex_terms.append(cost_model.usd_to_cents_up(fac.rack_usd) * racks)
    capex_hi = sum(f.capex_hi for f in fabrics.values())
    capex_hi += cost_model.usd_to_cents_up(fac.rack_usd) * hi_of(racks)

    nic_hi = sum(cost_model.nic_power_w(cat.nic(name)) * hi_of(nics_of[name]) for name in nic_lits)
    sw_hi_total = sum(f.power_hi for f in fabrics.values())
    it_hi = (
        hi_of(nodes) * max(cost_model.server_power_w(cat.gpu(g)) for g in gpu_lit)
        + sw_hi_total
        + nic_hi
    )
    it_power = md.new_int_var(0, it_hi, "it_power_w")
    md.add(
        it_power
        == sum(cost_model.server_power_w(cat.gpu(g)) * v for g, v in nodes_of.items())
        + sum(cost_model.nic_power_w(cat.nic(name)) * nics_of[name] for name in nic_lits)
        + sum(f.power for f in fabrics.values())
    )
    return ClusterTerms(sum(capex_terms), capex_hi, it_power, racks, tier_literals, tiers)


# the most a product_cents result may reach before it saturates: above every budget in
# cost units (solvers.limits.MAX_BUDGET_USD x 100 x TCO_UNITS_PER_CENT = 1e18), and with
# room for the few terms a cost adds to it
SATURATED_UNITS = INT_LIMIT // 4


def product_cents(
    md: cp_model.CpModel,
    name: str,
    amount: cp_model.IntVar,
    a_range: tuple[int, int],
    per_seq: cp_model.IntVar,
    t_range: tuple[int, int],
    cents_per_unit: float,
    most: float | None = None,
) -> cp_model.IntVar:
    """A variable >= amount x per_seq x cents_per_unit, rounded up, that fits int64.

    ``a_range`` and ``t_range`` bound the factors on every plan that matters (the
    caller enforces the upper ends). Each factor is coarsened (rounded up) to steps
    of 2^-20 of its lower end, or coarser if the ranges are too wide for int64
    (only without a budget or an incumbent to bound them, as in the conflict
    search, whose answers are then verified on the bounded model), so the
    relative error on any plan is at most about 2^-20 per factor; the
    coefficient is a fraction N / D >= cents_per_unit x both steps with N about
    2^18 or more. Every rounding overestimates, so a plan admitted within a budget
    is within it (README "Bill of materials").

    ``most``: the largest result the question tells apart (its budget or cost cap, in the
    result's units), when it has one. A product too wide for int64 saturates at
    SATURATED_UNITS (min(product, cap)), which changes no answer only above ``most``;
    otherwise OverflowError (the model rebuilds coarser, or the question is too large).
    A $10T TCO budget is 1e18 units: saturating at 2^59 had admitted a plan 18% over it."""
    a_lo, a_hi = max(1, a_range[0]), max(1, a_range[1])
    t_lo, t_hi = max(1, t_range[0]), max(1, t_range[1])
    bits = 20  # steps of 2^-bits of the lower ends; negative: coarser than the lower ends
    while True:
        a_step = max(1, a_lo >> bits if bits >= 0 else a_lo << -bits)
        r_step = max(1, t_lo >> bits if bits >= 0 else t_lo << -bits)
        a_n, t_n = -(-a_hi // a_step), -(-t_hi // r_step)
        if a_n * t_n <= 2**42:
            break
        bits -= 1
    a_coarse = ceil_by(md, f"{name}_amount_coarse", amount, a_hi, a_step)
    t_coarse = md.new_int_var(0, t_n, f"{name}_time_coarse")
    md.add_division_equality(t_coarse, per_seq + r_step - 1, r_step)
    prod = times(md, f"{name}_product", a_coarse, t_coarse)
    coef = cents_per_unit * a_step * r_step
    den = 2**62
    while den > 1 and hi_of(prod) * math.ceil(coef * den) >= INT_LIMIT // 4:
        den //= 2
    num = math.ceil(coef * den)
    if num >= INT_LIMIT // 4:
        raise OverflowError(f"{name}: cost bounds exceed int64; set a budget or deadline")
    if hi_of(prod) * num >= SATURATED_UNITS:
        # saturate: min(product, cap) changes no answer when every cost past the cap
        # exceeds the budget (or no budget bounds the model, as in the conflict search)
        level = SATURATED_UNITS // num
        if most is not None and level * num // den <= most:
            raise OverflowError(f"{name}: the budget in cost units leaves no room to saturate")
        capped = md.new_int_var(0, level, f"{name}_product_capped")
        md.add_min_equality(capped, [prod, level])
        prod = capped
    var = md.new_int_var(0, -(-hi_of(prod) * num // den), f"{name}_cents")
    md.add(den * var >= num * prod)
    md.add(den * var <= num * prod + den - 1)
    return var
