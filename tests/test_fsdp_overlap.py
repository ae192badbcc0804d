"""ZeRO-3 / FSDP parameter all-gathers hidden behind each micro-batch's compute (issue 31,
item 4): models.step.zero3_microbatch_s and the profile's param_gather_overlap_fraction;
the per-micro-batch gradient reduce-scatter, zero3_microbatch_grad_reduce_bytes."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise

import pytest

from helpers import load_bench
from models.evaluate import Hardware, evaluate
from models.layout import Assumptions, Layout
from models.memory import stage_params
from models.step import group_reduce_s, step_coefficients
from models.zoo import resolve_model

fsdp = load_bench("fsdp_overlap.py", "bench_fsdp_overlap")


@pytest.fixture(scope="module")
def a100(catalog):
    """The A100 profile with the gathers only (the per-micro-batch gradient reduce-scatter
    off: its own tests below)."""
    hw = Hardware.from_catalog(catalog, "a100-80gb")
    return fsdp.with_profile(
        hw, zero3_microbatch_grad_reduce_bytes=0.0, zero3_overlap_hbm_passes=0.0
    )


def _without_overlap(hw: Hardware) -> Hardware:
    cal = hw.gpu.calibration.model_copy(update={"param_gather_overlap_fraction": 0.0})
    return Hardware(hw.gpu.with_calibration(cal), hw.nic, hw.nics_per_node, hw.switch, hw.facility)


def test_megatron_core_profiles_prefetch_the_gathers(catalog):
    for name in ("h100-sxm", "a100-80gb", "b200", "mi300x"):
        gpu = catalog.gpu(name)
        assert gpu.calibration.param_gather_overlap_fraction == 1.0, name
        assert gpu.calibration.zero3_microbatch_grad_reduce_bytes == 4.0, name  # fp32
        assert gpu.calibration.zero3_overlap_hbm_passes == 3.0, name
        old = gpu.with_stack("vtrain-2022").calibration
        assert old.param_gather_overlap_fraction == 0.0
        assert old.zero3_overlap_hbm_passes == 0.0
        assert old.zero3_microbatch_grad_reduce_bytes == 0.0


def test_each_micro_batch_hides_its_own_gathers(a100):
    """dp_comm = (m - 1) max(0, gathers - f (compute + TP)) + the last micro-batch's
    max(0, gathers + reduction - max(f (compute + TP), window)): its compute is one
    window, shared by its gathers and the step's reduction (models.step.zero3_exposed_s)."""
    spec, lay = fsdp.LLAMA_65B, Layout(tp=8, pp=1, dp=256, micro_batch=4, global_batch=2048, zero=3)
    a = Assumptions(flash_attention=a100.gpu.calibration.flash_attention)
    c = step_coefficients(spec, lay, 2048, a100.gpu, a100.network, a)
    node = a100.network.node_bw_gb_per_s
    gathers = group_reduce_s(c, c.zero3_gather_bytes, lay.dp, node)
    reduce = group_reduce_s(c, c.dp_bytes, lay.dp, node)
    hidden = c.compute_mb_s + c.tp_mb_s
    assert c.gather_overlap_s == pytest.approx(hidden)
    m = lay.grad_accum
    window = c.dp_window_s(0.0)
    last = max(0.0, gathers + reduce - max(hidden, window))
    want = (m - 1) * max(0.0, gathers - hidden) + last
    assert evaluate(spec, a100, lay).breakdown.dp_comm == pytest.approx(want)
    # without prefetch (fraction 0) every gather is charged, as before issue 31; the last
    # micro-batch's window hides its gathers and the reduction together
    before = (m - 1) * gathers + max(0.0, gathers + reduce - window)
    assert evaluate(spec, _without_overlap(a100), lay).breakdown.dp_comm == pytest.approx(before)
    assert before > want


