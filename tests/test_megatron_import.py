"""designer/launch/megatron_import.py and designer/launch/script.py: importing a Megatron-LM
launch (a script whose variables would expand past the limit, a flag out of range blamed by
name, --bf16 with --fp16). From issue 20's checklist (reproductions 8 and 17).

Below the CLI tests, the module called directly (parse_megatron, load_megatron,
split_flags): how flags are split, Megatron's defaults and the notes that say so, the
mixture-of-experts flags, refusals naming the flag and the fix, and ImportedRun.as_dict."""

from __future__ import annotations

import json

import pytest

from designer.errors import UsageError
from designer.launch.megatron_import import (
    NOT_MODELLED,
    load_megatron,
    parse_megatron,
    split_flags,
)
from helpers import one_line, refused, run_main


def test_a_script_whose_variables_double_is_refused_not_expanded(tmp_path, capsys):
    """Reproduction 8: twenty self-doubling shell variables in a 420-byte script would
    expand to gigabytes; the importer stops past 100K characters with exit 2."""
    lines = ['A="--num-layers 2 "', 'A1="$A $A"']
    lines += [f'A{i}="$A{i - 1} $A{i - 1}"' for i in range(2, 21)]
    lines.append("torchrun pretrain_gpt.py $A20")
    script = tmp_path / "run.sh"
    script.write_text("\n".join(lines) + "\n")
    code, _, err = run_main(capsys, ["evaluate", "--from-megatron", str(script)])
    assert code == 2
    line = one_line(err)
    assert "--from-megatron" in line and "expand past 100,000 characters" in line


# ---------------------------------------------------------------- 17, 20, 21
MEGATRON = "torchrun --nnodes 1 --nproc-per-node 8 pretrain_gpt.py --num-layers 32 "
MEGATRON += "--hidden-size 4096 --num-attention-heads 32 --seq-length 4096 "
MEGATRON += "--max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 8 --bf16"


@pytest.mark.parametrize(
    "change,flag",
    [
        (("--num-layers 32", "--num-layers 200000"), "--num-layers"),
        (("--bf16", "--bf16 --vocab-size 999999999"), "--vocab-size"),
        (("--hidden-size 4096", "--hidden-size 40000000"), "--hidden-size"),
        (("--bf16", "--bf16 --ffn-hidden-size 1000000000"), "--ffn-hidden-size"),
    ],
)
def test_megatron_import_blames_the_flag_out_of_range(capsys, change, flag):
    """Reproduction 17: --num-layers 200000 or --vocab-size 999999999 blamed
    --num-attention-heads."""
    line = refused(capsys, ["evaluate", "--from-megatron", MEGATRON.replace(*change)], flag)
    assert "--num-attention-heads" not in line


def test_the_bf16_and_fp16_flags_together_are_refused(capsys):
    refused(capsys, ["evaluate", "--from-megatron", MEGATRON + " --fp16"], "--fp16", "--bf16")


# ---------------------------------------------------------------- the module, called directly
BASE = (
    "torchrun --nnodes 1 --nproc-per-node 8 pretrain_gpt.py --num-layers 4 --hidden-size 1024 "
    "--num-attention-heads 16 --seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 1 "
    "--vocab-size 32000 --bf16"
)


def imported(extra: str = "", base: str = BASE):
    return parse_megatron(f"{base} {extra}".split())


def refusal(extra: str = "", base: str = BASE) -> str:
    with pytest.raises(UsageError) as info:
        imported(extra, base)
    line = str(info.value)
    assert line.startswith("--from-megatron: ") and "\n" not in line
    return line.removeprefix("--from-megatron: ")


def test_split_flags_takes_equals_values_and_the_last_repeat():
    words = ["--a", "1", "2", "--b=3", "--a", "4", "x", "--nproc_per_node", "8"]
    assert split_flags(words) == {"--a": ["4", "x"], "--b": ["3"], "--nproc-per-node": ["8"]}
    assert split_flags(["stray", "--c"]) == {"--c": []}  # words before any flag: nobody's


def test_a_repeated_flag_counts_once_as_in_argparse():
    assert imported("--tensor-model-parallel-size 4 --tensor-model-parallel-size 2").layout.tp == 2


def test_megatron_defaults_and_their_notes():
    run = imported()
    assert (run.layout.tp, run.layout.pp, run.layout.cp, run.layout.dp) == (1, 1, 1, 8)
    assert run.layout.global_batch == 8 and run.layout.zero == 0
    assert not run.layout.sp and run.grad_reduce_dtype == "fp32"
    assert run.spec.seq_len == 2048 and run.tokens is None and (run.ep, run.etp) == (1, 1)
    assert run.notes == ("no --global-batch-size: micro-batch x DP = 8",)


