"""`designer evaluate`: one given layout analysed, like a dry run of a training launch.

``evaluate_options`` takes evaluate's options (designer.options.EVALUATE_OPTIONS) and
returns the evaluation with its evidence; bad input is a UsageError naming the option.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from catalog import CatalogError
from designer.errors import UsageError
from designer.launch import load_megatron
from designer.launch.megatron_import import (
    DENSE_MLP_MODULE,
    LAYOUT_MODULE,
    MODULE_NAMES,
    dispatcher_priced,
    megatron_modules,
    unread_group_note,
)
from designer.launch.pipeline_layout import layout_fields
from designer.output import text as render
from designer.output.formats import _plain
from designer.question.build import check_window, stack_catalog
from models import Assumptions, Layout, resolve_model
from models.evaluate import Hardware, evaluate
from models.evidence_range import evaluation_evidence
from models.expert import (
    FP8_DISPATCH_BYTES,
    HOPPER_FUSED_ATTENTION_SPEEDUP,
    HOPPER_GPUS,
    ExpertLayout,
    a2a_overlap_violation,
    dualpipe_violation,
)
from models.feasibility import divisibility_violations
from models.goodput import failure_model
from models.layout import FP8_RECIPES, MX_RECIPES
from models.memory import MODULES
from models.pipeline import GROUP_OPTION
from solvers.limits import MAX_GPUS
from solvers.purchases import purchased

if TYPE_CHECKING:
    from designer.launch.megatron_import import ImportedRun
    from models.evaluate import Evaluation, Hardware
    from models.expert import ExpertLayout

# evaluate's options that --from-megatron replaces (parameter name -> option)
IMPORTED_LAYOUT_OPTIONS = {
    "model_name": "--model",
    "tp": "--tp",
    "pp": "--pp",
    "dp": "--dp",
    "cp": "--cp",
    "vp": "--vp",
    "microbatch_group_size": GROUP_OPTION,
    "first_stage_layers": "--first-stage-layers",
    "last_stage_layers": "--last-stage-layers",
    "embedding_in_split": "--embedding-in-split",
    "loss_in_split": "--loss-in-split",
    "pipeline_layout": "--pipeline-layout",
    "mtp_layers": "--mtp-layers",
    "micro_batch": "--micro-batch",
    "global_batch": "--global-batch",
    "seq_len": "--seq-len",
    "recompute": "--recompute",
    "sequence_parallel": "--sequence-parallel",
    "zero": "--zero",
    "precision": "--precision",
}
# the Layout's fields, named as evaluate's options name them
LAYOUT_FIELDS = tuple(
    k
    for k in IMPORTED_LAYOUT_OPTIONS
    if k not in ("model_name", "global_batch", "seq_len", "pipeline_layout", "mtp_layers")
)
SPLIT_OPTIONS = ("vp", "first_stage_layers", "last_stage_layers", "embedding_in_split",
                 "loss_in_split")  # fmt: skip


@dataclass(frozen=True)
class EvaluateAnswer:
    ev: Evaluation
    evidence: dict[str, Any]  # models.evidence_range.evaluation_evidence, plain numbers
    imported: ImportedRun | None  # the Megatron-LM command the layout came from
    notes: tuple[str, ...] = ()  # how evaluate read Megatron-LM's names among its options

    def as_dict(self) -> dict[str, Any]:
        """evaluate --json: the evaluation, its evidence, the notes and the imported command."""
        doc = self.ev.as_dict()
        doc["evidence"] = self.evidence
        doc["notes"] = list(self.notes)
        if self.imported is not None:
            doc["from_megatron"] = self.imported.as_dict()
        return doc


def default_global_batch(micro_batch: int, dp: int, pp: int) -> int:
    """--global-batch when not given: one micro-batch per pipeline stage per replica."""
    return micro_batch * dp * pp


def given_precision(precision: str, gpu: str, notes: list[str]) -> str:
    """--precision as the Layout prices it: an FP8 recipe (``FP8_RECIPES``) as fp8, as
    --from-megatron prices any --fp8-format command, noted; a Hopper GPU, which has no MXFP8
    tensor cores, refuses the block-scaled ones."""
    if precision not in FP8_RECIPES:
        return precision
    if precision in MX_RECIPES and gpu in HOPPER_GPUS:
        raise UsageError(f"{gpu} has no MXFP8 tensor cores (Blackwell's); use fp8", "--precision")
    notes.append(
        f"--precision {precision} ({FP8_RECIPES[precision]}): priced as fp8 (the FP8 "
        "tensor-core rate and bytes; the recipe's scaling is not modelled)"
    )
    return "fp8"


def given_layout(opts: dict[str, Any]) -> tuple[Any, Layout, int, tuple[str, ...]]:
    """The model, layout and sequence length the options give, and notes on how they
    changed the model (``run_spec``)."""
    spec, notes = run_spec(resolve_model(opts["model_name"]), opts)
    gb = opts["global_batch"]
    if gb is None:
        gb = default_global_batch(opts["micro_batch"], opts["dp"], opts["pp"])
    fields = {k: opts[k] for k in LAYOUT_FIELDS}
    if opts.get("pipeline_layout") is not None:  # "" is refused, not ignored
        fields.update(pipeline_layout_fields(spec, opts))
    layout = Layout(global_batch=gb, **fields)
    if layout.microbatch_group_size is not None and layout.vp == 1:
        notes += (unread_group_note(layout.microbatch_group_size, GROUP_OPTION),)
        layout = replace(layout, microbatch_group_size=None)
    return spec, layout, opts["seq_len"] or spec.seq_len, notes


def run_spec(spec, opts: dict[str, Any]) -> tuple[Any, tuple[str, ...]]:
    """The model as the run builds it, with a note where that is not the model given:
    --mtp-layers N builds N multi-token-prediction layers (Megatron-LM --mtp-num-layers; 0
    none, as a command without it); without it, a --pipeline-layout that places no ``m``
    runs a model with MTP layers without them (Megatron-Core runs that string only without
    --mtp-num-layers, and --from-megatron reads such a command as a model of none)."""
    given, n = opts.get("mtp_layers"), spec.mtp_layers
    if given is not None:
        if given == n:
            return spec, ()
        return spec.model_copy(update={"mtp_layers": given}), (
            f"--mtp-layers {given}: evaluated with "
            f"{render.count(given, 'multi-token-prediction layer')} (Megatron-LM "
            f"--mtp-num-layers), where the model has {n}",
        )
    text = opts.get("pipeline_layout")
    if not text or not n or "m" in text:  # "": refused by pipeline_layout_fields
        return spec, ()
    return spec.model_copy(update={"mtp_layers": 0}), (
        f"the layout places no MTP layer (m): evaluated without the model's "
        f"{render.count(n, 'MTP layer')}, as Megatron-LM runs it without --mtp-num-layers",
    )


def pipeline_layout_fields(spec, opts: dict[str, Any]) -> dict[str, Any]:
    """vp and the split of --pipeline-layout (designer.launch.pipeline_layout
    ``layout_fields``); a --vp that contradicts it, another split option, or a string
    Megatron-Core would refuse is a usage error."""
    for key in SPLIT_OPTIONS[1:]:
        if opts.get(key):
            raise UsageError(
                "contradicts --pipeline-layout, which spells out every stage; give one",
                IMPORTED_LAYOUT_OPTIONS[key],
            )
    try:
        fields = layout_fields(opts["pipeline_layout"], spec.layers, opts["pp"], spec.mtp_layers)
    except ValueError as err:
        raise UsageError(str(err), "--pipeline-layout") from None
    if opts["vp"] not in (1, fields["vp"]):
        raise UsageError(f"--pipeline-layout has vp {fields['vp']}; drop --vp", "--vp")
    return fields


def check_gpu_count(layout: Layout, option: str) -> None:
    """A layout of more GPUs than optimize plans for (solvers/limits.py MAX_GPUS) is a
    usage error: each degree had its cap, their product none (tp 8 x pp 80 x dp 1,048,576
    x cp 1,024 was evaluated as a feasible cluster of 687 billion GPUs)."""
    if layout.num_gpus > MAX_GPUS:
        raise UsageError(
            f"the layout takes {layout.num_gpus:,} GPUs (tp x pp x dp x cp), more than the "
            f"{MAX_GPUS:,} the designer plans for; lower a degree",
            option,
        )


def check_layout(spec, layout: Layout, seq_len: int) -> None:
    """Shapes the model cannot take are usage errors (exit 2), named by option; so is a
    sequence longer than the model's sliding window (not modelled)."""
    check_window(spec, seq_len)
    broken = divisibility_violations(spec, layout, seq_len)
    if broken:
        raise UsageError(broken[0].detail, broken[0].option)


