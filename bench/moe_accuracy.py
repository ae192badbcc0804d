"""Predicted against published step times of mixture-of-experts runs (issue 17 item 7).

Usage: python bench/moe_accuracy.py [--set all|grok|independent] [--expert-load X]
       [--dispatch as-run|alltoall]   (--expert-load applies to the Grok-1 rows only)
       python bench/moe_accuracy.py --memory   (the independent rows' memory: they all ran)

The calibration set (bench/data/published/published_runs.csv, a copy of the shared
published-runs set; none of its held-out sources is read) has two kinds of MoE rows:

- NVIDIA dgxc-benchmarking v24.11.1 Grok-1 314B proxy runs (8 to 2,048 H100, BF16 and
  FP8): the rows give layers (reduced: 2 to 64), sequence, TP, PP, CP, EP, global batch
  and the step time, not the architecture. The architecture is Grok-1's published one,
  the zoo's grok-1 (xai-org/grok-1 run.py: 48 x 128 = 6,144 wide, 48 query and 8 KV heads
  of 128, 8 experts, top-2, widening factor 8 -> FFN int(8 x 6,144) x 2 / 3 = 32,768 gated
  (model.py ffn_size)), as the release's recipe builds it (GROK_RECIPE: an untied output
  layer and the Llama 3 tokenizer's 128,256 vocabulary, where xAI ties a 131,072 one). DP is GPUs / (TP x PP x CP): the printed
  DP column is inconsistent with the GPU count (the set's README says so).
  Recomputation and micro-batch are not given: none and 1 (Megatron-Core's defaults,
  as calibration/published.py assumes for the dense rows). The release's recipe
  (dgxc-benchmarking v24.11.1, commit 35a9aec, grok1/grok1_314b.yaml) sets no expert
  tensor parallelism, so the experts run at ETP = TP (Megatron-Core's default:
  megatron/training/arguments.py and parallel_state.initialize_model_parallel set
  expert_tensor_parallel_size to tensor_model_parallel_size when it is None; before
  Megatron-Core 0.10's parallel folding the experts were always sharded over TP), and
  its ``optim.grad_sync_dtype: bf16`` makes NeMo build Megatron-Core's DDP with
  ``grad_reduce_in_fp32`` False (nemo megatron_base_model.setup_mcore_distributed_parallel:
  ``grad_reduce_in_fp32=(grad_sync_dtype == 'fp32')``): bf16 gradient buffers, so the
  routed weight-gradient GEMM accumulates into a bf16 main_grad, GROK_WGRAD_ACCUMULATION_BYTES
  = 2 + 2 bytes per weight element (models.expert's default, 8, is Megatron-LM's fp32
  buffer for bf16 runs).
- DeepSeek-V3: the report's 180K H800 GPU-hours per trillion tokens (2,048 H800, PP 16,
  EP 64) is scored as bench/deepseek_v3.py prices it (issue 34: the H800 is in the
  catalog); Megatron-LM's 970 TFLOP/s per GB200 with MXFP8 is scored among the
  independent rows with the layout of the reproduce guide the row cites (256 GB200, PP 8
  x VP 4 by its --pipeline-model-parallel-layout, EP 32).

Each Grok-1 row is evaluated with models.evaluate at its EP and ETP = TP on the megatron-core
profile of the catalog, 8 x 400G NICs per server; the error is (predicted - measured) /
measured, reported per row and as the mean absolute error per precision.

Independent (not fitted) rows, bench/data/published/moe_independent.csv: public MoE
measurements from sources outside the held-out list of the shared published-runs README
and outside the calibration set (Megatron-LM's MoE README, MCore v0.8 / v0.9; NVIDIA's
Megatron-MoE-ModelZoo best-practice scripts and tables), one row per measured figure with
its source URL, commit and date, layout, and what was assumed (``notes``). Nothing is fitted
to them: they are evaluated exactly as the model stands (catalog megatron-core profile,
the catalog's default NIC at its largest count per server, ``expert_load`` 1.0), with
the model from the zoo (models/data/moe_zoo.yaml) at the run's sequence length. Their
columns map onto the model as follows:

- ``recompute``: none, selective and full as Layout takes them; ``elementwise`` (Megatron's
  ``--recompute-modules layernorm moe_act``: output-discarding recomputation of norms and
  the MoE activation, no GEMM re-run) is evaluated as none; ``module: ...`` (the whole MoE
  layer's forward re-run, all-to-alls included) has no equivalent and is not scored.
- ``zero``: 1 for Megatron's distributed optimizer, 3 for Megatron-FSDP.
- ``ep_overlap`` yes (``--overlap-moe-expert-parallel-comm``, the "1F1B overlap"):
  ExpertLayout.ep_overlap 1.0, the all-to-alls hidden; no: 0.0 (models/expert.py).
- ``embedding_loss_in_split`` yes: --account-for-embedding/loss-in-pipeline-split.
- The measured step is ``step_time_s`` when the source prints one, else global batch x
  sequence x Megatron's FLOPs per token / (TFLOP/s per GPU x GPUs), with the FLOP count
  of the source's Megatron version (``flops_convention``): ``megatron-causal-half``, the
  count since Megatron-LM 8873b55d6a (2025-03-06; models.flops.moe_flops_terms_per_token
  "megatron", which cites the formula), or ``megatron-full-square``, the count before it
  (the full s x s attention square: that plus one more attention-core term).
- ``dispatcher``: deepep and hybridep (Megatron's flex dispatcher) run with
  ExpertLayout.dispatch_per_domain (a token crosses the NICs once per remote scale-up
  domain, models/expert.py), alltoall without; ``--dispatch alltoall`` scores every row
  as alltoall (the model before that mechanism).
- ``routing``: forced-balance (``--moe-router-force-load-balancing``) and not stated run at
  ``expert_load`` 1.0 (balanced). A dropless run makes every EP rank wait for the busiest
  one's routed tokens (its routed GEMMs, dispatch bytes and permutation: ExpertLayout's
  ``expert_load``, models/expert.py). No published statistic gives that load, so it is
  FITTED, on the runs measured both ways: for each dropless row with a forced-balance twin
  (same model, GPU, layout, batch and sequence) the implied load is the one at which the
  model's dropless / forced step ratio equals the measured ratio (``dropless_pairs``), and a
  dropless row is predicted at the mean implied load of the OTHER pairs of its model
  (leave-one-out, at least MIN_OTHER_PAIRS of them; ``dropless_loads``), else 1.0. Only
  Qwen3-235B-A22B has such pairs (its four long-context ones, 16K to 128K, implied loads
  1.57-1.61); Mixtral 8x22B's single pair (1.07) cannot be predicted from others, and
  the Mixtral 8x7B rows have no twin: both keep 1.0.
- ``attention_kernels``: ``fused`` for the Megatron-MoE-ModelZoo runs on Hopper (its
  model configs run ``--transformer-impl transformer_engine`` in 2025-26 containers, whose
  attention on Hopper is Transformer Engine's cuDNN fused attention) and Megatron-Bridge
  issue #949's (Megatron-Bridge's GPTModelProvider builds Transformer Engine layers), priced at
  ExpertLayout.attention_kernel_speedup = models.expert.HOPPER_FUSED_ATTENTION_SPEEDUP
  (1.61, the FlashAttention-3 paper's cuDNN / FlashAttention-2 rates on H100; not fitted
  to these rows); ``profile`` (1.0) for the 2024 Megatron-LM README rows (the releases of
  the H100 profile's fit) and the Blackwell rows (their profile was fitted on 2025 runs).
- ``router_dtype``: ``fp32`` where the row's model config sets ``--moe-router-dtype fp32``
  (Megatron-MoE-ModelZoo model_configs/benchmarking/Qwen3-235B-A22B.yaml and
  Qwen3-Next-80B-A3B.yaml at every commit the rows cite, and the DeepSeek-V3 GB200
  reproduce guide's launch script), priced by ExpertLayout.router_fp32 (the router's
  backward GEMMs at the TF32 rate, models.expert.router_fp32_per_microbatch_s); ``bf16``
  where it is not set (Mixtral-8x22B.yaml; the 2024 Mixtral 8x7B README rows predate the
  flag; Pai-Megatron-Patch's Qwen3 example; Megatron-Bridge's Qwen3MoEModelProvider),
  Megatron-Core's default.
- ``permute_fusion``: ``yes`` where the row's config sets ``--moe-permute-fusion``
  (Transformer Engine's fused permute and unpermute kernels; every Megatron-MoE-ModelZoo
  model config the rows cite, xtuner's runs, Megatron-Bridge's Qwen3MoEModelProvider),
  ``no`` where it runs Megatron-Core's default unfused permutation, priced at
  models.expert.UNFUSED_PERMUTE_HBM_PASSES (measured: bench/moe_kernels.py):
  Pai-Megatron-Patch's Qwen3 example (examples/qwen3/run_mcore_qwen3.sh at 2b201af sets
  no such flag; Megatron-LM 6a6cd478's default is off) and the 2024 Mixtral 8x7B README
  rows (Megatron-Core v0.8 / v0.9 predate the fused path, Megatron-LM 8a71e3bc7d,
  2025-02-10, which needs Transformer Engine 2.1). The Grok-1 rows run unfused too
  (GROK_PERMUTE_FUSION: a NeMo 24.11 release, before that commit).
- Fine-grained rows (issue 34: many small experts): Qwen3-30B-A3B on 16 H800 from
  Pai-Megatron-Patch issue #643 (a table of two measured layouts with the example script
  they ran; ``routing`` capacity-1.0, --moe-expert-capacity-factor 1.0, runs at
  ``expert_load`` 1.0 as every routing but dropless does), Qwen3-235B-A22B on 256 H800
  in eight layouts of the same stack (xtuner's Megatron MoE benchmark, the runs of
  Pai-Megatron-Patch issue #658: a coarser model measured the same way, so the two
  models' errors compare on one stack), Qwen3-30B-A3B on 16 H100 from Megatron-Bridge
  issue #949 (a user's layout for the repository's performance script, TP 1 PP 2 VP 2 EP 2,
  MBS 8, full recompute, measured dropless, 14.44 s over 3,000 steps, and in the script's
  token-drop mode, 13.61 s: capacity 1.0 padded, priced at ``expert_load`` 1.0; with no
  forced / dropless pair of the model to fit on, the dropless row runs at 1.0 too; a user's
  measurement in an issue, not the repository's held-out performance summaries), and two
  community reports of runs their authors call slow (Megatron-MoE-ModelZoo issue #7,
  8 B200; Megatron-LM issue #2762, 32 H100): ``scored`` "no: <why>" lists them with their error
  (``listed_errors``) outside the means, since a report asking why a run is slow is
  selected for being slow and gives an approximate figure. An empty ``scored`` scores.

Errors are reported per row and as the mean absolute error per model, GPU and precision.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/deepseek_v3.py

from accuracy import write_catalog_evidence  # noqa: E402

from calibration.published import MODERN_ASSUMPTIONS, MODERN_STACK  # noqa: E402
from catalog import load_catalog  # noqa: E402
from designer.launch.pipeline_layout import layout_fields  # noqa: E402
from models import Hardware, Layout, TransformerSpec, evaluate, flops  # noqa: E402
from models.expert import HOPPER_FUSED_ATTENTION_SPEEDUP, ExpertLayout  # noqa: E402
from models.memory import MODULES  # noqa: E402
from models.zoo import moe_zoo  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "published" / "published_runs.csv"
INDEPENDENT = Path(__file__).resolve().parent / "data" / "published" / "moe_independent.csv"
RECOMPUTE = {"none": "none", "selective": "selective", "full": "full", "elementwise": "none"}
CONVENTIONS = ("megatron-causal-half", "megatron-full-square")
MIN_MOE_RUNS = 3  # a GPU's MoE band needs at least this many scored rows (else extrapolated)
PER_DOMAIN_DISPATCHERS = ("deepep", "hybridep")  # Megatron's flex dispatcher backends
# ``attention_kernels``: the profile's fitted attention rate, or Hopper's fused attention
# (models.expert.HOPPER_FUSED_ATTENTION_SPEEDUP; module docstring)
ATTENTION_KERNELS = {"profile": 1.0, "fused": HOPPER_FUSED_ATTENTION_SPEEDUP}
# ``router_dtype``: Megatron's --moe-router-dtype as the row's config sets it (module docstring)
ROUTER_DTYPES = {"bf16": False, "fp32": True}
# ``permute_fusion``: Megatron's --moe-permute-fusion as the row's config sets it (module
# docstring); the Grok-1 rows' NeMo 24.11 release predates the fused path
PERMUTE_FUSION = {"yes": True, "no": False}
GROK_PERMUTE_FUSION = False
# a dropless row's load is fitted on at least this many OTHER forced / dropless pairs of its
# model (``dropless_loads``): never on one row, never on its own
MIN_OTHER_PAIRS = 2
# the Grok-1 rows' bf16 gradient buffers: the weight-gradient GEMM reads and writes 2 bytes
# per weight element (module docstring: grad_sync_dtype bf16)
GROK_WGRAD_ACCUMULATION_BYTES = 4.0
# The proxy's architecture is the zoo's grok-1 (models/data/moe_zoo.yaml: xai-org/grok-1)
# as the release's recipe builds it (grok1/grok1_314b.yaml at 35a9aec):
# share_embeddings_and_output_weights false (an untied output layer, where xAI ties it) and
# tokenizer meta-llama/Meta-Llama-3-70B (128,256 tokens, a multiple of its
# make_vocab_size_divisible_by 128); the layer count and sequence are each row's
GROK_RECIPE = {"tied_embeddings": False, "vocab": 128256}


def grok_rows() -> list[dict[str, str]]:
    with DATA.open(newline="", encoding="utf-8") as f:
        return [r for r in csv.DictReader(f) if r["model_family"].startswith("Grok-1")]


def other_moe_rows() -> list[dict[str, str]]:
    with DATA.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return [
        r for r in rows if "MoE" in r["model_family"] and not r["model_family"].startswith("Grok-1")
    ]


def predict(row: dict[str, str], expert_load: float) -> tuple[float, float, dict]:
    """(predicted, measured step seconds, breakdown) of one Grok-1 proxy row."""
    layers, seq = int(row["layers"]), int(row["seq_len"])
    spec = moe_zoo()["grok-1"].model_copy(
        update={"name": "grok-1-proxy", "layers": layers, "seq_len": seq, **GROK_RECIPE}
    )
    gpus, tp, pp, cp = (int(row[k]) for k in ("num_gpus", "tp", "pp", "cp"))
    vp = int(row["virtual_pp"]) if row["virtual_pp"].isdigit() else 1
    layout = Layout(
        tp=tp,
        pp=pp,
        dp=gpus // (tp * pp * cp),
        cp=cp,
        vp=vp,
        micro_batch=int(row["micro_batch"] or 1),
        global_batch=int(row["global_batch"]),
        recompute="none",
        precision="fp8" if "FP8" in row["precision"].upper() else "bf16",
    )
    cat = load_catalog().with_stack(MODERN_STACK)
    hw = Hardware.from_catalog(cat, "h100-sxm")
    ex = grok_expert_layout(row, expert_load)
    ev = evaluate(spec, hw, layout, seq, assumptions=MODERN_ASSUMPTIONS, experts=ex)
    return float(ev.step_time_s), float(row["step_time_s"]), ev.breakdown.as_dict()


def grok_expert_layout(row: dict[str, str], expert_load: float) -> ExpertLayout:
    """A Grok-1 row's experts as its recipe runs them: EP as printed, ETP = TP, bf16
    gradient buffers, the unfused permutation (module docstring)."""
    return ExpertLayout(
        ep=int(row["ep"]),
        etp=int(row["tp"]),
        expert_load=expert_load,
        wgrad_accumulation_bytes=GROK_WGRAD_ACCUMULATION_BYTES,
        permute_fusion=GROK_PERMUTE_FUSION,
    )


def independent_rows(path: Path = INDEPENDENT) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def megatron_flops_per_token(spec: TransformerSpec, seq: int, convention: str) -> float:
    """Megatron's training FLOPs per token under the source's FLOP count (module docstring)."""
    if convention not in CONVENTIONS:
        raise ValueError(f"flops_convention {convention!r}: one of {', '.join(CONVENTIONS)}")
    terms = flops.moe_flops_terms_per_token(spec, seq)
    if convention == "megatron-full-square":
        return terms["megatron"] + terms["attention_core"]
    return terms["megatron"]


def measured_step_s(row: dict[str, str], spec: TransformerSpec) -> float:
    """The row's step time: as printed, or from its TFLOP/s per GPU (module docstring)."""
    if row["step_time_s"]:
        return float(row["step_time_s"])
    seq, gb, gpus = int(row["seq_len"]), int(row["global_batch"]), int(row["num_gpus"])
    per_token = megatron_flops_per_token(spec, seq, row["flops_convention"])
    return gb * seq * per_token / (float(row["tflops_per_gpu"]) * 1e12 * gpus)


