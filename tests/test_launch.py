"""From plan to launch (designer/launch/): exported settings, the Megatron-LM round trip,
Slurm and torchrun agreeing with the plan, command import and its errors, and the CLI
(optimize --emit / --from-megatron, evaluate --from-megatron, export)."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from pathlib import Path

import pytest

from catalog import load_catalog
from designer.errors import Infeasible, UsageError
from designer.launch import Launch, emit, load_megatron, parse_megatron
from designer.launch.checkpoint import Checkpointing, slurm_time
from designer.launch.emit import megatron_args
from designer.launch.nemo_recipe import nemo_fields
from designer.launch.script import command_from_script
from designer.launch.torchtitan_config import torchtitan_sections
from designer.launch.vocab import FRAMEWORKS, flag_index, vocabulary
from designer.question.build import build_scenario
from helpers import one_line, run_main
from models import Hardware, evaluate
from models.zoo import zoo
from solvers import Config
from solvers.plan import build_plan
from solvers.space import Shape
from torchtitan_rule import command

ROOT = Path(__file__).resolve().parent.parent

# --- plans built directly (no solve), one per feature the round trip must carry -------------

PLANS = {
    # model, seq, tokens, gpu, shape (tp, cp, pp, vp, mb, recompute, precision), nic, nics, dp, m
    "cp_gqa": (
        "llama2-70b",
        16384,
        2e12,
        "h100-sxm",
        (2, 4, 8, 1, 1, "selective", "bf16"),
        "cx7-400g",
        8,
        4,
        256,
    ),
    "interleaved": (
        "llama2-70b",
        4096,
        2e12,
        "h100-sxm",
        (4, 1, 4, 2, 1, "selective", "bf16"),
        "cx7-400g",
        4,
        8,
        32,
    ),
    "fp8_full": (
        "llama2-7b",
        4096,
        3e11,
        "h100-sxm",
        (2, 1, 2, 1, 2, "full", "fp8"),
        "cx7-400g",
        8,
        16,
        16,
    ),
    "tied_no_recompute": (
        "gpt3-175b",
        2048,
        3e11,
        "h100-sxm",
        (8, 1, 8, 2, 1, "none", "bf16"),
        "cx7-400g",
        8,
        4,
        64,
    ),
    # uneven pipeline splits (a ninth shape element: first, last, embedding, loss)
    "uneven_accounting_interleaved": (
        "llama3-405b",
        8192,
        1e12,
        "h200",
        (8, 1, 8, 8, 1, "selective", "bf16", (0, 0, True, True)),
        "cx7-400g",
        8,
        2,
        64,
    ),
    "uneven_first_last_interleaved": (
        "llama3-405b",
        8192,
        1e12,
        "h200",
        (8, 1, 8, 2, 1, "selective", "bf16", (16, 14, False, False)),
        "cx7-400g",
        8,
        2,
        64,
    ),
    "uneven_first_last": (
        "mt-nlg-530b",
        2048,
        3e11,
        "h100-sxm",
        (8, 1, 8, 1, 1, "selective", "bf16", (11, 10, False, False)),
        "cx7-400g",
        8,
        2,
        24,
    ),
    "llama3_8b_interleaved": (
        "llama3-8b",
        4096,
        3e11,
        "h100-sxm",
        (2, 1, 4, 2, 1, "selective", "bf16"),
        "cx7-400g",
        8,
        4,
        32,
    ),
}


def make_plan(key: str):
    model, seq, tokens, gpu, shape, nic, nics, dp, m = PLANS[key]
    prec = shape[6]
    scenario = build_scenario(
        model=model, tokens=tokens, seq_len=seq, gpus=(gpu,), max_gpus=100_000, precision=prec
    )
    plan = build_plan(scenario, Config(Shape(gpu, *shape), nic, nics, dp, m))
    return scenario, plan


def effective(layout) -> dict:
    return {
        "tp": layout.tp,
        "pp": layout.pp,
        "dp": layout.dp,
        "cp": layout.cp,
        "vp": layout.vp,
        "micro_batch": layout.micro_batch,
        "global_batch": layout.global_batch,
        "recompute": layout.recompute,
        "sp": layout.sp,
        "zero": layout.zero,
        "precision": layout.precision,
        "first_stage_layers": layout.first_stage_layers,
        "last_stage_layers": layout.last_stage_layers,
        "embedding_in_split": layout.embedding_in_split,
        "loss_in_split": layout.loss_in_split,
    }


@pytest.mark.parametrize("key", sorted(PLANS))
def test_megatron_round_trip_same_layout_and_evaluation(key):
    scenario, plan = make_plan(key)
    job = Launch.from_plan(scenario, plan)
    run = load_megatron(emit(job, "megatron"))
    spec = scenario.spec
    assert run.spec.model_dump(exclude={"name", "seq_len", "source", "published_params_b"}) == (
        spec.model_dump(exclude={"name", "seq_len", "source", "published_params_b"})
        | {"kv_heads": spec.kv_heads if spec.kv != spec.heads else None, "ffn_hidden": spec.ffn}
    )
    assert run.spec.params() == spec.params()
    assert effective(run.layout) == effective(plan.evaluation.layout)
    assert run.seq_len == plan.evaluation.seq_len
    assert run.world_size == plan.num_gpus
    assert run.tokens == pytest.approx(scenario.tokens, rel=1e-5)  # whole steps, rounded up
    # the same evaluation: the same hardware, the command's layout and tokens
    hw = Hardware.from_catalog(load_catalog(), job.gpu, plan.config.nic, plan.config.nics_per_node)
    ev = evaluate(run.spec, hw, run.layout, run.seq_len, scenario.tokens)
    want = evaluate(spec, hw, plan.evaluation.layout, run.seq_len, scenario.tokens)
    got_d, want_d = ev.as_dict(), want.as_dict()
    for d in (got_d, want_d):
        d.pop("model")
    assert got_d == want_d


def test_round_trip_covers_cp_interleaving_gqa_fp8():
    plans = [make_plan(k)[1] for k in PLANS]
    layouts = [p.evaluation.layout for p in plans]
    assert any(lay.embedding_in_split and lay.loss_in_split and lay.vp > 1 for lay in layouts)
    assert any(lay.first_stage_layers and lay.vp > 1 for lay in layouts)
    assert any(lay.first_stage_layers and lay.vp == 1 for lay in layouts)
    for p in plans:  # every plan here is one Megatron-LM accepts
        assert "divisibility" not in {v.constraint for v in p.evaluation.violations}
    assert any(lay.cp > 1 for lay in layouts)
    assert any(lay.vp > 1 for lay in layouts)
    assert any(lay.precision == "fp8" for lay in layouts)
    assert any(make_plan(k)[0].spec.kv != make_plan(k)[0].spec.heads for k in PLANS)


def test_round_trip_through_slurm_script(tmp_path):
    scenario, plan = make_plan("interleaved")
    script = tmp_path / "job.sbatch"
    script.write_text(emit(Launch.from_plan(scenario, plan), "slurm"))
    run = load_megatron(str(script))
    assert effective(run.layout) == effective(plan.evaluation.layout)
    assert run.world_size == plan.num_gpus


def sbatch(text: str) -> dict[str, str]:
    return dict(re.findall(r"^#SBATCH (--[\w-]+)=?(\S*)", text, re.M))


def torchrun_flags(text: str) -> dict[str, str]:
    line = next(ln for ln in text.splitlines() if "torchrun" in ln and not ln.startswith("#"))
    return dict(re.findall(r"(--nnodes|--nproc-per-node) (\d+)", line))


@pytest.mark.parametrize("key", sorted(PLANS))
def test_slurm_header_and_torchrun_agree_with_plan(key):
    scenario, plan = make_plan(key)
    job = Launch.from_plan(scenario, plan)
    text = emit(job, "slurm")
    header, launcher = sbatch(text), torchrun_flags(text)
    ev = plan.evaluation
    assert int(header["--nodes"]) == ev.nodes == int(launcher["--nnodes"])
    assert int(header["--gpus-per-node"]) == int(launcher["--nproc-per-node"])
    assert int(header["--gpus-per-node"]) <= ev.extra["gpus_per_node"]
    assert int(header["--nodes"]) * int(header["--gpus-per-node"]) == plan.num_gpus
    assert header["--ntasks-per-node"] == "1"  # torchrun starts the per-GPU processes
    assert torchrun_flags(emit(job, "megatron")) == launcher
    d, hms = header["--time"].split("-")
    h, m, s = (int(x) for x in hms.split(":"))
    limit_min = int(d) * 1440 + h * 60 + m
    # one job segment: the whole run (plus 10%) and the exit margin when shorter than the
    # 24 h default
    total = math.ceil(ev.time_to_train_days * 1.1 * 1440 - 1e-9)
    assert limit_min == min(24 * 60, total + 20)
    assert "--requeue" in header and header["--signal"] == "B:USR1@600"
    args = dict(re.findall(r"^\s+(--[\w-]+)(?: (\S+))?", text, re.M))
    assert args["--save"] == args["--load"] == '"$CKPT_DIR"'
    assert int(args["--exit-duration-in-mins"]) == limit_min - 20
    # a checkpoint at the plan's interval (models/goodput.py; an hour of training, the stated
    # default, for an ideal plan), in whole iterations
    minutes = 60.0 if ev.goodput is None else ev.goodput.checkpoint_interval_min
    assert int(args["--save-interval"]) == max(1, round(minutes * 60 / ev.step_time_s))
    assert "--exit-signal-handler" in args
    assert "# resume: sbatch this file again" in text
    assert f'-lt {job.train_iters} ]; then scontrol requeue "$SLURM_JOB_ID"' in text


def test_months_long_run_is_split_into_segments():
    scenario, plan = make_plan("uneven_accounting_interleaved")  # 405B on 128 GPUs: months
    text = emit(Launch.from_plan(scenario, plan), "slurm")
    assert sbatch(text)["--time"] == "1-00:00:00"
    days = plan.evaluation.time_to_train_days
    segments = math.ceil(days * 1.1 * 1440 / (24 * 60 - 20))
    assert f"in about {segments:,} job segments" in text
    assert days > 100 and "--exit-duration-in-mins 1420" in text


def test_a_short_run_is_one_segment_that_its_exit_and_signal_fit():
    """A run of minutes: --time is the run plus 10% and Megatron-LM's 20 min exit margin,
    so the save-and-exit comes after the run and USR1 (600 s before the limit) after the
    start; it was --time 5 min, USR1 due before the start, exit after 1 min."""
    sc = build_scenario(model="llama2-7b", tokens=2e8, gpus=("h100-sxm",), max_gpus=64)
    shape = Shape("h100-sxm", 1, 1, 1, 1, 1, "selective", "bf16")
    plan = build_plan(sc, Config(shape, "cx7-400g", 8, 64, 8))
    ev = plan.evaluation
    job = Launch.from_plan(sc, plan)
    ckpt = Checkpointing.for_job(job)
    total = math.ceil(ev.time_to_train_days * 1.1 * 1440 - 1e-9)
    assert total < 60
    assert ckpt.segment_minutes == total + 20 and ckpt.exit_minutes == total
    assert ckpt.segments == 1 and ckpt.signal_lead_s < ckpt.segment_minutes * 60
    text = emit(job, "slurm")
    assert f"--exit-duration-in-mins {total} " in text
    assert "in one job segment of --time" in text


def test_single_server_plan_uses_only_its_gpus():
    scenario, plan = make_plan("fp8_full")
    small = build_plan(scenario, replace(plan.config, dp=1))  # 4 GPUs on one 8-GPU server
    text = emit(Launch.from_plan(scenario, small), "slurm")
    assert sbatch(text)["--nodes"] == "1" and sbatch(text)["--gpus-per-node"] == "4"
    assert "--rdzv-endpoint" not in text


def test_uneven_servers_cannot_be_launched():
    scenario, plan = make_plan("fp8_full")
    uneven = build_plan(scenario, replace(plan.config, dp=5))  # 20 GPUs on 3 servers of 8
    with pytest.raises(Infeasible, match="--max-gpus 16"):
        Launch.from_plan(scenario, uneven)


def test_slurm_time_format():
    assert slurm_time(1584) == "1-02:24:00"
    assert slurm_time(0) == "0-00:01:00"


def test_megatron_flags_for_features():
    flags = dict(megatron_args(Launch.from_plan(*make_plan("cp_gqa"))))
    assert flags["--context-parallel-size"] == "4"
    assert flags["--num-query-groups"] == "8" and "--group-query-attention" in flags
    assert "--sequence-parallel" in flags and "--use-distributed-optimizer" in flags
    inter = dict(megatron_args(Launch.from_plan(*make_plan("interleaved"))))
    assert inter["--num-virtual-stages-per-pipeline-rank"] == "2"  # the newer form
    assert "--num-layers-per-virtual-pipeline-stage" not in inter
    fp8 = dict(megatron_args(Launch.from_plan(*make_plan("fp8_full"))))
    assert fp8["--fp8-format"] == "hybrid"
    assert fp8["--recompute-granularity"] == "full" and fp8["--recompute-method"] == "uniform"
    assert fp8["--train-iters"] == str(-(-int(3e11) // (16 * 16 * 2 * 4096)))
    gpt3 = dict(megatron_args(Launch.from_plan(*make_plan("tied_no_recompute"))))
    assert "--untie-embeddings-and-output-weights" not in gpt3 and "--swiglu" not in gpt3
    assert not any(k.startswith("--recompute") for k in gpt3)


def test_every_emitted_flag_is_in_the_vocabulary():
    known = set(flag_index("megatron"))
    for key in PLANS:
        for name, _ in megatron_args(Launch.from_plan(*make_plan(key))):
            assert name in known


def test_vocabularies_say_version_and_source():
    for fw in FRAMEWORKS:
        v = vocabulary(fw)
        assert v["checked_against"] and v["source"].startswith("https://")
        for entry in v.get("flags", {}).values():
            assert entry["flag"].startswith("--") and entry["doc"]
    nemo = {e["path"] for e in vocabulary("nemo")["fields"].values()}
    assert "model.tensor_model_parallel_size" in nemo and "mixed_precision" in nemo


def test_uneven_split_flags_in_every_format():
    job = Launch.from_plan(*make_plan("uneven_first_last_interleaved"))
    args = dict(megatron_args(job))
    assert args["--decoder-first-pipeline-num-layers"] == "16"
    assert args["--decoder-last-pipeline-num-layers"] == "14"
    # Megatron-LM refuses --num-layers-per-virtual-pipeline-stage with an uneven first/last
    assert args["--num-virtual-stages-per-pipeline-rank"] == "2"
    assert "--num-layers-per-virtual-pipeline-stage" not in args
    fields = dict(nemo_fields(job))
    assert fields["model.num_layers_in_first_pipeline_stage"] == 16
    assert fields["model.num_layers_in_last_pipeline_stage"] == 14
    parts = torchtitan_sections(job)["parallelism"]["module_fqns_per_model_part"]
    # virtual stage s on rank s mod 8: rank 0's two chunks hold 8 layers each, rank 7's 7
    assert (
        len(parts) == 16
        and parts[0][0] == "tok_embeddings"
        and parts[-1][-2:] == ["norm", "lm_head"]
    )
    assert [len([n for n in p if n.startswith("layers.")]) for p in parts[:8]] == [8] * 7 + [7]
    assert sum(len([n for n in p if n.startswith("layers.")]) for p in parts) == 126
    acc = Launch.from_plan(*make_plan("uneven_accounting_interleaved"))
    args = dict(megatron_args(acc))
    assert args["--num-virtual-stages-per-pipeline-rank"] == "8"
    assert "--account-for-embedding-in-pipeline-split" in args
    assert "--account-for-loss-in-pipeline-split" in args
    par = torchtitan_sections(acc)["parallelism"]
    assert par["pipeline_parallel_layers_per_stage"] == 2
    assert par["pipeline_parallel_first_stage_less_layers"] == 1
    assert par["pipeline_parallel_last_stage_less_layers"] == 1
    assert dict(nemo_fields(acc))["model.account_for_loss_in_pipeline_split"] is True
    even = dict(nemo_fields(Launch.from_plan(*make_plan("interleaved"))))
    # written and cleared, so that no recipe default survives
    assert even["model.num_layers_in_first_pipeline_stage"] is None
    assert even["model.account_for_embedding_in_pipeline_split"] is False


def test_nemo_fields():
    fields = dict(nemo_fields(Launch.from_plan(*make_plan("interleaved"))))
    assert fields["model.virtual_pipeline_model_parallel_size"] == 2
    assert fields["model.tensor_model_parallel_size"] == 4
    assert (
        fields["optimizer.use_distributed_optimizer"]
        is fields["ddp.use_distributed_optimizer"]
        is True
    )
    text = emit(Launch.from_plan(*make_plan("fp8_full")), "nemo")
    assert (
        'cfg.mixed_precision = get_mixed_precision_config("bf16_with_fp8_delayed_scaling_mixed")'
        in text
    )
    assert 'cfg.model.recompute_granularity = "full"' in text
    assert "# accepted by megatron-bridge 0.6.2" in text and "torchrun --nnodes 8 " in text


def test_torchtitan_command():
    """torchtitan 0.3.0's form: --module/--config, --section.field overrides, the
    activation-checkpoint subcommand last (bench/launch_check.py runs torchtitan on it)."""
    job = Launch.from_plan(*make_plan("llama3_8b_interleaved"))
    text = emit(job, "torchtitan")
    assert "# accepted by torchtitan 0.3.0 (ConfigManager" in text
    cmd = command(text)
    assert cmd["torchrun"] == {"--nnodes": "4", "--nproc-per-node": "8"}
    assert (cmd["module"], cmd["config"]) == ("llama3", "llama3_8b")
    assert cmd["activation_checkpoint"] == "selective"
    assert text.rstrip().endswith("activation-checkpoint:selective")
    assert cmd["sections"] == torchtitan_sections(job)
    par, training = cmd["sections"]["parallelism"], cmd["sections"]["training"]
    assert par["tensor_parallel_degree"] == 2 and par["pipeline_parallel_degree"] == 4
    assert par["data_parallel_shard_degree"] == 4
    assert par["pipeline_parallel_schedule"] == "Interleaved1F1B"
    assert par["pipeline_parallel_layers_per_stage"] == 4
    # torchtitan counts the embedding and the output as one layer each unless told not to
    assert par["pipeline_parallel_first_stage_less_layers"] == 0
    assert par["pipeline_parallel_last_stage_less_layers"] == 0
    assert training["global_batch_size"] == 4 * 32
    assert training["local_batch_size"] == 32  # one step's micro-batches per DP rank
    assert training["disable_cuda_graphs"] is True  # 0.3.0 captures no CUDA graph with PP
    assert "--model." not in text  # 0.3.0 has no --model.converters: FP8 is the config's


def test_torchtitan_sections_of_any_model():
    sec = torchtitan_sections(Launch.from_plan(*make_plan("interleaved")))
    assert sec["parallelism"]["pipeline_parallel_layers_per_stage"] == 10
    scenario, plan = make_plan("fp8_full")
    assert torchtitan_sections(Launch.from_plan(scenario, plan))["training"][
        "local_batch_size"
    ] == (16 * 2 * 16 // 16)
    flat = build_plan(
        scenario, Config(Shape("h100-sxm", 1, 1, 1, 1, 2, "none", "fp8"), "cx7-400g", 8, 8, 4)
    )
    no_pp = torchtitan_sections(Launch.from_plan(scenario, flat))
    assert no_pp["training"]["local_batch_size"] == 2  # no PP: the micro-batch, accumulated
    assert no_pp["training"]["global_batch_size"] == 2 * 4 * 8
    assert "disable_cuda_graphs" not in no_pp["training"]
    assert "pipeline_parallel_schedule" not in no_pp["parallelism"]
    assert set(torchtitan_sections(Launch.from_plan(*make_plan("cp_gqa")))) == {
        "training",
        "parallelism",
    }


def test_torchtitan_refuses_what_0_3_0_cannot_express():
    with pytest.raises(Infeasible, match=r"^torchtitan 0.3.0 has no config for llama2-70b "):
        emit(Launch.from_plan(*make_plan("interleaved")), "torchtitan")
    scenario = build_scenario(
        model="llama3-8b", tokens=3e11, seq_len=4096, gpus=("h100-sxm",), max_gpus=64,
        precision="fp8",
    )  # fmt: skip
    fp8 = build_plan(
        scenario, Config(Shape("h100-sxm", 1, 1, 1, 1, 2, "full", "fp8"), "cx7-400g", 8, 8, 4)
    )
    with pytest.raises(Infeasible, match="llama3_8b has no FP8 converter") as err:
        emit(Launch.from_plan(scenario, fp8), "torchtitan")
    assert "\n" not in str(err.value)
    big = build_scenario(
        model="llama3-405b", tokens=3e11, seq_len=8192, gpus=("h100-sxm",), max_gpus=100_000
    )
    bf16 = build_plan(
        big, Config(Shape("h100-sxm", 8, 1, 8, 1, 1, "full", "bf16"), "cx7-400g", 8, 4, 64)
    )
    with pytest.raises(Infeasible, match="llama3_405b trains in FP8"):
        emit(Launch.from_plan(big, bf16), "torchtitan")


def test_torchtitan_refuses_a_model_that_only_shares_a_config_name():
    """torchtitan 0.3.0's llama3_8b builds the zoo's 32-layer, 4,096-wide model: a plan of a
    custom 16-layer model named llama3-8b must not launch it (it did, with a comment
    saying it builds 16 layers)."""
    small = zoo()["llama3-8b"].model_copy(update={"layers": 16, "hidden": 2048})
    scenario = build_scenario(
        model=small, tokens=1e11, seq_len=8192, gpus=("h100-sxm",), max_gpus=64
    )
    plan = build_plan(
        scenario, Config(Shape("h100-sxm", 1, 1, 1, 1, 1, "selective", "bf16"), "cx7-400g", 8, 8, 8)
    )
    with pytest.raises(Infeasible, match=r"llama3_8b builds the zoo's llama3-8b") as err:
        emit(Launch.from_plan(scenario, plan), "torchtitan")
    assert "layers 16 (builds 32), hidden 2048 (builds 4096)" in str(err.value)
    same = build_scenario(
        model="llama3-8b", tokens=1e11, seq_len=8192, gpus=("h100-sxm",), max_gpus=64
    )
    ok = build_plan(same, Config(plan.config.shape, "cx7-400g", 8, 8, 8))
    assert "--config llama3_8b" in emit(Launch.from_plan(same, ok), "torchtitan")


# --- import: Megatron's defaults, scripts, errors --------------------------------------------

SMALL = (
    "torchrun --nnodes 2 --nproc_per_node 8 pretrain_gpt.py --num-layers 32 --hidden-size 4096 "
    "--num-attention-heads 32 --seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 2 "
    "--data-path x --lr 3e-4 --bf16"
)


def test_import_applies_megatron_defaults():
    run = load_megatron(SMALL)
    assert run.world_size == 16 and run.layout.dp == 16
    assert run.layout.global_batch == 32  # micro x DP
    assert run.layout.recompute == "none" and run.layout.zero == 0
    assert run.layout.precision == "bf16"
    assert run.spec.ffn == 4 * 4096 and not run.spec.gated_mlp
    assert run.spec.tied_embeddings  # Megatron ties unless told otherwise
    assert run.spec.vocab == 32000 and any("--vocab-size" in n for n in run.notes)
    assert run.tokens is None
    swiglu = load_megatron(SMALL + " --swiglu --recompute-activations --vocab-size 50000")
    assert swiglu.spec.ffn == int((4 * 4096 * 2 / 3) / 64) * 64
    assert swiglu.layout.recompute == "selective" and swiglu.spec.vocab == 50000


def test_import_flags_with_equals_and_virtual_stages():
    run = load_megatron(
        SMALL.replace("--nnodes 2", "--nnodes=4")
        + " --pipeline-model-parallel-size=4 --num-virtual-stages-per-pipeline-rank 2"
        + " --global-batch-size 64 --train-samples 1000"
    )
    assert run.world_size == 32 and run.layout.pp == 4 and run.layout.vp == 2
    assert run.tokens == 1000 * 4096


def test_import_script_with_arrays_variables_and_sbatch(tmp_path):
    script = tmp_path / "train.sh"
    script.write_text(
        """#!/bin/bash
