"""The time part of the CP-SAT model: the integer time unit, the step's terms and the
time per trained sequence T' (and the GPU-time per sequence G x T' the cost objectives
charge).

Times are integers in ``unit_s`` seconds, chosen so that the largest step fits in
~1e12 units, rounded up (usage) and down (capacities, savings), so a plan CP-SAT
admits passes the float model (models/step.py step_from_coefficients is the float
form of the same step)."""

from __future__ import annotations

from models.evaluate import days_from_seconds
from solvers.cpsat.context import BuildContext, GpuTime, IntVar
from solvers.cpsat.expert import (
    EpTime,
    add_ep_time,
    add_expert_reduction,
    gpu_time_ep,
    ring_hidden_time,
    ring_nic_time,
    worst_ep_s,
)
from solvers.intmath import INT_LIMIT, ceil_div, down, floor_div, hi, pick, product, up


def time_unit(ctx: BuildContext) -> float:
    """Seconds per time unit: the largest step in ~1e12 units (coarser on overflow)."""
    worst_step = max(
        ctx.m_max * (c.stage_mb_s + 2 * c.vp * (c.pp_send_intra_s + c.pp_latency_s))
        + c.bubble_s
        + 2 * c.pp * (c.pp_send_intra_s + c.pp_latency_s)
        + 2 * c.dp_bytes / (c.scale_up_bw_gb_per_s * 1e9)
        + c.optimizer_s
        + (ctx.m_max + c.pp) * worst_ep_s(ctx, c)
        for c in ctx.cf
    )
    return max(1e-9, worst_step / 1e12) * ctx.coarsen


class _Units:
    """Seconds and bytes on the NICs to time units, rounded up or down."""

    def __init__(self, unit_s: float) -> None:
        self.unit_s = unit_s

    def t(self, seconds: float) -> int:
        return up(seconds / self.unit_s)

    def t_down(self, seconds: float) -> int:
        return down(seconds / self.unit_s)

    # bits on the NICs are converted with 8 * GPUs per server / efficiency: time units at
    # 1 Gbit/s per server of a GPU's share (models/comm.py nic_share), rounded once
    def bits(self, c, nbytes: float) -> int:
        return up(8.0 * c.gpus_per_node / c.network_efficiency * nbytes / (self.unit_s * 1e9))

    def bits_down(self, c, nbytes: float) -> int:
        return down(8.0 * c.gpus_per_node / c.network_efficiency * nbytes / (self.unit_s * 1e9))