def recompute_of(row: dict[str, str]) -> tuple[str, frozenset[str]]:
    """The row's ``recompute`` and ``--recompute-modules`` (module docstring)."""
    text = row["recompute"]
    if text.startswith("module:"):
        return "none", frozenset(text.removeprefix("module:").split())
    if text == "elementwise":
        return "none", frozenset({"layernorm", "moe_act"})
    return RECOMPUTE[text], frozenset()


def skip_reason(row: dict[str, str]) -> str | None:
    """Why an independent row cannot be scored, or None. ``scored`` "no: <why>" lists a
    row the model can take but that is not scored (``listed_errors`` prints its error)."""
    if row.get("scored", "").startswith("no"):
        return row["scored"].removeprefix("no:").strip()
    if row["model"] not in moe_zoo():
        return f"model {row['model']} is not in the zoo (see notes)"
    text = row["recompute"]
    if text not in RECOMPUTE and not text.startswith("module:"):
        return f"recompute {text!r} has no equivalent in none/selective/full"
    unknown = recompute_of(row)[1] - set(MODULES)
    if unknown:
        return f"recompute modules {', '.join(sorted(unknown))} are not modelled"
    return None


def independent_spec(row: dict[str, str]) -> TransformerSpec:
    """The zoo's model at the row's sequence, with its ``mtp_layers`` when given."""
    update: dict = {"seq_len": int(row["seq_len"])}
    if row.get("mtp_layers"):
        update["mtp_layers"] = int(row["mtp_layers"])
    return moe_zoo()[row["model"]].model_copy(update=update)


