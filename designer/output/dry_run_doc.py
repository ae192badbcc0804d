"""`designer evaluate`'s text: the run, its memory and step-time tables, throughput, the
cluster, the evidence and, with --tokens, time and cost."""

from __future__ import annotations

from typing import Any

from designer.output import formats as report
from designer.output import text as render
from models.pipeline import describe_stage_layers, split_options
from models.rental import rental_words

MEMORY_PARTS = (
    "weights",
    "gradients",
    "optimizer",
    "activations",
    "other",
    "total",
    "usable",
    "capacity",
)
STEP_PARTS = ("compute", "bubble", "tp_comm", "cp_comm", "pp_comm", "dp_comm", "optimizer", "total")
MOE_STEP_PARTS = (*STEP_PARTS[:-2], "ep_comm", *STEP_PARTS[-2:])  # a MoE model's table


def imported_text(run) -> str:
    """What --from-megatron read from the command, and the defaults it assumed."""
    s = run.spec
    lines = [
        f"from Megatron-LM: {run.world_size:,} GPUs ({run.nnodes} x {run.nproc_per_node}); model "
        f"{s.layers} layers, hidden {s.hidden}, {s.heads} heads, "
        f"{s.kv} KV heads, ffn {s.ffn}, vocab {s.vocab:,}"
    ]
    lines += [f"  note: {n}" for n in run.notes]
    return "\n".join(lines)


def _head(ev, evidence: dict[str, Any]) -> list[str]:
    lay = ev.layout
    accum = lay.grad_accum  # whole unless the global batch breaks divisibility
    per_step = (
        render.count(accum, "micro-batch", "micro-batches")
        if float(accum).is_integer()
        else f"{accum:g} micro-batches"
    )
    lines = [
        f"{ev.model} on {lay.num_gpus:,} x {report.gpu_label(ev.gpu, evidence)} "
        f"({render.count(ev.nodes, 'server')}, {ev.nics_per_node} x {ev.nic} each)",
        f"layout: tp {lay.tp}, pp {lay.pp}, dp {lay.dp}, cp {lay.cp}, vp {lay.vp}"
        + (
            f" (micro-batch groups of {lay.microbatch_group})"
            if lay.custom_microbatch_group
            else ""
        )
        + (f", ep {ev.ep}, etp {ev.etp}" if ev.moe else "")
        + "; "
        f"micro-batch {lay.micro_batch}, global batch {lay.global_batch:,} "
        f"({per_step}/step), seq {ev.seq_len:,}; recompute "
        f"{lay.recompute}, SP {'on' if lay.sp else 'off'}, ZeRO {lay.zero}, {lay.precision}",
    ]
    if lay.uneven:
        opts = split_options(lay)
        lines.append(
            f"pipeline: {describe_stage_layers(ev.stage_layers)}" + (f" ({opts})" if opts else "")
        )
    if ev.moe:
        lines.append("moe: " + ", ".join(ev.moe_plan))
    lines.append(f"feasible: {'yes' if ev.feasible else 'NO'}")
    lines += [f"  violation {v.constraint}: {v.detail}" for v in ev.violations]
    return lines


def _outcome(ev, evidence: dict[str, Any]) -> list[str]:
    step = evidence["step_time_s_range"]
    lines = [
        f"throughput: {ev.tokens_per_s:,.0f} tokens/s, {ev.model_tflops_per_gpu:.0f} model "
        f"TFLOP/s per GPU, MFU {100 * ev.mfu:.1f}%",
        report.cluster_line(ev),
        f"evidence ({evidence['stack']} profile): {evidence['line']}; step time "
        f"{float(ev.step_time_s):.2f} s (measured range {report.span(step)} s)",
    ]
    days = ev.time_to_train_days
    if days is None:
        lines.append(
            f"capex {render.usd(ev.capex)} (pass --tokens for time to train and cloud cost)"
        )
        return lines
    rng = evidence["days_range"]  # the value at the range's precision (render.number)
    shown = render.number(days, ".1f") + (f" ({report.span(rng)})" if rng else "")
    lines.append(
        f"time to train: {shown} days; capex {render.usd(ev.capex)}, cloud "
        f"{render.usd(ev.cloud_cost)}, tco {render.usd(ev.tco_cost)} (energy "
        f"{render.usd(ev.energy_cost)})"
    )
    rented = ev.rented()  # the one cloud price (models/rental.py), the term optimize bills
    if rented is not None and ev.rented_days is not None:
        lines.append(rental_line(rented, ev.gpu, float(ev.rented_days)))
    gp = report.goodput_sentence(ev)
    if gp:
        lines.append(gp)
    return lines


def rental_line(rented, gpu: str, days: float) -> str:
    """How evaluate's cloud cost is billed: the cheapest term for the plan's days, its rate
    and the days it pays (models/rental.py), as optimize --pricing cloud bills it."""
    own = " (the block's own price)" if rented.block_price else ""
    return (
        f"cloud, as optimize --pricing cloud bills it: rented {rented.term} at "
        f"${rented.usd_per_gpu_hour:,.3f} per {gpu} GPU-hour{own}, {rental_words(rented, days)}"
    )


def evaluation_text(ev, evidence: dict[str, Any]) -> str:
    """evaluate's report, with the evidence line (models.evidence_range.evaluation_evidence) and
    the measured ranges of step time and time to train."""
    m, b = ev.memory, ev.breakdown
    memory = render.table(
        ["memory per GPU (GB)", *MEMORY_PARTS],
        [("most loaded stage", *(getattr(m, k) for k in MEMORY_PARTS))],
    )
    parts = MOE_STEP_PARTS if ev.moe else STEP_PARTS
    if ev.cp_ring:  # ring attention across servers: its NIC time is a term of its own
        parts = (*parts[:4], "cp_nic_comm", *parts[4:])
    step = render.table(["step time (s)", *parts], [("exposed", *(getattr(b, k) for k in parts))])
    ring = [_cp_ring_line(ev)] if ev.cp_ring else []
    return "\n".join(
        [*_head(ev, evidence), "", memory, "", step, *ring, "", *_outcome(ev, evidence)]
    )


def _cp_ring_line(ev) -> str:
    """Ring attention's traffic over the NICs (models.step.cp_ring_on_nics), per step."""
    r, lay = ev.cp_ring, ev.layout
    return (
        f"ring attention over the NICs: CP {lay.cp} spans servers; {r['nic_gb_per_gpu']:,.1f} GB "
        f"per GPU a step, {r['nic_s']:.2f} s at its NIC share, hidden behind "
        f"{r['hidden_behind_s']:.2f} s of attention; exposed {r['exposed_s']:.2f} s"
    )


def evaluate_text(answer) -> str:
    """The whole text: the imported command (with --from-megatron), then the evaluation."""
    text = "".join(f"note: {n}\n" for n in answer.notes) + evaluation_text(
        answer.ev, answer.evidence
    )
    if answer.imported is None:
        return text
    return imported_text(answer.imported) + "\n" + text
