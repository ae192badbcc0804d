"""Pipeline-parallel arithmetic: bubble, micro-batches in flight, stage counts, and
how Megatron-LM splits the layers over the pipeline ranks.

Sources: Huang et al. 2019 (GPipe) and Narayanan et al. SC'21 (1F1B and the
interleaved schedule): bubble fraction (p-1)/(v*m); with 1F1B the first stage
holds p micro-batches. The seed article (E4) counts a simpler schedule in
which a micro-batch waits 2N-2 rounds and up to 2N-1 are held; the designer
models 1F1B, which holds N.

Layer split: Megatron-LM (megatron/core/transformer/transformer_block.py
get_num_layers_to_build, transformer_layer.py get_transformer_layer_offset, the
checks in transformer_config.py __post_init__ and training/arguments.py
validate_args), see ``stage_layers`` and ``split_violation``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from models.layout import Layout

# A pipeline split as the decision space carries it: (first_stage_layers,
# last_stage_layers, embedding_in_split, loss_in_split), 0 for "not set".
Split = tuple[int, int, bool, bool]
EVEN: Split = (0, 0, False, False)


def bubble_fraction(pp: int, microbatches: float, vp: int = 1) -> float:
    """Idle fraction relative to the useful work: (p-1)/(v*m).

    Whatever the interleaved schedule's micro-batch group size N
    (--microbatch-group-size-per-virtual-pipeline-stage, Layout.microbatch_group_size):
    the bubble is the fill and drain of the pipeline, p - 1 chunk passes of 1/v of a
    micro-batch's work each way, and the groups only reorder the chunk passes in between
    (megatron/core/pipeline_parallel/schedules.py get_schedule_table: N micro-batches of
    one virtual stage, then the same N on the next); Megatron-Core's checks (N >= p, a
    last group of 0 or at least p) keep every rank's next chunk pass ready in steady state,
    so a larger N holds more activations (``in_flight_at_rank``), not more idle time."""
    return (pp - 1) / (vp * microbatches)


def in_flight_microbatches(
    pp: int, vp: int, num_microbatches: float, group: int | None = None
) -> float:
    """Micro-batches whose activations the first stage holds at once (1F1B, interleaved).

    1F1B: min(p, m). Interleaved with v chunks: times 1 + (p-1)/(p*v)
    (Megatron-LM theoretical_memory_usage.py), which is the warm-up of
    ``in_flight_at_rank`` at rank 0 with the default group size N = p:
    p (1 + (p-1)/(p v)) = (2 (p-1) + (v-1) p + 1) / v. Another ``group`` N (Megatron-Core's
    --microbatch-group-size-per-virtual-pipeline-stage) holds that warm-up with N in
    place of p, (2 (p-1) + (v-1) N + 1) / v, at most m (schedules.py
    get_pp_rank_microbatches)."""
    if pp == 1:
        return 1.0
    if vp > 1 and group is not None and group != pp:
        return _interleaved_in_flight(0, pp, vp, num_microbatches, group)
    held = min(float(pp), float(num_microbatches))
    if vp > 1:
        held *= 1.0 + (pp - 1) / (pp * vp)
    return held


def _interleaved_in_flight(
    rank: int, pp: int, vp: int, num_microbatches: float, group: int
) -> float:
    """Micro-batches in flight on ``rank`` under the interleaved schedule: its warm-up of
    2 (p - r - 1) + (v - 1) N chunk passes plus the one in flight, at most the v m of the
    step, over v chunks (megatron/core/pipeline_parallel/schedules.py
    get_pp_rank_microbatches, forward_backward_pipelining_with_interleaving)."""
    chunks = min(vp * float(num_microbatches), 2.0 * (pp - rank - 1) + (vp - 1) * group + 1)
    return chunks / vp


def article_held_microbatches(stages: int) -> int:
    """Seed E4's count for its schedule: up to 2N-1 micro-batches held."""
    return 2 * stages - 1


def naive_recompute_layer_forwards(layers: int) -> int:
    """Seed E4: recomputing every layer's forward from the start for each backward
    step costs 1 + 2 + ... + L layer-forwards."""
    return layers * (layers + 1) // 2