def independent_layout(
    row: dict[str, str], as_run: bool = True, expert_load: float = 1.0
) -> tuple[Layout, ExpertLayout]:
    """The row's Layout and ExpertLayout (module docstring); its DP must fill its GPUs.
    ``as_run`` False: the alltoall dispatcher whatever the row ran. A ``pipeline_layout``
    (Megatron-Core's string) sets the split as ``designer evaluate --pipeline-layout``.
    ``expert_load``: ExpertLayout.expert_load (``dropless_loads``)."""
    n = {k: int(row[k]) for k in ("tp", "pp", "dp", "cp", "vp", "ep", "etp", "num_gpus")}
    split = row["embedding_loss_in_split"] == "yes"
    recompute, modules = recompute_of(row)
    fields: dict = {}
    if row.get("pipeline_layout"):
        spec = independent_spec(row)
        fields = layout_fields(row["pipeline_layout"], spec.layers, n["pp"], spec.mtp_layers)
        if fields["vp"] != n["vp"]:
            raise ValueError(f"{row['name']}: pipeline_layout has vp {fields['vp']}, not {n['vp']}")
    layout = Layout(
        **fields,
        **{k: n[k] for k in ("tp", "pp", "dp", "cp", "vp") if k not in fields},
        micro_batch=int(row["micro_batch"]),
        global_batch=int(row["global_batch"]),
        recompute=recompute,
        zero=int(row["zero"]),
        precision=row["precision"],
        embedding_in_split=split,
        loss_in_split=split,
    )
    if layout.num_gpus != n["num_gpus"]:
        raise ValueError(f"{row['name']}: TP x PP x DP x CP = {layout.num_gpus}, not the GPUs")
    overlap = 1.0 if row["ep_overlap"] == "yes" else 0.0
    per_domain = as_run and row["dispatcher"] in PER_DOMAIN_DISPATCHERS
    ex = ExpertLayout(
        ep=n["ep"],
        etp=n["etp"],
        ep_overlap=overlap,
        dispatch_per_domain=per_domain,
        recompute_modules=modules,
        expert_load=expert_load,
        attention_kernel_speedup=ATTENTION_KERNELS[row["attention_kernels"]],
        router_fp32=ROUTER_DTYPES[row["router_dtype"]],
        permute_fusion=PERMUTE_FUSION[row["permute_fusion"]],
    )
    return layout, ex


