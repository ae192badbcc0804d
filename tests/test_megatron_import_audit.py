"""`designer evaluate` and its --from-megatron import against Megatron-LM's own rules (the
evaluate audit's nine defects), each judged by Megatron-LM's code at the pinned commit
000c4ac24f61 (megatron/training/arguments.py unless named): layout strings whose MTP
layers Megatron-Core refuses, the launch line a script runs, unset shell variables,
FSDP's sharding, expert parallelism on a dense or fp16 model, a head width that does not
divide, sequence parallelism over a sequence TP does not divide (evaluate, the import and
both solvers), the recomputation, virtual-stage and sequence flags Megatron refuses, and
the wording of the import's fixes and of evaluate's time to train."""

from __future__ import annotations

import json

import pytest

from designer.errors import Infeasible, UsageError
from designer.launch import load_megatron
from designer.launch.pipeline_layout import layout_fields, required_layout
from designer.launch.script import command_from_script, command_rank, script_command
from designer.question.build import build_scenario
from helpers import refused, run_main
from models.layout import Layout
from models.transformer import TransformerSpec
from solvers import solve_cpsat, solve_exhaustive

BASE = (
    "torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 4 --hidden-size 1024 "
    "--num-attention-heads 16 --seq-length 2048 --max-position-embeddings 2048 "
    "--micro-batch-size 1 --global-batch-size 8 --vocab-size 32000 --bf16"
)
MOE = " --num-experts 8 --moe-ffn-hidden-size 512"


def refusal(command: str) -> str:
    """load_megatron's one-line usage error (without its --from-megatron prefix)."""
    with pytest.raises(UsageError) as info:
        load_megatron(command)
    line = str(info.value)
    assert line.startswith("--from-megatron: ") and "\n" not in line, line
    return line.removeprefix("--from-megatron: ")


# --------------------------------------------------------------- 1: MTP in a layout string
V3 = ["evaluate", "--model", "deepseek-v3", "--tp", "4", "--pp", "16", "--dp", "38",
      "--ep", "8", "--global-batch", "7296", "--recompute", "none"]  # fmt: skip


@pytest.mark.parametrize(
    "layout, words",
    [
        ("Et*3|(tt|)*28,m|tt|L", ("stage 30 holds decoder layers (t) after the MTP layer",)),
        # m in rank 14's first virtual stage (stage 14 of 32, the stages after it empty)
        (
            "|".join(["Et*5", *["t*4"] * 13, "t*4m", *[""] * 16, "L"]),
            ("virtual stage 0 of rank 14", "last virtual stage"),
        ),
    ],
)
def test_evaluate_refuses_layouts_whose_mtp_megatron_core_refuses(capsys, layout, words):
    """PipelineParallelLayerLayout.validate_layer_layout (pipeline_parallel_layer_layout.py
    lines 110-130): as many m as MTP layers, every t before the m, m in the last virtual
    stage of its rank. Both strings of the audit were accepted (exit 0)."""
    refused(capsys, [*V3, "--pipeline-layout", layout], "--pipeline-layout: ", *words)


def test_the_mtp_rules_keep_the_layouts_megatron_core_runs():
    # PP 8 x VP 4 with the MTP layer alone on rank 6 (megatron-core 0.19's standalone MTP)
    assert layout_fields("Et*3|(tt|)*29,m|L", 61, 8, 1)["mtp_rank"] == 6
    assert "mtp_rank" not in layout_fields("Et*3|(tt|)*29,|mL", 61, 8, 1)
    # a model without MTP layers (--mtp-num-layers unset) takes no m, as the bench's row
    assert layout_fields("Et|(tt|)*30L", 61, 8, 0)["vp"] == 4
    with pytest.raises(ValueError, match="places 1 MTP layers"):
        layout_fields("Et*3|(tt|)*29,m|L", 61, 8, 0)


def test_the_import_refuses_the_layout_naming_megatrons_flag():
    cmd = (
        BASE.replace("--num-layers 4", "--num-layers 6")
        + " --pipeline-model-parallel-size 2 --mtp-num-layers 1 --position-embedding-type rope"
    )
    good = load_megatron(cmd + " --pipeline-model-parallel-layout 'Et*2|t*2|t*2m|L'")
    assert good.layout.mtp_rank == 0 and good.layout.vp == 2
    line = refusal(cmd + " --pipeline-model-parallel-layout 'Et*2|t*2m|t*2|L'")
    assert line.startswith("--pipeline-model-parallel-layout: stage 2 holds decoder layers")
    # --mtp-num-layers 1 and a string without m: Megatron-Core refuses it (evaluate's
    # --pipeline-layout, which has no such flag, runs it without MTP: test_pipeline_layout_moe)
    line = refusal(cmd + " --pipeline-model-parallel-layout 'Et*2|t*2|t*2|L'")
    assert "places 0 MTP layers (m)" in line and "the model has 1" in line, line


