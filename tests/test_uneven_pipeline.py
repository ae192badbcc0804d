"""Uneven pipeline splits as Megatron-LM runs them: the split rules (models/pipeline.py),
the most loaded stage in the step time and memory, the evaluate options and their usage
errors, the Megatron-LM import, and the optimizer choosing an uneven split."""

from __future__ import annotations

import json
from dataclasses import replace
from unittest import mock

import pytest

from designer.errors import UsageError
from designer.launch import parse_megatron
from helpers import prime_scenario, run_main
from models import Assumptions, Hardware, Layout, evaluate
from models.feasibility import divisibility_violations
from models.memory import memory_per_gpu, rank_activation_gb, rank_params
from models.pipeline import (
    StageLoad,
    accounting_split,
    first_last_split,
    in_flight_at_rank,
    in_flight_microbatches,
    split_violation,
    stage_layers,
    stage_loads,
    uneven_splits,
)
from models.step import slowest_stage, stage_flops_per_microbatch
from solvers import space
from solvers.cpsat.solve import solve_cpsat
from solvers.exhaustive import solve_exhaustive


def lay(pp: int, vp: int = 1, **kw) -> Layout:
    base = dict(tp=8, dp=4, micro_batch=1, global_batch=4 * 8 * pp)
    base.update(kw)
    return Layout(pp=pp, vp=vp, **base)  # type: ignore[arg-type]


# ---------------------------------------------------------------- the split (Megatron's rules)


def test_llama405b_pp8_vp8_with_embedding_and_loss_accounting():
    layout = lay(8, 8, embedding_in_split=True, loss_in_split=True)
    # (126 + 2) / 8 = 16 per rank, 2 per virtual chunk; the first chunk of the first rank
    # and the last chunk of the last rank build one transformer layer fewer
    assert stage_layers(126, layout) == (15, 16, 16, 16, 16, 16, 16, 15)
    assert split_violation(126, layout) is None
    assert split_violation(126, lay(8, 8)) == (
        "--pp",
        split_violation(126, lay(8, 8))[1],  # type: ignore[index]
    )


def test_llama405b_pp16_first_and_last_stage_layers():
    layout = lay(16, first_stage_layers=7, last_stage_layers=7)
    assert stage_layers(126, layout) == (7, *[8] * 14, 7)
    assert split_violation(126, layout) is None
    only_first = lay(16, first_stage_layers=6)  # 120 over the other 15 ranks
    assert stage_layers(126, only_first) == (6, *[8] * 15)
    assert split_violation(126, only_first) is None


def test_seventy_layers_on_twelve_stages():
    layout = lay(12, first_stage_layers=5, last_stage_layers=5)
    assert stage_layers(70, layout) == (5, *[6] * 10, 5)
    assert split_violation(70, layout) is None
    assert first_last_split(70, 12) == (5, 5, False, False)


@pytest.mark.parametrize(
    ("layers", "layout", "option", "words"),
    [
        (126, lay(16), "--pp", "does not divide"),
        (80, lay(8, 4), "--vp", "pp x vp = 32"),
        (126, lay(16, first_stage_layers=5), "--first-stage-layers", "do not split evenly"),
        (126, lay(16, first_stage_layers=7, loss_in_split=True), "--first-stage-layers", "cannot"),
        (
            126,
            lay(16, last_stage_layers=7, embedding_in_split=True),
            "--last-stage-layers",
            "one kind",
        ),
        (
            126,
            lay(8, 2, first_stage_layers=15, last_stage_layers=15),
            "--first-stage-layers",
            "vp 2",
        ),
        (126, lay(1, first_stage_layers=126), "--first-stage-layers", "pp > 1"),
        (126, lay(2, first_stage_layers=100, last_stage_layers=30), "--first-stage-layers", "-4"),
        (126, lay(16, embedding_in_split=True), "--embedding-in-split", "127"),
        (
            126,
            lay(4, 3, embedding_in_split=True, loss_in_split=True),
            "--embedding-in-split",
            "vp 3",
        ),
        (126, lay(8, first_stage_layers=0), "--first-stage-layers", "at least 1"),
    ],
)
def test_split_violations_name_the_option(layers, layout, option, words):
    broken = split_violation(layers, layout)
    assert broken is not None
    assert broken[0] == option
    assert words in broken[1]


def test_violation_message_suggests_a_split_megatron_accepts(models):
    spec = models["llama3-405b"]
    (v,) = [v for v in divisibility_violations(spec, lay(16), 8192) if v.option == "--pp"]
    assert "--first-stage-layers 7 --last-stage-layers 7" in v.detail
    suggested = lay(16, first_stage_layers=7, last_stage_layers=7)
    assert divisibility_violations(spec, suggested, 8192) == []