def evaluate_independent(row: dict[str, str], as_run: bool = True, expert_load: float = 1.0):
    """models.evaluate of one scorable independent row (module docstring)."""
    layout, ex = independent_layout(row, as_run, expert_load)
    hw = Hardware.from_catalog(load_catalog().with_stack(MODERN_STACK), row["gpu"])
    spec, seq = independent_spec(row), int(row["seq_len"])
    return evaluate(spec, hw, layout, seq, assumptions=MODERN_ASSUMPTIONS, experts=ex)


def predict_independent(
    row: dict[str, str], as_run: bool = True, expert_load: float = 1.0
) -> tuple[float, float, dict]:
    """(predicted, measured step seconds, breakdown) of one scorable independent row."""
    ev = evaluate_independent(row, as_run, expert_load)
    measured = measured_step_s(row, independent_spec(row))
    return float(ev.step_time_s), measured, ev.breakdown.as_dict()


# Rows that ran though the model puts their most loaded GPU over its memory, and why
# (README "A fine-grained H100 row"): tests/test_moe_accuracy.py fails on any other
_TE_LOSS_AND_GIB = (
    "its loss was Transformer Engine's fused cross entropy, which until TE 01bbe3eea "
    "(2026-07-09) kept the gradient in place in the bf16 logits: 2 bytes a logit, not the 4 "
    "priced (planning's 3 GB reserved and 5% headroom would still refuse it, but for reading "
    "an H100's 80 GiB as 80e9 bytes)"
)
MEMORY_EXPLAINED = {
    "qwen3-235b 256xGB200 mxfp8": "its table says 'activation offloading required' "
    "(fine-grained activation offloading is not modelled)",
    **{
        f"qwen3-30b-a3b pp2-vp2-ep2 mbs8 full 16xH100 bf16 {routing} (mbridge 949)": (
            _TE_LOSS_AND_GIB
        )
        for routing in ("dropless", "token-drop")
    },
}


