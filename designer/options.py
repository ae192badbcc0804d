"""Click options of the commands other than the question's (designer.question.fields declares
those): evaluate's layout, the answer's output options, the sweep's."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click

from designer.numbers import Finite, InputPath, Quantity, WholeCount
from designer.question.fields import field_option
from models.layout import FOUR_BIT, FP8_RECIPES, PRECISIONS, RECOMPUTE_MODES, precision_spelling
from solvers import limits

CATALOG_OPTION = click.option(
    "--catalog",
    "catalog_files",
    multiple=True,
    type=InputPath(),
    help="YAML file of entries that add to or override the built-in catalog (repeatable).",
)


def _count(flag: str, default: int | None, help: str, maximum: float = limits.MAX_GPUS) -> Callable:
    """A positive whole-number option (a degree, a size); its default shown when it has one.
    At most ``maximum``: a degree or count no plan of the decision space exceeds (GPU_CAP,
    solvers/limits.py), so no option overflows the models' 64-bit arrays."""
    return click.option(
        flag,
        type=WholeCount(min=1, max=int(maximum)),
        default=default,
        show_default=default is not None,
        help=help,
    )


def _named(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A catalog name option's value; an empty one is refused (evaluate --nic "" was read
    as no NIC given, the default chosen silently)."""
    if value is not None and not value.strip():
        raise click.BadParameter(
            "empty; give a catalog name (designer catalog lists them) or leave the option out"
        )
    return value


def _precision(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """evaluate's --precision: bf16, fp8 or an FP8 recipe's name (designer.dry_run
    FP8_RECIPES), in any case and with _ or -; 4-bit formats are refused by name."""
    got = precision_spelling(value)
    if got in (*PRECISIONS, *FP8_RECIPES):
        return got
    if got in FOUR_BIT:
        raise click.BadParameter(
            f"{value!r}: 4-bit training is not modelled (the model covers bf16 and fp8)"
        )
    raise click.BadParameter(
        f"{value!r} is not bf16, fp8 or an FP8 recipe ({', '.join(FP8_RECIPES)})"
    )


def file_option(flag: str, param: str, help: str) -> Callable:
    """An option naming a file to write (``--csv``, ``--plot``, ``--bom``)."""
    return click.option(
        flag, param, type=click.Path(dir_okay=False, path_type=Path), default=None, help=help
    )


GROUP_JSON = "designer.json"  # ctx.meta key (shared by a group's and its command's contexts)


def _remember_json(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    """--json as given, remembered for the subcommand (json_wanted)."""
    if value:
        ctx.meta[GROUP_JSON] = True
    return value


def json_wanted(as_json: bool) -> bool:
    """A command's --json, or its group's (`designer catalog --json show NAME` printed the
    text table: a script got text with exit 0)."""
    return as_json or bool(click.get_current_context().meta.get(GROUP_JSON))


JSON_OPTION = click.option(
    "--json", "as_json", is_flag=True, callback=_remember_json, help="Machine-readable output."
)


def apply(options: list[Callable]) -> Callable[[Callable], Callable]:
    """A decorator applying ``options`` in order (the first is the first in --help)."""

    def decorate(f: Callable) -> Callable:
        for option in reversed(options):
            f = option(f)
        return f

    return decorate


EVALUATE_OPTIONS = [
    click.option(
        "--model",
        "model_name",
        default="llama2-70b",
        show_default=True,
        help="Zoo name, YAML/JSON spec or HF config.json.",
    ),
    click.option("--gpu", default="h100-sxm", show_default=True, help="Catalog GPU name."),
    CATALOG_OPTION,
    _count("--tp", 1, "Tensor-parallel degree."),
    _count("--pp", 1, "Pipeline stages."),
    _count("--dp", 1, "Data-parallel degree."),
    _count("--cp", 1, "Context-parallel degree."),
    _count("--vp", 1, "Virtual pipeline chunks per stage."),
    click.option(
        "--microbatch-group-size-per-virtual-pipeline-stage",
        "microbatch_group_size",
        type=WholeCount(min=1, max=int(limits.MAX_BATCH_TOKENS)),
        default=None,
        help="Interleaving (vp > 1): micro-batches the schedule runs on one virtual stage "
        "before the next (Megatron-LM's flag of that name), from pp to the micro-batches per "
        "step, the last group 0 or at least pp; lets the micro-batches per step be no "
        "multiple of pp, and holds (v - 1) x (N - pp) more chunk passes in flight "
        "[default: pp].",
    ),
    _count(
        "--ep",
        1,
        "Expert-parallel degree of a mixture-of-experts model (Megatron-LM "
        "--expert-model-parallel-size; EP x ETP divides TP x CP x DP, EP the experts).",
    ),
    _count(
        "--etp",
        1,
        "Expert tensor-parallel degree of a mixture-of-experts model (Megatron-LM "
        "--expert-tensor-parallel-size).",
    ),
    click.option(
        "--moe-overlap",
        type=click.Choice(("none", "a2a", "dualpipe")),
        default="none",
        show_default=True,
        help="Mixture-of-experts: hide the token all-to-alls behind compute at the SM share "
        "they take, at most the compute's seconds (the rest stays exposed): a2a (Megatron-LM --overlap-moe-expert-parallel-comm: all but the "
        "schedule's warm-up and cool-down; needs EP > 1, VP > 1 when PP > 1, no full "
        "recompute) or dualpipe (DeepSeek-V3's schedule: also its bubble and two weight "
        "copies; needs an even PP, VP 1 and an even number of micro-batches, at least "
        "2 x PP).",
    ),
    click.option(
        "--dispatcher",
        type=click.Choice(("alltoall", "deepep", "flex", "hybridep", "allgather")),
        default="alltoall",
        show_default=True,
        help="Mixture-of-experts token dispatcher: alltoall sends every routed copy; deepep "
        "crosses the NICs once per remote domain, as do Megatron-LM's flex (its default "
        "DeepEP backend) and hybridep; allgather is priced as alltoall (noted).",
    ),
    click.option(
        "--fp8-dispatch",
        is_flag=True,
        help="Mixture-of-experts: dispatch tokens in fp8 (the combine stays bf16).",
    ),
    click.option(
        "--recompute-modules",
        default="",
        help="Mixture-of-experts: Megatron-LM --recompute-modules, comma- or "
        "space-separated: layernorm, mla_up_proj, moe_act, moe, shared_expert(s); core_attn "
        "is the layout's selective recompute, mlp not priced; none read under --recompute full.",
    ),
    click.option(
        "--fp8-activations",
        is_flag=True,
        help="Mixture-of-experts: cache expert and attention-output activations in fp8.",
    ),
    click.option(
        "--fused-attention",
        is_flag=True,
        help="Mixture-of-experts: run the attention core at Hopper's fused-attention rate "
        "(Transformer Engine's cuDNN kernels: 1.61 x the profile's FlashAttention-2-class "
        "rate, the FlashAttention-3 paper's H100 benchmark); no change on other GPUs "
        "(Blackwell's profile was fitted on fused-attention runs).",
    ),
    click.option(
        "--router-fp32",
        is_flag=True,
        help="Mixture-of-experts: the router in fp32 (Megatron-LM --moe-router-dtype fp32): "
        "its backward GEMMs at the TF32 rate, half the bf16 peak [default: bf16, "
        "Megatron-Core's].",
    ),
    click.option(
        "--permute-fusion/--no-permute-fusion",
        default=None,
        help="Mixture-of-experts: Megatron-LM --moe-permute-fusion, Transformer Engine's "
        "fused permute and unpermute kernels (8 HBM passes of the routed copies); "
        "--no-permute-fusion prices Megatron-Core's unfused permutation (60.6, measured) "
        "[default: fused, as the emitted launch sets it; --from-megatron: as the command].",
    ),
    click.option(
        "--capacity-factor",
        type=Finite(0.01, 100),
        default=None,
        help="Mixture-of-experts: tokens per expert x the balanced share, dropped beyond "
        "and padded up to it (Megatron-LM --moe-expert-capacity-factor) [default: dropless].",
    ),
    _count(
        "--first-stage-layers",
        None,
        "Transformer layers on the first pipeline stage, the rest split evenly "
        "(Megatron-LM --decoder-first-pipeline-num-layers).",
    ),
    _count(
        "--last-stage-layers",
        None,
        "Transformer layers on the last pipeline stage "
        "(Megatron-LM --decoder-last-pipeline-num-layers).",
    ),
    click.option(
        "--pipeline-layout",
        default=None,
        help="Megatron-Core's --pipeline-model-parallel-layout, e.g. 'Et*3|(tt|)*29,m|L': "
        "E embedding, t layer, m MTP layer, L loss, | between virtual stages; sets vp and "
        "the split (without m: the model without its MTP layers, as Megatron-LM runs it "
        "without --mtp-num-layers).",
    ),
    click.option(
        "--mtp-layers",
        type=WholeCount(min=0, max=1_000),
        default=None,
        help="Multi-token-prediction layers the run builds (Megatron-LM --mtp-num-layers; "
        "0: none) [default: the model's].",
    ),
    click.option(
        "--embedding-in-split/--no-embedding-in-split",
        default=False,
        show_default=True,
        help="Count the input embedding as one layer when splitting the pipeline "
        "(Megatron-LM --account-for-embedding-in-pipeline-split).",
    ),
    click.option(
        "--loss-in-split/--no-loss-in-split",
        default=False,
        show_default=True,
        help="Count the output layer and loss as one layer when splitting the pipeline "
        "(Megatron-LM --account-for-loss-in-pipeline-split).",
    ),
    _count("--micro-batch", 1, "Sequences per micro-batch."),
    _count(
        "--global-batch",
        None,
        "Sequences per step [default: micro-batch x dp x pp].",
        limits.MAX_BATCH_TOKENS,
    ),
    _count("--seq-len", None, "Sequence length [default: the model's].", limits.MAX_BATCH_TOKENS),
    click.option(
        "--cp-across-servers/--no-cp-across-servers",
        default=None,
        help="Let context parallelism leave the scale-up domain, its ring attention over the "
        "NICs (tp_domain then keeps TP alone inside) [default: off, TP x CP inside one "
        "domain; with --from-megatron on, as Megatron-LM places the command's CP ranks "
        "wherever its rank order puts them: --no-cp-across-servers checks the command "
        "against one domain].",
    ),
    click.option(
        "--recompute", type=click.Choice(RECOMPUTE_MODES), default="selective", show_default=True
    ),
    click.option(
        "--sequence-parallel/--no-sequence-parallel", default=None, help="Default: on when tp > 1."
    ),
    click.option(
        "--zero",
        type=click.IntRange(0, 3),
        default=1,
        show_default=True,
        help="ZeRO stage (1 = distributed optimizer).",
    ),
    click.option(
        "--precision",
        default="bf16",
        show_default=True,
        callback=_precision,
        help="bf16 or fp8; an FP8 recipe by name (mxfp8 or fp8-mx, Blackwell only; fp8-cs, "
        "fp8-ds, fp8-sc, fp8-tensorwise, fp8-delayed, fp8-blockwise; any case, _ or -) is "
        "priced as fp8, noted.",
    ),
    click.option(
        "--nic",
        default=None,
        callback=_named,
        help="Catalog NIC [default: fastest the server's PCIe supports].",
    ),
    _count("--nics-per-node", None, "NICs per server [default: its slots]."),
    click.option(
        "--tokens",
        type=Quantity(maximum=limits.MAX_TOKENS, minimum=limits.MIN_TOKENS),
        default=None,
        help="Training tokens, e.g. 2T (for time and cost).",
    ),
    field_option("dp_overlap"),
    field_option(
        "memory_overhead",
        "Allocator fragmentation and temporaries, fraction of tensor memory "
        "(counted in memory 'other'; Megatron's own estimate uses 0.05).",
    ),
    field_option(
        "reserved_gb",
        "Fixed GB per GPU for the CUDA context and NCCL buffers (in memory 'other'); "
        "0 with --headroom 0 gives the seed's tensor-only rule.",
    ),
    field_option(
        "headroom",
        "Fraction of GPU memory kept free (allocator fragmentation, uncounted peaks).",
    ),
    field_option("stack"),
    field_option("no_failures"),
    field_option("checkpoint_every"),
    field_option("failure_scale"),
    click.option(
        "--hot-spares",
        "hot_spares",
        type=Finite(0, 100),
        default=0.0,
        show_default=True,
        help="Hot spare servers per 100 bought (an optimized plan's hot_spares_per_100).",
    ),
    click.option(
        "--checkpoint-storage",
        "checkpoint_storage",
        type=Finite(0, 10_000, min_open=True),
        default=None,
        help="Checkpoint storage GB/s per server [default: the facility's] (an optimized "
        "plan's checkpoint_storage_gb_per_s_per_server).",
    ),
    click.option(
        "--from-megatron",
        "from_megatron",
        default=None,
        metavar="ARGS|FILE",
        help="Take the model and layout from a Megatron-LM launch command (quoted) or a script "
        "file holding one (torchrun ... pretrain_gpt.py --flags).",
    ),
    JSON_OPTION,
]
"""evaluate's options: the model, hardware and layout of one run."""

