"""The solvers' memory bound against models.evaluate for uneven MoE pipeline splits.

``designer optimize --model gpt-oss-120b --tokens 2T --budget 10M`` answered 256 H100s at
TP 1, PP 4, VP 2, EP 8, micro-batch 2, a split of 8/10/10/8 layers and 16 micro-batches
per step, 78.2 GB a GPU where 76.0 fit: the bound's terms were the memory at m = p
micro-batches per step (Shape.probe_layout), where the interleaved schedule's rank 1 holds
8 of the 9 chunk passes of its warm-up (4 micro-batches of its 10 layers), and from m = 2p
all 9 (4.5; models.pipeline.in_flight_at_rank). The terms are now at full pipelines
(solvers.space.memory_layout), the most any micro-batch count holds, and a plan a solver
returns is re-checked by the evaluator (solvers.result.checked)."""

from __future__ import annotations

import random

import pytest

from designer.question.build import build_scenario
from models.evaluate import Hardware, evaluate, with_profile
from models.expert import expert_memory
from models.memory import memory_per_gpu
from models.pipeline import EVEN, full_pipeline_microbatches, in_flight_at_rank
from solvers.cpsat.solve import solve_cpsat
from solvers.decisions import question_experts
from solvers.exhaustive import solve_exhaustive
from solvers.space import (
    dp_min_from_terms,
    enumerate_candidates,
    memory_layout,
    shape_bound_terms,
    shape_memory_terms,
)

REL = 1e-9


def _evaluated(s, plan) -> bool:
    """Whether models.evaluate itself (not the plan's stored evaluation) finds the plan
    feasible, memory included."""
    cfg = plan.config
    hw = Hardware.from_catalog(s.catalog, cfg.shape.gpu, cfg.nic, cfg.nics_per_node)
    layout = cfg.shape.layout(cfg.dp, cfg.microbatches)
    ex = question_experts(cfg.shape.ep, cfg.shape.etp, s.dispatcher)
    ev = evaluate(s.spec, hw, layout, s.seq_len, s.tokens, s.assumptions, experts=ex)
    return not [v for v in ev.violations if v.constraint == "memory"]


@pytest.fixture(scope="module")
def gpt_oss():
    return build_scenario(model="gpt-oss-120b", tokens=2e12, budget=10e6, gpus=("h100-sxm",))


def test_both_solvers_answer_a_plan_evaluate_calls_feasible(gpt_oss):
    """The audit's question: the best feasible plan is 240 GPUs at PP 3 (12.22 days,
    73.4 GB), not the 256-GPU PP 4 VP 2 plan over memory; both solvers' top 3 pass."""
    got = solve_cpsat(gpt_oss, top_k=3)
    ref = solve_exhaustive(gpt_oss, top_k=3, candidates=got.candidates)
    assert got.status == ref.status == "optimal"
    for res in (got, ref):
        best = res.plans[0]
        assert (best.num_gpus, best.config.shape.pp, best.config.shape.vp) == (240, 3, 1)
        assert best.evaluation.time_to_train_days == pytest.approx(12.22, abs=0.005)
        assert best.evaluation.memory.total == pytest.approx(73.4, abs=0.05)
        for plan in res.plans:
            assert plan.feasible, plan.violations
            assert _evaluated(gpt_oss, plan), plan.config
    assert [p.config for p in got.plans] == [p.config for p in ref.plans]