def memory_of_rows(rows: list[dict[str, str]]) -> list[tuple[dict[str, str], dict[str, float]]]:
    """(row, memory of its most loaded GPU) of every scored independent row, as models.evaluate
    prices it under MODERN_ASSUMPTIONS (tensors only: nothing reserved, no headroom), with
    the GPU's catalog capacity, at the load its step is scored at (``dropless_loads``):
    each of these layouts ran."""
    scored, _ = score_independent(rows)
    loads = dropless_loads(rows)
    return [
        (row, evaluate_independent(row, True, loads.get(row["name"], 1.0)).memory.as_dict())
        for row, *_ in scored
    ]


def report_memory(rows: list[dict[str, str]]) -> None:
    """Print each scored row's predicted memory against its GPU's, the parts of any row the
    model puts over it, and why it ran (MEMORY_EXPLAINED)."""
    print("Memory of the independent rows' layouts (all ran): tensors only, GB of 1e9 bytes")
    print(f"  {'run':60} {'GB':>6} {'of':>5}")
    over = []
    for row, mem in memory_of_rows(rows):
        flag = "  over" if mem["total"] > mem["capacity"] else ""
        print(f"  {row['name'][:60]:60} {mem['total']:6.1f} {mem['capacity']:5.0f}{flag}")
        if flag:
            over.append((row, mem))
    kinds = ("weights", "gradients", "optimizer", "activations", "other")
    for row, mem in over:
        parts = ", ".join(f"{k} {mem[k]:.1f}" for k in kinds)
        print(f"  {row['name']}: {parts}; ran because "
              f"{MEMORY_EXPLAINED.get(row['name'], 'NOT EXPLAINED')}")  # fmt: skip


def _twin_key(row: dict[str, str]) -> tuple[str, ...]:
    """What a forced-balance run and its dropless twin share: model, GPU, layout, batch."""
    keys = ("model", "gpu", "tp", "pp", "ep", "cp", "vp", "dp", "micro_batch", "global_batch")
    return tuple(row[k] for k in (*keys, "seq_len", "precision", "recompute", "dispatcher"))


