"""Feasibility checks of a layout, each returning a named violation.

The names are the constraint families of ../shared/CLI-CONTRACT.md; the CP-SAT
model encodes the same families, reading the same numbers from this module.
"""

from __future__ import annotations

from dataclasses import dataclass

from catalog.specs import GPUSpec
from models.layout import Assumptions, Layout
from models.memory import MemoryBreakdown
from models.pipeline import microbatch_group_violation, split_violation
from models.scaleup import model_tp_rule
from models.transformer import TransformerSpec

TOL = 1e-9


@dataclass(frozen=True)
class Violation:
    constraint: str
    detail: str
    option: str = ""  # the command-line option that sets what is violated, where one does

    def as_dict(self) -> dict[str, str]:
        return {"constraint": self.constraint, "detail": self.detail}


def divisibility_violations(spec: TransformerSpec, layout: Layout, seq_len: int) -> list[Violation]:
    """Megatron-LM's shape rules: TP divides heads and KV heads, the layers split over the
    pipeline as Megatron-LM allows (p*v divides them, or one of its uneven splits:
    models.pipeline.split_violation), micro x DP divides the global batch, 2*CP divides
    the sequence (load-balanced CP), and with sequence parallelism TP divides each CP
    rank's sequence (seq / CP): Megatron-Core scatters it over the TP group and asserts the
    split is exact (megatron/core/tensor_parallel/mappings.py lines 67-70,
    _split_along_first_dim, at NVIDIA/Megatron-LM 000c4ac24f61); with interleaving, the
    micro-batches per step in groups of the layout's micro-batch group size
    (models.pipeline.microbatch_group_violation; by default m a multiple of pp).
    Each violation names the layout option to change (the CLI's usage errors)."""
    out = []
    if spec.heads % layout.tp:
        out.append(
            Violation(
                "divisibility",
                f"tp {layout.tp} does not divide the model's {spec.heads} heads; use a divisor of {spec.heads}",
                "--tp",
            )
        )
    if spec.kv % layout.tp:
        out.append(
            Violation(
                "divisibility",
                f"tp {layout.tp} does not divide the model's {spec.kv} KV heads; use a divisor of {spec.kv}",
                "--tp",
            )
        )
    if layout.vp == 1 or layout.pp > 1:  # vp without pp is its own rule below
        broken = split_violation(spec.layers, layout)
        if broken is not None:
            out.append(Violation("divisibility", broken[1], broken[0]))
    if layout.global_batch % (layout.micro_batch * layout.dp):
        out.append(
            Violation(
                "divisibility",
                f"global batch {layout.global_batch} is not a multiple of micro-batch x dp = "
                f"{layout.micro_batch * layout.dp}",
                "--global-batch",
            )
        )
    if layout.cp > 1 and seq_len % (2 * layout.cp):
        out.append(
            Violation(
                "divisibility",
                f"2 x cp = {2 * layout.cp} must divide the sequence length {seq_len}",
                "--cp",
            )
        )
    if layout.sp and seq_len % (layout.tp * layout.cp) and not seq_len % layout.cp:
        per_rank = seq_len // layout.cp
        out.append(
            Violation(
                "divisibility",
                f"sequence parallelism splits each CP rank's {per_rank:,} tokens (seq "
                f"{seq_len:,} / cp {layout.cp}) over tp {layout.tp}, which must divide them; "
                f"use a sequence length that is a multiple of tp x cp = "
                f"{layout.tp * layout.cp}, or --no-sequence-parallel",
                "--seq-len",
            )
        )
    if layout.vp > 1 and layout.pp == 1:
        out.append(Violation("divisibility", "interleaving (vp > 1) needs pp > 1", "--vp"))
    m = layout.grad_accum
    group = layout.microbatch_group_size
    broken = (
        microbatch_group_violation(layout.pp, layout.vp, int(m), group) if m == int(m) else None
    )
    if broken is not None:
        out.append(Violation("divisibility", broken[1], broken[0]))
    return out


def tp_domain_gpus(tp: int, cp: int, cp_across_servers: bool) -> int:
    """The GPUs tp_domain keeps inside one scale-up domain: TP x CP (the contract's rule),
    or TP alone when CP may cross servers (``cp_across_servers``: its ring over the NICs,
    models/step.py). One rule for evaluate and both solvers (solvers/families/tp_domain.py)."""
    return tp if cp_across_servers else tp * cp


