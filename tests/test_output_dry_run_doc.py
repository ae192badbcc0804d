"""designer/output/dry_run_doc.py: `designer evaluate`'s text, built from evaluations made
directly (designer.dry_run.evaluate_options on options click parses, no CliRunner): the run's
head, the memory and step tables (their columns: dense, MoE, ring attention across servers),
the uneven pipeline line, infeasibility, time and cost with and without --tokens, and the
imported Megatron-LM command before it."""

from __future__ import annotations

from typing import Any

import click
import pytest

from designer.dry_run import evaluate_options
from designer.launch.megatron_import import parse_megatron
from designer.options import EVALUATE_OPTIONS, apply
from designer.output.dry_run_doc import (
    MEMORY_PARTS,
    MOE_STEP_PARTS,
    STEP_PARTS,
    evaluate_text,
    evaluation_text,
    imported_text,
)


@click.command("evaluate")
@apply(EVALUATE_OPTIONS)
def _evaluate(**kw: Any) -> None:
    pass


def answer(*args: str):
    """evaluate's answer for its command-line ``args`` (the CLI's own parsing and defaults)."""
    ctx = _evaluate.make_context("evaluate", list(args))
    given = {k for k in ctx.params if ctx.get_parameter_source(k).name == "COMMANDLINE"}
    return evaluate_options(ctx.params, given)


SMALL = ("--model", "llama2-7b", "--tp", "2", "--pp", "2", "--dp", "2", "--micro-batch", "1")


@pytest.fixture(scope="module")
def small():
    return answer(*SMALL, "--global-batch", "64", "--tokens", "10B")


def table(text: str, first_header: str) -> dict[str, str]:
    """The one row of the text table whose first header is ``first_header``, by header."""
    lines = text.split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith(first_header))
    headers = lines[at].removeprefix(first_header).split()
    row = lines[at + 2].split("  ")
    values = [c.strip() for c in row if c.strip()][-len(headers) :]
    return dict(zip(headers, values, strict=True))


def number(cell: str) -> float:
    return float(cell.replace(",", ""))


def test_the_head_says_model_gpus_and_layout(small):
    text = evaluation_text(small.ev, small.evidence)
    lines = text.split("\n")
    assert lines[0].startswith("llama2-7b on 8 x h100-sxm (1 server, ")
    assert lines[1].startswith("layout: tp 2, pp 2, dp 2, cp 1, vp 1; micro-batch 1, ")
    assert "global batch 64 (32 micro-batches/step)" in lines[1]  # 64 / (1 x dp 2)
    assert "SP on" in lines[1]  # tp > 1 turns sequence parallelism on
    assert "feasible: yes" in lines
    assert not any(line.startswith("pipeline:") or line.startswith("moe:") for line in lines)


def test_the_memory_table_agrees_with_the_evaluation(small):
    mem = table(evaluation_text(small.ev, small.evidence), "memory per GPU (GB)")
    assert tuple(mem) == MEMORY_PARTS
    m = small.ev.memory
    for part in MEMORY_PARTS:
        assert number(mem[part]) == pytest.approx(getattr(m, part), rel=5e-3, abs=5e-3), part
    parts = sum(number(mem[k]) for k in ("weights", "gradients", "optimizer", "activations"))
    assert parts + number(mem["other"]) == pytest.approx(number(mem["total"]), abs=0.05)


def test_the_step_table_is_the_dense_parts_and_adds_up(small):
    step = table(evaluation_text(small.ev, small.evidence), "step time (s)")
    assert tuple(step) == STEP_PARTS  # a dense model: no ep_comm column
    exposed = sum(number(step[k]) for k in STEP_PARTS[:-1])
    assert exposed == pytest.approx(number(step["total"]), rel=0.01)
    assert number(step["total"]) == pytest.approx(float(small.ev.step_time_s), rel=5e-3)