def test_uneven_splits_are_few_distinct_and_valid():
    for layers in (61, 70, 126, 127, 80, 3, 9):
        for pp in (2, 3, 4, 8, 12, 16, 32):
            for vp in (1, 2):
                splits = uneven_splits(layers, pp, vp)
                assert len(splits) <= 1
                ranks = set()
                for split in splits:
                    first, last, emb, loss = split
                    layout = lay(
                        pp,
                        vp,
                        first_stage_layers=first or None,
                        last_stage_layers=last or None,
                        embedding_in_split=emb,
                        loss_in_split=loss,
                    )
                    assert split_violation(layers, layout) is None, (layers, pp, vp, split)
                    per_rank = stage_layers(layers, layout)
                    assert sum(per_rank) == layers
                    # never worse balanced than one extra virtual chunk's worth
                    assert max(per_rank) <= -(-layers // (pp * vp)) * vp
                    ranks.add(per_rank)
                assert len(ranks) == len(splits)
                if layers % (pp * vp) == 0:
                    assert splits == ()
    assert accounting_split(126, 8, 8) == (0, 0, True, True)
    assert accounting_split(61, 2) == (0, 0, False, True)


def test_in_flight_per_rank_follows_the_schedule():
    for pp, vp, m in ((8, 1, 64), (8, 2, 64), (4, 4, 16), (16, 1, 8)):
        assert in_flight_at_rank(0, pp, vp, m) == in_flight_microbatches(pp, vp, m)
        held = [in_flight_at_rank(r, pp, vp, m) for r in range(pp)]
        assert held == sorted(held, reverse=True)
    assert [in_flight_at_rank(r, 4, 1, 64) for r in range(4)] == [4, 3, 2, 1]
    assert in_flight_at_rank(3, 4, 1, 2) == 1 and in_flight_at_rank(1, 4, 1, 2) == 2


# ---------------------------------------------------------------- step time and memory


def test_most_loaded_stage_sets_the_step_time(models, catalog_h100):
    spec, hw = models["llama3-405b"], catalog_h100
    balanced = lay(16, first_stage_layers=7, last_stage_layers=7, global_batch=512)
    heavy_first = replace(balanced, first_stage_layers=21, last_stage_layers=None)  # 7 elsewhere
    heavy_last = replace(balanced, first_stage_layers=None, last_stage_layers=21)
    assert split_violation(126, heavy_first) is None and split_violation(126, heavy_last) is None
    # the busiest rank: a middle one (8 layers beat 7 + the logits), then the heavy ranks
    assert slowest_stage(spec, balanced, 8192) == StageLoad(1, 8, False, False)
    assert slowest_stage(spec, heavy_first, 8192) == StageLoad(0, 21, True, False)
    assert slowest_stage(spec, heavy_last, 8192) == StageLoad(15, 21, False, True)
    assert stage_flops_per_microbatch(spec, heavy_first, 8192) == pytest.approx(
        stage_flops_per_microbatch(spec, balanced, 8192) * 21 / 8
    )
    times = [evaluate(spec, hw, x, 8192).step_time_s for x in (balanced, heavy_first, heavy_last)]
    assert times[0] < times[1] < times[2]  # moving layers onto one rank; the logits on top
    assert times[1] > 2 * times[0]


def test_memory_is_that_of_the_most_loaded_gpu(models):
    spec = models["llama3-405b"]
    a = Assumptions()
    for layout in (
        lay(16, first_stage_layers=7, last_stage_layers=7, global_batch=512),
        lay(16, first_stage_layers=21, global_batch=512),
        lay(16, last_stage_layers=21, global_batch=512),
        lay(8, 8, embedding_in_split=True, loss_in_split=True, global_batch=512),
        lay(8, global_batch=512, first_stage_layers=14, last_stage_layers=16),
    ):
        per_rank = stage_layers(spec.layers, layout)
        totals = []
        for r, n in enumerate(per_rank):  # every rank, not just the representatives
            load = StageLoad(r, n, r == 0, r == layout.pp - 1)
            one = replace(layout, dp=1)
            w = rank_params(spec, one, load) * (2 + 2 + 12 / layout.dp) / 1e9
            logits = 4 * 8192 * spec.vocab / layout.tp / 1e9 if load.output else 0.0
            totals.append(w + rank_activation_gb(spec, layout, 8192, load) + logits)
        mem = memory_per_gpu(spec, layout, 8192, 80.0, a)
        assert mem.total == pytest.approx(max(totals), rel=1e-12)
    # 7 / 8 x 14 / 7: the second rank (8 layers, 15 micro-batches in flight) holds the most
    # activations, more than the first (7 layers, 16 in flight)
    balanced = lay(16, first_stage_layers=7, last_stage_layers=7, global_batch=512)
    acts = [rank_activation_gb(spec, balanced, 8192, s) for s in stage_loads(126, balanced)]
    assert acts[1] > acts[0] > acts[-1]
    assert memory_per_gpu(spec, balanced, 8192, 80.0, a).activations == pytest.approx(acts[1])


def test_even_split_memory_and_time_unchanged_by_the_split_fields(models, catalog_h100):
    spec = models["llama2-70b"]
    even = Layout(tp=4, pp=8, dp=4, vp=2, micro_batch=1, global_batch=256)
    ev = evaluate(spec, catalog_h100, even)
    assert ev.stage_layers == (10,) * 8
    assert ev.as_dict()["layout"]["first_stage_layers"] is None
    # the accounting flags change nothing where they are not asked for
    assert stage_layers(80, even) == stage_layers(80, replace(even, dp=8))


@pytest.fixture(scope="module")
def catalog_h100(cat):
    return Hardware.from_catalog(cat, "h100-sxm")


# ---------------------------------------------------------------- designer evaluate

EVAL_405B = ["evaluate", "--model", "llama3-405b", "--gpu", "h200", "--tp", "8", "--dp", "4"]


def test_evaluate_405b_pp8_vp8_embedding_and_loss(capsys):
    args = [*EVAL_405B, "--pp", "8", "--vp", "8", "--embedding-in-split", "--loss-in-split"]
    code, out, err = run_main(capsys, [*args, "--global-batch", "512", "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["feasible"] and doc["violations"] == []
    assert doc["stage_layers"] == [15, 16, 16, 16, 16, 16, 16, 15]
    layout = doc["layout"]
    assert (layout["pp"], layout["vp"], layout["embedding_in_split"], layout["loss_in_split"]) == (
        8,
        8,
        True,
        True,
    )
    assert layout["first_stage_layers"] is None and layout["last_stage_layers"] is None
    code, out, _ = run_main(capsys, [*args, "--global-batch", "512"])
    assert code == 0
    assert "15, 16 x 6, 15 layers per stage (--embedding-in-split --loss-in-split)" in out


def test_evaluate_405b_pp16_first_last(capsys):
    args = [*EVAL_405B, "--pp", "16", "--first-stage-layers", "7", "--last-stage-layers", "7"]
    code, out, err = run_main(capsys, [*args, "--global-batch", "512", "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["stage_layers"] == [7, *[8] * 14, 7]
    assert (doc["layout"]["first_stage_layers"], doc["layout"]["last_stage_layers"]) == (7, 7)


def test_evaluate_70_layers_on_12_stages(capsys):
    code, out, err = run_main(
        capsys,
        [
            "evaluate", "--model", "bloom-176b", "--gpu", "h100-sxm", "--tp", "8", "--pp", "12",
            "--dp", "2", "--global-batch", "96", "--first-stage-layers", "5",
            "--last-stage-layers", "5", "--json",
        ],
    )  # fmt: skip
    assert code in (0, 1), err
    doc = json.loads(out)
    assert "divisibility" not in {v["constraint"] for v in doc["violations"]}
    assert doc["stage_layers"] == [5, *[6] * 10, 5]


@pytest.mark.parametrize(
    ("extra", "option"),
    [
        (["--pp", "16"], "--pp"),
        (["--pp", "16", "--first-stage-layers", "5"], "--first-stage-layers"),
        (["--pp", "16", "--last-stage-layers", "9"], "--last-stage-layers"),
        (
            [
                "--pp",
                "16",
                "--first-stage-layers",
                "7",
                "--last-stage-layers",
                "7",
                "--loss-in-split",
            ],
            "--first-stage-layers",
        ),
        (["--pp", "16", "--embedding-in-split"], "--embedding-in-split"),
        (["--pp", "8", "--vp", "4", "--loss-in-split"], "--loss-in-split"),
        (["--first-stage-layers", "7"], "--first-stage-layers"),
        (["--pp", "16", "--first-stage-layers", "0"], "--first-stage-layers"),
    ],
)
def test_evaluate_rejects_bad_splits_with_exit_2(capsys, extra, option):
    code, out, err = run_main(capsys, [*EVAL_405B, *extra])
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and option in lines[0] and "Traceback" not in err


def test_evaluate_split_options_replaced_by_from_megatron(capsys):
    cmd = (
        "torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 4 --hidden-size 1024 "
        "--num-attention-heads 8 --seq-length 1024 --max-position-embeddings 1024 --micro-batch-size 1"
    )
    code, _, err = run_main(capsys, ["evaluate", "--from-megatron", cmd, "--loss-in-split"])
    assert code == 2 and "--loss-in-split" in err


# ---------------------------------------------------------------- Megatron-LM import

TORCHRUN = "torchrun --nnodes 16 --nproc-per-node 8 pretrain_gpt.py"
SHAPE_405B = (
    "--num-layers 126 --hidden-size 16384 --ffn-hidden-size 53248 --num-attention-heads 128 "
    "--group-query-attention --num-query-groups 8 --swiglu --seq-length 8192 --max-position-embeddings 8192 "
    "--micro-batch-size 1 --global-batch-size 512 --tensor-model-parallel-size 8 --bf16 "
)


def test_from_megatron_reads_first_and_last_stage_layers():
    run = parse_megatron(
        (
            f"{TORCHRUN} {SHAPE_405B} --pipeline-model-parallel-size 16 "
            "--decoder-first-pipeline-num-layers 7 --decoder-last-pipeline-num-layers 7"
        ).split()
    )
    assert (run.layout.first_stage_layers, run.layout.last_stage_layers) == (7, 7)
    assert not run.layout.embedding_in_split and not run.layout.loss_in_split
    assert run.layout.dp == 1 and run.as_dict()["layout"]["first_stage_layers"] == 7


def test_from_megatron_reads_the_accounting_switches_and_counts_them_in_vp():
    run = parse_megatron(
        (
            f"{TORCHRUN} {SHAPE_405B} --pipeline-model-parallel-size 8 "
            "--num-layers-per-virtual-pipeline-stage 2 "
            "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split"
        ).split()
    )
    assert run.layout.embedding_in_split and run.layout.loss_in_split
    assert run.layout.vp == 8  # (126 + 2) / 8 / 2
    assert stage_layers(126, run.layout) == (15, 16, 16, 16, 16, 16, 16, 15)


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        ("--pipeline-model-parallel-size 16", "--pipeline-model-parallel-size"),
        (
            "--pipeline-model-parallel-size 16 --decoder-first-pipeline-num-layers 5",
            "--decoder-first-pipeline-num-layers",
        ),
        (
            "--pipeline-model-parallel-size 8 --num-layers-per-virtual-pipeline-stage 2 "
            "--decoder-first-pipeline-num-layers 16 --decoder-last-pipeline-num-layers 14",
            "--num-layers-per-virtual-pipeline-stage",
        ),
        (
            "--pipeline-model-parallel-size 16 --account-for-loss-in-pipeline-split",
            "--account-for-loss-in-pipeline-split",
        ),
    ],
)
def test_from_megatron_refuses_splits_megatron_refuses(flags, named):
    with pytest.raises(UsageError) as info:
        parse_megatron(f"{TORCHRUN} {SHAPE_405B} {flags}".split())
    assert named in str(info.value)


# ---------------------------------------------------------------- the optimizer


def test_space_offers_megatron_splits_only_where_needed(cat):
    cands = space.enumerate_candidates(prime_scenario(cat))
    by_pv: dict[tuple[int, int], set] = {}
    for c in cands:
        by_pv.setdefault((c.shape.pp, c.shape.vp), set()).add(c.shape.split)
    assert by_pv[(61, 1)] == {space.EVEN}
    assert by_pv[(4, 1)] == {space.EVEN, (15, 14, False, False)}
    assert by_pv[(2, 1)] == {space.EVEN, (0, 0, False, True)}
    for (pp, vp), splits in by_pv.items():
        assert len(splits - {space.EVEN}) <= 1
        for split in splits - {space.EVEN}:
            c = next(c for c in cands if c.shape.split == split and c.shape[3:5] == (pp, vp))
            assert "divisibility" not in c.structural
    even_not_dividing = next(c for c in cands if c.shape.pp == 4 and c.shape.split == space.EVEN)
    assert "divisibility" in even_not_dividing.structural


def test_optimizer_returns_an_uneven_plan_when_better(cat):
    s = prime_scenario(cat)
    got = solve_cpsat(s, time_limit_s=30)
    assert got.status == "optimal"
    best = got.best
    lay_ = best.evaluation.layout
    assert lay_.uneven and best.feasible
    assert 61 % (lay_.pp * lay_.vp) != 0
    assert split_violation(61, lay_) is None
    plan = best.as_dict(1)
    assert plan["first_stage_layers"] or plan["embedding_in_split"] or plan["loss_in_split"]
    # both solvers agree on it
    ref = solve_exhaustive(s)
    assert ref.best.objective == pytest.approx(best.objective, rel=1e-3)
    # without uneven splits the best plan is slower
    offered = space.pipeline_splits

    def even_only(layers: int, pp: int, vp: int) -> tuple:
        return tuple(x for x in offered(layers, pp, vp) if x == space.EVEN)

    with mock.patch.object(space, "pipeline_splits", even_only):
        even = solve_cpsat(s, time_limit_s=30)
    assert not even.best.evaluation.layout.uneven
    assert even.best.objective > best.objective * 1.01