def tp_domain_violation(layout: Layout, gpu: GPUSpec, cp_across_servers: bool) -> Violation | None:
    """tp_domain (tp_domain_gpus): TP beyond the domain, or TP x CP without
    ``cp_across_servers``."""
    domain = gpu.server.scale_up_domain_gpus
    if layout.tp > domain:
        return Violation(
            "tp_domain", f"tp {layout.tp} exceeds the scale-up domain of {domain} GPUs"
        )
    if tp_domain_gpus(layout.tp, layout.cp, cp_across_servers) > domain:
        return Violation(
            "tp_domain",
            f"tp x cp = {layout.tp * layout.cp} exceeds the scale-up domain of {domain} GPUs; "
            "--cp-across-servers lets CP leave it (ring attention over the NICs)",
            "--cp-across-servers",
        )
    return None


def check_layout(
    spec: TransformerSpec,
    layout: Layout,
    seq_len: int,
    gpu: GPUSpec,
    memory: MemoryBreakdown,
    nics_per_node: int,
    a: Assumptions,
) -> list[Violation]:
    """Every violated constraint family with the numbers behind it."""
    out = divisibility_violations(spec, layout, seq_len)
    if memory.total > memory.usable + TOL:
        kept = (
            f" ({memory.capacity:.1f} GB less {memory.headroom_fraction:.0%} headroom)"
            if memory.headroom_fraction
            else ""
        )
        out.append(
            Violation(
                "memory",
                f"needs {memory.total:.1f} GB per GPU, {gpu.name} has {memory.usable:.1f} GB{kept}",
            )
        )
    if layout.tp > 1:
        rule = model_tp_rule(spec, seq_len, gpu, layout.tp, layout.precision)
        if layout.tp > rule.limit + TOL:
            fp8 = f" x {rule.traffic:.3g} (FP8's all-gathers)" if rule.traffic != 1 else ""
            out.append(
                Violation(
                    "tp_bandwidth",
                    f"tp {layout.tp} exceeds 3h x bw / peak x w{' x f' if fp8 else ''} = 3 x "
                    f"{spec.hidden} x {rule.bw:g} GB/s / {rule.peak:g} TFLOP/s x {rule.work:.3f}"
                    f"{fp8} = {rule.limit:.2f} (seed E2's {rule.seed:.2f}; w: the attention "
                    f"core's work at {seq_len:,} tokens)",
                )
            )
    broken = tp_domain_violation(layout, gpu, a.cp_across_servers)
    if broken is not None:
        out.append(broken)
    if layout.pp > 1 and layout.grad_accum < layout.pp - TOL:
        out.append(
            Violation(
                "pipeline_fill",
                f"{layout.grad_accum:g} micro-batches per step is fewer than the {layout.pp} pipeline stages",
            )
        )
    batch_tokens = layout.global_batch * seq_len
    if a.batch_ceiling_tokens is not None and batch_tokens > a.batch_ceiling_tokens + TOL:
        out.append(
            Violation(
                "batch_ceiling",
                f"global batch {batch_tokens:,.0f} tokens exceeds the ceiling {a.batch_ceiling_tokens:,.0f}",
            )
        )
    if a.batch_floor_tokens is not None and batch_tokens < a.batch_floor_tokens - TOL:
        out.append(
            Violation(
                "batch_floor",
                f"global batch {batch_tokens:,.0f} tokens is below the floor {a.batch_floor_tokens:,.0f}",
            )
        )
    if nics_per_node > gpu.server.nic_slots:
        out.append(
            Violation(
                "nic_slots",
                f"{nics_per_node} NICs per server exceed the {gpu.server.nic_slots} slots",
            )
        )
    elif nics_per_node not in gpu.server.allowed_nic_counts():
        shipped = ", ".join(str(c) for c in gpu.server.allowed_nic_counts())
        out.append(
            Violation(
                "nic_slots",
                f"{gpu.name} servers ship with {shipped} scale-out NICs, not {nics_per_node}",
            )
        )
    return out