def test_time_and_cost_with_tokens(small):
    text = evaluation_text(small.ev, small.evidence)
    line = next(x for x in text.split("\n") if x.startswith("time to train: "))
    days = float(line.removeprefix("time to train: ").split()[0].replace(",", ""))
    assert days == pytest.approx(float(small.ev.time_to_train_days), abs=0.05)
    assert "capex $" in line and "cloud $" in line and "tco $" in line
    assert "(energy $" in line
    assert "Failures cost " in text  # failures on by default: the goodput sentence follows


def test_without_tokens_it_asks_for_them():
    ev = answer(*SMALL, "--no-failures")
    text = evaluation_text(ev.ev, ev.evidence)
    assert text.split("\n")[-1].startswith("capex $")
    assert text.endswith("(pass --tokens for time to train and cloud cost)")
    assert "time to train:" not in text and "Failures cost" not in text


def test_an_infeasible_layout_says_no_and_why():
    ev = answer("--model", "llama2-70b", "--tokens", "1B")  # 70B parameters on one GPU
    assert not ev.ev.feasible
    lines = evaluation_text(ev.ev, ev.evidence).split("\n")
    assert "feasible: NO" in lines
    memory = [x for x in lines if x.startswith("  violation memory")]
    assert memory, lines[:8]


def test_an_uneven_pipeline_gets_its_own_line():
    ev = answer(*SMALL, "--first-stage-layers", "14")  # 32 layers: 14 then 18
    lines = evaluation_text(ev.ev, ev.evidence).split("\n")
    pipeline = next(x for x in lines if x.startswith("pipeline: "))
    assert "14" in pipeline and "18" in pipeline
    assert "--first-stage-layers 14" in pipeline  # the options that give the split


def test_a_moe_model_adds_its_plan_and_the_ep_column():
    ev = answer(
        *("--model", "mixtral-8x7b", "--tp", "2", "--pp", "4", "--vp", "2", "--dp", "4"),
        *("--ep", "4", "--global-batch", "64", "--moe-overlap", "a2a"),
    )
    text = evaluation_text(ev.ev, ev.evidence)
    assert "vp 2, ep 4, etp 1; micro-batch" in text.split("\n")[1]  # evaluate's --etp: 1
    moe = next(x for x in text.split("\n") if x.startswith("moe: "))
    # 16 micro-batches: 11 of the first rank's 32 chunk passes run alone each way
    assert "all-to-all overlap 1" in moe and "66% of the all-to-alls hidden" in moe
    step = table(text, "step time (s)")
    assert tuple(step) == MOE_STEP_PARTS
    assert tuple(step).index("ep_comm") == tuple(step).index("dp_comm") + 1


def test_ring_attention_across_servers_adds_its_column_and_line():
    args = ("--model", "llama2-7b", "--cp", "16", "--seq-len", "65536", "--no-failures")
    ev = answer(*args, "--cp-across-servers")
    assert ev.ev.cp_ring, "CP 16 on 8-GPU servers spans two servers"
    assert ev.ev.feasible  # allowed across servers; the contract's default refuses it
    assert [v.constraint for v in answer(*args).ev.violations] == ["tp_domain"]
    text = evaluation_text(ev.ev, ev.evidence)
    step = table(text, "step time (s)")
    assert list(step)[4] == "cp_nic_comm"  # after cp_comm, before pp_comm
    ring = next(x for x in text.split("\n") if x.startswith("ring attention over the NICs"))
    assert "CP 16 spans servers" in ring


MEGATRON = (
    "torchrun --nnodes 2 --nproc-per-node 8 pretrain_gpt.py --num-layers 4 --hidden-size 1024 "
    "--num-attention-heads 16 --seq-length 2048 --max-position-embeddings 2048 "
    "--micro-batch-size 2 --tensor-model-parallel-size 2 --bf16"
).split()


def test_imported_text_names_the_command_and_its_notes():
    run = parse_megatron(MEGATRON)
    text = imported_text(run)
    first, *notes = text.split("\n")
    assert first == (
        "from Megatron-LM: 16 GPUs (2 x 8); model 4 layers, hidden 1024, 16 heads, 16 KV heads, "
        f"ffn 4096, vocab {run.spec.vocab:,}"
    )
    assert notes == [f"  note: {n}" for n in run.notes]
    assert any("--global-batch-size" in n for n in notes)  # no batch given: micro x DP