def add_time(ctx: BuildContext) -> None:
    """T' = K step / (b m d) in parts, the deadline's days per unit and G x T' (ideal: the
    model then inflates both by the batch's tokens, solvers/cpsat/batch_tokens.py, and makes
    them expected with failures, solvers/cpsat/goodput.py). Reads ``goodput_room``, which
    the model sets first (the headroom both of those need)."""
    ctx.unit_s = time_unit(ctx)
    u = _Units(ctx.unit_s)
    cf = ctx.cf
    pp1 = [c.pp > 1 for c in cf]
    a_in_v = [u.t(c.stage_mb_s + 2 * c.vp * c.pp_send_intra_s) for c in cf]
    a_net_v = [u.t(c.stage_mb_s + 2 * c.vp * c.pp_latency_s) for c in cf]
    a_in = ctx.bounded("stage_time_one_server", a_in_v)
    a_net = ctx.bounded("stage_time_servers", a_net_v)
    c_in = ctx.bounded(
        "fixed_time_one_server", (u.t(c.bubble_s + 2 * (c.pp - 1) * c.pp_send_intra_s) for c in cf)
    )
    c_net = ctx.bounded(
        "fixed_time_servers", (u.t(c.bubble_s + 2 * (c.pp - 1) * c.pp_latency_s) for c in cf)
    )
    pb_m_v = [
        u.bits(c, 2 * c.vp * c.pp_send_bytes) if p else 0 for c, p in zip(cf, pp1, strict=True)
    ]
    pb_m = ctx.bounded("pp_bits_per_microbatch", pb_m_v)
    pb_c = ctx.bounded(
        "pp_bits_fixed",
        (
            u.bits(c, 2 * (c.pp - 1) * c.pp_send_bytes) if p else 0
            for c, p in zip(cf, pp1, strict=True)
        ),
    )
    # pipeline sends over the NICs, the part not proportional to m: ceil(bits / node Gbit/s)
    nt_pp_c_raw = ceil_div(ctx.md, "pp_nic_time_fixed_if_servers", pb_c, hi(pb_c), ctx.node_bw)
    ring_nic = ring_nic_time(ctx, u)  # ring attention over the NICs (None: none crosses)
    dp_exposed = _gradient_reduction(ctx, u, ring_hidden_time(ctx, u, ring_nic))
    # optimizer step on the ZeRO-1 shard: ceil(optimizer / (cp d))
    opt_cap = ctx.bounded("optimizer_unsharded", (u.t(c.optimizer_s / c.cp) for c in cf))
    opt = ceil_div(ctx.md, "optimizer_time", opt_cap, hi(opt_cap), ctx.dp)
    md, r_pp = ctx.md, ctx.r_pp
    a_sel = pick(md, "stage_time", max(hi(a_in), hi(a_net)), a_in, a_net, r_pp)
    ep = add_ep_time(ctx, u, ring_nic)  # MoE dispatch, ring attention over the NICs
    ep_bubble = 0 if ep is None else ep.bubble
    if ep is not None:
        a_ep = md.new_int_var(0, hi(a_sel) + hi(ep.per_mb), "stage_time_with_ep")
        md.add(a_ep == a_sel + ep.per_mb)
        a_sel = a_ep
    bd = product(md, "micro_x_dp", ctx.b_sel, ctx.dp)
    rest = md.new_int_var(
        0,
        max(hi(c_in), hi(c_net) + hi(nt_pp_c_raw))
        + hi(dp_exposed)
        + hi(opt)
        + (0 if ep is None else hi(ep.bubble)),
        "step_fixed_time",
    )
    md.add(rest == c_in + dp_exposed + opt + ep_bubble).only_enforce_if(r_pp)
    md.add(rest == c_net + nt_pp_c_raw + dp_exposed + opt + ep_bubble).only_enforce_if(~r_pp)
    numer_hi = max(hi(a_sel), hi(a_net), hi(pb_m), hi(rest), 1)
    _per_sequence(ctx, a_sel, bd, pb_m, rest, numer_hi)
    ctx.gpu_time = _gpu_time_per_sequence(ctx, (a_in_v, a_net_v, pb_m_v), rest, numer_hi, ep)