def test_the_emitter_never_writes_an_mtp_placement_megatron_core_refuses():
    """An mtp_rank whose later stages hold layers: the string would put t after m."""
    lay = Layout(tp=1, pp=2, dp=1, micro_batch=1, global_batch=2, vp=2,
                 stage_counts=(2, 2, 1, 1), mtp_rank=0)  # fmt: skip
    with pytest.raises(Infeasible, match="Megatron-LM cannot run this pipeline layout"):
        required_layout(6, lay, "Megatron-LM", mtp=1)
    ok = Layout(tp=1, pp=2, dp=1, micro_batch=1, global_batch=2, vp=2,
                stage_counts=(2, 2, 2, 0), mtp_rank=0)  # fmt: skip
    assert required_layout(6, ok, "Megatron-LM", mtp=1) == "Et*2|t*2|t*2m|L"


# --------------------------------------------------------------- 2: which line is the command
LAUNCH = (
    BASE.replace("--global-batch-size 8", "--global-batch-size 64")
    + " --tensor-model-parallel-size 2"
)


@pytest.mark.parametrize(
    "before",
    [
        'echo "launching torchrun"',
        "python tools/preprocess_data.py --input data.jsonl --output-prefix my-gpt --workers 8",
        "srun --ntasks-per-node 1 hostname",
    ],
)
def test_the_pretrain_line_is_the_command(tmp_path, before):
    """The first line with 'torchrun' in it, or any python X.py --flags, was taken."""
    script = tmp_path / "run.sh"
    script.write_text(f"#!/bin/bash\n{before}\n{LAUNCH}\n")
    assert command_from_script(script.read_text()) == LAUNCH.split()
    run = load_megatron(str(script))
    assert run.layout.tp == 2 and run.layout.global_batch == 64


def test_command_rank_prefers_pretrain_then_a_launcher():
    assert command_rank("echo launching torchrun".split()) is None
    assert (
        command_rank("python -m torch.distributed.run --nproc-per-node 8 pretrain_gpt.py".split())
        == 0
    )
    assert command_rank("srun torchrun --nproc-per-node 8 train.py --x 1".split()) == 1
    assert command_rank("python tools/preprocess_data.py --input x".split()) == 2
    assert command_rank("X=1 exec /usr/bin/python3 pretrain_bert.py".split()) == 0
    text = "torchrun --nproc-per-node 8 train.py --a 1\npython pretrain_gpt.py --b 2\n"
    assert command_from_script(text) == ["python", "pretrain_gpt.py", "--b", "2"]
    # the launch after a cd, its log redirected or piped: the command alone
    for line in (f"cd /opt/Megatron-LM && {LAUNCH} > train.log 2>&1 &", f"{LAUNCH} | tee log"):
        assert command_from_script(line) == LAUNCH.split(), line


# --------------------------------------------------------------- 3: unset variables
def test_unset_variables_expand_to_nothing_with_a_note(tmp_path):
    """bash expands an unset $EXTRA_ARGS to nothing; it was kept literally and became a
    second value of --micro-batch-size (exit 2)."""
    script = tmp_path / "unset.sh"
    flags = LAUNCH.replace("--micro-batch-size 1", "--micro-batch-size 1 $EXTRA_ARGS")
    script.write_text(f'#!/bin/bash\n{flags} "${{MORE[@]}}" --data-path $DATA_PATH\n')
    run = load_megatron(str(script))
    assert run.layout.micro_batch == 1 and run.layout.tp == 2
    assert [n for n in run.notes if "not set in the script" in n] == [
        "$EXTRA_ARGS, $MORE: not set in the script; expanded to nothing, as bash does (flags "
        "the environment would give there are not read: set them in the script to import them)"
    ]  # --data-path $DATA_PATH: the value of a flag the import ignores, no note
    words, dropped = script_command(f"A=$UNSET\n{flags} --save $A/ckpt\n")  # type: ignore[misc]
    assert "$EXTRA_ARGS" not in " ".join(words) and "/ckpt" in words
    assert [name for _, name in dropped] == ["EXTRA_ARGS"]


def test_an_unset_value_of_a_flag_the_import_reads_is_refused_with_the_fix():
    line = refusal(
        LAUNCH.replace("--tensor-model-parallel-size 2", "--tensor-model-parallel-size $TP")
    )
    assert line.startswith("--tensor-model-parallel-size: takes one value, got none")


# --------------------------------------------------------------- 4: sharding flags
FSDP2 = " --use-torch-fsdp2 --untie-embeddings-and-output-weights --no-gradient-accumulation-fusion"


