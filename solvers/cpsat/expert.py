"""The mixture-of-experts part of the CP-SAT model's time (solvers/cpsat/time.py): the
token dispatch and combine that crosses the NICs, and the expert gradients' reduction
over the expert data-parallel group.

Both are the float model's (models/step.py ``ep_nic_mb_s`` and ``expert_reduce_s``,
from models/expert.py's coefficients) in integer time units, usage rounded up and
savings down as the rest of the time (solvers/cpsat/time.py). A dense question (every
shape's coefficients without expert terms) adds nothing to the model.

- Dispatch and combine per micro-batch: ``max(up, ceil(bits / node_bw)) +
  ceil(extra_bits / node_bw)`` with the in-domain part ``up`` and the bits the shape's
  all-to-alls send over the NICs (at 1 Gbit/s per server, as the pipeline sends); it
  joins the stage time (each micro-batch, and the bubble's (p-1)/v stage times).
  Ring attention across servers (a dense model's CP beyond the scale-up domain) adds the
  same way: ``max(ceil(cp_bits / node_bw) - floor(window), 0)`` (models.step.cp_nic_mb_s).
- Expert gradients: the hierarchical ring of models.step.group_reduce_s over
  g_e = d cp num / den ranks (num / den = TP / (EP ETP)), k_e of them per scale-up
  domain: inside one domain 2B/bw_up - 2B den / (bw_up num cp d); across domains
  2B (k_e-1)/(k_e bw_up) + ceil((bits(2B/k_e) - bits(2B den / (num cp)) / d) / node_bw).
"""

from __future__ import annotations

from dataclasses import dataclass

from models.step import nic_stage_mb_s
from solvers.cpsat.context import BuildContext, IntVar
from solvers.intmath import ceil_div, down, floor_div, hi, pick, product, times


@dataclass
class EpTime:
    """The NIC-dependent dispatch time of one micro-batch (``per_mb``) and its bubble share,
    ceil(per_mb (p-1) / v), in time units."""

    per_mb: IntVar
    bubble: IntVar


def has_ep_nic_time(ctx: BuildContext) -> bool:
    """Whether some shape's stage time depends on the NICs (expert dispatch or ring
    attention that leaves the scale-up domain: models.step.nic_stage_mb_s)."""
    return any(c.ep_crosses_nics or c.cp_crosses_nics for c in ctx.cf)


def has_expert_reduce(ctx: BuildContext) -> bool:
    return any(c.expert_dp_bytes > 0 for c in ctx.cf)


def _least_node_gbit(ctx: BuildContext) -> int:
    """The least scale-out Gbit/s a server of the question can have (one of its slowest
    NICs): node_bw is at least this."""
    return max(1, min(down(nc.speed_gbit_per_s) for nc in ctx.nics))


def worst_ep_s(ctx: BuildContext, c) -> float:
    """The NIC-dependent dispatch time of one micro-batch at the least NIC bandwidth (the
    time unit's scale)."""
    if not (c.ep_crosses_nics or c.cp_crosses_nics):
        return 0.0
    share = _least_node_gbit(ctx) / 8.0 * 1e9 / c.gpus_per_node * c.network_efficiency
    return float(nic_stage_mb_s(c, share))


