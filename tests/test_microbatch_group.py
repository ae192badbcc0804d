"""Megatron-LM's --microbatch-group-size-per-virtual-pipeline-stage (Layout.microbatch_group_size):
with interleaving (vp > 1) the schedule runs the step's m micro-batches in groups of N per
virtual stage (megatron/core/pipeline_parallel/schedules.py get_schedule_table), N = pp by
default (model_parallel_config.py ModelParallelConfig.__post_init__). It raises where N is
outside [pp, m] or the last group m mod N is in (0, pp)
(forward_backward_pipelining_with_interleaving), so without the flag m must be a multiple
of pp; rank r's warm-up is 2 (p - r - 1) + (v - 1) N chunk passes (get_pp_rank_microbatches),
so a larger N holds more activations. ``evaluate``, ``--from-megatron`` and the Megatron-LM
emitter read and write it."""

from __future__ import annotations

import json

import pytest

from designer.errors import Infeasible
from designer.launch import Launch, emit, load_megatron
from helpers import refused, run_main
from models import Layout, resolve_model
from models.pipeline import (
    a2a_overlap_exposed_share,
    a2a_overlap_warmup_chunks,
    in_flight_at_rank,
    in_flight_microbatches,
    microbatch_group_violation,
)

OPTION = "--microbatch-group-size-per-virtual-pipeline-stage"
# llama2-7b (32 layers) at PP 4, VP 2, DP 2: a global batch of 20 is m = 10 micro-batches
BASE = ["evaluate", "--model", "llama2-7b", "--gpu", "h100-sxm", "--tp", "1", "--pp", "4"]
BASE += ["--vp", "2", "--dp", "2", "--micro-batch", "1", "--json"]


def _evaluate(capsys, *extra: str) -> dict:
    code, out, err = run_main(capsys, [*BASE, *extra])
    assert code == 0, err
    return json.loads(out)


def test_m_not_a_multiple_of_pp_runs_with_the_group_size_and_is_refused_without(capsys):
    """m = 10 at PP 4: refused by default (naming --global-batch and the option that lets
    Megatron-LM run it); with N = m = 10 one group, evaluated."""
    line = refused(capsys, [*BASE, "--global-batch", "20"], "--global-batch", "multiple of pp 4")
    assert OPTION in line
    doc = _evaluate(capsys, "--global-batch", "20", OPTION, "10")
    assert doc["layout"]["microbatch_group_size"] == 10
    assert doc["layout"]["grad_accum"] == 10
    assert not [v for v in doc["violations"] if v["constraint"] == "divisibility"]
    code, out, err = run_main(capsys, [*BASE[:-1], "--global-batch", "20", OPTION, "10"])
    assert code == 0, err
    assert "vp 2 (micro-batch groups of 10)" in out


@pytest.mark.parametrize(
    "group,words",
    [
        ("3", ("3 must lie between pp 4 and the 10 micro-batches",)),  # N < PP: ValueError
        ("11", ("11 must lie between pp 4 and the 10",)),  # N > m: ValueError
        ("4", ("last group of 2", "fewer than pp 4", "e.g. 5")),  # 10 mod 4 = 2: RuntimeError
    ],
)
def test_megatrons_two_checks_are_refused_naming_the_option(capsys, group, words):
    """Megatron-Core's ValueError (N outside [PP, m]) and RuntimeError (a last group of
    1 to PP - 1) are usage errors naming the option and a size that runs (m = 10)."""
    refused(capsys, [*BASE, "--global-batch", "20", OPTION, group], OPTION, *words)


def test_fewer_micro_batches_than_pp_names_the_global_batch(capsys):
    """m = 2 < PP 4: no group size runs; the fix is the global batch, which the error
    names (it named the group-size option while telling the user to raise the batch)."""
    line = refused(capsys, [*BASE, "--global-batch", "4", OPTION, "4"], "--global-batch")
    assert line.startswith("designer: error: --global-batch:") and "raise the global" in line


def test_a_last_group_of_at_least_pp_runs(capsys):
    """m = 14, N = 8: groups of 8 and 6, the last at least PP 4, which Megatron-Core runs."""
    doc = _evaluate(capsys, "--global-batch", "28", OPTION, "8")
    assert doc["layout"]["microbatch_group_size"] == 8


def test_the_two_checks_by_hand():
    assert microbatch_group_violation(4, 2, 12, None) is None  # default N = PP, 12 = 3 x 4
    assert microbatch_group_violation(4, 2, 10, None)[0] == "--global-batch"
    assert microbatch_group_violation(4, 2, 10, 5) is None  # 10 mod 5 = 0
    assert microbatch_group_violation(4, 2, 10, 6) is None  # 10 mod 6 = 4 >= PP
    assert microbatch_group_violation(4, 2, 10, 7)[0] == OPTION  # 10 mod 7 = 3 < PP
    assert microbatch_group_violation(4, 2, 3, 4)[0] == "--global-batch"  # m < PP: none runs
    assert microbatch_group_violation(4, 1, 10, 7) is None  # 1F1B never reads it