def test_fsdp_flags_set_the_zero_level():
    """--use-torch-fsdp2 and --use-megatron-fsdp were ignored: ZeRO 0 (or 1)."""
    assert load_megatron(BASE + FSDP2).layout.zero == 3
    reshard = BASE + FSDP2 + " --torch-fsdp2-no-reshard-after-forward"
    assert load_megatron(reshard).layout.zero == 2
    mfsdp = BASE + " --use-megatron-fsdp --ckpt-format fsdp_dtensor"
    for strategy, zero in (("no_shard", 0), ("optim", 1), ("optim_grads", 2),
                           ("optim_grads_params", 3)):  # fmt: skip
        cmd = f"{mfsdp} --data-parallel-sharding-strategy {strategy} --use-distributed-optimizer"
        assert load_megatron(cmd).layout.zero == zero, strategy
    assert load_megatron(mfsdp).layout.zero == 0  # no_shard, Megatron's default


@pytest.mark.parametrize(
    "extra, words",
    [
        (" --use-torch-fsdp2", ("gradient accumulation fusion", "642-643")),
        (FSDP2 + " --pipeline-model-parallel-size 2", ("pipeline parallelism",)),
        (FSDP2 + " --use-distributed-optimizer", ("distributed optimizer",)),
        (" --use-torch-fsdp2 --no-gradient-accumulation-fusion", ("tied embeddings",)),
    ],
)
def test_torch_fsdp2_refusals_name_it(extra, words):
    line = refusal(BASE + extra)
    assert line.startswith("--use-torch-fsdp2: Megatron-LM does not run it with"), line
    assert all(w in line for w in words), line


def test_megatron_fsdp_needs_its_checkpoint_format():
    line = refusal(BASE + " --use-megatron-fsdp --data-parallel-sharding-strategy optim")
    assert line.startswith("--use-megatron-fsdp: ") and "--ckpt-format fsdp_dtensor" in line


def test_offloads_and_optimizer_instances_are_noted_not_priced():
    run = load_megatron(
        BASE + " --use-distributed-optimizer --optimizer-cpu-offload --cpu-offloading-num-layers 2"
        " --num-distributed-optimizer-instances 2"
    )
    for name in ("--optimizer-cpu-offload", "--cpu-offloading-num-layers",
                 "--num-distributed-optimizer-instances"):  # fmt: skip
        assert any(n.startswith(f"{name}: ") and "not modelled" in n for n in run.notes), name
    quiet = load_megatron(BASE + " --cpu-offloading-num-layers 0")  # Megatron's defaults
    assert not any("offload" in n for n in quiet.notes)


# --------------------------------------------------------------- 5: expert parallelism
def test_expert_parallelism_on_a_dense_model_or_in_fp16_is_refused():
    line = refusal(BASE + " --expert-model-parallel-size 2")
    assert (
        line.startswith("--expert-model-parallel-size: EP 2 on a dense model")
        and "--num-experts" in line
    )
    fp16 = BASE.replace("--bf16", "--fp16") + MOE + " --expert-model-parallel-size 2"
    assert refusal(fp16).startswith("--expert-model-parallel-size: Megatron-LM does not run")
    assert load_megatron(BASE.replace("--bf16", "--fp16") + MOE).ep == 1  # EP 1 with fp16


def test_zero_experts_is_a_dense_model():
    run = load_megatron(BASE + " --num-experts 0")
    assert not run.spec.is_moe and run.spec.params() == load_megatron(BASE).spec.params()


# --------------------------------------------------------------- 6: head width
def test_heads_that_do_not_divide_the_hidden_size_need_kv_channels():
    odd = BASE.replace("--num-attention-heads 16", "--num-attention-heads 24")
    line = refusal(odd)
    assert line.startswith("--hidden-size: 1024 is not a multiple of --num-attention-heads 24")
    assert "--kv-channels" in line
    assert load_megatron(odd + " --kv-channels 64").spec.head_dim == 64


# --------------------------------------------------------------- 7: sequence parallelism
def test_sequence_parallelism_needs_tp_to_divide_each_cp_ranks_sequence(capsys):
    """mappings.py _split_along_first_dim asserts (seq / CP) % TP == 0 with SP."""
    args = ["evaluate", "--model", "llama2-7b", "--tp", "4", "--cp", "2", "--seq-len", "4100"]
    refused(capsys, args, "--seq-len: ", "tp 4", "2,050 tokens", "--no-sequence-parallel")
    code, _, err = run_main(capsys, [*args, "--no-sequence-parallel"])
    assert code == 0, err
    cmd = BASE.replace("2048", "4102") + " --tensor-model-parallel-size 4 --sequence-parallel"
    line = refusal(cmd.replace("--nproc-per-node 8", "--nproc-per-node 4"))
    assert line.startswith("--seq-length: ") and "drop --sequence-parallel" in line