def etp_default_note(spec, layout: Layout, experts: ExpertLayout, given: bool) -> list[str]:
    """A note where --etp was left at the contract's default of 1 on an MoE model with TP
    > 1: Megatron-LM's --expert-tensor-parallel-size defaults to the TP degree
    (megatron/training/arguments.py sets it to tensor_model_parallel_size when None), so a
    run that does not set it ran ETP = TP (the Grok-1 recipe rows move by -3% to +42%:
    python bench/cli_parity.py --variants). Only where ETP = TP divides the group."""
    tp, group = layout.tp, layout.tp * layout.cp * layout.dp
    if given or not spec.is_moe or tp == 1 or group % (experts.ep * tp):
        return []
    return [
        f"--etp 1 (the default): Megatron-LM's --expert-tensor-parallel-size defaults to TP; "
        f"for a run that does not set it, pass --etp {tp}"
    ]


def expert_layout(spec, layout: Layout, ep: int, etp: int) -> ExpertLayout:
    """--ep and --etp checked against the model and the layout (Megatron-Core's parallel
    folding, models.memory.expert_data_parallel); bad values are usage errors naming the
    option."""
    if not spec.is_moe:
        for option, value in (("--ep", ep), ("--etp", etp)):
            if value != 1:
                raise UsageError(f"{spec.name} is a dense model (no experts); drop it", option)
        return ExpertLayout()
    if spec.experts % ep:
        raise UsageError(f"{ep} must divide the model's {spec.experts} experts", "--ep")
    group = layout.tp * layout.cp * layout.dp
    if group % (ep * etp):
        option = "--ep" if group % ep else "--etp"
        raise UsageError(
            f"EP {ep} x ETP {etp} must divide TP x CP x DP = {group} (Megatron-Core's "
            "parallel folding)",
            option,
        )
    return ExpertLayout(ep=ep, etp=etp)


