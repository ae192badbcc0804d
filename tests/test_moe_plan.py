"""The optimizer decides expert parallelism (issue 17 item 5).

- CP-SAT against the exhaustive solver on random small mixture-of-experts questions
  (routed and shared experts, dense leading layers, interleaved MoE layers, latent
  attention, multi-token prediction): the same optimum, both plans feasible.
- A dense question keeps its decision space: every shape has EP = ETP = 1 and the CP-SAT
  model holds no expert variable.
- Megatron-Core's folding: every plan's EP x ETP divides TP x CP x DP, in both solvers,
  with the ep_domain family switched off too.
- EP across scale-up domains prices the NICs: the plan's dispatch crosses them, and the
  explanation says so on nic_slots.
"""

from __future__ import annotations

import itertools
import json
import math
import random

import pytest

from helpers import assert_solvers_agree, random_scenario, run_main, wide_moe_scenario
from models.transformer import TransformerSpec
from solvers.cpsat.model import build
from solvers.cpsat.solve import solve_cpsat
from solvers.exhaustive import solve_exhaustive
from solvers.explain import binding_constraints
from solvers.families.ep_domain import ep_domains
from solvers.scenario import Scenario
from solvers.space import enumerate_candidates, expert_options

REL_TOL = 1e-3  # tests/test_solvers.py: CP-SAT's integer units against the float model
N_RANDOM = 60
N_QUICK = 12