def _gradient_reduction(ctx: BuildContext, u: _Units, ring_hidden: IntVar | None) -> IntVar:
    """The exposed gradient reduction: inside one server, or over the NICs, less the overlap
    window, which is shorter by what ring attention's NIC hops take of it (``ring_hidden``:
    solvers.cpsat.expert.ring_hidden_time; models.step.cp_ring_hidden_s)."""
    cf, md, dp = ctx.cf, ctx.md, ctx.dp
    up_bw = [c.scale_up_bw_gb_per_s * 1e9 for c in cf]
    dpi_r = ctx.bounded(
        "dp_intra_full", (u.t(2 * c.dp_bytes / b) for c, b in zip(cf, up_bw, strict=True))
    )
    li_cap = ctx.bounded(
        "dp_intra_saving_cap",
        (u.t_down(2 * c.dp_bytes / b / c.cp) for c, b in zip(cf, up_bw, strict=True)),
    )
    li = floor_div(md, "dp_intra_saving", li_cap, dp)
    k_of = [c.dp_ranks_per_node for c in cf]
    dpi_n = ctx.bounded(
        "dp_intra_part",
        (u.t(2 * c.dp_bytes * (k - 1) / k / b) for c, k, b in zip(cf, k_of, up_bw, strict=True)),
    )
    dnb = ctx.bounded(
        "dp_bits", (u.bits(c, 2 * c.dp_bytes / k) for c, k in zip(cf, k_of, strict=True))
    )
    ln_cap = ctx.bounded("dp_bits_saving_cap", (u.bits_down(c, 2 * c.dp_bytes / c.cp) for c in cf))
    ln = floor_div(md, "dp_bits_saving", ln_cap, dp)
    nt_dp_raw = ceil_div(
        md, "dp_nic_time_if_servers", dnb - ln, hi(dnb), ctx.node_bw, low=-hi(ln_cap)
    )
    dp_overlap = ctx.scenario.assumptions.dp_overlap
    overlap = ctx.bounded(  # less what an in-domain ring takes of it (cp_ring_hidden_s)
        "dp_overlap", (u.t_down(max(0.0, c.dp_window_s(dp_overlap) - c.cp_hidden_s)) for c in cf)
    )
    if ring_hidden is not None:
        shared = md.new_int_var(0, hi(overlap), "dp_overlap_less_ring")
        md.add_max_equality(shared, [overlap - ring_hidden, 0])
        overlap = shared
    dp_hi_t = hi(dpi_r) + hi(dpi_n) + hi(nt_dp_raw) + hi(ln_cap) + hi(li_cap)
    # the reduction less its overlap window is negative when the window is the longer (a
    # small model's reduction behind a long backward): its domain reaches down to minus the
    # window and the savings, or a plan whose reduction hides with room to spare would be
    # cut off (a 2-layer model's every plan was, which the exhaustive solver found)
    dp_pre = pick(
        md,
        "dp_time_less_overlap",
        dp_hi_t + hi(overlap),
        dpi_r - li - overlap,
        dpi_n + nt_dp_raw - overlap,
        ctx.r_dp,
    )
    expert = add_expert_reduction(ctx, u)  # MoE: expert gradients over expert-DP
    if expert is not None:
        dp_hi_t += hi(expert)
        dp_pre = dp_pre + expert
    dp_exposed = md.new_int_var(0, dp_hi_t, "dp_exposed")
    md.add_max_equality(dp_exposed, [dp_pre, 0])
    return dp_exposed