MOE_PLAN_OPTIONS = {  # option key: (flag, its default)
    "moe_overlap": ("--moe-overlap", "none"),
    "dispatcher": ("--dispatcher", "alltoall"),
    "fp8_dispatch": ("--fp8-dispatch", False),
    "recompute_modules": ("--recompute-modules", ""),
    "fp8_activations": ("--fp8-activations", False),
    "capacity_factor": ("--capacity-factor", None),
    "fused_attention": ("--fused-attention", False),
    "router_fp32": ("--router-fp32", False),
    "permute_fusion": ("--permute-fusion", None),
}


def moe_plan(
    spec, layout: Layout, ex: ExpertLayout, opts: dict[str, Any], notes: list[str]
) -> tuple[Layout, ExpertLayout]:
    """The MoE mechanisms evaluate's options switch on (models/expert.py ExpertLayout), and
    the layout with --recompute-modules' core_attn (recompute_modules); on a dense model any
    of them is a usage error naming it. Megatron-LM's names are read as --from-megatron
    reads them, what they change or leave noted in ``notes``."""
    if not spec.is_moe:
        for key, (flag, default) in MOE_PLAN_OPTIONS.items():
            if opts.get(key, default) != default:
                if opts.get(key) is False:  # the negative of a --x/--no-x pair
                    flag = flag.replace("--", "--no-", 1)
                raise UsageError(f"{spec.name} is a dense model (no experts); drop it", flag)
        return layout, ex
    layout, modules = recompute_modules(layout, opts.get("recompute_modules") or "", notes)
    overlap = opts.get("moe_overlap", "none")
    factor = opts.get("capacity_factor")
    per_domain = dispatcher_priced(opts.get("dispatcher", "alltoall"), "--dispatcher", notes)
    return layout, replace(  # the options add to what ``ex`` (an imported command's) runs
        ex,
        ep_overlap=1.0 if overlap == "a2a" else ex.ep_overlap,
        dualpipe=overlap == "dualpipe" or ex.dualpipe,
        dispatch_per_domain=per_domain or ex.dispatch_per_domain,
        dispatch_bytes=FP8_DISPATCH_BYTES if opts.get("fp8_dispatch") else ex.dispatch_bytes,
        recompute_modules=modules | ex.recompute_modules,
        fp8_activations=bool(opts.get("fp8_activations")) or ex.fp8_activations,
        capacity_factor=factor if factor is not None else ex.capacity_factor,
        attention_kernel_speedup=fused_attention(opts["gpu"], notes)
        if opts.get("fused_attention")
        else ex.attention_kernel_speedup,
        router_fp32=bool(opts.get("router_fp32")) or ex.router_fp32,
        permute_fusion=ex.permute_fusion
        if opts.get("permute_fusion") is None
        else bool(opts["permute_fusion"]),
    )