def test_the_issue_llama_65b_example(a100):
    """The issue: gradient accumulation took LLaMA-65B from 392 to 87 tokens/s/GPU. One
    micro-batch a step is unchanged (the last-micro-batch window already hid its gathers);
    two of four sequences recover part of it, 231 to 302 (the first micro-batch hides its
    gathers; the last one's window hides its gathers and the step's reduction together, not
    each in full: models.step.zero3_exposed_s); eight of one stay NIC-bound (the gathers
    outlast compute)."""

    def per_gpu(hw, mb):
        lay = Layout(tp=8, pp=1, dp=256, micro_batch=mb, global_batch=2048, zero=3)
        return evaluate(fsdp.LLAMA_65B, hw, lay).tokens_per_s / lay.num_gpus

    off = _without_overlap(a100)
    assert per_gpu(a100, 8) == pytest.approx(per_gpu(off, 8))
    assert per_gpu(off, 1) == pytest.approx(87, abs=1)
    assert per_gpu(off, 4) == pytest.approx(231.3, abs=0.1)
    assert per_gpu(a100, 4) == pytest.approx(302.1, abs=0.1)
    assert per_gpu(off, 1) < per_gpu(a100, 1) < 0.5 * 380


def test_bench_script_prints_both_columns(capsys):
    fsdp.main()
    out = capsys.readouterr().out
    assert "param_gather_overlap_fraction 1 (on) vs 0 (off)" in out
    assert out.count("LLaMA-65B") == 4 and out.count("OPT-175B") == 4
    assert out.count("(tokens/s/GPU)") == 4 + 16 and "level-free" in out
    assert "22 runs: mean absolute error" in out and "median bias taken out" in out


def test_sweeps_zero3_rows_are_compared_with_and_without(catalog):
    rows = fsdp.sweep_errors(fsdp.catalog_with(catalog, zero3_overlap_hbm_passes=0.0))
    assert len(rows) == 22 and all("zero3" in layout for _, layout, *_ in rows)
    # the term only removes time: never slower with it (without the contention of what it
    # hides, which the step's last window would otherwise have hidden for free)
    assert all(on <= off + 1e-12 for *_, on, off in rows)
    # it hides the PP rows' gather, once a step (their stages keep the parameters
    # unsharded: models.step.zero3_gathers_once; gathered every micro-batch, before, some
    # moved by more than 1%); the others run one micro-batch a step, whose window the
    # step's reduction shares
    pp = [(on, off) for _, layout, _, on, off in rows if " pp1 " not in f" {layout} "]
    assert len(pp) == 10 and all(0 < off - on < 0.005 for on, off in pp)
    contended = fsdp.sweep_errors(catalog)
    assert all(c[3] >= r[3] - 1e-12 for c, r in zip(contended, rows, strict=True))


def test_olmo_core_rows_pin_the_readme_table_and_scripts():
    """allenai/OLMo-core README.md at e27ba74550f1 (2024-11-05): tokens/s per H100 of the
    official scripts (src/scripts/train/*.py at that commit: rank micro-batch 8/2/2/1 x
    4,096 tokens, global batch 1,024 x 4,096, 13B 2,048 x 4,096; FSDP, no TP)."""
    assert fsdp.OLMO_CORE_COMMIT == "e27ba74550f12a685b95aded46c88f845a7e2d6d"
    assert fsdp.OLMO_CORE_COMMIT in fsdp.OLMO_CORE_URL
    table = {size: (mb, gbs, tps) for size, _, mb, gbs, tps in fsdp.OLMO_CORE_TABLE}
    assert table == {
        "1B": (8, 1024, {"bf16": 55_000, "fp8": 65_000}),
        "7B": (2, 1024, {"bf16": 10_000, "fp8": 13_000}),
        "8B": (2, 1024, {"bf16": 9_500, "fp8": 12_500}),
        "13B": (1, 2048, {"bf16": 4_600, "fp8": 5_500}),
    }
    specs = fsdp.OLMO_CORE_SPECS
    assert (specs["7B"].layers, specs["7B"].hidden, specs["7B"].ffn_hidden) == (32, 4096, 11008)
    assert (specs["13B"].layers, specs["13B"].hidden, specs["13B"].ffn_hidden) == (40, 5120, 13824)
    assert (specs["8B"].kv_heads, specs["8B"].ffn_hidden) == (8, 14336)
    assert (specs["1B"].layers, specs["1B"].ffn_hidden) == (18, 5632)
    assert {s.vocab for s in specs.values()} == {100_352} and {
        s.seq_len for s in specs.values()
    } == {4096}
    runs = fsdp.olmo_core_runs()
    assert len(runs) == 4 * 2 * len(fsdp.OLMO_CORE_GPU_COUNTS)
    for _, _spec, lay, _, unit in runs:
        assert (lay.tp, lay.pp, lay.zero, lay.recompute) == (1, 1, 3, "none")
        assert lay.num_gpus in fsdp.OLMO_CORE_GPU_COUNTS and unit == "tokens/s/GPU"


