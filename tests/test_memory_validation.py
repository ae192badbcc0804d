"""Memory check: models.memory against Megatron-LM's published formulas (bench/memory_accuracy.py).

Korthikanti et al. 2022, Table 2 (per-layer activation bytes) with concrete
numbers for the 175B model, and Megatron-LM's theoretical_memory_usage for the
paper's 22B-1T configurations. Independent validation: nothing is fitted.
"""

from __future__ import annotations

import pytest

from helpers import load_bench
from models import Assumptions, Layout, memory

bench_memory = load_bench("memory_accuracy.py", "bench_memory")

# Table 2 for s=2048, b=1, h=12288, a=96, t=8: s*b*h = 25,165,824 and 5as/h = 80
SBH = 2048 * 12288
TABLE2_175B_BYTES = {
    "no parallelism": SBH * 114,  # 34 + 80
    "tensor parallel": SBH * 23,  # 10 + 24/8 + 80/8
    "tensor + sequence parallel": SBH * 14.25,  # (34 + 80)/8
    "tensor parallel + selective": SBH * 13,  # 10 + 24/8
    "tensor + sequence parallel + selective": SBH * 4.25,  # 34/8
    "full recompute": SBH * 2,  # the layer input
}


def test_table2_per_layer_bytes_for_175b():
    got = bench_memory.table2_per_layer()
    assert set(got) == set(TABLE2_175B_BYTES)
    for label, expected in TABLE2_175B_BYTES.items():
        ours, ref = got[label]
        assert ref == pytest.approx(expected, rel=1e-12), label
        assert ours == pytest.approx(expected, rel=1e-12), label
    assert TABLE2_175B_BYTES["no parallelism"] == 2_868_903_936


@pytest.mark.parametrize("name", list(bench_memory.KORTHIKANTI))
def test_model_states_match_megatron_18_bytes(name):
    c = bench_memory.compare(name)
    assert c.ours_states_gb == pytest.approx(c.megatron_states_gb, rel=1e-3)


@pytest.mark.parametrize("name", list(bench_memory.KORTHIKANTI))
def test_activations_match_megatron_within_2_percent(name):
    """The gap is Megatron's embedding dropout (s*b*h*p/t), which the model leaves out."""
    c = bench_memory.compare(name)
    assert c.ours_activations_gb <= c.megatron_activations_gb
    assert c.ours_activations_gb == pytest.approx(c.megatron_activations_gb, rel=0.02)


def test_overhead_is_explicit_and_reported_as_other():
    spec = bench_memory.gpt("22B")
    lay = Layout(tp=8, pp=1, dp=1, micro_batch=1, global_batch=4, zero=0)
    plain = memory.memory_per_gpu(spec, lay, 2048, 80.0, Assumptions())
    a = Assumptions(memory_overhead_fraction=0.05, runtime_reserved_gb=1.5)
    padded = memory.memory_per_gpu(spec, lay, 2048, 80.0, a)
    assert plain.total == pytest.approx(
        plain.weights + plain.gradients + plain.optimizer + plain.activations + plain.other
    )
    assert padded.other - plain.other == pytest.approx(1.5 + 0.05 * plain.total, rel=1e-12)
    assert padded.total == pytest.approx(1.05 * plain.total + 1.5, rel=1e-12)
    # the solvers' linear form agrees with the breakdown
    ((fixed, shard),) = memory.memory_terms(spec, lay, 2048, a)
    assert fixed + shard == pytest.approx(padded.total, rel=1e-12)


def test_overhead_defaults_to_zero():
    a = Assumptions()
    assert a.memory_overhead_fraction == 0.0
    assert a.runtime_reserved_gb == 0.0
