"""Layers per virtual pipeline stage, and Megatron-LM's --pipeline-model-parallel-layout.

Virtual stage s sits on pipeline rank s mod p, as chunk s // p (Megatron-LM's interleaved
placement; PipelineParallelLayerLayout.__init__ turns the 1-D layout into [rank][chunk]
the same way: megatron/core/transformer/pipeline_parallel_layer_layout.py lines 46-52 at
NVIDIA/Megatron-LM 000c4ac24f61). A rank's transformer layers (models.pipeline.stage_layers)
are split evenly over its chunks; with --account-for-embedding/loss-in-pipeline-split the
embedding and the loss count as one layer of the first and the last chunk.

The layout string spells out every stage: ``E`` the embedding, ``t`` a transformer layer,
``L`` the loss, ``|`` between stages, ``x*n`` and ``(...)*n`` repeat (parse_str_to_list,
lines 270-300 there). The designer writes it for splits no other flag expresses (a
pipeline that does not divide the layers, planned with ``--ignore divisibility``).
"""

from __future__ import annotations

import re
from typing import Any

from designer.errors import Infeasible
from models import Layout
from models.pipeline import counts_layout_string, split_violation, stage_layers

STAGE = re.compile(r"^(E?)(t*)(L?)$")
STAGE_MTP = re.compile(r"^(E?)(t*)(m*)(L?)$")  # m: a multi-token-prediction layer
GROUP_REPEAT = re.compile(r"\(([^)]+)\)\*(\d+)")  # (...)*n, unrolled first
CHAR_REPEAT = re.compile(r"(.)\*(\d+)")  # x*n
EXAMPLE = "Et*3|(tt|)*29,m|L"  # DeepSeek-V3 on PP 8 x VP 4 (Megatron-LM's docs)
MAX_UNROLLED_CHARS = 100_000
"""The longest a layout string may unroll to: a thousand times what a published model needs
(DeepSeek-V3's 61 layers and MTP layer on PP 16 x VP 2 unroll to about 100 characters).
A repeat such as ``(tt|)*1000000000`` would otherwise build gigabytes before any check."""
_COUNT_DIGITS = len(str(MAX_UNROLLED_CHARS))  # a longer count passes the limit by itself