def test_the_sequence_from_encoder_seq_length_is_a_note():
    """Without --seq-length Megatron-LM trains --encoder-seq-length (validate_args,
    arguments.py lines 851-853), not --max-position-embeddings."""
    run = imported(base=BASE.replace("--seq-length 2048", "--encoder-seq-length 1024"))
    assert run.seq_len == 1024 and run.spec.seq_len == 2048  # the position table's size
    assert "no --seq-length: --encoder-seq-length 1024" in run.notes


def test_sequence_parallel_needs_tensor_parallelism():
    assert not imported("--sequence-parallel").layout.sp  # TP 1: nothing to split
    assert imported("--sequence-parallel --tensor-model-parallel-size 2").layout.sp


def test_query_groups_without_gqa_are_ignored_with_a_note():
    run = imported("--num-query-groups 4")
    assert run.spec.kv == 16
    assert "--num-query-groups ignored without --group-query-attention" in run.notes
    assert imported("--group-query-attention --num-query-groups 4").spec.kv == 4


def test_fp16_is_modelled_as_bf16_with_a_note_and_fp8_format_sets_fp8():
    run = imported(base=BASE.replace("--bf16", "--fp16"))
    assert run.layout.precision == "bf16"
    assert any(n.startswith("--fp16: modelled as bf16") for n in run.notes)
    assert imported("--fp8-format hybrid").layout.precision == "fp8"
    assert imported("--grad-reduce-in-bf16").grad_reduce_dtype == "bf16"


def test_block_recompute_is_modelled_as_full_with_a_note():
    run = imported("--recompute-granularity full --recompute-method block --recompute-num-layers 1")
    assert run.layout.recompute == "full"
    assert any(n.startswith("--recompute-method block") for n in run.notes)


def test_tokens_from_iterations_or_samples():
    assert imported("--train-iters 10").tokens == 10 * 8 * 2048  # x global batch x sequence
    assert imported("--train-samples 99").tokens == 99 * 2048


def test_iterations_and_samples_together_are_refused():
    """Megatron-LM's validate_args asserts --train-samples is None with --train-iters
    ('expected iteration-based training'); the import used the iterations silently."""
    line = refusal("--train-iters 10 --train-samples 99")
    assert line.startswith("--train-samples: contradicts --train-iters; give one")


def test_an_elastic_range_of_one_size_is_that_size():
    assert imported(base=BASE.replace("--nnodes 1", "--nnodes 2:2")).world_size == 16


def test_flags_alone_without_the_launcher_need_the_gpu_count():
    flags = BASE.split("pretrain_gpt.py ")[1]
    line = refusal(base=flags)
    assert line.startswith("--nproc-per-node: missing; the command must say how many GPUs")
    run = parse_megatron(["--nproc-per-node", "8", *flags.split()])  # torchrun's, no script
    assert run.world_size == 8


@pytest.mark.parametrize(
    "extra,start",
    [
        ("--num-expertz 8", "--num-expertz: not a Megatron-LM flag"),
        ("--swiglu --squared-relu", "--squared-relu: contradicts --swiglu; give one activation"),
        (
            "--max-position-embeddings 1024",
            "--max-position-embeddings: 1024 is below --seq-length 2048",
        ),
        ("--position-embedding-type mrope", "--position-embedding-type: 'mrope' positions are not"),
        ("--position-embedding-type alibi", "--position-embedding-type: 'alibi' is not one of"),
        (
            "--tensor-model-parallel-size 16",
            "--tensor-model-parallel-size: TP 16 x PP 1 x CP 1 = 16",
        ),
        ("--num-layers 0", "--num-layers: must be at least 1 (got 0)"),
        ("--rotary-base abc", "--rotary-base: 'abc' is not a number"),
        ("--micro-batch-size 1 2", "--micro-batch-size: takes one value, got 2"),
        ("--micro-batch-size $MBS", "--micro-batch-size: '$MBS' is not a whole number (a shell"),
        ("--fp16", "--fp16: contradicts --bf16; give one (validate_args)"),
        (
            "--pipeline-model-parallel-size 2 --pipeline-model-parallel-layout Et*2|t*2L "
            "--decoder-first-pipeline-num-layers 2",
            "--decoder-first-pipeline-num-layers: contradicts --pipeline-model-parallel-layout",
        ),
    ],
)
def test_refusals_name_the_flag(extra, start):
    line = refusal(extra)
    assert line.startswith(start), line


def test_no_bf16_is_refused_with_the_fix():
    line = refusal(base=BASE.replace(" --bf16", ""))
    assert line.startswith("--bf16: missing; without --bf16 or --fp16 Megatron-LM trains in fp32")
    assert line.endswith("add --bf16")


