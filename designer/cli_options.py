"""Click options of the commands other than the question's (designer.question declares
those): evaluate's layout, the answer's output options, the sweep's."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click

from catalog.specs import DEFAULT_STACK, STACKS
from designer.numbers import Quantity
from designer.question import DEFAULT_HEADROOM, DEFAULT_RESERVED_GB
from models.layout import PRECISIONS, RECOMPUTE_MODES

CATALOG_OPTION = click.option(
    "--catalog",
    "catalog_files",
    multiple=True,
    type=click.Path(path_type=Path),
    help="YAML file of entries that add to or override the built-in catalog (repeatable).",
)
JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")


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
    click.option(
        "--tp",
        type=click.IntRange(min=1),
        default=1,
        show_default=True,
        help="Tensor-parallel degree.",
    ),
    click.option(
        "--pp", type=click.IntRange(min=1), default=1, show_default=True, help="Pipeline stages."
    ),
    click.option(
        "--dp",
        type=click.IntRange(min=1),
        default=1,
        show_default=True,
        help="Data-parallel degree.",
    ),
    click.option(
        "--cp",
        type=click.IntRange(min=1),
        default=1,
        show_default=True,
        help="Context-parallel degree.",
    ),
    click.option(
        "--vp",
        type=click.IntRange(min=1),
        default=1,
        show_default=True,
        help="Virtual pipeline chunks per stage.",
    ),
    click.option(
        "--first-stage-layers",
        type=click.IntRange(min=1),
        default=None,
        help="Transformer layers on the first pipeline stage, the rest split evenly "
        "(Megatron-LM --decoder-first-pipeline-num-layers).",
    ),
    click.option(
        "--last-stage-layers",
        type=click.IntRange(min=1),
        default=None,
        help="Transformer layers on the last pipeline stage "
        "(Megatron-LM --decoder-last-pipeline-num-layers).",
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
    click.option(
        "--micro-batch",
        type=click.IntRange(min=1),
        default=1,
        show_default=True,
        help="Sequences per micro-batch.",
    ),
    click.option(
        "--global-batch",
        type=click.IntRange(min=1),
        default=None,
        help="Sequences per step [default: micro-batch x dp x pp].",
    ),
    click.option(
        "--seq-len",
        type=click.IntRange(min=1),
        default=None,
        help="Sequence length [default: the model's].",
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
    click.option("--precision", type=click.Choice(PRECISIONS), default="bf16", show_default=True),
    click.option(
        "--nic", default=None, help="Catalog NIC [default: fastest the server's PCIe supports]."
    ),
    click.option(
        "--nics-per-node",
        type=click.IntRange(min=1),
        default=None,
        help="NICs per server [default: its slots].",
    ),
    click.option(
        "--tokens",
        type=Quantity(),
        default=None,
        help="Training tokens, e.g. 2T (for time and cost).",
    ),
    click.option(
        "--dp-overlap",
        type=click.FloatRange(0, 1),
        default=0.0,
        show_default=True,
        help="Fraction of the last backward that hides DP traffic.",
    ),
    click.option(
        "--memory-overhead",
        type=click.FloatRange(0, 1),
        default=0.0,
        show_default=True,
        help="Allocator fragmentation and temporaries, fraction of tensor memory "
        "(counted in memory 'other'; Megatron's own estimate uses 0.05).",
    ),
    click.option(
        "--reserved-gb",
        type=click.FloatRange(min=0),
        default=DEFAULT_RESERVED_GB,
        show_default=True,
        help="Fixed GB per GPU for the CUDA context and NCCL buffers (in memory 'other'); "
        "0 with --headroom 0 gives the seed's tensor-only rule.",
    ),
    click.option(
        "--headroom",
        type=click.FloatRange(0, 1, max_open=True),
        default=DEFAULT_HEADROOM,
        show_default=True,
        help="Fraction of GPU memory kept free (allocator fragmentation, uncounted peaks).",
    ),
    click.option(
        "--stack",
        type=click.Choice(STACKS),
        default=DEFAULT_STACK,
        show_default=True,
        help="Software stack whose calibrated profile predicts the step time.",
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
        type=click.FloatRange(min=0.01),
        default=60.0,
        show_default=True,
        help="Solver time limit per solve, seconds.",
    ),
    click.option(
        "--explain/--no-explain",
        default=True,
        show_default=True,
        help="Price the binding constraints, or explain a conflict.",
    ),
    JSON_OPTION,
    click.option(
        "--csv",
        "csv_file",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="Write the plans as CSV.",
    ),
]
"""How optimize, compare and breakeven answer: after the question's options."""