def recompute_modules(
    layout: Layout, given: str, notes: list[str]
) -> tuple[Layout, frozenset[str]]:
    """--recompute-modules (commas or spaces between) in Megatron-LM's names or
    models.memory.MODULES', read as --from-megatron reads them (designer.launch
    .megatron_import.megatron_modules): core_attn is the layout's selective recompute (it
    turns --recompute none to selective), mlp is noted and not priced. Under --recompute full
    the list is not read (Megatron-Core reads it with selective granularity), and noted."""
    words = given.replace(",", " ").split()
    full = layout.recompute == "full"  # its own note only: the list is not read
    modules = megatron_modules(words, "--recompute-modules", [] if full else notes)
    unknown = sorted(modules - set(MODULES))
    if unknown:
        accepted = ", ".join((*MODULES, LAYOUT_MODULE, DENSE_MLP_MODULE, *MODULE_NAMES))
        raise UsageError(f"{', '.join(unknown)}: not one of {accepted}", "--recompute-modules")
    if words and full:
        notes.append(
            "--recompute-modules: not read under full recomputation (Megatron-Core reads "
            "it with --recompute-granularity selective)"
        )
        return layout, frozenset()
    if LAYOUT_MODULE in words:
        if layout.recompute == "none":
            layout = replace(layout, recompute="selective")
        notes.append(
            f"--recompute-modules {LAYOUT_MODULE}: the layout's selective recompute "
            "(priced as --recompute selective)"
        )
    return layout, modules


def fused_attention(gpu: str, notes: list[str]) -> float:
    """--fused-attention's speedup of the attention core: Hopper's
    (models.expert.HOPPER_FUSED_ATTENTION_SPEEDUP) on a Hopper GPU (HOPPER_GPUS), whose
    profile has FA2's rate; elsewhere none, noted (Blackwell's profile was fitted on
    fused-attention runs, the A100's ratio is unmeasured)."""
    if gpu in HOPPER_GPUS:
        return HOPPER_FUSED_ATTENTION_SPEEDUP
    notes.append(
        f"--fused-attention: no change on {gpu}: the 1.61 x is over the FlashAttention-2 "
        "rate of Hopper's profiles (Blackwell's was fitted on fused-attention runs)"
    )
    return 1.0


def _check_overlap(spec, layout: Layout, ex: ExpertLayout, opts: dict[str, Any]) -> None:
    """A layout Megatron-Core refuses its all-to-all overlap for, or DualPipe cannot run,
    is a usage error naming the option that asked for it (models.expert
    a2a_overlap_violation, dualpipe_violation)."""
    why = dualpipe_violation(layout, ex)
    if why is not None:
        raise UsageError(f"DualPipe cannot run this layout: {why}", "--moe-overlap")
    why = a2a_overlap_violation(spec, layout, ex)
    if why is None:
        return
    option = (
        "--moe-overlap"
        if opts.get("moe_overlap") == "a2a"
        else "--from-megatron: --overlap-moe-expert-parallel-comm"
    )
    raise UsageError(f"Megatron-Core refuses its all-to-all overlap for this layout: {why}", option)


