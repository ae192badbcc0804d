"""designer/launch/diff.py: optimize --from-megatron's question and its diff, called directly
(no CliRunner, no solve: the "optimized" plans are built with solvers.plan.build_plan).

The question fixes the command's model, GPU count and batch, and refuses the options that
clash (naming the option and the fix); the imported layout evaluated on the question's GPU
and NIC; a plan of the very same layout differs in no setting (a round trip through the plan
columns); a plan on fewer GPUs is said to be so; the JSON object is plain JSON."""

from __future__ import annotations

import json

import click
import pytest

from designer.dry_run import evaluate_options
from designer.errors import UsageError
from designer.launch import diff
from designer.launch.megatron_import import parse_megatron
from designer.options import EVALUATE_OPTIONS, apply
from designer.output import text as render
from designer.question.build import build_scenario
from helpers import refused
from solvers import Config
from solvers.plan import build_plan
from solvers.space import Shape

COMMAND = (
    "torchrun --nnodes 2 --nproc-per-node 8 pretrain_gpt.py --num-layers 4 --hidden-size 2048 "
    "--num-attention-heads 16 --seq-length 2048 --max-position-embeddings 2048 "
    "--micro-batch-size 2 --global-batch-size 64 --use-distributed-optimizer "
    "--train-iters 1000 --bf16 --grad-reduce-in-bf16"
)  # bf16 gradients, as the optimizer's plans count them


@click.command("evaluate")
@apply(EVALUATE_OPTIONS)
def _evaluate(**kw) -> None:
    pass


def fp32_run_words() -> list[str]:
    return COMMAND.replace(" --grad-reduce-in-bf16", "").split()


@pytest.fixture(scope="module")
def run():
    return parse_megatron(COMMAND.split())


@pytest.fixture(scope="module")
def scenario(run):
    return build_scenario(**diff.question_for(run, {}, set()))


@pytest.fixture(scope="module")
def imported(scenario, run):
    return diff.imported_evaluation(scenario, run)


def plan_of(scenario, run, tp: int = 1, dp: int | None = None):
    """A plan of ``scenario`` on the command's GPU: the command's layout unless ``tp``, ``dp``
    say otherwise (the global batch kept)."""
    lay = run.layout
    dp = lay.dp if dp is None else dp
    shape = Shape("h100-sxm", tp, lay.cp, lay.pp, lay.vp, lay.micro_batch, lay.recompute, "bf16")
    steps = lay.global_batch // (lay.micro_batch * dp)
    return build_plan(scenario, Config(shape, "cx7-400g", 8, dp, steps))


# --------------------------------------------------------------------- the question


def test_the_question_takes_the_command_model_gpus_and_batch(run):
    asked = {"budget": 1e6, "gpus": ()}
    q = diff.question_for(run, asked, set())
    assert q["model"] is run.spec and q["seq_len"] == 2048
    assert q["gpus"] == ("h100-sxm",)  # evaluate's default GPU
    assert q["max_gpus"] == 16  # 2 nodes x 8
    assert q["max_batch_tokens"] == q["min_batch_tokens"] == 64 * 2048
    assert q["tokens"] == 1000 * 64 * 2048  # --train-iters x global batch x sequence
    assert q["precision"] == "bf16" and q["budget"] == 1e6
    assert asked == {"budget": 1e6, "gpus": ()}  # the caller's question is not changed


def test_explicit_tokens_and_precision_win_over_the_command(run):
    q = diff.question_for(run, {"tokens": 5e9, "precision": "fp8"}, {"tokens", "precision"})
    assert q["tokens"] == 5e9 and q["precision"] == "fp8"
    q = diff.question_for(run, {"tokens": 5e9, "precision": "fp8"}, set())  # defaults only
    assert q["tokens"] == run.tokens and q["precision"] == "bf16"


def test_one_given_gpu_is_kept(run):
    assert diff.question_for(run, {"gpus": ("h200",)}, {"gpus"})["gpus"] == ("h200",)