def test_the_audited_shape_needs_the_full_pipelines_degree(gpt_oss):
    """The 8/10/10/8 shape: rank 1 holds 4 micro-batches at m = 4 and 4.5 from m = 8; the
    least DP degree that fits is the one at m >= 8 (about 101, 104 with EP 8's step), not
    m = 4's 52, and DP 64 at 16 micro-batches per step is 78.2 GB."""
    assert full_pipeline_microbatches(4, 2) == 8
    assert in_flight_at_rank(1, 4, 2, 4) == 4.0 and in_flight_at_rank(1, 4, 2, 8) == 4.5
    (cand,) = [
        c
        for c in enumerate_candidates(gpt_oss)
        if c.shape[1:] == (1, 1, 4, 2, 2, "none", "bf16", (8, 8, False, False), 8, 1)
    ]
    a = with_profile(gpt_oss.assumptions, cand._source.gpu)
    ex = question_experts(8, 1, gpt_oss.dispatcher)
    usable = cand._source.capacity_gb
    at_64 = expert_memory(gpt_oss.spec, cand.shape.layout(64, 16), gpt_oss.seq_len, 80.0, a, ex)
    assert at_64.memory.total == pytest.approx(78.19, abs=0.01) and at_64.rank == 1
    terms = shape_bound_terms(gpt_oss, cand.shape, a)
    assert max(f + x / 64 for f, x in terms) == pytest.approx(at_64.memory.total, rel=REL)
    assert cand.dp_min_memory is not None and cand.dp_min_memory > 64
    step = cand.shape.dp_step
    floor = -(-cand.dp_min_memory // step) * step
    for m in (4, 8, 16):
        layout = cand.shape.layout(floor, m)
        assert expert_memory(gpt_oss.spec, layout, gpt_oss.seq_len, 80.0, a, ex).memory.total <= (
            usable + 1e-9
        )
    below = cand.shape.layout(floor - step, 16)
    assert expert_memory(gpt_oss.spec, below, gpt_oss.seq_len, 80.0, a, ex).memory.total > usable


def _uneven_shapes(seed: int, count: int):
    """``count`` random uneven-split MoE shapes (most with virtual stages) of the zoo's
    MoE models on an H100, with their scenario."""
    rng = random.Random(seed)
    out = []
    for name in ("gpt-oss-120b", "deepseek-v3", "qwen3-30b-a3b"):
        s = build_scenario(model=name, tokens=1e12, budget=1e8, gpus=("h100-sxm",))
        s = s.with_changes(precisions=("bf16", "fp8"))
        cands = [c for c in enumerate_candidates(s) if c.shape.split != EVEN and c.shape.pp > 2]
        interleaved = [c for c in cands if c.shape.vp > 1]
        out += [(s, c) for c in rng.sample(interleaved, min(len(interleaved), 2 * count // 3))]
        plain = [c for c in cands if c.shape.vp == 1]
        out += [(s, c) for c in rng.sample(plain, min(len(plain), count // 3))]
    return out


def _memory_at(s, shape, a, dp: int, m: int) -> float:
    layout = shape.layout(dp, m)
    ex = question_experts(shape.ep, shape.etp, s.dispatcher)
    return expert_memory(s.spec, layout, s.seq_len, 80.0, a, ex).memory.total


@pytest.mark.parametrize("seed", [0, 1])
def test_terms_bound_the_evaluator_at_every_micro_batch_count(seed):
    """For random uneven MoE shapes and several DP degrees: the terms' largest at d is the
    evaluator's memory (models.expert.expert_memory, evaluate's own) at full pipelines and
    at least it at every micro-batch count the solvers may pick (m a multiple of PP with
    VP; memory grows with m), and the least degree they give fits at every count."""
    checked = 0
    for s, cand in _uneven_shapes(seed, 9):
        shape = cand.shape
        a = with_profile(s.assumptions, cand._source.gpu)
        bound, every = shape_bound_terms(s, shape, a), shape_memory_terms(s, shape, a)
        full = full_pipeline_microbatches(shape.pp, shape.vp)
        assert memory_layout(shape).grad_accum == full
        step = shape.dp_step
        counts = sorted({shape.pp, full, 2 * full, 5 * full})
        for dp in (step, 3 * step, 16 * step, 128 * step):
            ranks = dp * shape.cp
            terms_max = max(f + x / ranks for f, x in bound)
            assert terms_max == max(f + x / ranks for f, x in every)
            for m in counts:
                real = _memory_at(s, shape, a, dp, m)
                assert real <= terms_max * (1 + REL), (shape, dp, m, real, terms_max)
                if m >= full:
                    assert real == pytest.approx(terms_max, rel=REL), (shape, dp, m)
        need = dp_min_from_terms(bound, shape.cp, 76.0)
        if need is not None:
            floor = -(-need // step) * step
            assert all(_memory_at(s, shape, a, floor, m) <= 76.0 + 1e-9 for m in counts), shape
        checked += 1
    assert checked >= 15  # deepseek-v3 has no interleaved uneven split, qwen3 no plain one


def test_dense_uneven_terms_bound_the_evaluator_too():
    """The same for a dense model's uneven interleaved splits (models.memory.memory_terms
    against memory_per_gpu, evaluate's): PP 5, VP 5 and 10/20/20/20/10 layers of Llama 3
    70B held rank 1's 20 layers at fewer micro-batches at m = p than from m = 2p."""
    s = build_scenario(model="llama3-70b", tokens=1e12, budget=1e8, gpus=("h100-sxm",))
    cands = [c for c in enumerate_candidates(s) if c.shape.split != EVEN and c.shape.vp > 1]
    for cand in random.Random(0).sample(cands, 15):
        shape = cand.shape
        a = with_profile(s.assumptions, cand._source.gpu)
        terms = shape_memory_terms(s, shape, a)
        full = full_pipeline_microbatches(shape.pp, shape.vp)
        for dp in (1, 4, 32):
            terms_max = max(f + x / (dp * shape.cp) for f, x in terms)
            for m in sorted({shape.pp, full, 3 * full}):
                real = memory_per_gpu(s.spec, shape.layout(dp, m), s.seq_len, 80.0, a).total
                assert real <= terms_max * (1 + REL), (shape, dp, m, real, terms_max)
                if m >= full:
                    assert real == pytest.approx(terms_max, rel=REL), (shape, dp, m)