_IMPLIED: dict[tuple, float] = {}  # implied_dropless_load's answers by the rows' fields


def implied_dropless_load(dropless: dict[str, str], forced: dict[str, str]) -> float:
    """The expert_load at which the model's dropless / forced step ratio is the measured one
    (forced balancing: load 1.0; bisection on [1, 4], the step rising with the load)."""
    key = (tuple(dropless.items()), tuple(forced.items()))
    if key not in _IMPLIED:
        _IMPLIED[key] = _bisect_load(dropless, forced)
    return _IMPLIED[key]


def _bisect_load(dropless: dict[str, str], forced: dict[str, str]) -> float:
    spec = independent_spec(dropless)
    target = measured_step_s(dropless, spec) / measured_step_s(forced, spec)
    base = predict_independent(dropless)[0]
    lo, hi = 1.0, 4.0
    for _ in range(32):
        mid = (lo + hi) / 2
        lo, hi = (
            (mid, hi) if predict_independent(dropless, True, mid)[0] / base < target else (lo, mid)
        )
    return (lo + hi) / 2


def dropless_pairs(rows: list[dict[str, str]]) -> list[tuple[dict[str, str], float]]:
    """(dropless row, implied load) of every scorable dropless row with a forced-balance
    twin (``implied_dropless_load``)."""
    forced = {_twin_key(r): r for r in rows if r["routing"] == "forced-balance"}
    return [
        (r, implied_dropless_load(r, forced[_twin_key(r)]))
        for r in rows
        if r["routing"] == "dropless" and _twin_key(r) in forced and not skip_reason(r)
    ]


def dropless_loads(rows: list[dict[str, str]]) -> dict[str, float]:
    """Each dropless row's expert_load, leave-one-out: the mean implied load of the OTHER
    forced / dropless pairs of its model (``dropless_pairs``), where it has at least
    MIN_OTHER_PAIRS of them; a dropless row without them keeps 1.0 (balanced). FITTED:
    the loads come from the measured pairs, never from the row being predicted."""
    pairs = dropless_pairs(rows)
    out = {}
    for row, _ in pairs:
        others = [load for r, load in pairs if r["model"] == row["model"] and r is not row]
        if len(others) >= MIN_OTHER_PAIRS:
            out[row["name"]] = statistics.mean(others)
    return out


def score_independent(
    rows: list[dict[str, str]], as_run: bool = True
) -> tuple[list[tuple[dict[str, str], float, float, dict]], list[tuple[dict[str, str], str]]]:
    """(scored rows with predicted, measured and breakdown; skipped rows with the reason).
    Dropless rows with enough forced / dropless pairs of their model run at their
    leave-one-out load (``dropless_loads``)."""
    scored, skipped = [], []
    loads = dropless_loads(rows)
    for row in rows:
        reason = skip_reason(row)
        if reason:
            skipped.append((row, reason))
        else:
            load = loads.get(row["name"], 1.0)
            scored.append((row, *predict_independent(row, as_run, load)))
    return scored, skipped


def _top_parts(parts: dict) -> str:
    top = sorted(parts.items(), key=lambda kv: -kv[1])[:3]
    return ", ".join(f"{k} {v:.1f}" for k, v in top)


def report_independent(
    rows: list[dict[str, str]], as_run: bool = True
) -> dict[tuple[str, str, str], list[float]]:
    """Print the independent rows' errors; return the absolute errors per (model, GPU,
    precision)."""
    scored, skipped = score_independent(rows, as_run)
    how = "dispatchers as run" if as_run else "every row as the alltoall dispatcher"
    print(f"Independent MoE runs (not fitted), bench/data/published/moe_independent.csv, {how}:")
    print(f"  {'run':44} {'tp/pp/ep/cp/vp':>14} {'measured':>9} {'predicted':>9} {'error':>7}"
          "  largest parts")  # fmt: skip
    groups: dict[tuple[str, str, str], list[float]] = {}
    for row, pred, meas, parts in scored:
        err = (pred - meas) / meas
        groups.setdefault((row["model"], row["gpu"], row["precision"]), []).append(abs(err))
        layout = "/".join(row[k] for k in ("tp", "pp", "ep", "cp", "vp"))
        print(f"  {row['name'][:44]:44} {layout:>14} {meas:9.2f} {pred:9.2f} "
              f"{100 * err:+6.1f}%  {_top_parts(parts)}")  # fmt: skip
    print("  dropless rows' expert_load (implied by their forced-balance twin; used: the mean")
    print("  of the other pairs of the model, leave-one-out; else 1.0):")
    loads = dropless_loads(rows)
    for row, implied in dropless_pairs(rows):
        used = loads.get(row["name"], 1.0)
        print(f"    {row['name'][:44]:44} implied {implied:.3f}  used {used:.3f}")
    print("  per model, GPU and precision (mean absolute error, worst):")
    for (model, gpu, prec), errs in sorted(groups.items()):
        print(f"    {model:16} {gpu:9} {prec:5} {len(errs):2} rows  "
              f"{100 * statistics.mean(errs):5.1f}%  {100 * max(errs):5.1f}%")  # fmt: skip
    for model in sorted({key[0] for key in groups}):
        errs = [e for key, es in groups.items() if key[0] == model for e in es]
        print(f"    {model:16} {'all':15} {len(errs):2} rows  "
              f"{100 * statistics.mean(errs):5.1f}%  {100 * max(errs):5.1f}%")  # fmt: skip
    print("  not scored:")
    for row, reason in skipped:
        print(f"    {row['name']}: {reason}")
    for row, pred, meas in listed_errors(skipped, as_run):
        print(f"    {row['name'][:44]:44} (listed) measured {meas:.2f} s, predicted {pred:.2f} s, "
              f"{100 * (pred - meas) / meas:+.1f}%")  # fmt: skip
    return groups