@pytest.mark.parametrize("key,option", sorted(diff.FIXED.items()))
def test_an_option_the_command_decides_is_refused(run, key, option):
    with pytest.raises(UsageError) as info:
        diff.question_for(run, {}, {key})
    assert str(info.value) == (
        f"{option}: comes from the Megatron command with --from-megatron; drop it"
    )


def test_two_gpu_types_are_refused(run):
    with pytest.raises(UsageError, match=r"^--gpu: give one GPU type with --from-megatron"):
        diff.question_for(run, {"gpus": ("h100-sxm", "h200")}, {"gpus"})


# --------------------------------------------------------------------- the imported layout


def test_the_imported_evaluation_is_the_command_layout(imported, run, scenario):
    assert imported.layout == run.layout
    assert imported.layout.num_gpus == 16 and imported.gpu == "h100-sxm"
    assert imported.extra["gpus_per_node"] == 8
    assert imported.extra["cost_usd"] > 0 and imported.feasible
    days = float(imported.time_to_train_days)
    assert days == pytest.approx(float(imported.step_time_s) * 1000 / 86400, rel=0.5)


def test_the_imported_gradients_are_fp32_unless_the_command_says_bf16(run, scenario, imported):
    """Megatron-LM reduces fp32 gradients unless --grad-reduce-in-bf16: the imported layout
    counts them so, as evaluate --from-megatron does (the diff counted bf16 ones before)."""
    fp32_run = parse_megatron(fp32_run_words())
    assert fp32_run.grad_reduce_dtype == "fp32"
    fp32 = diff.imported_evaluation(scenario, fp32_run)
    assert fp32.memory.gradients == pytest.approx(2 * imported.memory.gradients)  # ZeRO 1
    ctx = _evaluate.make_context("evaluate", ["--from-megatron", " ".join(fp32_run_words())])
    evaluated = evaluate_options(ctx.params, {"from_megatron"}).ev
    assert fp32.memory.total == pytest.approx(evaluated.memory.total, rel=1e-12)
    assert fp32.step_time_s == pytest.approx(evaluated.step_time_s, rel=1e-12)


def test_one_given_nic_is_the_one_evaluated(run):
    q = diff.question_for(run, {"nics": ("cx6-200g",)}, {"nics"})
    ev = diff.imported_evaluation(build_scenario(**q), run)
    assert ev.nic == "cx6-200g"


def test_the_same_layout_changes_no_setting(imported, scenario, run):
    """The imported row and the plan's columns are the same names for the same layout:
    only the outcomes are listed, each equal."""
    same = plan_of(scenario, run)
    rows = diff.changes(imported, same)
    assert [r["setting"] for r in rows] == list(diff.OUTCOMES)
    for r in rows:
        assert r["imported"] == pytest.approx(r["optimized"], rel=1e-9), r["setting"]


def test_another_layout_lists_what_changed(imported, scenario, run):
    other = plan_of(scenario, run, tp=2, dp=8)
    rows = {r["setting"]: (r["imported"], r["optimized"]) for r in diff.changes(imported, other)}
    assert rows["tp"] == (1, 2) and rows["dp"] == (16, 8)
    assert rows["sequence_parallel"] == (False, True)  # the plan's SP at TP 2
    for same in ("pp", "num_gpus", "nodes", "micro_batch", "global_batch"):
        assert same not in rows, same  # unchanged settings are left out
    assert list(rows)[-len(diff.OUTCOMES) :] == list(diff.OUTCOMES)


def test_the_json_object_is_plain_and_says_the_gpu_count_is_a_cap(imported, scenario, run):
    doc, text = diff.report(scenario, run, plan_of(scenario, run, tp=2, dp=4))
    body = json.loads(json.dumps(doc))["from_megatron"]  # numpy numbers made plain
    assert body["max_gpus"] == 16 and body["exact_gpu_count"] is False
    assert body["command"]["num_gpus"] == 16 and body["command"]["layout"]["ep"] == 1
    assert body["cost_usd"] == pytest.approx(imported.extra["cost_usd"])
    assert {"setting": "num_gpus", "imported": 16, "optimized": 8} in body["diff"]
    assert diff.as_dict(run, imported, None)["diff"] == []
    assert text == diff.text(run, imported, plan_of(scenario, run, tp=2, dp=4))