def test_in_flight_grows_with_the_group_size_by_megatrons_warm_up():
    """p 4, v 2, m 10: rank r holds (2 (p - r - 1) + (v - 1) N + 1) / v micro-batches,
    at most m. N = 4 (the default): rank 0 (6 + 4 + 1) / 2 = 5.5, Megatron-LM's
    theoretical p (1 + (p - 1) / (p v)) = 4 x 1.375; N = 6: 6.5; N = 10: 8.5; rank 1 at N =
    6: (4 + 6 + 1) / 2 = 5.5; rank 3 at N = 10: (0 + 10 + 1) / 2 = 5.5."""
    assert in_flight_microbatches(4, 2, 10) == 4 * 1.375 == 5.5
    assert in_flight_microbatches(4, 2, 10, 6) == 6.5
    assert in_flight_at_rank(0, 4, 2, 10, 10) == 8.5
    assert in_flight_at_rank(1, 4, 2, 10, 6) == 5.5
    assert in_flight_at_rank(1, 4, 2, 10) == 4.5  # (4 + 4 + 1) / 2
    assert in_flight_at_rank(3, 4, 2, 10, 10) == 5.5
    assert in_flight_at_rank(0, 4, 2, 5, 5) == 5.0  # (6 + 5 + 1) = 12 capped at v m = 10
    # the all-to-all overlap's warm-up: 2 (p - 1) + (v - 1) N + 1 chunks, 13 of v m = 20
    assert a2a_overlap_warmup_chunks(4, 2, 6) == 13 and a2a_overlap_warmup_chunks(4, 2) == 11
    assert a2a_overlap_exposed_share(4, 2, 10, 6) == 13 / 20


def test_activations_in_evaluate_grow_by_the_formula(capsys):
    """evaluate's first-rank activations at N = 6 and 12 are the default's (N = 4, m = 12)
    times 6.5 / 5.5 and 9.5 / 5.5 ((6 + 12 + 1) / 2); the step time stays (the bubble is (p - 1) / (v m))."""
    base = _evaluate(capsys, "--global-batch", "24")
    for group, held in (("6", 6.5), ("12", 9.5)):
        doc = _evaluate(capsys, "--global-batch", "24", OPTION, group)
        act = doc["memory_gb"]["activations"]
        assert act == pytest.approx(base["memory_gb"]["activations"] * held / 5.5, rel=1e-12)
        assert doc["step_time_s"] == base["step_time_s"]


def test_group_size_pp_is_bit_identical_to_no_flag(capsys):
    """N = PP is Megatron-Core's default: every number (and the JSON) is the same."""
    assert _evaluate(capsys, "--global-batch", "24", OPTION, "4") == _evaluate(
        capsys, "--global-batch", "24"
    )


def test_without_interleaving_it_is_noted_and_not_read(capsys):
    """vp 1: Megatron-LM's 1F1B schedule never reads it; noted, the layout unchanged."""
    plain = [*BASE[:9], "--dp", "2", "--micro-batch", "1", "--json", "--global-batch", "20"]
    code, out, err = run_main(capsys, [*plain, OPTION, "7"])
    assert code == 0, err
    doc = json.loads(out)
    assert any(OPTION in n and "not read without interleaving" in n for n in doc["notes"])
    code, out2, _ = run_main(capsys, plain)
    no_flag = json.loads(out2)
    assert doc["memory_gb"] == no_flag["memory_gb"] and doc["layout"] == no_flag["layout"]


# ---------------------------------------------------------------- --from-megatron, emitter
MEGATRON = "torchrun --nnodes 1 --nproc-per-node 8 pretrain_gpt.py --num-layers 32 "
MEGATRON += "--hidden-size 4096 --num-attention-heads 32 --seq-length 4096 "
MEGATRON += "--max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 20 --bf16 "
MEGATRON += "--pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 2"


def test_from_megatron_reads_the_flag(capsys):
    run = load_megatron(f"{MEGATRON} {OPTION} 10")
    assert run.layout.microbatch_group_size == 10 and run.layout.grad_accum == 10
    refused(capsys, ["evaluate", "--from-megatron", MEGATRON], "--global-batch-size", OPTION)
    refused(capsys, ["evaluate", "--from-megatron", f"{MEGATRON} {OPTION} 4"], OPTION)
    code, out, err = run_main(capsys, ["evaluate", "--from-megatron", f"{MEGATRON} {OPTION} 10"])
    assert code == 0, err
    refused(  # the command gives it: not evaluate's option beside it
        capsys, ["evaluate", "--from-megatron", f"{MEGATRON} {OPTION} 10", OPTION, "10"], OPTION
    )
    one_f1b = MEGATRON.replace(" --num-virtual-stages-per-pipeline-rank 2", "")
    run = load_megatron(f"{one_f1b} {OPTION} 10")
    assert run.layout.microbatch_group_size is None
    assert any(OPTION in n and "not read without interleaving" in n for n in run.notes)


def _job(group: int | None) -> Launch:
    lay = Layout(
        tp=1, pp=4, dp=2, vp=2, micro_batch=1, global_batch=20, microbatch_group_size=group
    )
    return Launch(resolve_model("llama2-7b"), lay, 4096, None, 1, 8, "h100-sxm", None, "test")


def test_the_megatron_emitter_round_trips_the_group_size():
    text = emit(_job(10), "megatron")
    assert f"{OPTION} 10" in text
    run = load_megatron(text)
    assert run.layout.microbatch_group_size == 10
    assert run.layout.as_dict(4096) == _job(10).layout.as_dict(4096)
    with pytest.raises(Infeasible, match="multiple of pp 4"):  # the default refuses m = 10
        emit(_job(None), "megatron")
    default = Layout(tp=1, pp=4, dp=2, vp=2, micro_batch=1, global_batch=24)
    job = Launch(resolve_model("llama2-7b"), default, 4096, None, 1, 8, "h100-sxm", None, "t")
    assert OPTION not in emit(job, "megatron")
    with pytest.raises(Infeasible, match="micro-batch group size"):
        emit(_job(10), "nemo")