def test_olmo_core_rows_are_compared_with_and_without_the_term(catalog):
    h100 = Hardware.from_catalog(catalog, "h100-sxm")
    rows = fsdp.compare(h100, fsdp.olmo_core_runs())
    assert len(rows) == 16
    free = fsdp.compare(
        fsdp.with_profile(h100, zero3_overlap_hbm_passes=0.0), fsdp.olmo_core_runs()
    )
    # the term only hides time: never slower with it (without the contention of what it
    # hides), and it moves the 7B-13B rows
    assert all(on >= off - 1e-9 for _, _, off, on, _ in free)
    assert any(on > off * 1.05 for _, _, off, on, _ in rows)
    # the 1B rows: each micro-batch's compute hides its own gathers (off, every micro-batch
    # but the last exposes them; the last window no longer hides them all), and with the
    # contention of what it hides they still gain from it
    assert all(on > off for label, _, off, on, _ in free if " 1B " in label)
    assert all(off < on for label, _, off, on, _ in rows if " 1B " in label)
    a100 = Hardware.from_catalog(catalog, "a100-80gb")
    sweep = fsdp.fraction_sweep(a100, h100)
    assert [f for f, *_ in sweep] == list(fsdp.SWEEP_FRACTIONS)
    # the level-free error on the OLMo-core rows grows with the fraction without the
    # contention (README figures: 3.3% to 7.9%), and by a quarter of that with it (4.3%)
    free_sweep = fsdp.fraction_sweep(
        *(fsdp.with_profile(hw, zero3_overlap_hbm_passes=0.0) for hw in (a100, h100))
    )
    assert free_sweep[0][1] + 0.04 < free_sweep[-1][1]
    assert sweep[-1][1] - sweep[0][1] < (free_sweep[-1][1] - free_sweep[0][1]) / 4
    # and the mean absolute error grows less with it
    assert sweep[-1][2] < free_sweep[-1][2] - 0.05


def _olmo_13b_64():
    """OLMo-core 13B on 64 H100 (32 micro-batches of one sequence, gathers over the NICs)."""
    return next(r for r in fsdp.olmo_core_runs() if " 13B bf16" in r[0] and "64 H100" in r[0])