def test_both_solvers_never_split_an_odd_sequence_over_tp():
    """One sequence a step on whole 8-GPU servers: only TP can use the GPUs (PP needs a
    micro-batch per stage), so with a sequence of 1,001 tokens no plan is left; at 1,024
    both solvers run TP 8."""
    for seq, plans in ((1001, False), (1024, True)):
        spec = TransformerSpec(name="toy-sp", layers=2, hidden=8192, heads=64,
                               ffn_hidden=32768, vocab=1000, seq_len=seq)  # fmt: skip
        s = build_scenario(model=spec, tokens=1e8, budget=1e7, gpus=("h100-sxm",), max_gpus=8,
                           max_batch_tokens=seq, evidence="any", no_failures=True)  # fmt: skip
        for result in (solve_exhaustive(s), solve_cpsat(s, time_limit_s=30.0)):
            assert bool(result.plans) == plans, (seq, result.status)
            for p in result.plans:
                lay = p.evaluation.layout
                assert not lay.sp or seq % (lay.tp * lay.cp) == 0, (seq, lay)


# --------------------------------------------------------------- 8: flags Megatron refuses
@pytest.mark.parametrize(
    "extra, start",
    [
        (" --recompute-granularity full --recompute-num-layers 1", "--recompute-method: missing"),
        (
            " --recompute-granularity full --recompute-method uniform",
            "--recompute-num-layers: missing",
        ),
        (
            " --recompute-activations --recompute-num-layers 2",
            "--recompute-num-layers: Megatron-Core refuses it",
        ),
        (" --recompute-activations --cpu-offloading-num-layers 1", "--cpu-offloading-num-layers: "),
        (
            " --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1 "
            "--num-virtual-stages-per-pipeline-rank 2",
            "--num-virtual-stages-per-pipeline-rank: ",
        ),
        (" --encoder-seq-length 2048", "--encoder-seq-length: contradicts --seq-length"),
    ],
)
def test_flags_megatron_refuses_are_refused(extra, start):
    """The two virtual-stage flags were taken when they agreed (validate_args lines
    532-543 refuses any two); full recompute without a method or count was taken."""
    assert refusal(BASE + extra).startswith(start)


def test_max_position_embeddings_is_required_and_no_seq_length_reads_the_encoders():
    """validate_args requires --max-position-embeddings (lines 821-825) and without
    --seq-length trains --encoder-seq-length (851-853); the import used the position table's
    size as the sequence."""
    no_table = BASE.replace("--max-position-embeddings 2048 ", "")
    assert refusal(no_table).startswith("--max-position-embeddings: missing")
    run = load_megatron(BASE.replace("--seq-length 2048", "--encoder-seq-length 1024"))
    assert run.seq_len == 1024
    no_seq = BASE.replace("--seq-length 2048 ", "")
    assert refusal(no_seq).startswith("--seq-length: missing")
    full = BASE + " --recompute-granularity full --recompute-method block --recompute-num-layers 1"
    assert load_megatron(full).layout.recompute == "full"


# --------------------------------------------------------------- 9: wording
def test_the_imports_pipeline_fix_names_megatrons_flags():
    cmd = BASE.replace("--num-layers 4", "--num-layers 30") + " --pipeline-model-parallel-size 4"
    line = refusal(cmd)
    assert line.startswith("--pipeline-model-parallel-size: pp 4 does not divide"), line
    assert "--decoder-first-pipeline-num-layers 7 --decoder-last-pipeline-num-layers 7" in line
    assert "--first-stage-layers" not in line


def test_time_to_train_and_its_range_share_one_precision(capsys):
    """'0.0 (0.0429-0.0532) days': the value at one decimal, the range at three figures."""
    args = ["evaluate", "--model", "llama2-7b", "--tp", "2", "--pp", "2", "--dp", "2",
            "--tokens", "100M"]  # fmt: skip
    code, out, err = run_main(capsys, args)
    assert code == 0, err
    line = next(x for x in out.split("\n") if x.startswith("time to train: "))
    value, rng = line.removeprefix("time to train: ").split()[:2]
    low, high = rng.strip("()").split("-")
    assert float(value) > 0 and float(low) <= float(value) <= float(high), line
    assert len(value.split(".")[-1]) == len(low.split(".")[-1]), line  # same figures
    code, out, _ = run_main(capsys, [*args, "--json"])
    assert float(value) == pytest.approx(json.loads(out)["time_to_train_days"], rel=5e-3)
