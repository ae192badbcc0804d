"""The CP-SAT formulation of the design question.

Variables (named in the model): one literal per candidate shape (exactly one
is chosen), a NIC-type literal per NIC, NICs per server, the data-parallel
degree d, micro-batches per step m, servers, and auxiliary integers for the
step time. Each constraint family of the contract is guarded by its own
enforcement literal ``enforce[family]``; solving normally fixes them true, the
explanation code (solvers/explain.py) passes them as assumptions or leaves
them out. Products of two variables use AddMultiplicationEquality.

Units: time in ``unit_s`` seconds (ns or coarser, chosen so that the largest
step fits in ~1e12 units); usage is rounded up and capacity down, so a plan
CP-SAT admits always passes the float model (solvers/plan.py re-checks it).
The objective T' is K x step time / global batch (time per trained sequence),
which times the training sequences is the time to train.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ortools.sat.python import cp_model

from models.cost import pue_milli, usd_to_cents_up
from solvers.bounds import dp_bounds, least_per_gpu, objective_lower_bound
from solvers.cpsat_cluster import ClusterTerms, add_cluster_terms, product_cents
from solvers.scenario import FAMILIES, GPU_CAP, Scenario
from solvers.space import Candidate, nic_specs

INT_LIMIT = 2**62
TCO_UNITS_PER_CENT = 1000  # energy and capex shares are fractions of a cent per unit of time
STRUCTURAL = ("tp_bandwidth", "tp_domain", "divisibility")


def _lo(var: cp_model.IntVar) -> int:
    return int(var.proto.domain[0])


def _hi(var: cp_model.IntVar) -> int:
    dom = var.proto.domain  # ortools' repeated field does not support negative indexing
    return int(dom[len(dom) - 1])


def _up(x: float) -> int:
    return int(math.ceil(x - 1e-9 * max(1.0, abs(x))))


def _down(x: float) -> int:
    return int(math.floor(x + 1e-9 * max(1.0, abs(x))))


@dataclass
class Formulation:
    model: cp_model.CpModel
    x: list[cp_model.IntVar]
    nic_lits: dict[str, cp_model.IntVar]
    nics: cp_model.IntVar
    dp: cp_model.IntVar
    m: cp_model.IntVar
    nodes: cp_model.IntVar
    objective: cp_model.LinearExprT
    enforce: dict[str, cp_model.IntVar] = field(default_factory=dict)
    candidates: list[Candidate] = field(default_factory=list)
    cluster: ClusterTerms | None = None  # fabric, racks and power, when the question prices them


def build(
    scenario: Scenario,
    candidates: list[Candidate],
    fix_families: bool = True,
    cost_cap_usd: float | None = None,
    bounds: tuple[list[tuple[int, int]], list[float]] | None = None,
) -> Formulation:
    """The CP-SAT model of ``scenario`` over ``candidates``, with the finest time unit that fits int64.

    ``cost_cap_usd``: no plan that matters costs more (an incumbent's cost with a margin);
    it tightens the bounds of the TCO products, so their rounding is finer. ``bounds``:
    each candidate's DP range and objective lower bound (solvers/bounds.py), when the
    caller has them; used only with ``fix_families``."""
    coarsen = 1.0
    for _ in range(8):
        try:
            return _build(scenario, candidates, fix_families, coarsen, cost_cap_usd, bounds)
        except OverflowError:
            coarsen *= 1000.0
    raise OverflowError(
        "the question is too large for 64-bit arithmetic; lower the GPU cap or batch ceiling"
    )


def _build(
    scenario: Scenario,
    candidates: list[Candidate],
    fix_families: bool,
    coarsen: float,
    cost_cap_usd: float | None = None,
    given_bounds: tuple[list[tuple[int, int]], list[float]] | None = None,
) -> Formulation:
    md = cp_model.CpModel()
    cat = scenario.catalog
    # only NIC types some GPU of the question takes (each brings its own fabric terms)
    usable = {nc.name for g in {c.shape.gpu for c in candidates} for nc in scenario.nics_for(g)}
    nics = [nc for nc in nic_specs(scenario) if nc.name in usable] or nic_specs(scenario)
    n = len(candidates)
    if n == 0:
        raise ValueError("no candidate shapes")
    x = [md.new_bool_var(f"shape[{i}]") for i in range(n)]
    md.add_exactly_one(x)

    enforce: dict[str, cp_model.IntVar] = {}
    for fam in FAMILIES:
        if scenario.active(fam):
            enforce[fam] = md.new_bool_var(f"enforce[{fam}]")
            if fix_families:
                md.add(enforce[fam] == 1)

    def sel(values) -> cp_model.LinearExpr:
        """The chosen candidate's value: sum_i x_i * value_i."""
        return cp_model.LinearExpr.weighted_sum(x, [int(v) for v in values])

    shapes = [c.shape for c in candidates]
    gpus = {c.shape.gpu: cat.gpu(c.shape.gpu) for c in candidates}
    gpu_names = sorted(gpus)
    gpu_lit = {g: md.new_bool_var(f"gpu[{g}]") for g in gpu_names}
    for g in gpu_names:
        md.add(gpu_lit[g] == sum(x[i] for i in range(n) if shapes[i].gpu == g))

    # --- structural families: shapes that violate them are forbidden
    for fam in STRUCTURAL:
        if fam in enforce:
            bad = [x[i] for i in range(n) if fam in candidates[i].structural]
            if bad:
                md.add(sum(bad) == 0).only_enforce_if(enforce[fam])

    # --- scale: largest admissible DP degree and micro-batches per step
    ceiling_seq = (
        _down(scenario.ceiling_tokens / scenario.seq_len) if "batch_ceiling" in enforce else None
    )
    # Domains may only use a family's limit when the family is fixed on: with assumption
    # literals (conflict explanations) every family must stay relaxable.
    gpu_cap = GPU_CAP
    if fix_families and "max_gpus" in enforce:
        caps = [scenario.gpu_cap(g) for g in gpus]
        if all(c is not None for c in caps):
            gpu_cap = min(gpu_cap, max(c for c in caps if c is not None))
    if fix_families and "budget" in enforce and scenario.capex_charged_in_full:
        cheapest = min(usd_to_cents_up(g.price_usd) for g in gpus.values())
        gpu_cap = min(gpu_cap, int(scenario.budget * 100 // cheapest))
    gpu_cap = max(1, gpu_cap)
    dp_max = gpu_cap
    m_max = GPU_CAP
    if fix_families and ceiling_seq:
        dp_max, m_max = min(dp_max, ceiling_seq), ceiling_seq
    m_max = max(1, m_max)
    dp = md.new_int_var(1, dp_max, "dp")
    m = md.new_int_var(1, m_max, "microbatches")

    # --- NICs: one type the chosen GPU's server takes, a count its design allows
    counts_of = {name: scenario.nic_counts(name) for name in gpus}
    fits_of = {name: {nc.name for nc in scenario.nics_for(name)} for name in gpus}
    max_count = max(max(c) for c in counts_of.values())
    nic_lits = {nc.name: md.new_bool_var(f"nic[{nc.name}]") for nc in nics}
    md.add_exactly_one(nic_lits.values())
    nics_per_node = md.new_int_var(1, max_count, "nics_per_node")
    nic_count = {}
    for nc in nics:
        v = md.new_int_var(0, max_count, f"nics_of[{nc.name}]")
        md.add(v == nics_per_node).only_enforce_if(nic_lits[nc.name])
        md.add(v == 0).only_enforce_if(~nic_lits[nc.name])
        nic_count[nc.name] = v
    node_bw = md.new_int_var(
        1, max_count * max(_up(nc.speed_gbit_per_s) for nc in nics), "node_gbit_s"
    )
    md.add(node_bw == sum(_down(nc.speed_gbit_per_s) * nic_count[nc.name] for nc in nics))
    relaxed = scenario.with_changes(disabled=scenario.disabled | {"nic_slots"})
    for name in gpus:
        for nc in nics:
            if nc.name not in fits_of[name]:  # PCIe generation or the vendor's design
                md.add_bool_or([~gpu_lit[name], ~nic_lits[nc.name]])
        if not fits_of[name]:
            md.add(gpu_lit[name] == 0)
        if "nic_slots" in enforce:
            md.add_linear_expression_in_domain(
                nics_per_node, cp_model.Domain.from_values(counts_of[name])
            ).only_enforce_if([gpu_lit[name], enforce["nic_slots"]])
        md.add_linear_expression_in_domain(
            nics_per_node, cp_model.Domain.from_values(relaxed.nic_counts(name))
        ).only_enforce_if(gpu_lit[name])

    if scenario.pricing == "cloud" and "power" not in enforce:
        # dominance: rented GPU-hours do not charge for NICs, and more NIC bandwidth never
        # slows a step, so the fastest NIC in every slot is always best (exhaustive.py too;
        # not under a power cap, where switches draw power)
        for name in gpus:
            fitting = [nc for nc in nics if nc.name in fits_of[name]]
            if not fitting:
                continue
            fastest = max(fitting, key=lambda nc: (nc.speed_gbit_per_s, nc.name))
            md.add(nic_lits[fastest.name] == 1).only_enforce_if(gpu_lit[name])
            md.add(nics_per_node == max(counts_of[name])).only_enforce_if(gpu_lit[name])

    # --- memory: d at least the smallest ZeRO shard that fits
    if "memory" in enforce:
        never = [x[i] for i in range(n) if candidates[i].dp_min_memory is None]
        if never:
            md.add(sum(never) == 0).only_enforce_if(enforce["memory"])
        md.add(dp >= sel(c.dp_min_memory or 1 for c in candidates)).only_enforce_if(
            enforce["memory"]
        )

    # --- batch: W = m d micro-batches, global batch GB = b W sequences
    w = md.new_int_var(1, dp_max * m_max, "microbatches_total")
    md.add_multiplication_equality(w, [dp, m])
    b_sel = md.new_int_var(1, max(s.micro_batch for s in shapes), "micro_batch")
    md.add(b_sel == sel(s.micro_batch for s in shapes))
    gb_max = max(s.micro_batch for s in shapes) * dp_max * m_max
    if "batch_ceiling" in enforce and fix_families and ceiling_seq:
        gb_max = min(gb_max, ceiling_seq)
    global_batch = md.new_int_var(1, gb_max, "global_batch")
    md.add_multiplication_equality(global_batch, [b_sel, w])
    if "batch_ceiling" in enforce:
        md.add(global_batch <= ceiling_seq).only_enforce_if(enforce["batch_ceiling"])
    if "batch_floor" in enforce:
        md.add(global_batch >= _up(scenario.floor_tokens / scenario.seq_len)).only_enforce_if(
            enforce["batch_floor"]
        )
    if "pipeline_fill" in enforce:
        md.add(m >= sel(s.pp for s in shapes)).only_enforce_if(enforce["pipeline_fill"])
    # the interleaved schedule itself needs at least p micro-batches (Narayanan et al. SC'21,
    # section 2.2): not a relaxable rule
    md.add(m >= sel(s.pp if s.vp > 1 else 1 for s in shapes))

    # --- GPUs and servers: G = replica x d, servers = ceil(G / GPUs per server)
    rep = md.new_int_var(1, max(s.replica_gpus for s in shapes), "replica_gpus")
    md.add(rep == sel(s.replica_gpus for s in shapes))
    num_gpus = md.new_int_var(1, gpu_cap, "num_gpus")
    md.add_multiplication_equality(num_gpus, [rep, dp])
    md.add(num_gpus <= GPU_CAP)
    for name, spec in gpus.items():  # bought in whole servers or racks (catalog ServerSpec)
        unit = spec.server.purchase_unit_gpus
        if unit > 1:
            units = md.new_int_var(0, gpu_cap // unit + 1, f"purchase_units[{name}]")
            md.add(num_gpus == unit * units).only_enforce_if(gpu_lit[name])
    if "max_gpus" in enforce:
        for name in gpu_names:
            cap = scenario.gpu_cap(name)
            if cap is not None:
                md.add(num_gpus <= cap).only_enforce_if([enforce["max_gpus"], gpu_lit[name]])
    gpn = md.new_int_var(1, max(g.server.gpus_per_server for g in gpus.values()), "gpus_per_server")
    md.add(gpn == sel(gpus[s.gpu].server.gpus_per_server for s in shapes))
    nodes = md.new_int_var(1, gpu_cap, "servers")
    node_gpus = md.new_int_var(1, GPU_CAP * 1024, "server_gpu_slots")
    md.add_multiplication_equality(node_gpus, [nodes, gpn])
    md.add(node_gpus >= num_gpus)
    md.add(node_gpus <= num_gpus + gpn - 1)

    # --- regimes: gradient group inside one server (r_dp), whole job in one server (r_pp)
    r_dp = md.new_bool_var("dp_group_in_one_server")
    r_pp = md.new_bool_var("job_in_one_server")
    thd = [math.ceil(c.coeffs.dp_ranks_per_node / c.shape.cp) for c in candidates]
    thp = [c.coeffs.domain_gpus // c.shape.replica_gpus for c in candidates]
    md.add(dp <= sel(thd) - 1).only_enforce_if(r_dp)
    md.add(dp >= sel(thd)).only_enforce_if(~r_dp)
    md.add(dp <= sel(thp)).only_enforce_if(r_pp)
    md.add(dp >= sel(thp) + 1).only_enforce_if(~r_pp)

    # --- time: choose the unit so the largest step fits in ~1e12 units
    cf = [c.coeffs for c in candidates]
    worst_step = max(
        m_max * (c.stage_mb_s + 2 * c.vp * (c.pp_send_intra_s + c.pp_latency_s))
        + c.bubble_s
        + 2 * c.pp * (c.pp_send_intra_s + c.pp_latency_s)
        + 2 * c.dp_bytes / (c.scale_up_bw_gb_per_s * 1e9)
        + c.optimizer_s
        for c in cf
    )
    unit_s = max(1e-9, worst_step / 1e12) * coarsen

    def t(seconds: float) -> int:
        return _up(seconds / unit_s)

    def t_down(seconds: float) -> int:
        return _down(seconds / unit_s)

    # bits on the NICs are converted with 8 * GPUs per server / efficiency (a GPU's share)
    def bits(c, nbytes: float) -> int:
        return _up(8.0 * c.gpus_per_node / c.network_efficiency * nbytes / (unit_s * 1e9))

    def bits_down(c, nbytes: float) -> int:
        return _down(8.0 * c.gpus_per_node / c.network_efficiency * nbytes / (unit_s * 1e9))

    def bounded(name: str, values) -> cp_model.IntVar:
        vals = [int(v) for v in values]
        var = md.new_int_var(min(0, min(vals)), max(0, max(vals)), name)
        md.add(var == sel(vals))
        return var

    pp1 = [c.pp > 1 for c in cf]
    a_in_v = [t(c.stage_mb_s + 2 * c.vp * c.pp_send_intra_s) for c in cf]
    a_net_v = [t(c.stage_mb_s + 2 * c.vp * c.pp_latency_s) for c in cf]
    a_in = bounded("stage_time_one_server", a_in_v)
    a_net = bounded("stage_time_servers", a_net_v)
    c_in = bounded(
        "fixed_time_one_server", (t(c.bubble_s + 2 * (c.pp - 1) * c.pp_send_intra_s) for c in cf)
    )
    c_net = bounded(
        "fixed_time_servers", (t(c.bubble_s + 2 * (c.pp - 1) * c.pp_latency_s) for c in cf)
    )
    pb_m_v = [bits(c, 2 * c.vp * c.pp_send_bytes) if p else 0 for c, p in zip(cf, pp1, strict=True)]
    pb_m = bounded("pp_bits_per_microbatch", pb_m_v)
    pb_c = bounded(
        "pp_bits_fixed",
        (
            bits(c, 2 * (c.pp - 1) * c.pp_send_bytes) if p else 0
            for c, p in zip(cf, pp1, strict=True)
        ),
    )

    def product(name: str, a: cp_model.IntVar, b: cp_model.IntVar) -> cp_model.IntVar:
        lo_a, hi_a = _lo(a), _hi(a)
        lo_b, hi_b = _lo(b), _hi(b)
        corners = [lo_a * lo_b, lo_a * hi_b, hi_a * lo_b, hi_a * hi_b]
        lo, hi = min(corners), max(corners)
        if hi >= INT_LIMIT or lo <= -INT_LIMIT:
            raise OverflowError(f"{name}: product bounds exceed int64; narrow the question")
        var = md.new_int_var(lo, hi, name)
        md.add_multiplication_equality(var, [a, b])
        return var

    def ceil_div(name: str, num, num_hi: int, den: cp_model.IntVar, lo: int = 0) -> cp_model.IntVar:
        """name = ceil(num / den) for den >= 1 (a functional definition: no slack to crawl)."""
        var = md.new_int_var(lo, max(lo, num_hi), name)
        md.add_division_equality(var, num + den - 1, den)
        return var

    def floor_div(name: str, num: cp_model.IntVar, den: cp_model.IntVar) -> cp_model.IntVar:
        var = md.new_int_var(0, max(0, _hi(num)), name)
        md.add_division_equality(var, num, den)
        return var

    def pick(name: str, hi: int, when_true, when_false, lit) -> cp_model.IntVar:
        """name = when_true if lit else when_false."""
        var = md.new_int_var(-hi, hi, name)
        md.add(var == when_true).only_enforce_if(lit)
        md.add(var == when_false).only_enforce_if(~lit)
        return var

    # pipeline sends over the NICs, the part not proportional to m: ceil(bits / node Gbit/s)
    nt_pp_c_raw = ceil_div("pp_nic_time_fixed_if_servers", pb_c, _hi(pb_c), node_bw)

    # gradient reduction
    up = [c.scale_up_bw_gb_per_s * 1e9 for c in cf]
    dpi_r = bounded("dp_intra_full", (t(2 * c.dp_bytes / u) for c, u in zip(cf, up, strict=True)))
    li_cap = bounded(
        "dp_intra_saving_cap",
        (t_down(2 * c.dp_bytes / u / c.cp) for c, u in zip(cf, up, strict=True)),
    )
    li = floor_div("dp_intra_saving", li_cap, dp)
    k_of = [c.dp_ranks_per_node for c in cf]
    dpi_n = bounded(
        "dp_intra_part",
        (t(2 * c.dp_bytes * (k - 1) / k / u) for c, k, u in zip(cf, k_of, up, strict=True)),
    )
    dnb = bounded("dp_bits", (bits(c, 2 * c.dp_bytes / k) for c, k in zip(cf, k_of, strict=True)))
    ln_cap = bounded("dp_bits_saving_cap", (bits_down(c, 2 * c.dp_bytes / c.cp) for c in cf))
    ln = floor_div("dp_bits_saving", ln_cap, dp)
    nt_dp_raw = ceil_div("dp_nic_time_if_servers", dnb - ln, _hi(dnb), node_bw, lo=-_hi(ln_cap))
    overlap = bounded(
        "dp_overlap", (t_down(c.dp_window_s(scenario.assumptions.dp_overlap)) for c in cf)
    )
    dp_hi_t = _hi(dpi_r) + _hi(dpi_n) + _hi(nt_dp_raw) + _hi(ln_cap) + _hi(li_cap)
    dp_pre = pick(
        "dp_time_less_overlap", dp_hi_t, dpi_r - li - overlap, dpi_n + nt_dp_raw - overlap, r_dp
    )
    dp_exposed = md.new_int_var(0, dp_hi_t, "dp_exposed")
    md.add_max_equality(dp_exposed, [dp_pre, 0])

    # optimizer step on the ZeRO-1 shard: ceil(optimizer / (cp d))
    opt_cap = bounded("optimizer_unsharded", (t(c.optimizer_s / c.cp) for c in cf))
    u = ceil_div("optimizer_time", opt_cap, _hi(opt_cap), dp)

    # Time per trained sequence, T' = K step / (b m d), split so that the 1/d and 1/(m d)
    # parts are explicit (tight bounds once the shape is chosen):
    #   K A / (b d)                 A = per-micro-batch stage time (+ intra-server sends)
    # + K bits / (node_bw b d)      per-micro-batch sends over the NICs (across servers)
    # + K (C + fixed sends + DP + optimizer) / (b m d)
    a_sel = pick("stage_time", max(_hi(a_in), _hi(a_net)), a_in, a_net, r_pp)
    bd = product("micro_x_dp", b_sel, dp)
    rest = md.new_int_var(
        0,
        max(_hi(c_in), _hi(c_net) + _hi(nt_pp_c_raw)) + _hi(dp_exposed) + _hi(u),
        "step_fixed_time",
    )
    md.add(rest == c_in + dp_exposed + u).only_enforce_if(r_pp)
    md.add(rest == c_net + nt_pp_c_raw + dp_exposed + u).only_enforce_if(~r_pp)
    numer_hi = max(_hi(a_in), _hi(a_net), _hi(pb_m), _hi(rest), 1)
    k_scale = min(10**6, (INT_LIMIT // 4) // numer_hi)
    if k_scale < 1:
        raise OverflowError("time per sequence")
    q_stage = ceil_div("time_per_sequence_stage", k_scale * a_sel, k_scale * _hi(a_sel), bd)
    bw_bd = product("node_bw_x_micro_x_dp", node_bw, bd)
    q_sends_raw = ceil_div(
        "time_per_sequence_sends_if_servers", k_scale * pb_m, k_scale * _hi(pb_m), bw_bd
    )
    q_sends = pick("time_per_sequence_sends", _hi(q_sends_raw), 0, q_sends_raw, r_pp)
    q_rest = ceil_div("time_per_sequence_fixed", k_scale * rest, k_scale * _hi(rest), global_batch)
    per_seq = md.new_int_var(0, _hi(q_stage) + _hi(q_sends) + _hi(q_rest), "time_per_sequence")
    md.add(per_seq == q_stage + q_sends + q_rest)
    days_per_unit = unit_s / k_scale * scenario.sequences / 86400.0
    gpu_time = _gpu_time_per_sequence(
        md, shapes, sel, r_pp, (a_in_v, a_net_v, pb_m_v), rest, node_bw, b_sel, m, numer_hi
    )
    if "deadline" in enforce:
        md.add(per_seq <= _down(scenario.deadline / days_per_unit)).only_enforce_if(
            enforce["deadline"]
        )

    # --- the cluster: servers, NICs, fabric, racks, power (models/cost.py)
    cluster: ClusterTerms | None = None
    capex_expr = None
    if scenario.pricing != "cloud" or "power" in enforce or "max_racks" in enforce:
        gpus_of, nodes_of = {}, {}
        for g in gpu_names:
            gpus_of[g] = md.new_int_var(0, GPU_CAP, f"gpus_of[{g}]")
            md.add(gpus_of[g] == num_gpus).only_enforce_if(gpu_lit[g])
            md.add(gpus_of[g] == 0).only_enforce_if(~gpu_lit[g])
            nodes_of[g] = md.new_int_var(0, GPU_CAP, f"servers_of[{g}]")
            md.add(nodes_of[g] == nodes).only_enforce_if(gpu_lit[g])
            md.add(nodes_of[g] == 0).only_enforce_if(~gpu_lit[g])
        nn = product("nics_total", nodes, nics_per_node)
        nics_of = {}
        for nc in nics:
            nics_of[nc.name] = md.new_int_var(0, _hi(nn), f"nics_total_of[{nc.name}]")
            md.add(nics_of[nc.name] == nn).only_enforce_if(nic_lits[nc.name])
            md.add(nics_of[nc.name] == 0).only_enforce_if(~nic_lits[nc.name])
        cluster = add_cluster_terms(
            md, scenario, nodes, nodes_of, gpu_lit, nic_lits, nic_count, nics_of
        )
        capex_expr = cp_model.LinearExpr.sum(
            [
                *(usd_to_cents_up(gpus[g].price_usd) * gpus_of[g] for g in gpu_names),
                *(usd_to_cents_up(gpus[g].server.overhead_usd) * nodes_of[g] for g in gpu_names),
                *(usd_to_cents_up(nc.price_usd) * nics_of[nc.name] for nc in nics),
                cluster.capex_cents,
            ]
        )
        if "power" in enforce:  # facility power = IT x PUE (thousandths), nameplate
            cap = _down(scenario.power_cap_w * 1000.0)
            md.add(pue_milli(cat.facility) * cluster.it_power_w <= cap).only_enforce_if(
                enforce["power"]
            )
        if "max_racks" in enforce:
            md.add(cluster.racks <= scenario.rack_cap).only_enforce_if(enforce["max_racks"])

    # --- cost
    cost_expr: Any = None
    per_cent = TCO_UNITS_PER_CENT if scenario.pricing == "tco" else 1  # cost units per cent
    coef: dict[str, float] = {}
    gt_of: dict[str, cp_model.IntVar] = {}
    if scenario.pricing == "capex":
        assert capex_expr is not None
        cost_expr = capex_expr
        if "budget" in enforce:
            md.add(cost_expr <= _down(scenario.budget * 100)).only_enforce_if(enforce["budget"])
    elif scenario.pricing == "tco" and (scenario.objective == "cost" or "budget" in enforce):
        assert cluster is not None and capex_expr is not None
        cost_expr = _tco_cost(
            md,
            scenario,
            fix_families,
            cost_cap_usd,
            candidates,
            gpus,
            cluster,
            capex_expr,
            capex_hi=gpu_cap * max(usd_to_cents_up(g.price_usd) for g in gpus.values())
            + _hi(nodes) * max(usd_to_cents_up(g.server.overhead_usd) for g in gpus.values())
            + _hi(nn) * max(usd_to_cents_up(nc.price_usd) for nc in nics)
            + cluster.capex_hi_cents,
            num_gpus=num_gpus,
            gpu_time=gpu_time,
            gpu_days_per_unit=unit_s / gpu_time.scale * scenario.sequences / 86400.0,
        )
        if "budget" in enforce:
            md.add(cost_expr <= _down(scenario.budget * 100 * per_cent)).only_enforce_if(
                enforce["budget"]
            )
    elif scenario.pricing == "cloud":
        # cost = hourly price x GPU-time, G x T' built from per-shape factors (GpuTime: tight
        # once the shape is chosen), in cents per GPU-time unit of each GPU type
        gpu_days_per_unit = unit_s / gpu_time.scale * scenario.sequences / 86400.0
        coef = {g: gpus[g].cloud_usd_per_gpu_hour * 100 * gpu_days_per_unit * 24 for g in gpu_names}
        gt_hi = _hi(gpu_time.var)
        if "budget" in enforce and fix_families:
            gt_hi = min(gt_hi, _down(scenario.budget * 100 / min(coef.values())))
            md.add(gpu_time.var <= gt_hi)
        for g in gpu_names:
            cap = gt_hi
            if "budget" in enforce and fix_families:
                cap = min(cap, _down(scenario.budget * 100 / coef[g]))
            gt_of[g] = md.new_int_var(0, max(0, cap), f"gpu_time_of[{g}]")
            md.add(gt_of[g] == gpu_time.var).only_enforce_if(gpu_lit[g])
            md.add(gt_of[g] == 0).only_enforce_if(~gpu_lit[g])
            limit = _down(scenario.budget * 100 / coef[g]) if "budget" in enforce else None
            if limit is not None and limit < _hi(gt_of[g]):  # else the budget cannot bind
                md.add(gt_of[g] <= limit).only_enforce_if([enforce["budget"], gpu_lit[g]])
        cost_expr = sum(coef[g] * gt_of[g] for g in gpu_names)

    # --- redundant cuts (valid bounds that let CP-SAT discard shapes without search)
    lbs: list[float] = [0.0] * n  # per candidate, objective units (the search order)
    if fix_families:
        if given_bounds is not None:
            bounds, lbs = given_bounds
        else:
            bounds = [dp_bounds(scenario, cand) for cand in candidates]
            lbs = [
                objective_lower_bound(scenario, c, bnd)
                for c, bnd in zip(candidates, bounds, strict=True)
            ]
        md.add(dp <= sel(max(1, min(hi, dp_max)) for _, hi in bounds))
        md.add(dp >= sel(min(lo, dp_max) for lo, _ in bounds))
    if fix_families and scenario.objective == "time":
        to_units = k_scale * 86400.0 / (scenario.sequences * unit_s) * (1 - 1e-9)
        md.add(per_seq >= sel(max(0, math.floor(lb * to_units) - 1) for lb in lbs))
    elif fix_families:
        if scenario.pricing != "cloud":
            md.add(cost_expr >= sel(_down(lb * 100 * per_cent * (1 - 1e-12)) for lb in lbs))
        else:  # in GPU-time units of each GPU type (the cost's coefficients are not integers)
            for gname in gpu_names:
                # the model's GPU-time rounds some terms down (the overlap window, the DP
                # savings), so the cut keeps a 1e-6 margin below the float bound
                terms = [
                    (x[i], _down(lbs[i] * 100 / coef[gname] * (1 - 1e-6)))
                    for i in range(n)
                    if shapes[i].gpu == gname
                ]
                md.add(gt_of[gname] >= sum(v * lb for v, lb in terms))
    if ceiling_seq and "batch_ceiling" in enforce:
        # dominance: the largest m the ceiling allows is always best (exhaustive.py docstring)
        md.add(w + dp >= sel(ceiling_seq // s.micro_batch + 1 for s in shapes)).only_enforce_if(
            enforce["batch_ceiling"]
        )

    objective: cp_model.LinearExprT
    if scenario.objective == "time":
        objective = per_seq
    elif scenario.pricing != "cloud":
        assert cost_expr is not None
        objective = cost_expr
    else:
        # cloud cost = price x GPU-time: with one GPU type (solve_cpsat splits by type) the
        # GPU-time itself is the integer objective, so no float coefficient reaches CP-SAT
        if len(gpu_names) != 1:
            raise ValueError("the cloud cost objective is solved one GPU type at a time")
        objective = gt_of[gpu_names[0]]
    form = Formulation(
        md, x, nic_lits, nics_per_node, dp, m, nodes, objective, enforce, list(candidates), cluster
    )
    order = sorted(range(n), key=lambda i: (lbs[i], i))
    md.add_decision_strategy(
        [x[i] for i in order], cp_model.CHOOSE_FIRST, cp_model.SELECT_MAX_VALUE
    )
    # then the network (small domains; once fixed, the budget caps d tightly), then d by bisection
    md.add_decision_strategy(
        list(nic_lits.values()), cp_model.CHOOSE_FIRST, cp_model.SELECT_MAX_VALUE
    )
    md.add_decision_strategy([nics_per_node], cp_model.CHOOSE_FIRST, cp_model.SELECT_UPPER_HALF)
    md.add_decision_strategy(
        [dp],
        cp_model.CHOOSE_FIRST,
        cp_model.SELECT_UPPER_HALF if scenario.objective == "time" else cp_model.SELECT_LOWER_HALF,
    )
    md.add_decision_strategy([m], cp_model.CHOOSE_FIRST, cp_model.SELECT_UPPER_HALF)
    if cluster is not None:  # then the smallest fabric and the fewest racks (the cheapest)
        md.add_decision_strategy(
            cluster.tier_literals, cp_model.CHOOSE_FIRST, cp_model.SELECT_MAX_VALUE
        )
        md.add_decision_strategy([cluster.racks], cp_model.CHOOSE_FIRST, cp_model.SELECT_MIN_VALUE)
    return form


@dataclass
class GpuTime:
    """GPU-time per trained sequence, G x T' (in ``unit_s / scale`` GPU-seconds), rounded up,
    and a lower bound of it over the shapes."""

    var: cp_model.IntVar
    scale: int
    lo: int


def _gpu_time_per_sequence(
    md: cp_model.CpModel,
    shapes: list,
    sel,
    r_pp: cp_model.IntVar,
    per_shape: tuple[list[int], list[int], list[int]],
    rest: cp_model.IntVar,
    node_bw: cp_model.IntVar,
    b_sel: cp_model.IntVar,
    m: cp_model.IntVar,
    numer_hi: int,
) -> GpuTime:
    """G x T' = replica x (A / b + sends / (node_bw b) + rest / (b m)): the time per
    sequence times the GPUs, from factors that are (nearly) fixed once the shape is.

    The cost objectives charge GPU-time at a per-GPU rate; G x T' as the product of
    two variables would propagate only the product of their extreme bounds (d at its
    lowest times T' at the largest d), so that a proof visits every DP degree. Written
    this way, d appears only in ``rest`` (the bubble, gradient reduction and optimizer:
    small) and in m."""
    a_in_v, a_net_v, pb_m_v = per_shape
    reps = [s.replica_gpus for s in shapes]
    rep_hi = max(reps)
    scale = max(1, min(10**6, (INT_LIMIT // 4) // (max(1, numer_hi) * rep_hi * 4)))

    def per_shape_var(name: str, values: list[int]) -> cp_model.IntVar:
        vals = [
            -(-scale * r * v // s.micro_batch) for r, v, s in zip(reps, values, shapes, strict=True)
        ]
        var = md.new_int_var(min(vals), max(vals), name)
        md.add(var == sel(vals))
        return var

    st_in = per_shape_var("gpu_time_stage_one_server", a_in_v)
    st_net = per_shape_var("gpu_time_stage_servers", a_net_v)
    st_hi = max(_hi(st_in), _hi(st_net))
    stage = md.new_int_var(0, st_hi, "gpu_time_stage")
    md.add(stage == st_in).only_enforce_if(r_pp)
    md.add(stage == st_net).only_enforce_if(~r_pp)
    bits = per_shape_var("gpu_bits_per_sequence", pb_m_v)
    sends_raw = md.new_int_var(0, _hi(bits), "gpu_time_sends_if_servers")
    md.add_division_equality(sends_raw, bits + node_bw - 1, node_bw)
    sends = md.new_int_var(0, _hi(bits), "gpu_time_sends")
    md.add(sends == 0).only_enforce_if(r_pp)
    md.add(sends == sends_raw).only_enforce_if(~r_pp)
    rep = md.new_int_var(min(reps), rep_hi, "gpu_time_replica")
    md.add(rep == sel(reps))
    rep_rest = md.new_int_var(0, rep_hi * _hi(rest), "replica_x_fixed_time")
    md.add_multiplication_equality(rep_rest, [rep, rest])
    bm = md.new_int_var(1, _hi(b_sel) * _hi(m), "micro_batch_x_microbatches")
    md.add_multiplication_equality(bm, [b_sel, m])
    fixed = md.new_int_var(0, scale * _hi(rep_rest), "gpu_time_fixed")
    md.add_division_equality(fixed, scale * rep_rest + bm - 1, bm)
    total = md.new_int_var(0, st_hi + _hi(sends) + _hi(fixed), "gpu_time_per_sequence")
    md.add(total == stage + sends + fixed)
    lo = min(min(a, b) for a, b in zip(a_in_v, a_net_v, strict=True))
    lo_all = min(
        -(-scale * r * min(a, b) // s.micro_batch)
        for r, a, b, s in zip(reps, a_in_v, a_net_v, shapes, strict=True)
    )
    del lo
    return GpuTime(total, scale, max(1, lo_all))


def _tco_cost(
    md: cp_model.CpModel,
    scenario: Scenario,
    fix_families: bool,
    cost_cap_usd: float | None,
    candidates: list[Candidate],
    gpus: dict,
    cluster: ClusterTerms,
    capex_expr,
    capex_hi: int,
    num_gpus: cp_model.IntVar,
    gpu_time: GpuTime,
    gpu_days_per_unit: float,
) -> cp_model.LinearExprT:
    """TCO in 1/TCO_UNITS_PER_CENT cents: capex (or its lifetime share) + energy (models/cost.py).

    Energy = eps x IT power x T' = eps x (IT power / G) x (G x T') (eps: cents per W per
    GPU-time unit, at the average draw and the PUE). With a lifetime, share + energy =
    sigma x (G x T') x (capex + kappa x power) / G, kappa = eps / sigma cents per W, so
    one product carries both. Both factors, a per-GPU rate (rounded up) and the
    GPU-time per sequence, are nearly fixed once the shape is, so the product's
    bounds are tight; their ranges come from the least rate per GPU (solvers/bounds.py
    least_per_gpu), the least GPU-time of any shape, and the budget or the
    incumbent's cost, which keeps their rounding near 2^-20."""
    fac = scenario.catalog.facility
    eps = (
        (pue_milli(fac) / 1000.0 * fac.power_draw_fraction * gpu_days_per_unit * 24.0 / 1000.0)
        * fac.usd_per_kwh
        * 100.0
    )
    cap: float | None = None
    if fix_families and scenario.active("budget"):
        cap = scenario.budget * 100.0
    if fix_families and cost_cap_usd is not None:
        cap = min(cap if cap is not None else math.inf, cost_cap_usd * 100.0)
    per_gpu = [least_per_gpu(scenario, g) for g in gpus.values()]
    t_lo, t_hi = gpu_time.lo, _hi(gpu_time.var)
    p_lo = max(1, math.floor(min(w for _, w in per_gpu)))
    per_cent = TCO_UNITS_PER_CENT

    def per_gpu_of(name: str, amount, amount_hi: int, lo: int) -> cp_model.IntVar:
        var = md.new_int_var(lo, max(lo, amount_hi), name)
        md.add_division_equality(var, amount + num_gpus - 1, num_gpus)
        return var

    if fac.lifetime_years is None:
        p_hi = _hi(cluster.it_power_w)
        if cap is not None:
            md.add(capex_expr <= _down(cap))  # capex alone is within the cost
            if eps > 0:
                t_hi = min(t_hi, _down(cap / (eps * p_lo)))
                p_hi = min(p_hi, _down(cap / (eps * t_lo)))
        md.add(gpu_time.var <= t_hi)
        watts = per_gpu_of("power_per_gpu_w", cluster.it_power_w, _hi(cluster.it_power_w), p_lo)
        md.add(watts <= max(p_lo, p_hi))
        energy = product_cents(
            md, "energy", watts, (p_lo, p_hi), gpu_time.var, (t_lo, t_hi), eps * per_cent
        )
        return per_cent * capex_expr + energy
    sigma = gpu_days_per_unit / (365.0 * fac.lifetime_years)  # capex share per GPU-time unit
    kappa = math.ceil(1024 * eps / sigma)  # 1024 x cents per W, rounded up
    q_lo = max(1, math.floor(min(1024 * 100 * usd + kappa * w for usd, w in per_gpu)))
    q_hi = 1024 * capex_hi + kappa * _hi(cluster.it_power_w)
    if cap is not None:
        t_hi = min(t_hi, _down(cap * 1024 / (sigma * q_lo)))
        q_hi = min(q_hi, _down(cap * 1024 / (sigma * t_lo)))
    weighted = md.new_int_var(0, 1024 * capex_hi + kappa * _hi(cluster.it_power_w), "tco_weight")
    md.add(weighted == 1024 * capex_expr + kappa * cluster.it_power_w)
    rate = per_gpu_of("tco_weight_per_gpu", weighted, _hi(weighted), q_lo)
    md.add(gpu_time.var <= t_hi)
    md.add(rate <= max(q_lo, q_hi))
    return product_cents(
        md, "tco", rate, (q_lo, q_hi), gpu_time.var, (t_lo, t_hi), sigma / 1024 * per_cent
    )