def ring_nic_time(ctx: BuildContext, u) -> IntVar | None:
    """Ring attention's bits over the NICs per micro-batch in time units at the chosen
    bandwidth, ceil(cp_bits / node_bw); None when no shape's ring leaves the scale-up
    domain."""
    if not any(c.cp_crosses_nics for c in ctx.cf):
        return None
    least = _least_node_gbit(ctx)
    bits = ctx.bounded("cp_ring_bits", (u.bits(c, c.cp_nic_bytes) for c in ctx.cf))
    return ceil_div(ctx.md, "cp_ring_nic_time", bits, -(-hi(bits) // least), ctx.node_bw)


def ring_hidden_time(ctx: BuildContext, u, ring: IntVar | None) -> IntVar | None:
    """What the ring's hops take of a micro-batch's compute, min(ring time, window) with
    both rounded up (models.step.cp_ring_hidden_s): the step's reduction window is shorter
    by it, so rounding it up keeps CP-SAT's step at or above the float model's."""
    if ring is None:
        return None
    window = ctx.bounded("cp_ring_window_up", (u.t(c.cp_window_s) for c in ctx.cf))
    hidden = ctx.md.new_int_var(0, min(hi(ring), hi(window)), "cp_ring_hidden")
    ctx.md.add_min_equality(hidden, [ring, window])
    return hidden


def add_ep_time(ctx: BuildContext, u, ring_nic: IntVar | None = None) -> EpTime | None:
    """The chosen shape's NIC-dependent dispatch per micro-batch and its bubble share; None
    when no shape's EP group leaves the scale-up domain. ``ring_nic``: ring_nic_time."""
    if not has_ep_nic_time(ctx):
        return None
    md, cf, least = ctx.md, ctx.cf, _least_node_gbit(ctx)
    up_t = ctx.bounded("ep_time_in_domain", (u.t(c.ep_up_mb_s) for c in cf))
    bits = ctx.bounded("ep_bits", (u.bits(c, c.ep_nic_bytes) for c in cf))
    extra = ctx.bounded("ep_extra_bits", (u.bits(c, c.ep_nic_extra_bytes) for c in cf))
    nic = ceil_div(md, "ep_nic_time", bits, -(-hi(bits) // least), ctx.node_bw)
    nic_extra = ceil_div(md, "ep_extra_nic_time", extra, -(-hi(extra) // least), ctx.node_bw)
    most = md.new_int_var(0, max(hi(up_t), hi(nic)), "ep_time_max")
    md.add_max_equality(most, [up_t, nic])
    ring = _ring_exposed_time(ctx, u, ring_nic)
    ring_hi = 0 if isinstance(ring, int) else hi(ring)
    per_mb = md.new_int_var(0, hi(most) + hi(nic_extra) + ring_hi, "ep_time_per_microbatch")
    md.add(per_mb == most + nic_extra + ring)
    stages_less_one = ctx.bounded("pp_less_one", (s.pp - 1 for s in ctx.shapes))
    chunks = md.new_int_var(1, max(s.vp for s in ctx.shapes), "virtual_stages")
    md.add(chunks == ctx.sel(s.vp for s in ctx.shapes))
    num = product(md, "ep_bubble_numerator", per_mb, stages_less_one)
    bubble = ceil_div(md, "ep_bubble_time", num, hi(num), chunks)
    return EpTime(per_mb, bubble)


def _ring_exposed_time(ctx: BuildContext, u, nic: IntVar | None) -> IntVar | int:
    """Ring attention's exposed time over the NICs per micro-batch (module docstring): the
    bits rounded up (``nic``: ring_nic_time), the attention window that hides them rounded
    down; 0 when no ring crosses the NICs."""
    if nic is None:
        return 0
    md, cf = ctx.md, ctx.cf
    window = ctx.bounded("cp_ring_window", (u.t_down(c.cp_window_s) for c in cf))
    ring = md.new_int_var(0, hi(nic), "cp_ring_exposed")
    md.add_max_equality(ring, [nic - window, 0])
    return ring


def gpu_time_ep(ctx: BuildContext, ep: EpTime, rep: IntVar, scale: int) -> IntVar:
    """replica x dispatch per micro-batch / b in the GPU-time's ``scale`` (rounded up)."""
    md = ctx.md
    rep_ep = times(md, "replica_x_ep_time", rep, ep.per_mb)
    return ceil_div(md, "gpu_time_ep", scale * rep_ep, scale * hi(rep_ep), ctx.b_sel)


def add_expert_reduction(ctx: BuildContext, u) -> IntVar | None:
    """The chosen shape's expert-gradient reduction over expert-DP (module docstring); None
    for a question without expert parameters."""
    if not has_expert_reduce(ctx):
        return None
    md, cf, dp = ctx.md, ctx.cf, ctx.dp
    up_bw = [c.expert_scale_up_bw_gb_per_s * 1e9 for c in cf]
    k_of = [c.expert_ranks_per_node for c in cf]
    # 1 / g_e = den / (num cp d): the savings' numerators
    inv = [c.expert_dp_den / (c.expert_dp_num * c.cp) for c in cf]
    full = ctx.bounded(
        "expert_dp_intra_full",
        (u.t(2 * c.expert_dp_bytes / b) for c, b in zip(cf, up_bw, strict=True)),
    )
    save_cap = ctx.bounded(
        "expert_dp_intra_saving_cap",
        (u.t_down(2 * c.expert_dp_bytes / b * f) for c, b, f in zip(cf, up_bw, inv, strict=True)),
    )
    save = floor_div(md, "expert_dp_intra_saving", save_cap, dp)
    part = ctx.bounded(
        "expert_dp_intra_part",
        (
            u.t(2 * c.expert_dp_bytes * (k - 1) / k / b)
            for c, k, b in zip(cf, k_of, up_bw, strict=True)
        ),
    )
    bits = ctx.bounded(
        "expert_dp_bits",
        (u.bits(c, 2 * c.expert_dp_bytes / k) for c, k in zip(cf, k_of, strict=True)),
    )
    bits_cap = ctx.bounded(
        "expert_dp_bits_saving_cap",
        (u.bits_down(c, 2 * c.expert_dp_bytes * f) for c, f in zip(cf, inv, strict=True)),
    )
    bits_save = floor_div(md, "expert_dp_bits_saving", bits_cap, dp)
    nic = ceil_div(
        md, "expert_dp_nic_time", bits - bits_save, hi(bits), ctx.node_bw, low=-hi(bits_cap)
    )
    inside = md.new_bool_var("expert_dp_group_in_one_domain")
    # g_e < k_e  <=>  d < k_e den / (num cp)
    thresholds = [
        -(-k * c.expert_dp_den // (c.expert_dp_num * c.cp)) for c, k in zip(cf, k_of, strict=True)
    ]
    md.add(dp <= ctx.sel(thresholds) - 1).only_enforce_if(inside)
    md.add(dp >= ctx.sel(thresholds)).only_enforce_if(~inside)
    bound = hi(full) + hi(part) + hi(nic) + hi(save_cap) + hi(bits_cap)
    return pick(md, "expert_dp_time", bound, full - save, part + nic, inside)