def listed_errors(
    skipped: list[tuple[dict[str, str], str]], as_run: bool = True
) -> list[tuple[dict[str, str], float, float]]:
    """(row, predicted, measured step seconds) of the skipped rows marked ``scored`` "no"
    whose model the zoo has: evidence shown beside the table, never in its means."""
    out = []
    for row, _ in skipped:
        if row.get("scored", "").startswith("no") and row["model"] in moe_zoo():
            pred, meas, _ = predict_independent(row, as_run)
            out.append((row, pred, meas))
    return out


def deepseek_v3_rows() -> list[tuple[str, str, str, str, float, float]]:
    """The released set's DeepSeek-V3 H800 row, as bench/deepseek_v3.py prices the
    report's layout: GPU-hours per trillion tokens, predicted against 180K."""
    import deepseek_v3 as v3

    layout = v3.report_layout()
    hours = v3.gpu_hours_per_trillion(float(v3.predict(layout).step_time_s), layout)
    name = "DeepSeek-V3 report 2048xH800 fp8 (GPU-hours/T)"
    return [("released", name, "deepseek-v3", "h800", "fp8", hours / v3.REPORT_GPU_HOURS_PER_T)]


def all_scored() -> list[tuple[str, str, str, str, float, float]]:
    """Every scored MoE row: (set, name, model, GPU, precision, predicted / measured)."""
    out = []
    for row in grok_rows():
        pred, meas, _ = predict(row, 1.0)
        prec = "fp8" if "FP8" in row["precision"].upper() else "bf16"
        name = f"grok-1 proxy {row['num_gpus']}xH100 {prec} L{row['layers']}"
        out.append(("released", name, "grok-1", "h100-sxm", prec, pred / meas))
    out += deepseek_v3_rows()
    for row, pred, meas, _ in score_independent(independent_rows())[0]:
        prec = row["precision"]
        out.append(("independent", row["name"], row["model"], row["gpu"], prec, pred / meas))
    return out


def report_all(rows: list[tuple[str, str, str, str, float, float]]) -> None:
    """Per model and per (GPU, precision): rows, mean absolute error, worst."""
    print("Every scored MoE row (released set, DeepSeek-V3 report, independent), per model:")
    for title, key in (("model", lambda r: r[2]), ("GPU, precision", lambda r: (r[3], r[4]))):
        groups: dict = {}
        for r in rows:
            groups.setdefault(key(r), []).append(abs(r[5] - 1.0))
        for k, errs in sorted(groups.items(), key=lambda kv: str(kv[0])):
            label = k if isinstance(k, str) else " ".join(k)
            print(f"  {title:15} {label:24} {len(errs):3} rows  mean {100 * statistics.mean(errs):5.1f}%"
                  f"  worst {100 * max(errs):5.1f}%")  # fmt: skip
    errs = [abs(r[5] - 1.0) for r in rows]
    print(f"  all {len(rows)} rows: mean {100 * statistics.mean(errs):.1f}%, worst {100 * max(errs):.1f}%"
          f", over 35%: {sum(e > 0.35 for e in errs)}")  # fmt: skip


GROK_RELEASE = ("2024-11", "dgxc-benchmarking 24.11.1")  # the released set's Grok-1 rows


def row_releases() -> dict[str, tuple[str, str]]:
    """Scored row name -> (date, software) of the release it measured: the Grok-1 rows
    dgxc-benchmarking 24.11.1's, an independent row its source's commit date and
    repository (bench/data/published/moe_independent.csv ``date``, ``source``)."""
    out = {}
    for row in grok_rows():
        prec = "fp8" if "FP8" in row["precision"].upper() else "bf16"
        out[f"grok-1 proxy {row['num_gpus']}xH100 {prec} L{row['layers']}"] = GROK_RELEASE
    for row in independent_rows():
        out[row["name"]] = (row["date"][:7], row["source"].split()[0])
    return out