@pytest.mark.parametrize("name", sorted(NOT_MODELLED))
def test_flags_of_models_not_modelled_are_refused(name):
    line = refusal(f"{name} 1" if name != "--quick-geglu" else name)
    assert line == f"{name}: {NOT_MODELLED[name]}; remove it to plan the dense model"


# ---------------------------------------------------------------- mixture of experts
MOE = "--num-experts 8 --moe-ffn-hidden-size 512"


def test_a_moe_command_imports_its_experts_and_router():
    run = imported(f"{MOE} --moe-router-topk 2 --expert-model-parallel-size 4")
    s = run.spec
    assert (s.experts, s.experts_per_token, s.expert_ffn_hidden) == (8, 2, 512)
    assert (s.dense_layers, s.moe_layer_every, s.shared_experts) == (0, 1, 0)
    assert s.router_score == "softmax" and (run.ep, run.etp) == (4, 1)  # ETP: TP's default
    assert any(n.startswith("--moe-token-dispatcher-type allgather: modelled as alltoall")
               for n in run.notes)  # fmt: skip
    assert not any(
        "dispatcher" in n for n in imported(f"{MOE} --moe-token-dispatcher-type alltoall").notes
    )


def test_leading_dense_layers_then_every_layer():
    run = imported(f"{MOE} --moe-layer-freq ([0]*1+[1]*3)")
    assert (run.spec.dense_layers, run.spec.moe_layer_every) == (1, 1)
    run = imported(f"{MOE} --moe-layer-freq ([0]+[1])*2")
    assert (run.spec.dense_layers, run.spec.moe_layer_every) == (0, 2)


@pytest.mark.parametrize("freq", ["2", "[1,0,0,1]"])
def test_a_layer_pattern_the_designer_cannot_model_is_refused(freq):
    """Megatron's integer N makes layers 0, N, 2N... MoE: the first layer MoE and the rest
    every N-th, which no (leading dense layers, every n-th) pair gives."""
    line = refusal(f"{MOE} --moe-layer-freq {freq}")
    assert line.startswith(f"--moe-layer-freq: '{freq}': the designer models leading dense")


@pytest.mark.parametrize(
    "extra,start",
    [
        (
            "--num-experts 6 --expert-model-parallel-size 4",
            "--expert-model-parallel-size: 4 does not divide the 6 experts",
        ),
        (
            f"{MOE} --expert-model-parallel-size 8 --expert-tensor-parallel-size 2",
            "--expert-model-parallel-size: EP 8 x ETP 2 does not divide TP x CP x DP = 8",
        ),
        (f"{MOE} --moe-router-score-function tanh", "--moe-router-score-function: 'tanh' is not"),
        (f"{MOE} --moe-router-topk 1000", "--moe-router-topk:"),
    ],
)
def test_moe_refusals_name_the_flag(extra, start):
    line = refusal(extra)
    assert line.startswith(start), line


def test_expert_flags_on_a_dense_model_are_degree_one():
    """--expert-model-parallel-size above 1 on a dense model is refused as Megatron-LM
    refuses it (tests/test_megatron_import_audit.py); ETP alone is degree one."""
    assert (imported("--expert-tensor-parallel-size 2").ep, imported().etp) == (1, 1)
    assert imported("--expert-model-parallel-size 1").ep == 1


# ---------------------------------------------------------------- load_megatron and as_dict


def test_load_reads_a_script_file_and_a_quoted_command(tmp_path):
    script = tmp_path / "train.sh"
    script.write_text(f"#!/bin/bash\nexport X=1\n{BASE} --train-iters 5\n")
    from_file = load_megatron(str(script))
    assert from_file == load_megatron(f"{BASE} --train-iters 5")
    assert from_file.tokens == 5 * 8 * 2048


def test_load_refuses_a_script_without_a_command_and_a_missing_script(tmp_path):
    empty = tmp_path / "empty.sh"
    empty.write_text("#!/bin/bash\necho nothing to launch\n")
    with pytest.raises(UsageError, match=r"no torchrun or python \.\.\. \.py command found"):
        load_megatron(str(empty))
    with pytest.raises(UsageError) as info:
        load_megatron(str(tmp_path / "absent.sbatch"))
    assert str(info.value).endswith("file not found; pass a launch script or a command")


def test_a_command_too_long_for_a_file_name_is_read_as_a_command():
    padding = " ".join(["--data-path", "x" * 300] * 20)  # past the file system's name limit
    assert load_megatron(f"{BASE} {padding}").world_size == 8


