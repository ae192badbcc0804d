"""ZeRO-3 / FSDP parameter all-gather overlap: the public FSDP runs with and without it.

Usage: python bench/fsdp_overlap.py

The step model charges ZeRO-3's per-micro-batch parameter all-gathers (forward and
backward) less what prefetching hides behind the micro-batch's own compute
(models.step.zero3_gather_exposed_s; the stack profile's param_gather_overlap_fraction).
None of the calibration set's runs is evaluated under ZeRO-3 (bench/accuracy.py --skipped:
the FSDP stacks have no profile, OPT-175B's layout is not given), so this script evaluates
the FSDP runs of public reports on the layouts stated below, under the megatron-core
profile, with the fraction as the catalog has it and at 0 (the charge before issue 31):

- LLaMA-65B (Touvron et al. 2023, "LLaMA", section 2.4): 380 tokens/s/GPU on 2,048
  A100-80GB, 4M-token batches of 2,048-token sequences. Layout [assumed]: TP 8 (the
  paper's "model parallelism"), ZeRO-3 over DP 256, one micro-batch of 8 sequences a step
  (2,048 sequences / 256); the issue's example runs the same batch as 8 micro-batches of 1.
- OPT-175B (Zhang et al. 2022, "OPT", section 2.4; bench/data/published row "OPT-175B"):
  "up to 147 TFLOP/s per GPU" on 992 A100-80GB, FSDP with Megatron-LM TP, 2M-token
  batches. Layout [assumed]: TP 8, DP 124, 992 sequences a step (8 per DP rank) as 1 to 8
  micro-batches; full recomputation (metaseq's activation checkpointing).

The reported figures are what the runs achieved; the layouts are guesses, so the rows show
how the overlap term moves the prediction, not a fit (the fraction is not fitted on them).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from catalog import load_catalog  # noqa: E402
from models.evaluate import Hardware, evaluate  # noqa: E402
from models.layout import Layout  # noqa: E402
from models.spec import TransformerSpec  # noqa: E402

LLAMA_65B = TransformerSpec(
    name="llama-65b", layers=80, hidden=8192, heads=64, ffn_hidden=22016, vocab=32000,
    seq_len=2048, gated_mlp=True,
)  # fmt: skip
OPT_175B = TransformerSpec(
    name="opt-175b", layers=96, hidden=12288, heads=96, vocab=50272, seq_len=2048,
)  # fmt: skip

# (label, spec, layout, reported value, unit)
RUNS = [
    *(
        (
            f"LLaMA-65B TP 8 ZeRO-3 DP 256, {8 // mb} micro-batch(es) of {mb}",
            LLAMA_65B,
            Layout(tp=8, pp=1, dp=256, micro_batch=mb, global_batch=2048, zero=3),
            380.0,
            "tokens/s/GPU",
        )
        for mb in (8, 4, 2, 1)
    ),
    *(
        (
            f"OPT-175B TP 8 ZeRO-3 DP 124, {8 // mb} micro-batch(es) of {mb}",
            OPT_175B,
            Layout(tp=8, pp=1, dp=124, micro_batch=mb, global_batch=992, zero=3, recompute="full"),
            147.0,
            "TFLOP/s/GPU",
        )
        for mb in (8, 4, 2, 1)
    ),
]


def predicted(hw: Hardware, spec: TransformerSpec, layout: Layout, unit: str) -> float:
    ev = evaluate(spec, hw, layout)
    if unit == "tokens/s/GPU":
        return ev.tokens_per_s / layout.num_gpus
    return ev.model_tflops_per_gpu


def main() -> None:
    cat = load_catalog()
    hw = Hardware.from_catalog(cat, "a100-80gb")
    cal = hw.gpu.calibration
    off = Hardware(
        hw.gpu.with_calibration(cal.model_copy(update={"param_gather_overlap_fraction": 0.0})),
        hw.nic,
        hw.nics_per_node,
        hw.switch,
        hw.facility,
    )
    print(
        f"a100-80gb megatron-core profile, param_gather_overlap_fraction "
        f"{cal.param_gather_overlap_fraction:g} (on) vs 0 (off)"
    )
    print(f"{'run':58} {'reported':>9} {'off':>8} {'err':>7} {'on':>8} {'err':>7}")
    for label, spec, layout, reported, unit in RUNS:
        before = predicted(off, spec, layout, unit)
        after = predicted(hw, spec, layout, unit)
        print(
            f"{label:58} {reported:9.0f} {before:8.0f} {before / reported - 1:+7.1%} "
            f"{after:8.0f} {after / reported - 1:+7.1%}  ({unit})"
        )


if __name__ == "__main__":
    main()