def hardware(cat, gpu: str, nic: str | None, nics_per_node: int | None) -> Hardware:
    """The GPU's server with its NICs; an unknown GPU blames --gpu, any other misfit --nic."""
    try:
        return Hardware.from_catalog(cat, gpu, nic, nics_per_node)
    except CatalogError as err:
        raise UsageError(str(err), "--gpu" if gpu not in cat.gpus else "--nic") from err


def _assumptions(opts: dict[str, Any], imported: ImportedRun | None) -> Assumptions:
    """evaluate's assumptions; CP across servers off unless asked for, on for a Megatron
    command (Megatron-LM places its CP ranks across servers as its rank order puts them)
    unless --no-cp-across-servers."""
    across = opts.get("cp_across_servers")
    a = Assumptions(
        dp_overlap=opts["dp_overlap"],
        memory_overhead_fraction=opts["memory_overhead"],
        runtime_reserved_gb=opts["reserved_gb"],
        memory_headroom_fraction=opts["headroom"],
        cp_across_servers=imported is not None if across is None else across,
    )
    return a if imported is None else imported.assumptions(a)


def evaluate_options(opts: dict[str, Any], given: set[str]) -> EvaluateAnswer:
    """evaluate's answer for its options (``given``: those set on the command line)."""
    imported, tokens = None, opts["tokens"]
    notes: list[str] = []
    if opts["from_megatron"] is not None:
        for name in sorted(given & set(IMPORTED_LAYOUT_OPTIONS)):
            raise UsageError(
                "comes from the Megatron command with --from-megatron; drop it",
                IMPORTED_LAYOUT_OPTIONS[name],
            )
        imported = load_megatron(opts["from_megatron"])
        spec, layout, seq_len = imported.spec, imported.layout, imported.seq_len
        tokens = tokens if tokens is not None else imported.tokens
    else:
        opts = {**opts, "precision": given_precision(opts["precision"], opts["gpu"], notes)}
        spec, layout, seq_len, layout_notes = given_layout(opts)
        notes.extend(layout_notes)
    cat = stack_catalog(tuple(Path(f) for f in opts["catalog_files"]), opts["stack"])
    hw = hardware(cat, opts["gpu"], opts["nic"], opts["nics_per_node"])
    if hw.gpu.peak_tflops(layout.precision) is None:
        option = "--from-megatron: --fp8-format" if imported else "--precision"
        raise UsageError(f"{opts['gpu']} has no {layout.precision} support; use bf16", option)
    check_gpu_count(layout, "--from-megatron" if imported else "--dp")
    if imported is None:
        check_layout(spec, layout, seq_len)
    if imported is not None:  # the command's EP, ETP (checked) and MoE mechanisms
        expert_layout(spec, layout, imported.ep, imported.etp)
        experts = imported.experts() if spec.is_moe else ExpertLayout()
    else:
        experts = expert_layout(spec, layout, opts["ep"], opts["etp"])
        notes.extend(etp_default_note(spec, layout, experts, "etp" in given))
    layout, experts = moe_plan(spec, layout, experts, opts, notes)
    _check_overlap(spec, layout, experts, opts)
    a = _assumptions(opts, imported)
    failures = None
    if not opts.get("no_failures"):
        failures = failure_model(
            hw.gpu,
            cat.facility,
            float(spec.params()),
            a.weight_bytes + a.optimizer_bytes,
            1.0 if opts.get("failure_scale") is None else opts["failure_scale"],
            opts.get("checkpoint_every"),
        )
    ev = evaluate(spec, hw, layout, seq_len, tokens, a, experts, failures=failures)
    # the plan's purchases (issue 18 item 4: solvers/purchases.py)
    ev = purchased(ev, opts.get("hot_spares") or 0.0, opts.get("checkpoint_storage"))
    evidence = _plain(evaluation_evidence(cat, ev, opts["stack"]))
    return EvaluateAnswer(ev, evidence, imported, tuple(notes))