def test_gradient_reduce_scatter_each_micro_batch_prices_as_the_formula_says(catalog):
    """zero3_microbatch_grad_reduce_bytes (PyTorch FSDP2 reduce-scatters after every backward
    unless set_requires_gradient_sync(False); OLMo-core's reduce_dtype float32: 4 bytes):
    per micro-batch max(tail, gathers + reduce-scatter - window), the tail (the backward's
    last group: embedding, output, norm and the first layer) outside every window, the last
    micro-batch's window shared with the step's own reduction, which keeps only the weights'
    half. Off (0), the step is as before."""
    h100 = Hardware.from_catalog(catalog, "h100-sxm")
    _, spec, lay, _, _ = _olmo_13b_64()
    free = fsdp.with_profile(h100, zero3_overlap_hbm_passes=0.0)  # its own test below
    on = fsdp.with_profile(free, zero3_microbatch_grad_reduce_bytes=4.0)
    off = fsdp.with_profile(free, zero3_microbatch_grad_reduce_bytes=0.0)
    a = Assumptions(flash_attention=h100.gpu.calibration.flash_attention)
    c = step_coefficients(spec, lay, spec.seq_len, on.gpu, on.network, a)
    c0 = step_coefficients(spec, lay, spec.seq_len, off.gpu, off.network, a)
    params = stage_params(spec, lay, "most")
    assert c.zero3_grad_rs_bytes == pytest.approx(params * 4.0 / 2)
    tail_params = params - (spec.layers - 1) * spec.layer_params()
    assert tail_params == pytest.approx(
        2 * spec.vocab * spec.hidden + spec.hidden + spec.layer_params()
    )
    assert c.zero3_grad_rs_tail_bytes == pytest.approx(tail_params * 4.0 / 2)
    assert c.dp_bytes == pytest.approx(params * a.weight_bytes / 2)
    assert c0.zero3_grad_rs_bytes == 0 and c0.dp_bytes == pytest.approx(params * 4.0 / 2)
    node, g, m = on.network.node_bw_gb_per_s, lay.dp, lay.grad_accum
    gathers = group_reduce_s(c, c.zero3_gather_bytes, g, node)
    rs = group_reduce_s(c, c.zero3_grad_rs_bytes, g, node)
    tail = group_reduce_s(c, c.zero3_grad_rs_tail_bytes, g, node)
    window = c.gather_overlap_s
    shared = max(window, c.dp_window_s(0))  # the last micro-batch: one window, not two
    reduce = group_reduce_s(c, c.dp_bytes, g, node)
    want = (m - 1) * max(tail, gathers + rs - window) + max(tail, gathers + rs + reduce - shared)
    ev_on, ev_off = evaluate(spec, on, lay), evaluate(spec, off, lay)
    assert ev_on.breakdown.dp_comm == pytest.approx(want)
    reduce0 = group_reduce_s(c0, c0.dp_bytes, g, node)
    before = (m - 1) * max(0.0, gathers - window) + max(0.0, gathers + reduce0 - shared)
    assert ev_off.breakdown.dp_comm == pytest.approx(before)
    # only the data-parallel part moves, by the formula's difference
    assert ev_on.step_time_s - ev_off.step_time_s == pytest.approx(want - before)
    assert want > before + 0.5  # 32 micro-batches over the NICs: about a second a step


def test_gradient_reduce_scatter_term_leaves_zero_1_alone(catalog):
    """The solvers plan ZeRO-1: its once-a-step reduction does not read the term."""
    h100 = Hardware.from_catalog(catalog, "h100-sxm")
    _, spec, lay, _, _ = _olmo_13b_64()
    z1 = replace(lay, zero=1)
    on = fsdp.with_profile(h100, zero3_microbatch_grad_reduce_bytes=4.0)
    off = fsdp.with_profile(h100, zero3_microbatch_grad_reduce_bytes=0.0)
    assert evaluate(spec, on, z1).step_time_s == evaluate(spec, off, z1).step_time_s


def test_bench_summary_compares_the_reduce_scatter_on_and_off(catalog):
    summary = dict(fsdp.grad_reduce_summary(catalog))
    assert set(summary) == set(fsdp.GRAD_REDUCE_BYTES) == {0.0, 4.0}
    off, fp32 = summary[0.0], summary[4.0]
    # the gather overlap's OLMo-core error falls with the reduce-scatter charged (README)
    assert fp32["OLMo-core MAE"][1] < off["OLMo-core MAE"][1]
    assert fp32["OLMo-core level-free"][1] < off["OLMo-core level-free"][1]