#SBATCH --nodes=4
#SBATCH --gpus-per-node=h100:8
GPUS=${GPUS_PER_NODE:-8}
MODEL_ARGS=(
    --num-layers 80      # llama2-70b
    --hidden-size 8192 --ffn-hidden-size 28672
    --num-attention-heads 64 --group-query-attention --num-query-groups 8
)
export TP=8
CUDA_DEVICE_MAX_CONNECTIONS=1 torchrun --nnodes $SLURM_NNODES --nproc-per-node $GPUS \\
    pretrain_gpt.py ${MODEL_ARGS[@]} --seq-length 4096 --max-position-embeddings 4096 \\
    --tensor-model-parallel-size ${TP} --micro-batch-size 1 --global-batch-size 128 \\
    --train-iters 10 --fp8-format hybrid --use-distributed-optimizer --sequence-parallel --bf16
"""
    )
    run = load_megatron(str(script))
    assert run.nnodes == 4 and run.nproc_per_node == 8
    assert run.spec.layers == 80 and run.spec.kv == 8
    assert run.layout.tp == 8 and run.layout.dp == 4 and run.layout.sp
    assert run.layout.precision == "fp8" and run.layout.zero == 1
    assert run.tokens == 10 * 128 * 4096


def test_readme_example_script_imports():
    run = load_megatron(str(ROOT / "examples" / "megatron-llama2-70b.sh"))
    assert (run.nnodes, run.nproc_per_node) == (16, 8)
    assert (run.layout.tp, run.layout.pp, run.layout.dp) == (8, 4, 4)
    assert run.spec.architecture() == zoo()["llama2-70b"].architecture()
    assert run.spec.params() == zoo()["llama2-70b"].params()
    assert run.notes == ()


def test_script_without_command():
    assert command_from_script("#!/bin/bash\nA=1\necho hi\n") is None


@pytest.mark.parametrize(
    "extra, needle",
    [
        ("--tensor-model-parallel-size 3", "--tensor-model-parallel-size: TP 3 x PP 1 x CP 1 = 3"),
        ("--micro-batch-size two", "--micro-batch-size: 'two' is not a whole number"),
        (
            "--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 5",
            "--num-layers-per-virtual-pipeline-stage",
        ),
        (
            "--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 4 --num-virtual-stages-per-pipeline-rank 2",
            "--num-virtual-stages-per-pipeline-rank: 2 virtual stages contradict",
        ),
        ("--kv-channels 0", "--kv-channels: must be at least 1"),
        ("--global-batch-size 40", "--global-batch-size"),
        ("--recompute-granularity partial", "--recompute-granularity: 'partial' is not one of"),
        ("--group-query-attention --num-query-groups 5", "--num-query-groups"),
    ],
)
def test_import_contradictions_name_the_flag(extra, needle):
    with pytest.raises(UsageError) as info:
        load_megatron(f"{SMALL} {extra}")
    assert needle in str(info.value)
    assert str(info.value).startswith("--from-megatron: ")


def test_import_missing_world_size_and_shape():
    with pytest.raises(UsageError, match="--nproc-per-node: missing"):
        parse_megatron(SMALL.split()[5:])
    with pytest.raises(UsageError, match="--hidden-size: missing"):
        load_megatron(SMALL.replace("--hidden-size 4096", ""))
    with pytest.raises(UsageError, match="elastic range"):
        load_megatron(SMALL.replace("--nnodes 2", "--nnodes 1:4"))


def test_import_missing_script_file():
    with pytest.raises(UsageError, match="file not found"):
        load_megatron("/nonexistent/train.sh")


# --- the CLI -----------------------------------------------------------------------------------

OPT = [
    "optimize",
    "--model",
    "llama2-7b",
    "--gpu",
    "h100-sxm",
    "--tokens",
    "300B",
    "--max-gpus",
    "64",
]


@pytest.fixture(scope="module")
def saved_plan(tmp_path_factory):
    from click.testing import CliRunner

    from designer.cli import cli

    out = CliRunner().invoke(cli, [*OPT, "--json", "--no-explain"], catch_exceptions=False)
    assert out.exit_code == 0
    path = tmp_path_factory.mktemp("plan") / "plan.json"
    path.write_text(out.stdout)
    return path, json.loads(out.stdout)


@pytest.mark.parametrize("fmt", ["megatron", "nemo", "torchtitan", "slurm"])
def test_export_matches_optimize_emit(capsys, saved_plan, fmt):
    path, doc = saved_plan
    code, exported, err = run_main(capsys, ["export", str(path), "--format", fmt])
    if fmt == "torchtitan":  # torchtitan 0.3.0 has no llama2-7b config: both refuse alike,
        # each naming its own option (export's fix said --emit, which export does not take)
        assert code == 1 and "has no config for llama2-7b" in err
        assert err.strip().endswith("use --format megatron") and "--emit" not in err
        said = err.replace("--format", "--emit")
        assert run_main(capsys, [*OPT, "--emit", fmt])[::2] == (1, said)
        return
    assert code == 0, err
    code, emitted, err = run_main(capsys, [*OPT, "--emit", fmt])
    assert code == 0, err
    assert exported == emitted
    plan = doc["plans"][0]
    if fmt == "slurm":
        assert emitted.startswith("#!/bin/bash\n")  # the settings alone: redirect to a file
        header = sbatch(emitted)
        assert int(header["--nodes"]) == plan["nodes"]
        assert int(header["--nodes"]) * int(header["--gpus-per-node"]) == plan["num_gpus"]
        assert torchrun_flags(emitted) == {
            "--nnodes": str(plan["nodes"]),
            "--nproc-per-node": header["--gpus-per-node"],
        }


def test_export_then_evaluate_round_trip_cli(capsys, saved_plan, tmp_path):
    path, doc = saved_plan
    plan = doc["plans"][0]
    code, text, _ = run_main(capsys, ["export", str(path)])
    script = tmp_path / "launch.sh"
    script.write_text(text)
    code, out, err = run_main(
        capsys,
        [
            "evaluate",
            "--from-megatron",
            str(script),
            "--gpu",
            plan["gpu"],
            "--nic",
            plan["nic"],
            "--nics-per-node",
            str(plan["nics_per_node"]),
            "--hot-spares",
            str(plan["hot_spares_per_100"]),
            "--checkpoint-storage",
            str(plan["checkpoint_storage_gb_per_s_per_server"]),
            "--json",
        ],
    )
    assert code == 0, err
    ev = json.loads(out)
    for key in ("tp", "pp", "dp", "cp", "vp", "micro_batch", "global_batch", "recompute", "zero"):
        assert ev["layout"][key] == plan[key], key
    assert ev["step_time_s"] == pytest.approx(plan["step_time_s"], rel=1e-12)
    assert ev["memory_gb"]["total"] == pytest.approx(plan["memory_gb_per_gpu"], rel=1e-12)
    # the command trains whole steps (--train-iters rounds up): at most one step more
    steps = plan["time_to_train_days"] * 86400 / plan["step_time_s"]
    assert ev["time_to_train_days"] == pytest.approx(plan["time_to_train_days"], rel=1 / steps)
    assert ev["from_megatron"]["num_gpus"] == plan["num_gpus"]


def test_export_trains_the_tokens_the_plan_is_timed_for(capsys, tmp_path):
    """Past the critical batch a plan trains more tokens than asked (models/batch_tokens.py)
    and its days count them: the launch runs those steps, not the asked tokens' (2,006
    steps short for Qwen3-30B-A3B at $5M before), and its header says both counts."""
    code, out, err = run_main(capsys, ["optimize", "--budget", "30M", "--json", "--no-explain"])
    assert code == 0, err
    plan = json.loads(out)["plans"][0]
    batch_tokens = plan["global_batch"] * 4096
    assert plan["effective_tokens"] > 2e12 + batch_tokens  # past it by more than one step
    path = tmp_path / "a.json"
    path.write_text(out)
    code, text, err = run_main(capsys, ["export", str(path), "--format", "megatron"])
    assert code == 0, err
    iters = int(re.search(r"--train-iters (\d+)", text).group(1))
    assert iters == math.ceil(plan["effective_tokens"] / batch_tokens)
    steps = plan["ideal_time_days"] * 86400 / plan["step_time_s"]
    assert iters - 1 < steps <= iters
    days = f"{plan['time_to_train_days']:.1f}"
    assert f"{days} days for 2.001T tokens (2T asked; the batch is past the critical" in text


def test_optimize_emit_json_adds_launch(capsys):
    llama3 = [*OPT[:2], "llama3-8b", *OPT[3:]]
    code, out, _ = run_main(capsys, [*llama3, "--emit", "torchtitan", "--json", "--no-explain"])
    assert code == 0
    doc = json.loads(out)
    assert {"status", "objective", "solve", "plans", "binding", "conflict"} <= set(doc)
    assert doc["launch"]["format"] == "torchtitan"
    assert "-m torchtitan.train --module llama3 --config llama3_8b" in doc["launch"]["text"]


def test_optimize_from_megatron_json_and_text(capsys, tmp_path):
    cmd = (
        SMALL
        + " --global-batch-size 512 --swiglu --ffn-hidden-size 11008 --untie-embeddings-and-output-weights --train-iters 1000 --recompute-granularity full --recompute-method uniform --recompute-num-layers 1"
    )
    code, out, err = run_main(capsys, ["optimize", "--from-megatron", cmd, "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert {"status", "objective", "solve", "plans", "binding", "conflict", "question"} <= set(doc)
    best = doc["plans"][0]
    fm = doc["from_megatron"]
    assert best["gpu"] == "h100-sxm"  # evaluate's default GPU
    assert best["num_gpus"] <= 16 == fm["max_gpus"]
    assert best["global_batch"] == 512  # the command's batch, as floor and ceiling
    assert doc["question"]["tokens"] == 1000 * 512 * 4096
    assert fm["command"]["layout"]["recompute"] == "full"
    assert fm["evaluation"]["layout"]["dp"] == 16
    diff = {d["setting"]: d for d in fm["diff"]}
    assert {"step_time_s", "time_to_train_days", "cost_usd", "mfu"} <= set(diff)
    assert diff["step_time_s"]["imported"] == pytest.approx(fm["evaluation"]["step_time_s"])
    assert diff["step_time_s"]["optimized"] == pytest.approx(best["step_time_s"])
    assert diff["step_time_s"]["optimized"] <= diff["step_time_s"]["imported"] * (1 + 1e-9)
    for setting in ("tp", "pp", "dp", "micro_batch", "recompute"):
        if setting in diff:
            assert diff[setting]["imported"] != diff[setting]["optimized"]
    assert "recompute" in diff  # full recomputation is never the fastest here
    code, text, err = run_main(capsys, ["optimize", "--from-megatron", cmd, "--no-explain"])
    assert code == 0, err
    assert text.startswith("Imported Megatron-LM command: 16 GPUs (2 x 8)")
    assert re.search(r"^recompute\s+full\s+", text, re.M)


@pytest.mark.parametrize(
    "args, needle",
    [
        (
            ["evaluate", "--from-megatron", SMALL, "--tp", "2"],
            "--tp: comes from the Megatron command",
        ),
        (["optimize", "--from-megatron", SMALL, "--max-gpus", "8"], "--max-gpus: comes from"),
        (
            ["optimize", "--from-megatron", SMALL, "--gpu", "h100-sxm", "--gpu", "h200"],
            "--gpu: give one GPU type",
        ),
        (
            ["evaluate", "--from-megatron", SMALL + " --tensor-model-parallel-size 3"],
            "--tensor-model-parallel-size",
        ),
        (
            ["evaluate", "--from-megatron", SMALL + " --fp8-format hybrid", "--gpu", "a100-80gb"],
            "--fp8-format",
        ),
        (["export", "nonexistent.json"], "nonexistent.json: file not found"),
        (["optimize", "--emit", "deepspeed"], "--emit"),
    ],
)
def test_launch_usage_errors_exit_2(capsys, args, needle):
    code, _, err = run_main(capsys, args)
    assert code == 2
    assert needle in one_line(err)


def test_export_question_file_has_no_plan(capsys, tmp_path):
    q = tmp_path / "q.yaml"
    q.write_text("model: llama2-7b\nbudget: 1M\n")
    code, _, err = run_main(capsys, ["export", str(q)])
    assert code == 2 and "holds no plan" in one_line(err)


def test_evaluate_from_megatron_text(capsys):
    code, out, err = run_main(
        capsys, ["evaluate", "--from-megatron", SMALL + " --vocab-size 32000"]
    )
    assert code == 1, err  # no distributed optimizer, no recomputation: does not fit
    assert out.startswith("from Megatron-LM: 16 GPUs (2 x 8)")
    assert "layout: tp 1, pp 1, dp 16" in out and "recompute none" in out and "ZeRO 0" in out
    assert "violation memory" in out
    fitted = SMALL + " --use-distributed-optimizer --recompute-activations --micro-batch-size 1"
    code, out, err = run_main(capsys, ["evaluate", "--from-megatron", fitted])
    assert code == 0, err
    assert "recompute selective" in out and "ZeRO 1" in out and "note: no --vocab-size" in out


# --- issue 29: what Megatron-LM 0.19's validate_args and the goodput model need ----------


@pytest.mark.parametrize("fmt", ["megatron", "slurm"])
def test_tp_or_cp_exports_one_device_connection(fmt):
    """validate_args refuses TP or CP without CUDA_DEVICE_MAX_CONNECTIONS=1 (before
    Blackwell); the export comes before the torchrun line that needs it."""
    for key in ("cp_gqa", "interleaved"):
        text = emit(Launch.from_plan(*make_plan(key)), fmt)
        lines = text.splitlines()
        at = lines.index("export CUDA_DEVICE_MAX_CONNECTIONS=1")
        assert at < next(i for i, ln in enumerate(lines) if "torchrun " in ln and ln[0] != "#")


def test_no_tensor_or_context_parallelism_exports_nothing():
    scenario, plan = make_plan("cp_gqa")
    lay = replace(plan.evaluation.layout, tp=1, cp=1)
    job = replace(Launch.from_plan(scenario, plan), layout=lay)
    assert "CUDA_DEVICE_MAX_CONNECTIONS" not in emit(job, "megatron")


def test_slurm_saves_in_the_background_as_the_goodput_model_charges():
    """The checkpoint interval assumes non-blocking saves; Megatron-LM 0.19 blocks unless
    --async-save, so the Slurm launch asks for it (the bare megatron launch saves nothing)."""
    scenario, plan = make_plan("interleaved")
    job = Launch.from_plan(scenario, plan)
    assert "--async-save" in emit(job, "slurm")
    assert "--async-save" not in emit(job, "megatron")
    run = load_megatron(emit(job, "slurm"))  # the importer still reads the script
    assert run.world_size == plan.num_gpus


# ------------------------------------------------------------------ launch matches memory
def test_emitted_megatron_launch_sets_the_gradient_precision_the_plan_counts(tmp_path, capsys):
    """The plan counts 2-byte gradients; its Megatron command says --grad-reduce-in-bf16 and
    imports to the same memory. Without the flag Megatron keeps fp32 gradients: the import
    counts 4 bytes, so the dropped flag shows up as more memory."""
    script = tmp_path / "train.sh"
    code, text, err = run_main(
        capsys,
        [
            "optimize",
            "--model",
            "llama2-7b",
            "--tokens",
            "100B",
            "--gpu",
            "h100-sxm",
            "--budget",
            "2M",
            "--no-explain",
            "--emit",
            "megatron",
        ],
    )
    assert code == 0, err
    script.write_text(text)
    assert "--grad-reduce-in-bf16" in text
    plan_code, plan_out, _ = run_main(
        capsys, ["evaluate", "--from-megatron", str(script), "--json"]
    )
    assert plan_code in (0, 1)
    with_flag = json.loads(plan_out)["memory_gb"]
    fp32 = tmp_path / "fp32.sh"
    fp32.write_text(text.replace("--grad-reduce-in-bf16", ""))
    _, out, _ = run_main(capsys, ["evaluate", "--from-megatron", str(fp32), "--json"])
    without = json.loads(out)["memory_gb"]
    assert without["gradients"] == pytest.approx(2 * with_flag["gradients"])


def test_a_tp_group_that_would_straddle_two_servers_is_refused():
    """12 GPUs on two servers start 6 processes each: TP 4 would put ranks 4-7 on both,
    while the plan times TP inside a server (a hand-edited plan launched it)."""
    scenario = build_scenario(
        model="llama2-7b", tokens=1e10, seq_len=4096, gpus=("h100-sxm",), max_gpus=64
    )
    plan = build_plan(
        scenario, Config(Shape("h100-sxm", 4, 1, 1, 1, 1, "selective", "bf16"), "cx7-400g", 8, 3, 8)
    )
    assert plan.evaluation.nodes == 2 and plan.evaluation.layout.num_gpus == 12
    with pytest.raises(Infeasible, match="a TP group of 4 ranks would span two domains"):
        Launch.from_plan(scenario, plan)
    fits = build_plan(
        scenario, Config(Shape("h100-sxm", 2, 1, 1, 1, 1, "selective", "bf16"), "cx7-400g", 8, 6, 8)
    )
    assert Launch.from_plan(scenario, fits).procs_per_node == 6  # TP 2 groups stay inside


def test_tp_over_two_nvl72_trays_stays_inside_the_rack():
    """GB200 trays hold 4 GPUs of a 72-GPU NVLink domain: TP 8 over two trays is inside the
    domain, as the plan times it (the check refused it when it counted servers, not
    domains: CI's launch check on a 144-GPU GB200 plan)."""
    scenario = build_scenario(
        model="llama3-70b", tokens=1e10, seq_len=4096, gpus=("gb200",), max_gpus=144
    )
    shape = Shape("gb200", 8, 1, 1, 1, 1, "selective", "bf16")
    plan = build_plan(scenario, Config(shape, "cx7-400g", 4, 18, 8))
    job = Launch.from_plan(scenario, plan)
    assert (job.nodes, job.procs_per_node) == (36, 4)