def chunk_layers(layers: int, layout: Layout) -> list[int] | None:
    """Transformer layers of every virtual stage in stage order, or None when a rank's
    layers do not split evenly over its chunks."""
    p, v = layout.pp, layout.vp
    if layout.stage_counts is not None:
        return list(layout.stage_counts)
    per_rank = stage_layers(layers, layout)
    e, lo = int(layout.embedding_in_split), int(layout.loss_in_split)
    chunks = [[0] * v for _ in range(p)]
    for r, n in enumerate(per_rank):
        counted = n + (e if r == 0 else 0) + (lo if r == p - 1 else 0)
        if counted % v:
            return None
        chunks[r] = [counted // v] * v
    chunks[0][0] -= e
    chunks[-1][-1] -= lo
    if min(min(c) for c in chunks) < 0:
        return None
    return [chunks[s % p][s // p] for s in range(p * v)]


def chunks_or_refuse(layers: int, layout: Layout, framework: str) -> list[int]:
    """chunk_layers, or Infeasible naming the framework when ranks do not split evenly."""
    chunks = chunk_layers(layers, layout)
    if chunks is None:
        ranks = "/".join(map(str, stage_layers(layers, layout)))
        raise Infeasible(
            f"{framework} cannot run this pipeline split: the ranks' layers {ranks} do not "
            f"divide over vp {layout.vp} chunks; re-run optimize without --ignore divisibility"
        )
    return chunks


def required_layout(layers: int, layout: Layout, framework: str, mtp: int = 0) -> str | None:
    """The layout string when only it expresses the split (needs_layout), else None; a
    MoE model's ``mtp`` layers as ``m`` on the last stage of their rank (Layout.mtp_rank,
    the last by default)."""
    if not needs_layout(layers, layout):
        return None
    chunks = chunks_or_refuse(layers, layout, framework)
    if not mtp:
        return layout_string(layers, layout)
    rank = layout.pp - 1 if layout.mtp_rank is None else layout.mtp_rank
    text = counts_layout_string(tuple(chunks), rank + (layout.vp - 1) * layout.pp)
    text = text.replace("m", "m" * mtp)
    try:  # an mtp_rank whose later stages hold layers: Megatron-Core refuses the string
        mtp_rank_of(parse(text), layout.pp, mtp)
    except ValueError as err:
        raise Infeasible(f"{framework} cannot run this pipeline layout: {err}") from None
    return text


def needs_layout(layers: int, layout: Layout) -> bool:
    """A split only --pipeline-model-parallel-layout expresses (one Megatron-LM's other
    split flags refuse)."""
    if layout.stage_counts is not None:
        return True
    return layout.pp > 1 and split_violation(layers, layout) is not None


def layout_string(layers: int, layout: Layout) -> str | None:
    """The --pipeline-model-parallel-layout value for the layout's split, or None when a
    rank's layers do not split evenly over its chunks."""
    chunks = chunk_layers(layers, layout)
    if chunks is None:
        return None
    stages = []
    for s, n in enumerate(chunks):
        body = "t" * min(n, 1) + (f"*{n}" if n > 1 else "")
        stages.append(("E" if s == 0 else "") + body + ("L" if s == len(chunks) - 1 else ""))
    return "|".join(stages)


def parse(text: str) -> list[str]:
    """The stages of a layout string, repetitions unrolled (Megatron-LM's two passes, groups
    then single characters), cosmetic commas removed. ValueError when the string is empty,
    its groups nest, or its repeats would unroll past MAX_UNROLLED_CHARS: each pass
    measures its result before building it, so ``(tt|)*1000000000`` is refused at once,
    not expanded."""
    text = text.replace(",", "")
    if not text.strip():
        raise ValueError(f"empty; give a layout such as {EXAMPLE!r} or leave it out")
    _groups_close(text)
    for pattern in (GROUP_REPEAT, CHAR_REPEAT):
        text = _unrolled(pattern, text)
    return text.split("|")


def _groups_close(text: str) -> None:
    """ValueError unless every ``(`` closes with a ``)`` before the next ``(``. Megatron-LM
    unrolls one level of groups, so a nested or unpaired parenthesis is never a valid
    layout; left in, it would make GROUP_REPEAT scan the rest of the string from every
    ``(`` (quadratic: seconds for a few ten thousand characters)."""
    depth = 0
    for c in text:
        depth += (c == "(") - (c == ")")
        if depth not in (0, 1):
            break
    if depth:
        raise ValueError(
            f"its parentheses nest or do not pair up; repeat one group at a time as (...)*n, "
            f"e.g. {EXAMPLE!r}"
        )


def _unrolled(pattern: re.Pattern[str], text: str) -> str:
    """``text`` with ``pattern``'s repeats (group 1 times the count in group 2) unrolled;
    ValueError, before anything is built, when the result would pass MAX_UNROLLED_CHARS
    (its length is summed from the matches first)."""
    size = len(text)
    for m in pattern.finditer(text):
        size += len(m.group(1)) * _count(m.group(2)) - len(m.group(0))
    if size > MAX_UNROLLED_CHARS:
        raise ValueError(
            f"it unrolls to more than {MAX_UNROLLED_CHARS:,} characters, far more than any "
            "model's layers need; check its repeat counts (t*n, (...)*n)"
        )
    return pattern.sub(lambda m: m.group(1) * _count(m.group(2)), text)


def _count(digits: str) -> int:
    """A repeat count; MAX_UNROLLED_CHARS + 1 for one with more digits than the limit (any
    larger count only unrolls further), so no huge integer is parsed."""
    digits = digits.lstrip("0") or "0"
    return int(digits) if len(digits) <= _COUNT_DIGITS else MAX_UNROLLED_CHARS + 1


def layout_split(text: str, layers: int, pp: int) -> dict[str, Any]:
    """Layout fields (vp, first/last stage layers, embedding/loss accounting) whose split
    the designer models identically to the layout string (first/last-stage layers only
    where Megatron-LM's flags take them). ValueError (with the reason) when the string is
    malformed or its split is not one the designer models."""
    stages = parse(text)
    if len(stages) % pp:
        raise ValueError(f"{len(stages)} stages do not divide by the pipeline size {pp}")
    for s, stage in enumerate(stages):
        m = STAGE.match(stage)
        if m is None:
            raise ValueError(
                f"stage {s} {stage!r}: the designer reads E (embedding), t (layer), L (loss)"
            )
        if bool(m.group(1)) != (s == 0) or bool(m.group(3)) != (s == len(stages) - 1):
            raise ValueError("E must open the first stage and L close the last")
    counts = [len(STAGE.match(st).group(2)) for st in stages]  # type: ignore[union-attr]
    if sum(counts) != layers:
        raise ValueError(f"it holds {sum(counts)} layers, the model {layers}")
    vp = len(stages) // pp
    per_rank = [sum(counts[r::pp]) for r in range(pp)]
    candidates: list[dict[str, Any]] = [{}]
    candidates += [
        {"embedding_in_split": e, "loss_in_split": lo}
        for e, lo in ((True, True), (False, True), (True, False))
    ]
    ends = {"first_stage_layers": per_rank[0], "last_stage_layers": per_rank[-1]}
    if pp > 1:
        candidates += [{k: ends[k] for k in keys} for keys in (tuple(ends), *zip(ends))]
    for fields in candidates:
        probe = Layout(tp=1, pp=pp, dp=1, micro_batch=1, global_batch=1, vp=vp, **fields)
        if chunk_layers(layers, probe) != counts:
            continue
        # only a split Megatron-LM's flags take (a rank of 0 layers, or an even split of
        # layers p does not divide, is refused: split_violation): stage_counts say the
        # rest (layout_fields)
        if split_violation(layers, probe) is None:
            return {"vp": vp, **fields}
    raise ValueError(
        f"its split ({'/'.join(map(str, counts))} layers per stage) is not one the designer "
        "models (even, first/last-stage layers, embedding/loss accounting)"
    )


def layout_fields(text: str, layers: int, pp: int, mtp_layers: int = 0) -> dict[str, Any]:
    """Layout fields of a --pipeline-model-parallel-layout string: the designer's own split
    fields when they express it (``layout_split``), else ``stage_counts`` (every virtual
    stage's layers, Layout.stage_counts) with its vp. ``m``: the model's MTP layers, placed
    as Megatron-Core allows (``mtp_rank``); ``mtp_rank`` when not the last rank: Megatron-Core
    computes their logits with the loss, on the last. ValueError with the reason otherwise."""
    stages = parse(text)
    counts = []
    for s, stage in enumerate(stages):
        m = STAGE_MTP.match(stage)
        if m is None:
            raise ValueError(
                f"stage {s} {stage!r}: the designer reads E (embedding), t (layer), m (MTP "
                "layer), L (loss)"
            )
        if bool(m.group(1)) != (s == 0) or bool(m.group(4)) != (s == len(stages) - 1):
            raise ValueError("E must open the first stage and L close the last")
        counts.append(len(m.group(2)))
    if len(stages) % pp:
        raise ValueError(f"{len(stages)} stages do not divide by the pipeline size {pp}")
    if sum(counts) != layers:
        raise ValueError(f"it holds {sum(counts)} layers, the model {layers}")
    mtp_rank = mtp_rank_of(stages, pp, mtp_layers)
    plain = "|".join("E" * (s == 0) + "t" * n + "L" * (s == len(counts) - 1)
                     for s, n in enumerate(counts))  # fmt: skip
    placed = {"mtp_rank": mtp_rank} if mtp_rank not in (None, pp - 1) else {}
    try:
        return {**layout_split(plain, layers, pp), **placed}
    except ValueError:
        return {"vp": len(stages) // pp, "stage_counts": tuple(counts), **placed}


def mtp_rank_of(stages: list[str], pp: int, mtp_layers: int) -> int | None:
    """The pipeline rank whose stage holds the ``m`` (MTP) layers, None without any.
    ValueError where Megatron-Core's PipelineParallelLayerLayout.validate_layer_layout
    refuses the stages (megatron/core/transformer/pipeline_parallel_layer_layout.py at
    NVIDIA/Megatron-LM 000c4ac24f61): as many ``m`` as the model's MTP layers, none when
    it has none (--mtp-num-layers unset: lines 110-113); no decoder layer after the first
    ``m`` in layer order, which is stage order (lines 114-119); ``m`` only in the last
    virtual stage of its rank (lines 120-125), all in one stage (lines 126-130). That
    commit also keeps MTP on the last rank with the loss (lines 131-134); megatron-core
    0.19 (core_v0.19.0 lines 136-144, the release the launch check runs) lets it stand
    alone on another rank, which ``mtp_rank`` models, so that rule is not applied."""
    holders = [s for s, st in enumerate(stages) if "m" in st]
    mtp = sum(st.count("m") for st in stages)
    fix = f"e.g. {EXAMPLE!r} (DeepSeek-V3 on PP 8 x VP 4)"
    if mtp != mtp_layers or len(holders) > 1:
        raise ValueError(
            f"it places {mtp} MTP layers (m) in {len(holders)} stages; the model has "
            f"{mtp_layers}, and Megatron-Core needs exactly as many m, all in one stage "
            f"({fix})"
        )
    if not holders:
        return None
    s = holders[0]
    later = next((k for k in range(s + 1, len(stages)) if "t" in stages[k]), None)
    if later is not None:
        raise ValueError(
            f"stage {later} holds decoder layers (t) after the MTP layer (m) of stage {s}; "
            f"Megatron-Core places every t before the m ({fix})"
        )
    if s // pp != len(stages) // pp - 1:
        raise ValueError(
            f"the MTP layer (m) is in stage {s}, virtual stage {s // pp} of rank {s % pp}; "
            f"Megatron-Core needs it in the last virtual stage of its rank "
            f"(stages {len(stages) - pp} to {len(stages) - 1}) ({fix})"
        )
    return s % pp