def _per_sequence(
    ctx: BuildContext, a_sel: IntVar, bd: IntVar, pb_m: IntVar, rest: IntVar, numer_hi: int
) -> None:
    """Time per trained sequence, T' = K step / (b m d), split so that the 1/d and 1/(m d)
    parts are explicit (tight bounds once the shape is chosen):
      K A / (b d)                 A = per-micro-batch stage time (+ intra-server sends)
    + K bits / (node_bw b d)      per-micro-batch sends over the NICs (across servers)
    + K (C + fixed sends + DP + optimizer) / (b m d)"""
    md, r_pp = ctx.md, ctx.r_pp
    k_scale = min(10**6, (INT_LIMIT // 4) // (numer_hi * ctx.goodput_room))
    if k_scale < 1:
        raise OverflowError("time per sequence")
    q_stage = ceil_div(md, "time_per_sequence_stage", k_scale * a_sel, k_scale * hi(a_sel), bd)
    bw_bd = product(md, "node_bw_x_micro_x_dp", ctx.node_bw, bd)
    q_sends_raw = ceil_div(
        md, "time_per_sequence_sends_if_servers", k_scale * pb_m, k_scale * hi(pb_m), bw_bd
    )
    q_sends = pick(md, "time_per_sequence_sends", hi(q_sends_raw), 0, q_sends_raw, r_pp)
    q_rest = ceil_div(
        md, "time_per_sequence_fixed", k_scale * rest, k_scale * hi(rest), ctx.global_batch
    )
    per_seq = md.new_int_var(0, hi(q_stage) + hi(q_sends) + hi(q_rest), "time_per_sequence")
    md.add(per_seq == q_stage + q_sends + q_rest)
    ctx.k_scale, ctx.per_seq = k_scale, per_seq
    ctx.days_per_unit = days_from_seconds(ctx.unit_s / k_scale * ctx.prepared.sequences)


def _gpu_time_per_sequence(
    ctx: BuildContext,
    per_shape: tuple[list[int], list[int], list[int]],
    rest: IntVar,
    numer_hi: int,
    ep: EpTime | None = None,
) -> GpuTime:
    """G x T' = replica x (A / b + sends / (node_bw b) + rest / (b m)): the time per
    sequence times the GPUs, from factors that are (nearly) fixed once the shape is.

    The cost objectives charge GPU-time at a per-GPU rate; G x T' as the product of
    two variables would propagate only the product of their extreme bounds (d at its
    lowest times T' at the largest d), so that a proof visits every DP degree. Written
    this way, d appears only in ``rest`` (the bubble, gradient reduction and optimizer:
    small) and in m."""
    md, shapes, r_pp = ctx.md, ctx.shapes, ctx.r_pp
    a_in_v, a_net_v, pb_m_v = per_shape
    reps = [s.replica_gpus for s in shapes]
    rep_hi = max(reps)
    scale = max(
        1, min(10**6, (INT_LIMIT // 4) // (max(1, numer_hi) * rep_hi * 4 * ctx.goodput_room))
    )

    def per_shape_var(name: str, values: list[int]) -> IntVar:
        vals = [
            -(-scale * r * v // s.micro_batch) for r, v, s in zip(reps, values, shapes, strict=True)
        ]
        var = md.new_int_var(min(vals), max(vals), name)
        md.add(var == ctx.sel(vals))
        return var

    st_in = per_shape_var("gpu_time_stage_one_server", a_in_v)
    st_net = per_shape_var("gpu_time_stage_servers", a_net_v)
    st_hi = max(hi(st_in), hi(st_net))
    stage = md.new_int_var(0, st_hi, "gpu_time_stage")
    md.add(stage == st_in).only_enforce_if(r_pp)
    md.add(stage == st_net).only_enforce_if(~r_pp)
    bits = per_shape_var("gpu_bits_per_sequence", pb_m_v)
    sends_raw = ceil_div(md, "gpu_time_sends_if_servers", bits, hi(bits), ctx.node_bw)
    sends = md.new_int_var(0, hi(bits), "gpu_time_sends")
    md.add(sends == 0).only_enforce_if(r_pp)
    md.add(sends == sends_raw).only_enforce_if(~r_pp)
    rep = md.new_int_var(min(reps), rep_hi, "gpu_time_replica")
    md.add(rep == ctx.sel(reps))
    rep_rest = md.new_int_var(0, rep_hi * hi(rest), "replica_x_fixed_time")
    md.add_multiplication_equality(rep_rest, [rep, rest])
    bm = md.new_int_var(1, hi(ctx.b_sel) * hi(ctx.m), "micro_batch_x_microbatches")
    md.add_multiplication_equality(bm, [ctx.b_sel, ctx.m])
    fixed = ceil_div(md, "gpu_time_fixed", scale * rep_rest, scale * hi(rep_rest), bm)
    ep_gpu: int | IntVar = 0
    ep_hi = 0
    if ep is not None:
        ep_var = gpu_time_ep(ctx, ep, rep, scale)
        ep_gpu, ep_hi = ep_var, hi(ep_var)
    total = md.new_int_var(0, st_hi + hi(sends) + hi(fixed) + ep_hi, "gpu_time_per_sequence")
    md.add(total == stage + sends + fixed + ep_gpu)
    lo_all = min(
        -(-scale * r * min(a, b) // s.micro_batch)
        for r, a, b, s in zip(reps, a_in_v, a_net_v, shapes, strict=True)
    )
    return GpuTime(total, scale, max(1, lo_all))