def test_pipeline_stages_reduce_once_a_step(catalog):
    """torch.distributed.pipelining's stage backward sets set_requires_gradient_sync(False)
    on FSDP modules until the last backward: with PP the term is off on PyTorch's pipeline
    stages (zero3_pp_unsharded_params). Megatron-Core's FSDP reduce-scatters every
    backward with PP too (custom_fsdp at 1e057005: grad_reduce_every_bprop), so on the
    megatron-core profile it stays on, as without PP."""
    h100 = Hardware.from_catalog(catalog, "h100-sxm")
    _, spec, lay, _, _ = _olmo_13b_64()
    pp = replace(lay, pp=2, dp=lay.dp // 2)
    a = Assumptions(flash_attention=h100.gpu.calibration.flash_attention)
    torch = fsdp.with_profile(
        h100, zero3_microbatch_grad_reduce_bytes=4.0, zero3_pp_unsharded_params=True
    )
    c = step_coefficients(spec, pp, spec.seq_len, torch.gpu, torch.network, a)
    assert c.zero3_grad_rs_bytes == 0 and c.zero3_grad_rs_tail_bytes == 0
    mc = fsdp.with_profile(h100, zero3_microbatch_grad_reduce_bytes=4.0)
    assert not mc.gpu.calibration.zero3_pp_unsharded_params
    c = step_coefficients(spec, pp, spec.seq_len, mc.gpu, mc.network, a)
    params = stage_params(spec, pp, "most")
    assert c.zero3_grad_rs_bytes == pytest.approx(params * 4.0 / 2)
    assert c.zero3_grad_rs_tail_bytes > 0


def _olmo_13b_8():
    """OLMo-core 13B on one node of 8 H100 (256 micro-batches of one sequence, NVLink)."""
    return next(r for r in fsdp.olmo_core_runs() if " 13B bf16" in r[0] and ", 8 H100" in r[0])


def test_hidden_collectives_slow_the_compute_by_their_hbm_traffic(catalog):
    """zero3_overlap_hbm_passes: each micro-batch's hidden ZeRO-3 collectives cost
    passes x the bytes a GPU sends (2 B (1 - 1/g)) x the hidden share at the HBM bandwidth,
    outside every window (compute lost, not communication); 0 leaves the step as before."""
    h100 = Hardware.from_catalog(catalog, "h100-sxm")
    _, spec, lay, _, _ = _olmo_13b_8()
    on = fsdp.with_profile(h100, zero3_overlap_hbm_passes=3.0)
    off = fsdp.with_profile(h100, zero3_overlap_hbm_passes=0.0)
    a = Assumptions(flash_attention=h100.gpu.calibration.flash_attention)
    c = step_coefficients(spec, lay, spec.seq_len, on.gpu, on.network, a)
    nbytes = c.zero3_gather_bytes + c.zero3_grad_rs_bytes
    g, node, m = lay.dp, on.network.node_bw_gb_per_s, lay.grad_accum
    comm = group_reduce_s(c, nbytes, g, node)
    assert comm < c.gather_overlap_s  # one node's NVLink: each micro-batch hides them all
    hbm = on.gpu.memory_bw_tb_per_s * 1e12
    per_mb = 3.0 * 2.0 * nbytes * (1 - 1 / g) / hbm
    ev_on, ev_off = evaluate(spec, on, lay), evaluate(spec, off, lay)
    assert ev_on.breakdown.dp_comm - ev_off.breakdown.dp_comm == pytest.approx(m * per_mb)
    assert ev_on.breakdown.compute == ev_off.breakdown.compute
    # about a third of the collectives' own time on H100 (3 x 360 / 3,350 GB/s)
    assert 0.25 * comm < per_mb < 0.4 * comm
    # with the overlap off nothing is hidden, so nothing contends
    z = fsdp.with_gather_overlap
    assert (
        evaluate(spec, z(on, 0.0), lay).step_time_s == evaluate(spec, z(off, 0.0), lay).step_time_s
    )
    # ZeRO-1 (the solvers' plans) never reads it
    z1 = replace(lay, zero=1)
    assert evaluate(spec, on, z1).step_time_s == evaluate(spec, off, z1).step_time_s


def test_contention_and_the_leave_one_size_out_level(catalog):
    """The bench's contention summary (passes 0 and 3), the OLMo-core rows scaled by a level
    fitted on the other sizes only, and the fms-fsdp rows under ZeRO-3."""
    summary = dict(fsdp.contention_summary(catalog))
    assert set(summary) == set(fsdp.CONTENTION_PASSES) == {0.0, 3.0}
    free, contended = summary[0.0], summary[3.0]
    # the overlap's OLMo-core error falls with the contention; the LLaMA/OPT rows (assumed
    # micro-batching and reduce dtype) are better with the overlap than without it, 50.8%
    # against 56.2%, but above their no-reduce-scatter error (47.2%) since the last
    # micro-batch's window hides its gathers and the reduction together, not each in full
    assert contended["OLMo-core MAE"][1] < free["OLMo-core MAE"][1] - 0.05
    assert contended["OLMo-core MAE"][0] == pytest.approx(free["OLMo-core MAE"][0])
    assert contended["LLaMA/OPT MAE"][1] == pytest.approx(0.508, abs=0.001)
    assert contended["LLaMA/OPT MAE"][0] == pytest.approx(0.562, abs=0.001)
    h100 = Hardware.from_catalog(catalog, "h100-sxm")
    rows = fsdp.compare(h100, fsdp.olmo_core_runs())
    scaled = fsdp.leave_one_size_out(rows)
    # a size's level never sees its own rows: changing one size's reported figures leaves
    # its own scaled error's level alone and moves the other sizes'
    bumped = [(r[0], r[1] * (2.0 if " 1B " in r[0] else 1.0), *r[2:]) for r in rows]
    again = fsdp.leave_one_size_out(bumped)
    for (label, _, s1), (_, _, s2) in zip(scaled, again, strict=True):
        if " 1B " in label:
            assert (1 + s2) == pytest.approx((1 + s1) / 2.0)
    fms = fsdp.fms_fsdp_runs(catalog)
    assert len(fms) == 8 and all(lay.zero == 3 and lay.grad_accum == 1 for _, _, lay, _, _ in fms)
    assert {hw.network.node_bw_gb_per_s for *_, hw, _ in fms} == {100.0, 50.0}
    # fms-fsdp reduces its gradients in bf16 (its bfSixteen policy), the profile in fp32
    assert {hw.gpu.calibration.zero3_microbatch_grad_reduce_bytes for *_, hw, _ in fms} == {2.0}
    titan = fsdp.pytorch_fsdp_runs(catalog, "torchtitan")
    assert {hw.gpu.calibration.zero3_microbatch_grad_reduce_bytes for *_, hw, _ in titan} == {4.0}


def _faster(hw: Hardware, times: float) -> Hardware:
    gpu = hw.gpu.model_copy(update={"dense_bf16_tflops": hw.gpu.dense_bf16_tflops * times})
    return Hardware(gpu, hw.nic, hw.nics_per_node, hw.switch, hw.facility)


@pytest.mark.parametrize("stack", ["megatron-core", "pytorch-fsdp2"])
def test_a_faster_gpu_never_predicts_a_slower_zero3_step(catalog, stack):
    """The last micro-batch's compute is one window for its own collectives and the step's
    reduction (models.step.zero3_exposed_s). Counted twice, a faster GPU's shorter windows
    made communication-bound steps slower: Llama 2 7B, TP 2 x DP 16 on A100 under
    pytorch-fsdp2, 0.694 s at twice the TFLOP/s and 0.734 s at three times."""
    cat = catalog.with_stack(stack)
    checked = 0
    for model, gpu, tp, dp, m in (
        ("llama2-7b", "a100-80gb", 2, 16, 2),
        ("llama2-7b", "a100-80gb", 2, 64, 1),
        ("llama2-7b", "h100-sxm", 1, 64, 4),
        ("llama2-7b", "h100-sxm", 8, 4, 1),
        ("llama3-8b", "h100-sxm", 2, 16, 8),
        ("llama3-70b", "h100-sxm", 8, 4, 1),
        ("llama3-70b", "a100-80gb", 8, 16, 4),
    ):
        spec, hw = resolve_model(model), Hardware.from_catalog(cat, gpu)
        lay = Layout(tp=tp, pp=1, dp=dp, micro_batch=1, global_batch=m * dp, zero=3)
        steps = [evaluate(spec, _faster(hw, x), lay).step_time_s for x in (1, 1.25, 1.5, 2, 3)]
        assert all(b <= a * (1 + 1e-12) for a, b in pairwise(steps)), (model, steps)
        checked += 1
    assert checked == 7


def _llama2_13b_pp(pp: int, global_batch: int = 256) -> Layout:
    """Llama 2 13B, TP 2 x DP 16 (x PP), ZeRO-3: 16 micro-batches of one 4K sequence."""
    return Layout(tp=2, pp=pp, dp=16, micro_batch=1, global_batch=global_batch, zero=3)


def _fsdp2(catalog, gpu: str = "h100-sxm") -> Hardware:
    return Hardware.from_catalog(catalog.with_stack("pytorch-fsdp2"), gpu)


def test_pipeline_stages_keep_their_gradients_and_parameters_unsharded(catalog):
    """With PP, torch.distributed.pipelining's stage backward turns FSDP2's reduce-scatter
    off (set_requires_gradient_sync(False)) and its reshard after backward too, and
    torchtitan does not reshard after forward with PP (models.memory.zero3_kept_bytes):
    across the step's micro-batches each stage holds its gradients unsharded in the
    reduce dtype (fp32, the profile's zero3_microbatch_grad_reduce_bytes) and its bf16
    parameters unsharded beside their shards. Without PP the reduce-scatter runs every
    micro-batch and nothing is kept. Before, PP 2 kept the shards only (0.41 GB of
    gradients on a stage of 3.3B parameters per GPU)."""
    from models.evaluate import with_profile
    from models.memory import GB, UNSHARDED_PARAM_BYTES, memory_terms

    spec, hw = resolve_model("llama2-13b"), _fsdp2(catalog)
    a = Assumptions()
    pp1, pp2 = (evaluate(spec, hw, _llama2_13b_pp(p)) for p in (1, 2))
    lay = _llama2_13b_pp(2)
    params = stage_params(spec, lay, "first")  # the most loaded: 2 micro-batches in flight
    shard = lay.dp * lay.cp
    rs = hw.gpu.calibration.zero3_microbatch_grad_reduce_bytes
    assert rs == 4.0 and hw.gpu.calibration.zero3_pp_unsharded_params
    assert pp2.memory.gradients == pytest.approx(params * rs / GB, rel=1e-9)
    want_w = params * (a.weight_bytes / shard + UNSHARDED_PARAM_BYTES) / GB
    assert pp2.memory.weights == pytest.approx(want_w, rel=1e-9)
    # the stage holds half the model: its kept states dwarf the shards PP 1 keeps
    assert pp2.memory.gradients > 15 * pp1.memory.gradients
    params1 = stage_params(spec, _llama2_13b_pp(1), "most")
    assert pp1.memory.gradients == pytest.approx(params1 * a.grad_bytes / shard / GB, rel=1e-9)
    assert pp1.memory.weights == pytest.approx(params1 * a.weight_bytes / shard / GB, rel=1e-9)
    # the solvers' memory terms agree (what is kept is not divided by DP x CP)
    fixed, sharded = max(memory_terms(spec, lay, spec.seq_len, with_profile(a, hw.gpu)))
    assert fixed + sharded / shard == pytest.approx(pp2.memory.total, rel=1e-9)


def test_pipeline_stages_gather_once_a_step(catalog):
    """Parameters kept unsharded across the micro-batches are gathered once a step, in the
    first micro-batch (one all-gather: half the per-micro-batch gathers' traffic), and the
    step's own reduction reduce-scatters the fp32 gradients accumulated since:
    dp_comm = max(0, gather - window) + its contention + max(0, reduction - window)
    (models.step.zero3_exposed_s). The megatron-core profile (Megatron-Core's FSDP), which
    reshards, keeps the gathers every micro-batch and reduce-scatters every micro-batch,
    so its memory keeps neither the parameters nor the gradients unsharded."""
    spec, hw = resolve_model("llama2-13b"), _fsdp2(catalog)
    lay = _llama2_13b_pp(2)
    a = Assumptions(flash_attention=hw.gpu.calibration.flash_attention)
    c = step_coefficients(spec, lay, spec.seq_len, hw.gpu, hw.network, a)
    params = stage_params(spec, lay, "most")
    assert c.zero3_gather_bytes == 0 and c.zero3_grad_rs_bytes == 0
    assert c.zero3_step_gather_bytes == pytest.approx(params * a.weight_bytes / 2)
    assert c.dp_bytes == pytest.approx(params * (4.0 + a.weight_bytes) / 2)  # fp32 gradients
    node, g = hw.network.node_bw_gb_per_s, lay.dp
    once = group_reduce_s(c, c.zero3_step_gather_bytes, g, node)
    window = c.gather_overlap_s
    hbm = hw.gpu.memory_bw_tb_per_s * 1e12
    sent = 2.0 * c.zero3_step_gather_bytes * (1 - 1 / g)
    contention = 3.0 * sent * min(once, window) / once / hbm
    reduce = group_reduce_s(c, c.dp_bytes, g, node)
    want = max(0.0, once - window) + contention + max(0.0, reduce - max(window, c.dp_window_s(0)))
    ev = evaluate(spec, hw, lay)
    assert ev.breakdown.dp_comm == pytest.approx(want)
    # the megatron-core profile reshards: every micro-batch gathers, forward and backward
    mc = Hardware.from_catalog(catalog, "h100-sxm")
    assert not mc.gpu.calibration.zero3_pp_unsharded_params
    c_mc = step_coefficients(spec, lay, spec.seq_len, mc.gpu, mc.network, a)
    assert c_mc.zero3_gather_bytes == pytest.approx(params * a.weight_bytes)
    assert c_mc.zero3_step_gather_bytes == 0
    assert c_mc.zero3_grad_rs_bytes == pytest.approx(params * 4.0 / 2)
    ev_mc = evaluate(spec, mc, lay)
    assert ev_mc.memory.gradients < ev.memory.gradients / 10
    assert ev_mc.memory.weights < ev.memory.weights / 10
    # one micro-batch a step: the gradients are reduced at its backward, nothing accumulates
    one = evaluate(spec, hw, _llama2_13b_pp(2, global_batch=16))
    last = stage_params(spec, lay, "last")  # the most loaded now: the output layer's
    assert one.memory.gradients == pytest.approx(last * a.grad_bytes / 16 / 1e9, rel=1e-9)


def test_a_stack_reducing_once_a_step_keeps_the_gradients_unsharded(catalog):
    """A profile with zero3_microbatch_grad_reduce_bytes 0 (vtrain-2022) reduces ZeRO-3's
    gradients once a step, so they accumulate unsharded across its micro-batches, at the
    gradient bytes (no reduce dtype of its own); its parameters are resharded."""
    from models.memory import GB

    spec = resolve_model("llama2-13b")
    hw = Hardware.from_catalog(catalog.with_stack("vtrain-2022"), "h100-sxm")
    assert hw.gpu.calibration.zero3_microbatch_grad_reduce_bytes == 0.0
    lay = _llama2_13b_pp(1)
    params, a = stage_params(spec, lay, "most"), Assumptions()
    ev = evaluate(spec, hw, lay)
    assert ev.memory.gradients == pytest.approx(params * a.grad_bytes / GB, rel=1e-9)
    assert ev.memory.weights == pytest.approx(params * a.weight_bytes / 16 / GB, rel=1e-9)