def moe_spec(seed: int, base: TransformerSpec) -> TransformerSpec:
    """A random MoE variant of ``base`` (a pure function of ``seed``)."""
    r = random.Random(1000 + seed)
    experts = r.choice([4, 8, 16, 32, 64])
    fields = base.model_dump()
    fields.update(
        name=f"moe-{seed}",
        hidden=max(1024, base.hidden),  # wide enough that the dispatch matters
        experts=experts,
        experts_per_token=r.choice([k for k in (1, 2, 4, 8) if k <= experts]),
        expert_ffn_hidden=r.choice([512, 1024, 2048]),
    )
    fields["ffn_hidden"] = fields["head_dim"] = None  # defaults of the new width
    if r.random() < 0.4:
        fields.update(shared_experts=1)
    if base.layers > 2 and r.random() < 0.3:
        fields.update(dense_layers=1)
    if base.layers > 3 and r.random() < 0.2:
        fields.update(moe_layer_every=2)
    if r.random() < 0.2:
        head = fields["hidden"] // base.heads
        fields.update(
            q_lora_rank=None,
            kv_lora_rank=fields["hidden"] // 4,
            qk_head_dim=head,
            qk_rope_head_dim=max(8, head // 2),
            v_head_dim=head,
            kv_heads=None,
        )
    if r.random() < 0.2:
        fields.update(mtp_layers=1)
    return TransformerSpec.model_validate(fields)


def random_moe_scenario(seed: int, cat) -> Scenario:
    s = random_scenario(seed, cat)
    s = s.with_changes(spec=moe_spec(seed, s.spec))
    if s.budget_usd is not None and seed % 2:  # clusters of many servers: EP across them
        s = s.with_changes(budget_usd=s.budget_usd * 10)
    return s


def _params():
    return [
        pytest.param(seed, marks=[pytest.mark.slow] if seed >= N_QUICK else [], id=f"seed{seed}")
        for seed in range(N_RANDOM)
    ]


@pytest.mark.parametrize("seed", _params())
def test_cpsat_matches_exhaustive_on_moe(seed, cat):
    s = random_moe_scenario(seed, cat)
    ref = solve_exhaustive(s)
    got = solve_cpsat(s, time_limit_s=30.0)
    for plan in assert_solvers_agree(ref, got, REL_TOL):
        shape, dp = plan.config.shape, plan.config.dp
        assert (shape.tp * shape.cp * dp) % (shape.ep * shape.etp) == 0
        assert s.spec.experts % shape.ep == 0


def test_dense_question_keeps_its_decision_space(cat):
    s = random_scenario(3, cat)
    assert s.spec.is_dense
    cands = enumerate_candidates(s)
    assert all(c.shape.ep == c.shape.etp == 1 and c.shape.dp_step == 1 for c in cands)
    gpu = cat.gpu(s.gpus[0])
    assert expert_options(s.spec, 4, gpu) == [(1, 1)]
    names = {v.name for v in build(s, cands[:50]).model.proto.variables}
    moe = ("ep_", "expert_", "dp_step", "dp_over_step", "stage_time_with_ep", "replica_x_ep")
    assert not [n for n in names if n.startswith(moe) or n.endswith("_ep")]


@pytest.fixture(scope="module")
def crossing(cat):
    """A MoE model too large for 24 GB GPUs at EP 8: its best plan spreads EP over servers."""
    s = wide_moe_scenario(cat)
    return s, solve_cpsat(s, time_limit_s=60.0)


def test_ep_folding_holds_with_the_family_off(crossing):
    s, _ = crossing
    off = s.with_changes(disabled=s.disabled | {"ep_domain"})
    for res in (solve_cpsat(off, time_limit_s=60.0), solve_exhaustive(off)):
        shape, dp = res.best.config.shape, res.best.config.dp
        assert (shape.tp * shape.cp * dp) % (shape.ep * shape.etp) == 0
        assert res.best.feasible


def test_ep_across_servers_prices_the_nics(crossing):
    s, res = crossing
    assert res.status == "optimal"
    ref = solve_exhaustive(s)
    assert math.isclose(res.best.objective, ref.best.objective, rel_tol=REL_TOL)
    plan = res.best
    gpu = s.catalog.gpu(plan.config.shape.gpu)
    assert plan.config.shape.ep * plan.config.shape.etp > gpu.server.scale_up_domain_gpus
    assert plan.evaluation.breakdown.ep_comm > 0
    rows = {b.constraint: b for b in binding_constraints(s, plan, res.candidates)}
    assert "EP traffic crosses the NICs" in rows["nic_slots"].detail
    assert "scale-up domains: EP traffic crosses the NICs" in rows["ep_domain"].detail


def optimize_spec(capsys, tmp_path, spec: str, *args: str) -> str:
    """optimize's output for a spec file of ``spec`` (YAML) and ``args``; exit 0 checked."""
    path = tmp_path / "moe.yaml"
    path.write_text(spec)
    code, out, err = run_main(capsys, ["optimize", "--model", str(path), *args, "--no-explain"])
    assert code == 0, err
    return out


def test_optimize_reports_ep_and_etp(capsys, tmp_path):
    spec = "layers: 4\nhidden: 1024\nheads: 16\nvocab: 32000\nseq_len: 1024\nexperts: 8\n"
    args = ["--gpu", "h100-sxm", "--tokens", "1B", "--budget", "1M"]
    out = optimize_spec(capsys, tmp_path, spec + "experts_per_token: 2\n", *args)
    assert "tp/pp/dp/cp/vp/ep/etp" in out and ", EP " in out


def test_saved_moe_plan_explains_with_its_ep(capsys, tmp_path):
    spec = (
        "layers: 2\nhidden: 4096\nheads: 32\nvocab: 32000\nseq_len: 2048\n"
        "experts: 128\nexperts_per_token: 8\nexpert_ffn_hidden: 2048\n"
    )
    args = ["--gpu", "rtx4090", "--tokens", "50B", "--budget", "4M", "--json"]
    out = optimize_spec(capsys, tmp_path, spec, *args)
    saved = tmp_path / "answer.json"
    saved.write_text(out)
    plan = json.loads(out)["plans"][0]
    assert plan["ep"] > 1  # a plan whose EP a reader that dropped it would get wrong
    code, out, err = run_main(capsys, ["explain", str(saved), "--json"])
    assert code == 0, err
    again = json.loads(out)["plans"][0]
    assert (again["ep"], again["etp"]) == (plan["ep"], plan["etp"])
    assert again["step_time_s"] == pytest.approx(plan["step_time_s"], rel=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_shared_dense_coefficients_change_no_moe_coefficient(seed, cat):
    """A MoE candidate's step coefficients, computed with the dense part its EP x ETP
    variants share (solvers/space.py _Source.dense_cache, at DP 1), equal those computed
    from scratch at the shape's own probe layout, field by field."""
    from dataclasses import asdict

    from models.evaluate import with_profile
    from models.expert import moe_step_coefficients

    s = random_moe_scenario(seed, cat)
    cands = enumerate_candidates(s)
    r = random.Random(seed)
    for cand in r.sample(cands, min(60, len(cands))):
        src, shape = cand._source, cand.shape
        a = with_profile(s.assumptions, src.gpu)
        ref = moe_step_coefficients(
            s.spec, shape.probe_layout(), shape.experts, s.seq_len, src.gpu, src.network, a
        )
        assert asdict(cand.coeffs) == asdict(ref), shape


# --ep-in-domain (solvers/families/ep_domain.py): the request is a shape rule both solvers
# keep. Seeds whose optimum without it spreads EP over scale-up domains, then a few where
# it does not; the other seeds run with --run-slow.
EP_SPREAD_SEEDS = (16, 21, 36)
EP_IN_DOMAIN_QUICK = (*EP_SPREAD_SEEDS, 4, 6, 10)


def _in_domain_params():
    rest = [s for s in range(N_RANDOM) if s not in EP_IN_DOMAIN_QUICK]
    return [pytest.param(s, id=f"seed{s}") for s in EP_IN_DOMAIN_QUICK] + [
        pytest.param(s, marks=[pytest.mark.slow], id=f"seed{s}") for s in rest
    ]


@pytest.mark.parametrize("seed", _in_domain_params())
def test_cpsat_matches_exhaustive_with_the_ep_group_in_one_domain(seed, cat):
    s = random_moe_scenario(seed, cat).with_changes(ep_in_domain=True)
    ref = solve_exhaustive(s)
    got = solve_cpsat(s, time_limit_s=30.0)
    for plan in assert_solvers_agree(ref, got, REL_TOL):
        assert ep_domains(plan, s) == 1
    if seed in EP_SPREAD_SEEDS:  # the request is what keeps the optimum inside
        off = solve_exhaustive(s.with_changes(ep_in_domain=False))
        assert ep_domains(off.best, s) > 1
        assert off.best.objective < ref.best.objective


@pytest.mark.parametrize("seed", EP_SPREAD_SEEDS)
def test_cpsat_matches_exhaustive_with_the_deepep_dispatcher(seed, cat):
    """--dispatcher deepep (Scenario.dispatcher): every MoE shape dispatches per scale-up
    domain (ExpertLayout.dispatch_per_domain); CP-SAT's optimum is the exhaustive solver's,
    each plan says its dispatcher, and on these questions (whose optimum spreads EP over
    domains) it is no slower than the all-to-all's: it sends no more over the NICs."""
    s = random_moe_scenario(seed, cat).with_changes(dispatcher="deepep")
    ref = solve_exhaustive(s)
    got = solve_cpsat(s, time_limit_s=30.0)
    for plan in assert_solvers_agree(ref, got, REL_TOL):
        assert plan.as_dict(1)["dispatcher"] == "deepep"
        assert "per-domain dispatch (DeepEP)" in plan.evaluation.moe_plan
    plain = solve_exhaustive(s.with_changes(dispatcher="alltoall"))
    assert plain.best.as_dict(1)["dispatcher"] == "alltoall"
    assert ref.best.objective <= plain.best.objective * (1 + 1e-9)
    if seed in (16, 21):  # their all-to-alls cross the NICs: DeepEP sends fewer copies
        assert ref.best.objective < plain.best.objective * 0.999


def test_moe_numbers_shared_across_gpus_equal_their_own(cat):
    """A shape's expert memory and rank FLOPs are computed once for every GPU of the same
    FlashAttention (solvers/space.py Candidate.coeffs, models.expert._stage_flops): the
    coefficients of a shape on H200 (141 GB), computed after H100's (80 GB) filled both
    caches, equal those computed from scratch on H200."""
    from dataclasses import asdict

    from models.evaluate import with_profile
    from models.expert import _stage_flops, moe_step_coefficients

    s = random_moe_scenario(1, cat).with_changes(gpus=("h100-sxm", "h200"))
    cands = enumerate_candidates(s)
    by_gpu = {g: {c.shape[1:]: c for c in cands if c.shape.gpu == g} for g in s.gpus}
    common = sorted(set(by_gpu["h100-sxm"]) & set(by_gpu["h200"]))
    assert common
    picked = random.Random(1).sample(common, min(40, len(common)))
    for key in picked:
        assert by_gpu["h100-sxm"][key].coeffs is not None  # fills the shared caches
    for key in picked:
        cand = by_gpu["h200"][key]
        got = asdict(cand.coeffs)
        _stage_flops.cache_clear()
        src, shape = cand._source, cand.shape
        a = with_profile(s.assumptions, src.gpu)
        ref = moe_step_coefficients(
            s.spec, shape.probe_layout(), shape.experts, s.seq_len, src.gpu, src.network, a
        )
        assert got == asdict(ref), shape
    # the one GPU property the rank FLOPs read: the cache keys on it (no GPU of the
    # catalog runs without FlashAttention, so the flag is flipped here)
    shape = by_gpu["h200"][picked[0]].shape
    layout, ex = shape.probe_layout(), shape.experts
    on = _stage_flops(s.spec, layout, s.seq_len, True, ex)
    assert on != _stage_flops(s.spec, layout, s.seq_len, False, ex)
    flash = cat.gpu("h200").calibration.flash_attention
    assert _stage_flops(s.spec, layout, s.seq_len, flash, ex) == on


def test_moe_gemm_shared_across_gpus_equals_the_direct_formula(cat):
    """Candidate.gemm_mb_s prices a MoE shape's FLOPs (models.expert.moe_gemm_work, computed
    once for every GPU of the same FlashAttention) at each GPU's rates (moe_gemm_rates):
    on H200, after H100 filled the shared FLOPs, every shape's GEMM time equals
    moe_gemm_per_microbatch_s computed from scratch, and that equals the formula written
    out rank by rank (grouped-GEMM efficiency, work_gemm_s, the Gated DeltaNet chunks)
    bit for bit, in bf16 and fp8, for a model with linear attention too; the ranks' work
    (moe_gemm_stages) does not change with the precision, EP or ETP."""
    from models.expert import (
        _stage_flops,
        gdn_chunk_per_microbatch_s,
        grouped_gemm_efficiency,
        moe_gemm_per_microbatch_s,
        moe_gemm_stages,
    )
    from models.step import StageWork, work_gemm_s
    from models.zoo import moe_zoo

    base = random_moe_scenario(1, cat).with_changes(
        gpus=("h100-sxm", "h200"), precisions=("bf16", "fp8")
    )
    for s in (base, base.with_changes(spec=moe_zoo()["qwen3-next-80b-a3b"])):
        cands = enumerate_candidates(s)
        by_gpu = {g: {c.shape[1:]: c for c in cands if c.shape.gpu == g} for g in s.gpus}
        common = sorted(set(by_gpu["h100-sxm"]) & set(by_gpu["h200"]))
        picked = random.Random(2).sample(common, min(60, len(common)))
        assert {key[6] for key in picked} == {"bf16", "fp8"}  # the shape's precision
        for key in picked:
            assert by_gpu["h100-sxm"][key].gemm_mb_s > 0  # fills the shared FLOPs
        for key in picked:
            cand = by_gpu["h200"][key]
            gpu, layout, ex = cand._source.gpu, cand.shape.probe_layout(), cand.shape.experts
            direct = moe_gemm_per_microbatch_s(s.spec, layout, s.seq_len, gpu, ex)
            gg = grouped_gemm_efficiency(s.spec, layout, s.seq_len, gpu, ex)
            worst = 0.0
            flash = gpu.calibration.flash_attention
            for work, routed, layers in _stage_flops(s.spec, layout, s.seq_len, flash, ex):
                t = work_gemm_s(work, s.spec.hidden, layout, gpu)
                t += work_gemm_s(StageWork(routed / gg, 0.0, 0.0), s.spec.hidden, layout, gpu)
                t += gdn_chunk_per_microbatch_s(s.spec, layout, s.seq_len, gpu, ex, layers)
                worst = max(worst, t)
            assert cand.gemm_mb_s == direct == worst, cand.shape
        # the ranks' work, shared by the shapes that differ in precision, EP and ETP only
        flash = cat.gpu("h200").calibration.flash_attention
        for key in picked[:20]:
            shape = by_gpu["h200"][key].shape
            ref = moe_gemm_stages(s.spec, shape.probe_layout(), s.seq_len, flash, shape.experts)
            for prec, (ep, etp) in itertools.product(("bf16", "fp8"), ((1, 1), (8, 1), (4, 2))):
                other = shape._replace(precision=prec, ep=ep, etp=etp)
                got = moe_gemm_stages(s.spec, other.probe_layout(), s.seq_len, flash, other.experts)
                assert got == ref, other


@pytest.mark.parametrize("seed", range(8))
def test_the_dense_part_bound_lies_between_the_cheap_and_the_full_one(seed, cat):
    """bounds.dense_part_lower_bounds, the bound prune asks before a MoE shape's full one
    (no expert term computed): never above objective_lower_bound, shape by shape, on
    random MoE questions (the time objective), and never below the GEMM-only bound; it
    prunes nothing under another objective."""
    from solvers.screen.bounds import (
        dense_part_lower_bounds,
        gemm_lower_bounds,
        objective_lower_bounds,
        prepare_bounds,
    )
    from solvers.screen.presolve import presolve

    s = random_moe_scenario(seed, cat)
    t = prepare_bounds(s)
    pre = presolve(s, enumerate_candidates(s), terms=t)
    r = random.Random(seed)
    at = r.sample(range(len(pre.candidates)), min(80, len(pre.candidates)))
    cands, ranges = [pre.candidates[i] for i in at], [pre.dp_ranges[i] for i in at]
    mid = dense_part_lower_bounds(t, cands, ranges)
    if s.objective != "time":
        assert all(m == -math.inf for m in mid)
        return
    full = objective_lower_bounds(t, cands, ranges)
    cheap = gemm_lower_bounds(t, cands, ranges)
    for c, m, f, g in zip(cands, mid, full, cheap, strict=True):
        assert m <= f, c.shape
        if m > -math.inf:
            assert m >= g * (1 - 1e-9), c.shape


def test_the_dense_part_bound_prunes_before_any_expert_term(cat):
    """On GPT-OSS-120B's $100M question (time), most shapes the GEMM-only bound leaves
    under the optimum's time are settled by the dense part's bound, whose shapes keep
    their MoE step coefficients uncomputed."""
    from designer.question.build import build_scenario
    from solvers.screen.bounds import dense_part_lower_bounds, gemm_lower_bounds, prepare_bounds
    from solvers.screen.presolve import presolve

    s = build_scenario(model="gpt-oss-120b", tokens=15e12, budget=100e6, gpus=("h100-sxm",))
    t = prepare_bounds(s)
    pre = presolve(s, enumerate_candidates(s), terms=t)
    optimum_days = 12.06  # bench: designer optimize --model gpt-oss-120b --tokens 15T --budget 100M
    cheap = gemm_lower_bounds(t, pre.candidates, pre.dp_ranges)
    left = [i for i, b in enumerate(cheap) if b < optimum_days]
    mid = dense_part_lower_bounds(
        t, [pre.candidates[i] for i in left], [pre.dp_ranges[i] for i in left]
    )
    settled = [i for i, m in zip(left, mid, strict=True) if m >= optimum_days]
    assert len(settled) > len(left) // 4
    assert all(pre.candidates[i]._coeffs is None for i in settled)