def test_evaluate_text_puts_the_import_first(small):
    assert evaluate_text(small) == evaluation_text(small.ev, small.evidence)
    imported = answer("--from-megatron", " ".join(MEGATRON), "--no-failures")
    text = evaluate_text(imported)
    assert text.startswith("from Megatron-LM: 16 GPUs (2 x 8)")
    assert text.endswith(evaluation_text(imported.ev, imported.evidence))


# (--etp given: left at its default on TP 2, a note says Megatron-LM's default is TP)
MIXTRAL = (
    "--model",
    "mixtral-8x7b",
    "--tp",
    "2",
    "--pp",
    "4",
    "--dp",
    "4",
    "--ep",
    "4",
    "--etp",
    "1",
)


def test_an_moe_run_with_tp_and_no_etp_is_told_megatrons_default():
    """--etp defaults to 1 (the CLI contract), Megatron-LM's --expert-tensor-parallel-size
    to TP: a note says so where ETP = TP would divide the group, and nothing changes."""
    base = (*MIXTRAL[:-2], "--gpu", "b200", "--global-batch", "64", "--no-failures")
    left, given = answer(*base), answer(*base, "--etp", "1")
    assert left.notes == (
        "--etp 1 (the default): Megatron-LM's --expert-tensor-parallel-size defaults to TP; "
        "for a run that does not set it, pass --etp 2",
    )
    assert not given.notes and left.ev.step_time_s == given.ev.step_time_s
    assert answer(*base, "--etp", "2").notes == ()
    one = ("--model", "mixtral-8x7b", "--tp", "1", "--pp", "4", "--dp", "8", "--ep", "4")
    assert answer(*one, "--gpu", "b200", "--global-batch", "64").notes == ()  # TP 1: none


def test_megatrons_names_parse_and_their_notes_lead_the_text_and_json():
    """evaluate takes Megatron-LM's spellings (--dispatcher flex, --precision mxfp8,
    --recompute-modules 'core_attn moe_act'), each priced as --from-megatron prices it, its
    notes first in the text and under "notes" in the JSON; mxfp8 shows as fp8 (the
    contract's --precision values). Click had refused all three."""
    args = (*MIXTRAL, "--gpu", "b200", "--global-batch", "64", "--no-failures")
    ev = answer(*args, "--dispatcher", "flex", "--precision", "mxfp8",
                "--recompute-modules", "core_attn moe_act")  # fmt: skip
    same = answer(*args, "--dispatcher", "deepep", "--precision", "fp8",
                  "--recompute-modules", "moe_act")  # fmt: skip
    assert ev.ev.step_time_s == same.ev.step_time_s and ev.ev.memory == same.ev.memory
    assert ev.ev.layout.precision == "fp8" and not same.notes
    text = evaluate_text(ev)
    assert [x.removeprefix("note: ") for x in text.split("\n")[:2]] == list(ev.notes)
    assert text.endswith(evaluation_text(ev.ev, ev.evidence))
    doc = ev.as_dict()
    assert doc["layout"]["precision"] == "fp8" and doc["notes"] == list(ev.notes)
    assert any(n.startswith("--precision mxfp8 (") and "priced as fp8" in n for n in ev.notes)


def test_fused_attention_leaves_blackwell_as_it_is():
    """--fused-attention on gb200 changes no number (its profile was fitted on fused
    attention) and says so; on h100-sxm it still speeds the step up."""
    base = (*MIXTRAL, "--global-batch", "64", "--no-failures")
    gb200 = [answer(*base, "--gpu", "gb200", *flag) for flag in ((), ("--fused-attention",))]
    assert gb200[0].ev.step_time_s == gb200[1].ev.step_time_s
    assert gb200[1].ev.moe_plan == gb200[0].ev.moe_plan
    assert gb200[1].notes[0].startswith("--fused-attention: no change on gb200")
    h100 = [answer(*base, *flag) for flag in ((), ("--fused-attention",))]
    assert h100[1].ev.step_time_s < h100[0].ev.step_time_s and not h100[1].notes