def release_span(rows) -> str:
    """The software releases a GPU's MoE rows measured, oldest to newest: the MoE profile
    represents these (issue 34 item 5: MoE speed moves between releases)."""
    known = row_releases()
    found = sorted({known[r[1]] for r in rows if r[1] in known})
    if not found:
        return ""
    names = ", ".join(sorted({name for _, name in found}))
    return f"{found[0][0]} to {found[-1][0]} ({names})"


def moe_evidence_blocks(rows) -> dict[str, list[str]]:
    """Per GPU, the YAML lines of its catalog ``measured_moe:`` block (megatron-core)."""
    from calibration.vtrain import evidence_record

    by_gpu: dict[str, list] = {}
    for r in rows:
        by_gpu.setdefault(r[3], []).append(r)
    blocks = {}
    for gpu, rs in sorted(by_gpu.items()):
        if len(rs) < MIN_MOE_RUNS:  # too few to bound an error: the GPU stays extrapolated
            continue
        precisions = tuple(sorted({r[4] for r in rs}))
        counts = ", ".join(f"{sum(r[4] == x for r in rs)} {x}" for x in precisions)
        sets = f"MoE runs (python bench/moe_accuracy.py): {counts}"
        e = evidence_record([100.0 * (r[5] - 1.0) for r in rs], sets, precisions)
        e = e.model_copy(update={"releases": release_span(rs)})
        lines = ["    measured_moe:", f"      {MODERN_STACK}:"]
        for key, value in e.model_dump().items():
            text = (f'"{value}"' if isinstance(value, str)
                    else "[" + ", ".join(value) + "]" if isinstance(value, tuple) else str(value))  # fmt: skip
            lines.append(f"        {key}: {text}")
        blocks[gpu] = lines
    return blocks


def write_moe_evidence(blocks: dict[str, list[str]]) -> None:
    """Replace (or add) each GPU's measured_moe: block in catalog/data/gpus.yaml."""
    write_catalog_evidence(blocks, "measured_moe")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--expert-load", type=float, default=1.0,
        help="the Grok-1 rows' expert_load (the independent rows keep 1.0)",
    )  # fmt: skip
    parser.add_argument(
        "--set", choices=("all", "grok", "independent"), default="all",
        help="the Grok-1 calibration rows, the independent rows, or both",
    )  # fmt: skip
    parser.add_argument(
        "--dispatch", choices=("as-run", "alltoall"), default="as-run",
        help="independent rows: each with its own dispatcher, or all as alltoall",
    )  # fmt: skip
    parser.add_argument(
        "--evidence", action="store_true",
        help="print the catalog's measured_moe: blocks (with --write: into gpus.yaml)",
    )  # fmt: skip
    parser.add_argument("--write", action="store_true", help="with --evidence: write them")
    parser.add_argument(
        "--memory", action="store_true",
        help="the independent rows' predicted memory against their GPUs' (layouts that ran)",
    )  # fmt: skip
    args = parser.parse_args()
    if args.memory:
        report_memory(independent_rows())
        return
    if args.evidence:
        blocks = moe_evidence_blocks(all_scored())
        if args.write:
            write_moe_evidence(blocks)
        print("".join(f"  {g}:\n" + "\n".join(ls) + "\n" for g, ls in blocks.items()), end="")
        return
    if args.set in ("all", "grok"):
        report_grok(args.expert_load)
    if args.set in ("all", "independent"):
        report_independent(independent_rows(), args.dispatch == "as-run")
    if args.set == "all":
        report_all(all_scored())


def report_grok(expert_load: float) -> None:
    print(f"Grok-1 proxy rows (dgxc-benchmarking v24.11.1), expert_load {expert_load}:")
    print(f"  {'gpus':>5} {'prec':>4} {'L':>3} {'s':>5} {'tp/pp/cp/ep':>12} {'measured':>9} "
          f"{'predicted':>9} {'error':>7}  largest parts")  # fmt: skip
    errors: dict[str, list[float]] = {}
    for row in grok_rows():
        pred, meas, parts = predict(row, expert_load)
        err = (pred - meas) / meas
        errors.setdefault(row["precision"].upper(), []).append(abs(err))
        top = sorted(parts.items(), key=lambda kv: -kv[1])[:3]
        where = ", ".join(f"{k} {v:.1f}" for k, v in top)
        layout = f"{row['tp']}/{row['pp']}/{row['cp']}/{row['ep']}"
        print(
            f"  {row['num_gpus']:>5} {row['precision']:>4} {row['layers']:>3} {row['seq_len']:>5} "
            f"{layout:>12} {meas:9.2f} {pred:9.2f} {100 * err:+6.1f}%  {where}"
        )
    for prec, errs in sorted(errors.items()):
        print(
            f"  {prec}: {len(errs)} rows, mean absolute error {100 * statistics.mean(errs):.1f}%, "
            f"worst {100 * max(errs):.1f}%"
        )
    print("Scored apart (the DeepSeek-V3 report below; the GB200 row among the independent):")
    for row in other_moe_rows():
        print(f"  {row['name']}: {row['gpu']}, {row['num_gpus'] or '256 GPUs (its guide)'}")


if __name__ == "__main__":
    main()