def test_as_dict_is_json_and_reads_back(tmp_path):
    run = imported("--train-iters 3 --tensor-model-parallel-size 2 --sequence-parallel")
    doc = json.loads(json.dumps(run.as_dict()))
    assert (doc["nnodes"], doc["nproc_per_node"], doc["num_gpus"]) == (1, 8, 8)
    assert doc["layout"]["tp"] == 2 and doc["layout"]["dp"] == 4 and doc["layout"]["ep"] == 1
    assert doc["tokens"] == 3 * 4 * 2048 and doc["grad_reduce_dtype"] == "fp32"
    assert doc["notes"] == list(run.notes)
    assert doc["model_spec"]["layers"] == 4 and doc["model_spec"]["name"] == "from-megatron"


HOSTILE_PATTERNS = {
    "[1]*99999999999": "would list 99,999,999,999 layers",  # MemoryError
    "[1]*50000000": "would list 50,000,000 layers",  # 444 MB built before the length check
    "99999999999999999999*[1]": "past 10^18",  # OverflowError
    "[[1]]*4": "a list holds the integers 0 and 1",  # TypeError
    "+".join(["[1]"] * 5000): "it lists 5,000",  # RecursionError in ast.parse
    "(" * 40 + "1" + ")" * 40: "nested more than 32 deep",
    "[1]*[1]": "* repeats a list",
    "[1]+1": "+ joins two lists or two integers",
}


@pytest.mark.parametrize("freq", sorted(HOSTILE_PATTERNS), ids=lambda f: f[:24])
def test_a_hostile_layer_pattern_is_refused_before_it_is_built(freq):
    """--moe-layer-freq is evaluated by hand, each list's size checked before it is built:
    a huge repeat, a huge count, a nested list and thousands of terms were a MemoryError,
    hundreds of MB, an OverflowError, a TypeError and a RecursionError."""
    import tracemalloc

    tracemalloc.start()
    try:
        line = refusal(f"{MOE} --moe-layer-freq {freq}")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert line.startswith("--moe-layer-freq: "), line
    assert HOSTILE_PATTERNS[freq] in line, line
    assert len(line) < 400 and peak < 20_000_000, (len(line), peak)


def test_layer_patterns_megatron_writes_still_read():
    from designer.launch.megatron_model import layer_pattern

    assert layer_pattern("[0]*3+[1]*5", 8) == (False,) * 3 + (True,) * 5
    assert layer_pattern("([0]*1+[1])*2*2", 8) == (False, True) * 4
    assert layer_pattern("[0, 1,]*2 + (2*1)*[1]", 6) == (False, True, False, True, True, True)


@pytest.mark.parametrize(
    "command,why",
    [("--num-layers 'abc", "no closing quotation"), ("--num-layers 4 \\", "no escaped character")],
)
def test_a_command_with_an_unclosed_quote_is_refused_naming_the_option(capsys, command, why):
    """shlex.split's ValueError on the command itself was an internal error (a launch
    script's lines fall back to whitespace: designer/launch/script.py _words)."""
    from helpers import run_main

    code, out, err = run_main(capsys, ["evaluate", "--from-megatron", command])
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith("designer: error: --from-megatron: ") and why in err, err
    assert "close its quotes" in err


ROPE = "--position-embedding-type rope --use-rope-scaling"
LATENT = (
    "--multi-latent-attention --kv-lora-rank 512 --qk-head-dim 128 --v-head-dim 128 "
    "--qk-pos-emb-head-dim 64 --disable-bias-linear"
)


@pytest.mark.parametrize(
    "extra,flag,says",
    [
        (f"{ROPE} --rope-scaling-factor nan", "--rope-scaling-factor", "finite"),
        (f"{ROPE} --rope-scaling-factor inf", "--rope-scaling-factor", "finite"),
        (f"{ROPE} --rope-scaling-factor -1", "--rope-scaling-factor", "greater than 0"),
        (f"{ROPE} --rope-scaling-factor 0", "--rope-scaling-factor", "greater than 0"),
        (f"{LATENT} --rotary-scaling-factor 0", "--rotary-scaling-factor", "greater than 0"),
        (f"{LATENT} --rotary-scaling-factor 40 --mscale -1", "--mscale", "greater than 0"),
    ],
    ids=["nan", "inf", "negative", "zero", "yarn-zero", "mscale"],
)
def test_a_bad_rope_scaling_flag_is_named(extra, flag, says):
    """The RoPE scaling's errors were blamed on --num-attention-heads (FIELD_SETTINGS's
    fallback), and a factor of 0 was read as absent (``or default``): 8.0 for
    --rope-scaling-factor, no scaling for --rotary-scaling-factor."""
    line = refusal(extra)
    assert line.startswith(f"{flag}: ") and says in line, line


def test_a_rope_scaling_factor_is_read():
    assert imported(f"{ROPE} --rope-scaling-factor 16").spec.rope_scaling.factor == 16.0
    assert imported(ROPE).spec.rope_scaling.factor == 8.0  # Megatron's default
