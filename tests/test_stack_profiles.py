"""The modern stack's mechanisms as named terms: each switches on and off and moves the
step time the way its physics says (models/step.py, catalog.specs.Calibration)."""

from __future__ import annotations

import dataclasses

import pytest

from models import Assumptions, Hardware, Layout, evaluate, resolve_model
from models.step import (
    gemm_per_microbatch_s,
    memory_bound_per_microbatch_s,
    stage_work_per_microbatch,
    step_coefficients,
)


@pytest.fixture(scope="module")
def h100(catalog):
    return Hardware.from_catalog(catalog, "h100-sxm")


@pytest.fixture(scope="module")
def spec():
    return resolve_model("llama2-70b")


LAYOUT = dict(tp=8, pp=4, dp=4, micro_batch=1, global_batch=512, vp=1, recompute="none")


def with_cal(hw: Hardware, **changes) -> Hardware:
    cal = hw.gpu.calibration.model_copy(update=changes)
    return dataclasses.replace(hw, gpu=hw.gpu.with_calibration(cal))


def test_default_stack_is_the_modern_profile(h100):
    assert h100.gpu.stack == "megatron-core"
    cal = h100.gpu.calibration
    assert cal.attention_efficiency is not None and cal.fp8_matmul_efficiency is not None


def test_fp8_runs_the_linear_layers_only_in_fp8(h100, spec):
    """Attention stays BF16 under FP8 (same attention time); the linear layers speed up by
    the FP8 peak x FP8 efficiency over the BF16 peak x BF16 efficiency."""
    bf16 = Layout(**LAYOUT, precision="bf16")
    fp8 = Layout(**LAYOUT, precision="fp8")
    cal = h100.gpu.calibration
    no_attention = with_cal(h100, attention_efficiency=1.0)
    t_bf16 = gemm_per_microbatch_s(spec, bf16, 4096, no_attention.gpu)
    t_fp8 = gemm_per_microbatch_s(spec, fp8, 4096, no_attention.gpu)
    work = stage_work_per_microbatch(spec, bf16, 4096, True)
    bf16_rate = h100.gpu.dense_bf16_tflops * 1e12
    fp8_rate = h100.gpu.dense_fp8_tflops * 1e12
    saved = work.linear / (bf16_rate * cal.matmul_efficiency) - work.linear / (
        fp8_rate * cal.fp8_matmul_efficiency
    )
    assert t_bf16 - t_fp8 == pytest.approx(saved, rel=1e-9)


def test_fp8_cast_passes_add_memory_traffic(h100, spec):
    fp8 = Layout(**LAYOUT, precision="fp8")
    base = memory_bound_per_microbatch_s(spec, fp8, 4096, with_cal(h100, fp8_cast_passes=0).gpu)
    more = memory_bound_per_microbatch_s(spec, fp8, 4096, with_cal(h100, fp8_cast_passes=2).gpu)
    assert more > base
    bf16 = Layout(**LAYOUT, precision="bf16")
    assert memory_bound_per_microbatch_s(
        spec, bf16, 4096, with_cal(h100, fp8_cast_passes=2).gpu
    ) == pytest.approx(memory_bound_per_microbatch_s(spec, bf16, 4096, h100.gpu))


def test_causal_skip_halves_the_attention_time(h100, spec):
    lay = Layout(**LAYOUT)
    skip = gemm_per_microbatch_s(spec, lay, 8192, with_cal(h100, causal_attention_skip=True).gpu)
    full = gemm_per_microbatch_s(spec, lay, 8192, with_cal(h100, causal_attention_skip=False).gpu)
    work = stage_work_per_microbatch(spec, lay, 8192, True)
    attention_full = work.attention / (
        h100.gpu.dense_bf16_tflops * 1e12 * h100.gpu.calibration.attention_efficiency
    )
    assert full - skip == pytest.approx(attention_full / 2, rel=1e-9)


def test_flash_attention_recomputes_scores_in_backward(spec):
    """FlashAttention: 3.5 forward-equivalents of attention work (5 matmuls backward for 2
    forward); the 2022 unfused model counts 3, or 4 with selective recomputation."""
    lay = Layout(**LAYOUT)
    fa = stage_work_per_microbatch(spec, lay, 4096, True)
    plain = stage_work_per_microbatch(spec, lay, 4096, False)
    assert fa.attention == pytest.approx(plain.attention * 3.5 / 3.0)
    assert fa.linear == plain.linear and fa.logits == plain.logits


def test_flash_attention_keeps_scores_out_of_hbm(h100, spec):
    """With FlashAttention the memory-bound traffic grows linearly with the sequence (no
    s x s score passes); without it the score term makes it superlinear."""
    lay = dict(LAYOUT, global_batch=512)
    fa_gpu = with_cal(h100, kernel_overhead_us_per_layer=0.0).gpu
    fa = [memory_bound_per_microbatch_s(spec, Layout(**lay), s, fa_gpu) for s in (4096, 8192)]
    plain_gpu = with_cal(h100, attention_efficiency=None, kernel_overhead_us_per_layer=0.0).gpu
    plain = [memory_bound_per_microbatch_s(spec, Layout(**lay), s, plain_gpu) for s in (4096, 8192)]
    assert fa[1] / fa[0] == pytest.approx(2.0, rel=1e-6)
    assert plain[1] / plain[0] > 2.05


def coefficients(h100, spec, **calibration):
    """The step coefficients of LAYOUT at 4K tokens on an H100 with ``calibration`` changed."""
    gpu = with_cal(h100, **calibration).gpu
    return step_coefficients(spec, Layout(**LAYOUT), 4096, gpu, h100.network, Assumptions())