def stages_needed(layers: int, layers_per_gpu: int, tp: int = 1) -> int:
    """Seed E7: stages when each GPU holds ``layers_per_gpu`` layers and a TP group of
    ``tp`` GPUs holds ``tp`` times as many."""
    return math.ceil(layers / (layers_per_gpu * tp))


def in_flight_at_rank(
    rank: int, pp: int, vp: int, num_microbatches: float, group: int | None = None
) -> float:
    """Micro-batches (of the whole rank's layers) whose activations pipeline rank ``rank`` holds.

    Rank 0 is ``in_flight_microbatches``. Other ranks, 1F1B: min(p - r, m); interleaved:
    Megatron-LM's warm-up of 2 (p - r - 1) + (v - 1) N model-chunk passes plus the one in
    flight, at most v m, over v chunks (schedules.py get_pp_rank_microbatches,
    forward_backward_pipelining_with_interleaving), N the micro-batch ``group`` size
    (--microbatch-group-size-per-virtual-pipeline-stage; None: p, Megatron-Core's
    default), so a larger N holds more."""
    if rank == 0 or pp == 1:
        return in_flight_microbatches(pp, vp, num_microbatches, group)
    if vp == 1:
        return float(min(pp - rank, num_microbatches))
    return _interleaved_in_flight(rank, pp, vp, num_microbatches, pp if group is None else group)