ANSWER_OPTIONS = [
    click.option(
        "--time-limit",
        type=Finite(min=0.01),
        default=60.0,
        show_default=True,
        help="Time limit per solve, seconds: on enumerating the decision space, and on the search.",
    ),
    click.option(
        "--explain/--no-explain",
        default=True,
        show_default=True,
        help="Price the binding constraints, or explain a conflict.",
    ),
    JSON_OPTION,
    file_option("--csv", "csv_file", "Write the plans as CSV."),
]
"""How optimize, compare and breakeven answer: after the question's options."""
ANSWER_KEYS = ("time_limit", "explain", "as_json", "csv_file")  # their parameters

SOLVE_OPTIONS = [
    click.option(
        "--top",
        "top_k",
        type=click.IntRange(1, 100),
        default=1,
        show_default=True,
        help="The K best plans with distinct layouts (compare: on each GPU type).",
    ),
    click.option(
        "--solver", type=click.Choice(("cpsat", "exhaustive")), default="cpsat", show_default=True
    ),
]
"""The contract's --top and --solver, which optimize and compare take."""

REPORT_OPTIONS = [
    file_option(
        "--html",
        "html_file",
        "Write one self-contained page (charts inlined; opens offline; needs designer[report]).",
    ),
    file_option(
        "--xlsx",
        "xlsx_file",
        "Write an Excel workbook: plans, BOM with formulas, study rows, binding constraints, "
        "assumptions (needs designer[report]).",
    ),
    click.option("--open", "open_page", is_flag=True, help="Open the page in the default browser."),
    click.option(
        "--study",
        "study_file",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="The study file of a results CSV [default: STUDY.yaml beside the CSV].",
    ),
    ANSWER_OPTIONS[0],  # --time-limit: when FILE is a question to answer first
]
"""report's options: the files to write and how to read the input."""