# --------------------------------------------------------------------- the text


def test_the_text_without_a_plan_is_the_command_line_and_its_notes(imported, run):
    lines = diff.text(run, imported, None).split("\n")
    assert lines[0].startswith(
        "Imported Megatron-LM command: 16 GPUs (2 x 8), tp 1 pp 1 dp 16 cp 1 vp 1, "
        "micro-batch 2, global batch 64, seq 2,048; on h100-sxm: step "
    )
    assert "INFEASIBLE" not in lines[0]
    assert lines[1:] == [f"  note: {n}" for n in run.notes]
    assert lines[1].startswith("  note: no --vocab-size: assumed 32,000")


def test_the_text_says_the_optimizer_chose_fewer_gpus(imported, scenario, run):
    text = diff.text(run, imported, plan_of(scenario, run, tp=2, dp=4))
    assert (
        "The optimizer may use at most the command's 16 GPUs (it cannot require exactly that "
        "many); it chose 8." in text
    )
    table = text.split("\n\n")[-1].split("\n")
    assert table[0].split() == ["setting", "imported", "optimized"]
    cells = {line.split()[0]: line.split()[1:] for line in table[2:]}
    assert cells["num_gpus"] == ["16", "8"] and cells["tp"] == ["1", "2"]
    assert cells["cost_usd"][0].startswith("$") and cells["mfu"][0].endswith("%")


def test_the_same_gpu_count_says_nothing_about_it(imported, scenario, run):
    assert "at most" not in diff.text(run, imported, plan_of(scenario, run))


def test_an_infeasible_import_says_why():
    run = parse_megatron((COMMAND + " --tensor-model-parallel-size 8").split())
    s = build_scenario(**diff.question_for(run, {}, set()))
    ev = diff.imported_evaluation(s, run)
    assert not ev.feasible
    first = diff.text(run, ev, None).split("\n")[0]
    broken = "; ".join(f"{v.constraint}: {v.detail}" for v in ev.violations)
    assert first.endswith(" - INFEASIBLE: " + broken)


# --------------------------------------------------------------------- refusals of the question
SHORT = (
    "torchrun --nnodes 2 --nproc-per-node 8 pretrain_gpt.py --num-layers 4 --hidden-size 1024 "
    "--num-attention-heads 16 --seq-length 2048 --max-position-embeddings 2048 "
    "--micro-batch-size 1 --global-batch-size 64 "
    "--bf16 --train-iters 100"
)  # 13M tokens: a critical batch far below the command's 131,072-token batch


def test_a_batch_the_batch_tokens_model_refuses_names_the_command_and_the_fix():
    """The floor is the command's batch (question_for): the refusal used to blame
    --min-batch-tokens and say 'lower it', an option --from-megatron refuses."""
    run = parse_megatron(SHORT.split())
    q = diff.question_for(run, {}, set())
    with pytest.raises(UsageError) as info:
        build_scenario(**q)
    assert info.value.option == "--min-batch-tokens"  # as the question builder blames it
    blamed = diff.refusal(info.value, run)
    assert blamed is not None and blamed.option == "--from-megatron"
    assert str(blamed).startswith(
        "--from-megatron: the command's global batch (64 x 2,048 = 131,072 tokens) is above "
        "the batch-tokens model's largest batch, "
    )
    assert str(blamed).endswith(
        "; pass --batch-tokens-model off to plan at it, or import a smaller --global-batch-size"
    )
    assert "lower it" not in str(blamed)
    assert build_scenario(**q, batch_tokens_model="off").max_gpus == 16  # the fix it names


def test_other_refusals_stand():
    run = parse_megatron(SHORT.split())
    assert diff.refusal(UsageError("unknown GPU 'x'", "--gpu"), run) is None