def test_tp_overlap_hides_its_fraction(h100, spec):
    none = coefficients(h100, spec, tp_overlap_fraction=0.0)
    half = coefficients(h100, spec, tp_overlap_fraction=0.5)
    assert none.tp_mb_s > 0
    assert half.tp_mb_s == pytest.approx(none.tp_mb_s / 2)


def test_pp_overlap_hides_its_fraction_of_the_sends(h100, spec):
    none = coefficients(h100, spec, pp_overlap_fraction=0.0)
    most = coefficients(h100, spec, pp_overlap_fraction=0.75)
    assert most.pp_send_bytes == pytest.approx(none.pp_send_bytes / 4)
    assert most.pp_send_intra_s == pytest.approx(none.pp_send_intra_s / 4)


def test_gradient_overlap_hides_dp_traffic_behind_one_microbatch(h100, spec):
    """The distributed optimizer's reduce-scatter / all-gather hide behind the window;
    with the overlap off the whole DP time is exposed."""
    lay = Layout(**dict(LAYOUT, dp=64, global_batch=4096))
    off = evaluate(spec, with_cal(h100, grad_overlap_fraction=0.0), lay)
    on = evaluate(spec, with_cal(h100, grad_overlap_fraction=1.0), lay)
    assert off.breakdown.dp_comm > 0
    assert on.breakdown.dp_comm < off.breakdown.dp_comm
    c = step_coefficients(spec, lay, 4096, h100.gpu, h100.network, Assumptions())
    assert c.dp_window_s(0.0) == pytest.approx(
        h100.gpu.calibration.grad_overlap_fraction * (c.compute_mb_s + c.tp_mb_s)
    )
    # the question's --dp-overlap can only widen the window
    assert c.dp_window_s(1.0) >= c.dp_window_s(0.0)


def test_modern_profile_is_faster_than_2022_on_h100(catalog, spec):
    """The point of issue 14: on H100 the 2022 fit predicts modern runs far too slow."""
    lay = Layout(tp=4, pp=4, dp=8, cp=1, vp=5, micro_batch=1, global_batch=1024)
    modern = evaluate(spec, Hardware.from_catalog(catalog, "h100-sxm"), lay)
    old = evaluate(spec, Hardware.from_catalog(catalog.with_stack("vtrain-2022"), "h100-sxm"), lay)
    assert modern.step_time_s < 0.8 * old.step_time_s
    assert 0.45 < modern.mfu < 0.65


def test_evaluate_stack_option(tmp_path):
    from click.testing import CliRunner

    from designer.cli import cli

    args = ["evaluate", "--model", "llama2-70b", "--gpu", "h100-sxm", "--tp", "8", "--pp", "4"]
    args += ["--dp", "4", "--global-batch", "512", "--json"]
    runner = CliRunner()
    import json

    modern = json.loads(runner.invoke(cli, args).output)
    old = json.loads(runner.invoke(cli, [*args, "--stack", "vtrain-2022"]).output)
    assert modern["step_time_s"] < old["step_time_s"]
    bad = runner.invoke(cli, [*args, "--stack", "nope"])
    assert bad.exit_code == 2 and "--stack" in bad.output


def test_fp8_keeps_weight_copies_in_memory(spec):
    """FP8 adds the cached FP8 weight copies (fp8_weight_cache_bytes per parameter of the
    stage), in memory_per_gpu and in the solver's memory_terms alike."""
    from models.memory import memory_per_gpu, memory_terms, rank_params
    from models.pipeline import stage_loads

    a = Assumptions()
    bf16 = Layout(**LAYOUT, precision="bf16")
    fp8 = Layout(**LAYOUT, precision="fp8")
    m16 = memory_per_gpu(spec, bf16, 4096, 80.0, a)
    m8 = memory_per_gpu(spec, fp8, 4096, 80.0, a)
    params = max(rank_params(spec, fp8, load) for load in stage_loads(spec.layers, fp8))
    # the most loaded rank (first or last) holds about the largest rank's parameters
    assert m8.weights - m16.weights == pytest.approx(
        params * a.fp8_weight_cache_bytes / 1e9, rel=1e-4
    )
    fixed, sharded = max(memory_terms(spec, fp8, 4096, a))
    assert fixed + sharded / (fp8.dp * fp8.cp) == pytest.approx(m8.total, rel=1e-9)


def test_flash_attention_stores_no_score_matrix(catalog, spec):
    """Under a FlashAttention profile "none" keeps what "selective" keeps; under the 2022
    profile the 5as/h score term makes "none" much larger."""
    lay = dict(LAYOUT, recompute="none")
    modern = evaluate(spec, Hardware.from_catalog(catalog, "h100-sxm"), Layout(**lay))
    old = evaluate(
        spec, Hardware.from_catalog(catalog.with_stack("vtrain-2022"), "h100-sxm"), Layout(**lay)
    )
    selective = evaluate(
        spec, Hardware.from_catalog(catalog, "h100-sxm"), Layout(**dict(lay, recompute="selective"))
    )
    assert modern.memory.activations == pytest.approx(selective.memory.activations)
    assert old.memory.activations > 1.5 * modern.memory.activations


def test_published_runs_fit_in_predicted_memory(catalog):
    """Every published run did run: the memory model (FlashAttention, FP8 weight copies)
    must say almost all of them fit (bench/memory_accuracy.py --published lists the exceptions)."""
    from calibration.published import read_runs, runs_over_memory

    runs, _ = read_runs(catalog)
    over = runs_over_memory(runs, catalog)
    assert len(over) <= 0.05 * len(runs), [r.name for r, _, _ in over]
