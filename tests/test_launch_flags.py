"""The launch flags as data: every flag an emitter writes is in a flag table with the
project file and commit it comes from; Megatron-LM's defaults make a missing flag a
different model; --from-megatron reads Meta's 405B layout in both Megatron-LM forms and
names the flag it refuses; vendor forks."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from designer.errors import Infeasible, UsageError
from designer.launch import Launch, emit, load_megatron
from designer.launch.megatron_model import defaults
from designer.launch.torchtitan_config import torchtitan_sections
from designer.launch.vocab import (
    FRAMEWORKS,
    all_flags,
    flag_index,
    normalize,
    releases,
    vocabulary,
)
from helpers import plan_of, random_plans, run_main, zoo_plan
from models.zoo import zoo
from solvers.space import Shape
from torchtitan_rule import command

COMMIT = re.compile(r"^[0-9a-f]{40}$")


def _emitted_plans():
    yield zoo_plan("llama3-405b")
    yield zoo_plan("gpt3-175b")
    for entry in random_plans()[:25]:
        yield plan_of(*entry)


def _megatron_flags(text: str) -> set[str]:
    body = text.split("pretrain_gpt.py", 1)[1]
    return {normalize(w) for w in re.findall(r"(?<!\S)(--[\w-]+)", body)}


def _torchrun_flags(text: str) -> set[str]:
    line = next(ln for ln in text.splitlines() if "torchrun " in ln and not ln.startswith("#"))
    head = line.split("pretrain_gpt.py", 1)[0]
    return set(re.findall(r"(?<!\S)(--[\w-]+)", head))


def _table(framework: str) -> dict[str, dict]:
    return {entry["flag"]: entry for entry in vocabulary(framework)["flags"].values()}


def test_flag_tables_name_file_and_commit():
    meg = vocabulary("megatron")
    assert COMMIT.match(meg["commit"]) and meg["file"] == "megatron/training/arguments.py"
    for entry in meg["flags"].values():
        assert isinstance(entry["line"], int) and entry["line"] > 0
        assert normalize(entry["flag"]) in all_flags("megatron")  # in Megatron's argparse
    tt = vocabulary("torchtitan")  # a PyPI release, no commit: the wheel's file
    assert tt["release"] == releases()["releases"]["torchtitan"]
    assert tt["file"] == "torchtitan/config/configs.py"
    assert set(tt["configs"]) <= set(zoo())  # config functions of designer models
    assert set(tt["activation_checkpoint"]) == {"none", "selective", "full"}
    for fields in tt["sections"].values():
        assert all(isinstance(f["line"], int) for f in fields.values())
    assert "megatron-bridge 0.6.2" in vocabulary("nemo")["checked_against"]
    for fw in FRAMEWORKS:
        assert vocabulary(fw)["checked_against"] and vocabulary(fw)["source"].startswith("https")


def test_every_emitted_flag_is_in_a_flag_table():
    meg, run, slurm = _table("megatron"), _table("torchrun"), _table("slurm")
    nemo = {e["path"] for e in vocabulary("nemo")["fields"].values()}
    tt = vocabulary("torchtitan")["sections"]
    for scenario, plan in _emitted_plans():
        job = Launch.from_plan(scenario, plan)
        for fmt in ("megatron", "slurm"):
            text = emit(job, fmt)
            assert _megatron_flags(text) <= set(meg), _megatron_flags(text) - set(meg)
            assert _torchrun_flags(text) <= set(run)
        header = re.findall(r"^#SBATCH (--[\w-]+)", emit(job, "slurm"), re.M)
        assert set(header) <= set(slurm)
        paths = re.findall(r"^cfg\.(\S+) = ", emit(job, "nemo"), re.M)
        assert paths and set(paths) <= nemo
        try:
            sections = command(emit(job, "torchtitan"))["sections"]
        except Infeasible:  # no torchtitan 0.3.0 config for the model or precision
            sections = torchtitan_sections(job)
        for section, values in sections.items():
            assert set(values) <= set(tt[section])


def test_flag_table_check_can_fail():
    assert "--made-up-flag" not in _table("megatron")
    assert not {"--made-up-flag"} <= set(_table("megatron"))


def test_defaults_table_pins_every_default_to_a_line():
    d = defaults()
    assert COMMIT.match(d["commit"]) and d["file"] == "megatron/training/arguments.py"
    for name, entry in d["defaults"].items():
        assert "value" in entry and isinstance(entry["line"], int), name
    v = d["defaults"]
    assert v["position_embedding"]["value"] == "learned_absolute"
    assert v["normalization"]["value"] == "layernorm" and v["linear_bias"]["value"] is True
    assert v["attention_dropout"]["value"] == v["hidden_dropout"]["value"] == 0.1
    assert v["grad_reduce_dtype"]["value"] == "fp32"


LLAMA = (
    "torchrun --nnodes 1 --nproc-per-node 8 pretrain_gpt.py --num-layers 32 --hidden-size 4096 "
    "--num-attention-heads 32 --seq-length 4096 --max-position-embeddings 4096 "
    "--micro-batch-size 1 --bf16 --tensor-model-parallel-size 8"
)


def test_missing_model_flags_import_as_megatron_defaults():
    run = load_megatron(LLAMA)
    spec = run.spec
    assert spec.position_embedding == "learned_absolute" and spec.normalization == "layernorm"
    assert spec.linear_bias and spec.attention_dropout == spec.hidden_dropout == 0.1
    assert spec.tied_embeddings and spec.activation == "gelu" and not spec.gated_mlp
    assert run.grad_reduce_dtype == "fp32"
    # the positions, biases and LayerNorm make it a bigger model than the Llama shape
    llama = load_megatron(
        LLAMA + " --position-embedding-type rope --normalization RMSNorm --disable-bias-linear"
    )
    h, ffn = 4096, 4 * 4096
    per_layer = (3 * h + h + ffn + h) + 2 * h  # QKV, output, MLP biases; two LayerNorm biases
    assert spec.params() - llama.spec.params() == 4096 * h + 32 * per_layer + h


@pytest.mark.parametrize("model", ["llama3-70b", "gpt3-175b", "nemotron4-15b"])
def test_dropping_any_model_flag_changes_the_import(model):
    scenario, plan = zoo_plan(model)
    text = emit(Launch.from_plan(scenario, plan), "megatron")
    model_flags = [
        "--position-embedding-type", "--rotary-base", "--normalization", "--norm-epsilon",
        "--disable-bias-linear", "--attention-dropout", "--hidden-dropout", "--swiglu",
        "--squared-relu", "--untie-embeddings-and-output-weights", "--group-query-attention",
        "--ffn-hidden-size", "--kv-channels", "--rotary-percent", "--use-rope-scaling",
    ]  # fmt: skip
    present = [f for f in model_flags if re.search(rf"^\s+{f}\b", text, re.M)]
    assert len(present) >= 6
    want = scenario.spec.architecture()
    for name in present:
        dropped = re.sub(rf"^\s+{name}( \S+)? \\\n", "", text, flags=re.M)
        assert name not in dropped
        try:
            got = load_megatron(dropped).spec.architecture()
        except UsageError:
            continue  # a contradiction the import names: also not the planned model
        if got == want:  # only where the model's value is Megatron's own default
            same = {
                "--norm-epsilon": want["norm_eps"] == 1e-5,
                "--rotary-base": want["rope_base"] == 10000.0,
                "--rotary-percent": want["rope_percent"] == 1.0,
                "--kv-channels": want["head_dim"] * want["heads"] == want["hidden"],
                "--ffn-hidden-size": want["ffn_hidden"] == 4 * want["hidden"],
                "--position-embedding-type": want["position_embedding"] == "learned_absolute",
                "--normalization": want["normalization"] == "layernorm",
            }
            assert same.get(name), name


META_405B = (
    "torchrun --nnodes 256 --nproc-per-node 8 pretrain_gpt.py --num-layers 126 "
    "--hidden-size 16384 --ffn-hidden-size 53248 --num-attention-heads 128 "
    "--group-query-attention --num-query-groups 8 --swiglu --untie-embeddings-and-output-weights "
    "--position-embedding-type rope --rotary-base 500000 --use-rope-scaling "
    "--normalization RMSNorm --disable-bias-linear --attention-dropout 0 --hidden-dropout 0 "
    "--seq-length 8192 --max-position-embeddings 8192 --vocab-size 128256 "
    "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 16 --micro-batch-size 1 "
    "--global-batch-size 2048 --use-distributed-optimizer --sequence-parallel --bf16 "
)


def test_meta_405b_layout_in_both_megatron_forms():
    accounting = load_megatron(
        META_405B + "--account-for-embedding-in-pipeline-split "
        "--account-for-loss-in-pipeline-split --num-virtual-stages-per-pipeline-rank 8"
    )
    lay = accounting.layout
    assert (lay.tp, lay.pp, lay.dp, lay.vp) == (8, 16, 16, 8)
    assert lay.embedding_in_split and lay.loss_in_split
    first_last = load_megatron(
        META_405B + "--decoder-first-pipeline-num-layers 7 --decoder-last-pipeline-num-layers 7"
    )
    lay = first_last.layout
    assert (lay.pp, lay.vp, lay.first_stage_layers, lay.last_stage_layers) == (16, 1, 7, 7)
    for run in (accounting, first_last):
        assert run.spec.params() / 1e9 == pytest.approx(405.85, abs=0.01)
        assert run.spec.rope_scaling is not None and run.spec.rope_scaling.factor == 8.0


@pytest.mark.parametrize(
    "extra, flag_named",
    [
        ("--num-layer 126", "--num-layer"),  # a typo
        ("--window-size 4096 0", "--window-size"),  # a model the designer does not model
        ("--squared-relu", "--squared-relu"),  # with --swiglu
        ("--fp16", "--fp16"),  # with --bf16
        (
            "--num-virtual-stages-per-pipeline-rank 8 --pipeline-model-parallel-layout 'Et*8|t*8'",
            "--num-virtual-stages-per-pipeline-rank",
        ),
        (
            "--decoder-first-pipeline-num-layers 7 --decoder-last-pipeline-num-layers 7 "
            "--account-for-loss-in-pipeline-split",
            "--decoder-first-pipeline-num-layers",
        ),
        ("--max-position-embeddings 4096", "--max-position-embeddings"),  # below --seq-length
    ],
)
def test_unknown_or_contradictory_flag_is_named(capsys, extra, flag_named):
    code, out, err = run_main(capsys, ["evaluate", "--from-megatron", META_405B + extra])
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert f"--from-megatron: {flag_named}:" in lines[0]


def test_import_requires_a_precision_megatron_models():
    with pytest.raises(UsageError, match="--bf16: missing"):
        load_megatron(META_405B.replace("--bf16 ", ""))


def test_layout_string_round_trip_and_refusal():
    text = META_405B.replace(
        "--pipeline-model-parallel-size 16", "--pipeline-model-parallel-size 4"
    )
    run = load_megatron(text + "--pipeline-model-parallel-layout 'Et*31|t*32|t*32|t*31L'")
    assert run.layout.pp == 4 and (run.layout.embedding_in_split, run.layout.loss_in_split) == (
        True,
        True,
    )
    # a split no other flag expresses is read as its stage counts (issue 34)
    odd = load_megatron(text + "--pipeline-model-parallel-layout 'Et*40|t*20|t*33|t*33L'")
    assert odd.layout.stage_counts == (40, 20, 33, 33)
    with pytest.raises(UsageError, match="--pipeline-model-parallel-layout: it holds 125"):
        load_megatron(text + "--pipeline-model-parallel-layout 'Et*40|t*20|t*33|t*32L'")


def test_grad_reduce_flag_matches_the_plan():
    scenario, plan = zoo_plan("llama3-8b")
    job = Launch.from_plan(scenario, plan)
    assert scenario.assumptions.grad_bytes == 2.0 and job.grad_reduce_bf16
    text = emit(job, "megatron")
    assert "--grad-reduce-in-bf16" in text and load_megatron(text).grad_reduce_dtype == "bf16"
    assert "cfg.mixed_precision.grad_reduce_in_fp32 = False" in emit(job, "nemo")
    fp32 = emit(replace(job, grad_reduce_bf16=False), "megatron")  # a plan with 4-byte grads
    assert "--grad-reduce-in-bf16" not in fp32 and load_megatron(fp32).grad_reduce_dtype == "fp32"


def test_amd_plan_names_the_rocm_fork_and_gaudi_stops():
    shape = Shape("mi300x", 8, 1, 1, 1, 1, "selective", "bf16")
    scenario, plan = plan_of("llama3-8b", shape, 1, 1)
    job = Launch.from_plan(scenario, plan)
    for fmt in ("megatron", "slurm"):
        assert "ROCm/Megatron-LM" in emit(job, fmt)
    with pytest.raises(Infeasible, match="NVIDIA GPUs"):
        emit(job, "nemo")
    gaudi = Launch.from_plan(*plan_of("llama3-8b", shape._replace(gpu="gaudi3"), 1, 1))
    for fmt in ("megatron", "slurm", "nemo", "torchtitan"):
        with pytest.raises(Infeasible, match="HabanaAI/Megatron-DeepSpeed"):
            emit(gaudi, fmt)


def test_flag_index_has_every_table_flag():
    assert set(flag_index("megatron")) == {
        normalize(e["flag"]) for e in _table("megatron").values()
    }


def test_gaudi_emit_exits_1_naming_the_fork(capsys):
    args = ["optimize", "--model", "llama3-8b", "--gpu", "gaudi3", "--evidence", "any"]
    args += ["--max-gpus", "64", "--tokens", "100B", "--emit", "slurm"]
    code, out, err = run_main(capsys, args)
    assert code == 1 and out == "" and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and "HabanaAI/Megatron-DeepSpeed" in err