def test_optimize_says_so_in_one_line(capsys):
    line = refused(capsys, ["optimize", "--from-megatron", SHORT], "--batch-tokens-model off")
    assert line.startswith("designer: error: --from-megatron: the command's global batch")
    refused(capsys, ["optimize", "--from-megatron", SHORT, "--gpu", "x"], "--gpu: unknown GPU")


def test_the_imported_row_prices_a_moe_commands_mechanisms_as_evaluate_does(capsys):
    """optimize --from-megatron's row for the command prices it as evaluate --from-megatron
    does: its MoE mechanisms (here DeepEP's dispatch, the all-to-all overlap and the
    unfused permutation of a command without --moe-permute-fusion) included."""
    from helpers import run_main

    moe = (
        "torchrun --nnodes 2 --nproc-per-node 8 pretrain_gpt.py --num-layers 4 "
        "--hidden-size 1024 --num-attention-heads 16 --seq-length 1024 "
        "--max-position-embeddings 1024 --micro-batch-size 1 --global-batch-size 64 "
        "--use-distributed-optimizer --train-iters 1000 --bf16 --num-experts 16 "
        "--expert-model-parallel-size 16 --moe-grouped-gemm --moe-token-dispatcher-type flex "
        "--moe-enable-deepep --overlap-moe-expert-parallel-comm"
    )
    run = parse_megatron(moe.split())
    ex = run.experts()
    assert ex.dispatch_per_domain and ex.ep_overlap == 1.0 and not ex.permute_fusion
    scenario = build_scenario(**diff.question_for(run, {}, set()))
    row = diff.imported_evaluation(scenario, run)
    code, out, err = run_main(capsys, ["evaluate", "--from-megatron", moe, "--json"])
    assert code == 0, err
    assert row.step_time_s == pytest.approx(json.loads(out)["step_time_s"], rel=1e-9)


def test_optimize_from_a_deepep_command_keeps_its_dispatcher():
    """optimize --from-megatron plans with the command's dispatcher (DeepEP's per-domain
    dispatch) unless --dispatcher is given, and the diff compares it as a setting; a dense
    command's row has none."""
    moe = (
        "torchrun --nnodes 2 --nproc-per-node 8 pretrain_gpt.py --num-layers 4 "
        "--hidden-size 1024 --num-attention-heads 16 --seq-length 1024 "
        "--max-position-embeddings 1024 --micro-batch-size 1 --global-batch-size 64 "
        "--bf16 --num-experts 16 --expert-model-parallel-size 16 "
        "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep"
    )
    run = parse_megatron(moe.split())
    assert diff.question_for(run, {}, set())["dispatcher"] == "deepep"
    given = diff.question_for(run, {"dispatcher": "alltoall"}, {"dispatcher"})
    assert given["dispatcher"] == "alltoall"
    scenario = build_scenario(**diff.question_for(run, {}, set()))
    assert scenario.dispatcher == "deepep"
    assert diff.row(diff.imported_evaluation(scenario, run))["dispatcher"] == "deepep"
    assert "dispatcher" in diff.SETTINGS
    plain = parse_megatron(
        moe.replace("flex --moe-flex-dispatcher-backend hybridep", "alltoall").split()
    )
    assert "dispatcher" not in diff.question_for(plain, {}, set())
    dense = parse_megatron(SHORT.split())
    assert dense.spec.is_dense
    q = {**diff.question_for(dense, {}, set()), "batch_tokens_model": "off"}
    assert diff.row(diff.imported_evaluation(build_scenario(**q), dense))["dispatcher"] is None


def test_a_run_of_under_a_day_reads_to_three_figures(imported, run):
    """The header's days as evaluate prints them (render.number): 0.0474, not 0.0."""
    days = float(imported.time_to_train_days or 0)
    head = diff.text(run, imported, None).split("\n")[0]
    assert 0 < days < 1  # 1,000 steps of 64 x 2,048 tokens on 16 GPUs
    assert f"{render.number(days, '.1f')} days, " in head and " 0.0 days" not in head