def full_pipeline_microbatches(pp: int, vp: int) -> int:
    """The fewest micro-batches per step (at least p, a multiple of ``microbatch_step``)
    from which no rank holds more in flight (``in_flight_at_rank`` grows with m, then stays):
    p under 1F1B (min(p - r, m); the first rank's count stops at p); interleaved, the
    first multiple of p whose v m chunk passes cover rank 1's warm-up plus the one in
    flight, 2 (p - 2) + (v - 1) p + 1 (the largest cap of the ranks past the first), so
    2p once p > 3: with m = p rank 1 of PP 4, VP 2 holds 8 of its 9 chunk passes."""
    if pp <= 1:
        return 1
    if vp == 1:
        return pp
    warmup = 2 * (pp - 2) + (vp - 1) * pp + 1
    return max(1, -(-warmup // (vp * pp))) * pp


def a2a_overlap_warmup_chunks(pp: int, vp: int, group: int | None = None) -> int:
    """Model-chunk forwards the first rank runs alone, before Megatron-Core's all-to-all
    overlap (--overlap-moe-expert-parallel-comm) pairs each forward with another
    micro-batch's backward; as many backwards run alone at the end. With PP 1, one
    (combined_1f1b.py combined_1f1b_schedule_for_no_pipelining: the first micro-batch's
    forward alone, then each backward beside the next forward); interleaved, the warm-up
    of forward_backward_pipelining_with_interleaving, 2 (p - 1) + (v - 1) N, plus the one
    the overlap adds (schedules.py get_pp_rank_microbatches, megatron-core 0.19.2); N the
    micro-batch ``group`` size (--microbatch-group-size-per-virtual-pipeline-stage; None:
    p, Megatron-Core's default).

    The overlap holds no more activations than 1F1B (``in_flight_at_rank``): the extra
    warm-up forward is the chunk 1F1B runs before its first backward, and each combined
    step runs one chunk's forward layer by layer beside another's backward in reverse
    (combined_1f1b.py), so a layer is stored as one is freed; the transient of one layer
    is not modelled."""
    if pp == 1:
        return 1
    return 2 * (pp - 1) + (vp - 1) * (pp if group is None else group) + 1


def a2a_overlap_exposed_share(
    pp: int, vp: int, num_microbatches: float, group: int | None = None
) -> float:
    """The share of the all-to-alls Megatron-Core's overlap leaves on the critical path:
    the warm-up's forwards and the cool-down's backwards run alone, W of the v m chunk
    passes each way (``a2a_overlap_warmup_chunks``, at micro-batch ``group`` size N), so
    W / (v m), at most 1."""
    w = a2a_overlap_warmup_chunks(pp, vp, group)
    return min(1.0, w / (vp * max(1.0, float(num_microbatches))))


def _spread(total: int, ranks: int) -> list[int]:
    """``total`` layers over ``ranks`` as evenly as possible, the remainder on the last ranks."""
    if ranks <= 0:
        return []
    base, extra = divmod(max(total, 0), ranks)
    return [base + (1 if i >= ranks - extra else 0) for i in range(ranks)]


@lru_cache(maxsize=1 << 16)
def stage_layers(layers: int, layout: Layout) -> tuple[int, ...]:
    """Transformer layers of each pipeline rank (all its virtual chunks together).

    Megatron-LM's rule (transformer_block.py get_num_layers_to_build):
    - ``first_stage_layers`` / ``last_stage_layers`` (--decoder-first/last-pipeline-num-layers)
      put that many layers on the first / last rank; the other layers are split evenly
      over the remaining ranks.
    - otherwise ``embedding_in_split`` / ``loss_in_split``
      (--account-for-embedding/loss-in-pipeline-split) count the embedding / the loss as
      one layer each: every rank gets (L + e + l) / p, and the first virtual chunk of the
      first rank (the last chunk of the last rank) builds one transformer layer fewer.
    - otherwise L / p each.
    Layouts Megatron refuses (``split_violation``) still get a split, the nearest even
    one, so that a relaxed ``divisibility`` family can be evaluated.
    """
    p = layout.pp
    if layout.stage_counts is not None:  # --pipeline-layout: rank r holds stages r, r + p, ...
        return tuple(sum(layout.stage_counts[r::p]) for r in range(p))
    if p == 1:
        return (layers,)
    first, last = layout.first_stage_layers, layout.last_stage_layers
    if first is not None or last is not None:
        middle = p - (first is not None) - (last is not None)
        rest = layers - (first or 0) - (last or 0)
        ranks = [first] if first is not None else []
        ranks += _spread(rest, middle)
        ranks += [last] if last is not None else []
        return tuple(ranks)
    e, lo = int(layout.embedding_in_split), int(layout.loss_in_split)
    counted = _spread(layers + e + lo, p)
    counted[0] -= e
    counted[-1] -= lo
    return tuple(max(0, c) for c in counted)


@dataclass(frozen=True)
class StageLoad:
    """One pipeline rank's share: its transformer layers and the non-layer parts it holds."""

    rank: int
    layers: int  # transformer layers, all virtual chunks together
    embedding: bool  # the input embedding (first rank)
    output: bool  # the final norm, output layer and loss (last rank)


@lru_cache(maxsize=1 << 16)
def stage_loads(layers: int, layout: Layout) -> tuple[StageLoad, ...]:
    """The ranks that can be the most loaded: the first, the earliest middle rank of each
    distinct layer count (earlier ranks hold more micro-batches in flight), the last."""
    per_rank = stage_layers(layers, layout)
    p = len(per_rank)
    keep = [0]
    seen: set[int] = set()
    for r in range(1, p - 1):
        if per_rank[r] not in seen:
            seen.add(per_rank[r])
            keep.append(r)
    if p > 1:
        keep.append(p - 1)
    return tuple(StageLoad(r, per_rank[r], r == 0, r == p - 1) for r in keep)


def busiest_stage(layers: int, layout: Layout, output_layers: float) -> StageLoad:
    """The rank with the most work per micro-batch: its transformer layers, plus on the
    last rank the output layer and loss worth ``output_layers`` transformer layers (the
    ratio of their FLOPs). Ties go to the rank with more transformer layers."""
    return max(
        stage_loads(layers, layout),
        key=lambda s: (s.layers + (output_layers if s.output else 0.0), s.layers),
    )


def _fits_first_last(layers: int, pp: int, vp: int, first: int, last: int) -> bool:
    if first % vp or last % vp or first < 1 or last < 1:
        return False
    rest, middle = layers - first - last, pp - 2
    if bool(rest) != bool(middle) or rest < 0:
        return False
    return not middle or (rest % middle == 0 and (rest // middle) % vp == 0)


def first_last_split(layers: int, pp: int, vp: int = 1) -> Split | None:
    """The balanced --decoder-first/last-pipeline-num-layers split: the middle ranks get the
    fewest layers per rank that leaves the first and last ranks no more than they hold
    (and at least one per virtual chunk); the last rank, which also computes the logits,
    takes the smaller share. None when no such split exists or p x v divides the layers."""
    if pp < 2 or layers % (pp * vp) == 0:
        return None
    middle = math.ceil(layers / pp / vp) * vp  # layers per middle rank
    rest = layers - (pp - 2) * middle
    if rest < 2 * vp:
        return None
    last = rest // 2 // vp * vp
    first = rest - last
    if first > middle or not _fits_first_last(layers, pp, vp, first, last):
        return None
    return (first, last, False, False)


def accounting_split(layers: int, pp: int, vp: int = 1) -> Split | None:
    """--account-for-embedding/loss-in-pipeline-split when it makes the split even: both,
    else the loss alone, else the embedding alone. None when none does or p x v divides
    the layers already."""
    if pp < 2 or layers % (pp * vp) == 0:
        return None
    for e, lo in ((1, 1), (0, 1), (1, 0)):
        if (layers + e + lo) % (pp * vp) == 0:
            return (0, 0, bool(e), bool(lo))
    return None


@lru_cache(maxsize=4096)
def uneven_splits(layers: int, pp: int, vp: int = 1) -> tuple[Split, ...]:
    """The Megatron-LM split for a (p, v) whose product does not divide the layers: the
    embedding/loss accounting when it makes the split even, else the first/last-rank
    split; none when neither exists.

    One is enough: where both exist the accounting's busiest rank holds
    (L + e + l) / p layers, no more than the first/last split's middle ranks
    (ceil(L / (p v)) v, equal once p v > 2), and it leaves the first rank, which holds
    the most micro-batches in flight, no more layers than the last."""
    for split in (accounting_split(layers, pp, vp), first_last_split(layers, pp, vp)):
        if split is not None:
            return (split,)
    return ()


def _suggest(layers: int, pp: int, vp: int) -> str:
    """A split Megatron-LM accepts for (p, v), as options, or a hint when there is none."""
    for split in (first_last_split(layers, pp, vp), accounting_split(layers, pp, vp)):
        if split is None:
            continue
        first, last, emb, loss = split
        if first:
            return f"e.g. --first-stage-layers {first} --last-stage-layers {last}"
        return "e.g. " + " ".join(
            o for o, on in (("--embedding-in-split", emb), ("--loss-in-split", loss)) if on
        )
    return "choose pp x vp that divides them"


def split_violation(layers: int, layout: Layout) -> tuple[str, str] | None:
    """(option, message) of the first Megatron-LM pipeline-split rule the layout breaks,
    or None. The rules (Megatron-LM transformer_config.py __post_init__ "Uneven PP" and
    arguments.py validate_args):
    - first/last-stage layers cannot be combined with embedding/loss accounting;
    - first/last-stage layers are at least 1 and, with interleaving, multiples of vp; the
      remaining layers split evenly over the remaining ranks (none left for none), and,
      with interleaving, each such rank's share is a multiple of vp;
    - with accounting, p divides L + e + l and, with interleaving, vp divides each
      rank's share;
    - otherwise p divides L and, with interleaving, vp divides L / p.
    Messages name the designer's option to change (``--first-stage-layers``, ...)."""
    p, v, n = layout.pp, layout.vp, layers
    if layout.stage_counts is not None:
        return stage_counts_violation(n, layout)
    first, last = layout.first_stage_layers, layout.last_stage_layers
    given = "--first-stage-layers" if first is not None else "--last-stage-layers"
    if first is not None or last is not None:
        if layout.embedding_in_split or layout.loss_in_split:
            return (
                given,
                "cannot be combined with --embedding-in-split or --loss-in-split "
                "(Megatron-LM refuses both kinds of uneven split together); use one kind",
            )
        if p == 1:
            return (given, "needs pp > 1 (a single pipeline stage holds every layer)")
        for option, value in (("--first-stage-layers", first), ("--last-stage-layers", last)):
            if value is None:
                continue
            if value < 1:
                return (option, f"must be at least 1 (got {value})")
            if value % v:
                return (
                    option,
                    f"{value} layers are not a multiple of vp {v} (each virtual chunk of the "
                    "rank holds the same number of layers)",
                )
        middle = p - (first is not None) - (last is not None)
        rest = n - (first or 0) - (last or 0)
        hint = _suggest(n, p, v)
        if rest < 0 or bool(rest) != bool(middle):
            return (
                given,
                f"the first/last stage layers leave {rest} of the model's {n} layers for "
                f"{middle} other pipeline stages; {hint}",
            )
        if middle and rest % middle:
            return (
                given,
                f"the other {rest} layers do not split evenly over the {middle} other "
                f"pipeline stages; {hint}",
            )
        if middle and (rest // middle) % v:
            return (
                given,
                f"the other stages' {rest // middle} layers each are not a multiple of vp "
                f"{v}; {hint}",
            )
        return None
    counted = n + int(layout.embedding_in_split) + int(layout.loss_in_split)
    if layout.embedding_in_split or layout.loss_in_split:
        option = "--embedding-in-split" if layout.embedding_in_split else "--loss-in-split"
        extra = counted - n
        if counted % p:
            return (
                option,
                f"with the embedding/loss counted, {n} + {extra} = {counted} layers do not "
                f"divide by pp {p}; {_suggest(n, p, v)}",
            )
        if (counted // p) % v:
            return (
                option,
                f"with the embedding/loss counted, {counted // p} layers per pipeline stage do "
                f"not divide by vp {v}; {_suggest(n, p, v)}",
            )
        return None
    if n % p:
        return (
            "--pp",
            f"pp {p} does not divide the model's {n} layers; use a divisor, or an uneven "
            f"split as Megatron-LM runs it ({_suggest(n, p, v)})",
        )
    if (n // p) % v:
        return (
            "--vp",
            f"pp x vp = {p * v} does not divide the model's {n} layers; use a vp that divides "
            f"{n // p}, or an uneven split ({_suggest(n, p, v)})",
        )
    return None


def stage_counts_violation(layers: int, layout: Layout) -> tuple[str, str] | None:
    """A --pipeline-layout split Megatron-Core refuses (PipelineParallelLayerLayout
    validate_layer_layout: pp x vp stages that hold every layer once), or None; the other
    split options cannot be combined with it."""
    counts = layout.stage_counts or ()
    if layout.first_stage_layers is not None or layout.last_stage_layers is not None:
        return ("--pipeline-layout", "cannot be combined with --first/--last-stage-layers")
    if layout.embedding_in_split or layout.loss_in_split:
        return ("--pipeline-layout", "cannot be combined with --embedding/--loss-in-split")
    if len(counts) != layout.pp * layout.vp:
        return (
            "--pipeline-layout",
            f"{len(counts)} stages are not pp x vp = {layout.pp * layout.vp}",
        )
    if sum(counts) != layers or min(counts) < 0:
        return ("--pipeline-layout", f"it holds {sum(counts)} layers, the model {layers}")
    return None


def counts_layout_string(counts: tuple[int, ...], mtp_stage: int | None = None) -> str:
    """Megatron-Core's layout string of per-stage layer counts: E opens the first stage,
    L closes the last, m (the MTP layers) ends stage ``mtp_stage``."""
    stages = []
    for s, n in enumerate(counts):
        body = "t" * min(n, 1) + (f"*{n}" if n > 1 else "") + ("m" if s == mtp_stage else "")
        stages.append(("E" if s == 0 else "") + body + ("L" if s == len(counts) - 1 else ""))
    return "|".join(stages)


def describe_stage_layers(ranks: tuple[int, ...]) -> str:
    """Layers per pipeline rank (``stage_layers``) in words: "7, 8 x 14, 7 layers per stage"."""
    runs: list[list[int]] = []
    for n in ranks:
        if runs and runs[-1][0] == n:
            runs[-1][1] += 1
        else:
            runs.append([n, 1])
    return ", ".join(f"{n} x {k}" if k > 1 else f"{n}" for n, k in runs) + " layers per stage"


def split_options(layout: Layout) -> str:
    """The designer options that set the layout's uneven split ("" when even)."""
    out = []
    if layout.stage_counts is not None:
        mtp = None if layout.mtp_rank is None else layout.mtp_rank + (layout.vp - 1) * layout.pp
        text = counts_layout_string(layout.stage_counts, mtp)
        out.append(f"--pipeline-layout '{text}'")
    if layout.first_stage_layers is not None:
        out.append(f"--first-stage-layers {layout.first_stage_layers}")
    if layout.last_stage_layers is not None:
        out.append(f"--last-stage-layers {layout.last_stage_layers}")
    if layout.embedding_in_split:
        out.append("--embedding-in-split")
    if layout.loss_in_split:
        out.append("--loss-in-split")
    return " ".join(out)


def microbatch_step(pp: int, vp: int) -> int:
    """What the micro-batches per step must be a multiple of: ``pp`` under the interleaved
    schedule (``vp`` > 1), which runs them in groups of PP per virtual stage and raises at
    the first step on a smaller last group (megatron-core 0.19 schedules.py,
    forward_backward_pipelining_with_interleaving; torch's Interleaved1F1B likewise); 1
    otherwise."""
    return pp if vp > 1 and pp > 1 else 1


GROUP_OPTION = "--microbatch-group-size-per-virtual-pipeline-stage"


def _valid_group(pp: int, num_microbatches: int, group: int) -> bool:
    """Whether Megatron-Core's interleaved schedule runs m micro-batches in groups of N."""
    last = num_microbatches % group
    return pp <= group <= num_microbatches and not 0 < last < pp


def microbatch_group_violation(
    pp: int, vp: int, num_microbatches: int, group: int | None
) -> tuple[str, str] | None:
    """(option, message) where the interleaved schedule refuses m micro-batches per step in
    groups of N (``group``; None: p, Megatron-Core's default), or None. The checks of
    megatron/core/pipeline_parallel/schedules.py forward_backward_pipelining_with_interleaving
    (megatron-core 0.19.2 lines 1133-1153; NVIDIA/Megatron-LM d98e8a64 lines 1160-1180): N within [p, m]
    (ValueError), and the last group, m mod N, 0 or at least p (RuntimeError: "dependency
    bubbles"); N defaults to p (model_parallel_config.py ModelParallelConfig.__post_init__),
    where the two make m a multiple of p (``microbatch_step``). Only the interleaved
    schedule reads N (vp > 1)."""
    m, p = num_microbatches, pp
    if vp <= 1 or p <= 1 or m < 1:
        return None
    n = p if group is None else group
    if _valid_group(p, m, n):
        return None
    fix = next((k for k in range(p, m + 1) if _valid_group(p, m, k)), None)
    if group is None:
        alt = f", or {GROUP_OPTION} {fix} as Megatron-LM runs it" if fix is not None else ""
        return (
            "--global-batch",
            f"the interleaved schedule (vp {vp}) needs the micro-batches per step ({m}) to "
            f"be a multiple of pp {p}; choose a global batch of micro-batch x dp x a "
            f"multiple of {p}{alt}",
        )
    if fix is None:
        return (
            "--global-batch",
            f"the interleaved schedule (vp {vp}) runs no {GROUP_OPTION} with {m} "
            f"micro-batches per step, fewer than pp {p}; raise the global batch to at least pp "
            "micro-batches",
        )
    if not p <= n <= m:
        why = f"{n} must lie between pp {p} and the {m} micro-batches per step"
    else:
        why = (
            f"{n} leaves a last group of {m % n} of the {m} micro-batches per step, fewer "
            f"than pp {p} (a dependency bubble)"
        )
    return (
        GROUP_OPTION,
        f"{why}, which Megatron-Core's interleaved schedule refuses; use e.g. {fix} (a size "
        f"in [{p}, {m}] whose last group is 0 or at least {p})",
    )
