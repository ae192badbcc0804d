"""Megatron-Core's --pipeline-model-parallel-layout for splits the first/last-stage flags
do not express (issue 34 item 3): DeepSeek-V3's 61 layers with its MTP layer on PP 8 x
VP 4 or PP 16 x VP 2, in evaluate, --from-megatron and the Megatron emitter."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from designer.launch import emit, load_megatron
from designer.launch.pipeline_layout import layout_fields
from helpers import run_main
from models.layout import Layout
from models.memory import rank_layer_ids
from models.pipeline import split_violation, stage_layers
from models.zoo import moe_zoo

V3 = moe_zoo()["deepseek-v3"]
PP8_VP4 = "Et*3|(tt|)*29,m|L"  # the MTP layer alone in stage 30 (rank 6), the loss in 31
PP16_VP2 = "Et*1|t*1|" + "t*2|" * 29 + "t*1,mL"


def test_layout_strings_become_stage_counts_and_the_mtp_rank():
    f = layout_fields(PP8_VP4, 61, 8, 1)
    assert f["vp"] == 4 and f["mtp_rank"] == 6
    assert f["stage_counts"] == (3, *([2] * 29), 0, 0)
    lay = Layout(tp=1, pp=8, dp=8, micro_batch=1, global_batch=64, **f)
    assert split_violation(61, lay) is None
    assert stage_layers(61, lay) == (9, 8, 8, 8, 8, 8, 6, 6)
    # rank 0 builds stages 0, 8, 16, 24: layers 0-2, then 17-18, 33-34, 49-50
    assert rank_layer_ids(61, lay, 0) == (0, 1, 2, 17, 18, 33, 34, 49, 50)
    g = layout_fields(PP16_VP2, 61, 16, 1)
    assert g["vp"] == 2 and "mtp_rank" not in g  # MTP with the loss: the last rank
    assert stage_layers(61, Layout(tp=1, pp=16, dp=1, micro_batch=1, global_batch=16, **g)) == (
        3, 3, *([4] * 13), 3,
    )  # fmt: skip
    # a split the designer's own flags express stays in them
    assert layout_fields("Et*3|t*4|t*4|t*2L", 13, 4) == {
        "vp": 1, "first_stage_layers": 3, "last_stage_layers": 2,
    }  # fmt: skip
    for bad, why in (
        ("Et*3|t*4|t*4|t*1mL", "holds 12 layers"),
        ("Et*3|t*4|t*4|mt*2L", "stage 3"),
        ("Et*3|t*4m|t*4|t*2mL", "2 MTP layers"),
    ):
        with pytest.raises(ValueError, match=why):
            layout_fields(bad, 13, 4, 1)


EVAL = ["evaluate", "--model", "deepseek-v3", "--tp", "2", "--pp", "8", "--dp", "16",
        "--ep", "32", "--global-batch", "2048", "--precision", "fp8", "--json"]  # fmt: skip


def test_evaluate_takes_the_layout_and_moves_the_mtp_layer(capsys):
    code, out, err = run_main(capsys, [*EVAL, "--pipeline-layout", PP8_VP4])
    assert code in (0, 1), err
    doc = json.loads(out)
    assert doc["layout"]["vp"] == 4 and doc["layout"]["mtp_rank"] == 6
    assert doc["stage_layers"] == [9, 8, 8, 8, 8, 8, 6, 6]
    # the MTP layer on the last rank instead: that rank then does more than rank 6 did
    last = PP8_VP4.replace(",m|L", "|mL")
    code, out2, _ = run_main(capsys, [*EVAL, "--pipeline-layout", last])
    assert json.loads(out2)["layout"].get("mtp_rank") is None
    assert json.loads(out2)["step_time_s"] != doc["step_time_s"]
    for args, option in (
        (["--pipeline-layout", PP8_VP4, "--vp", "2"], "--vp"),
        (["--pipeline-layout", PP8_VP4, "--first-stage-layers", "9"], "--first-stage-layers"),
        (["--pipeline-layout", "Et*3|t*2L"], "--pipeline-layout"),
    ):
        code, _, err = run_main(capsys, [*EVAL, *args])
        assert code == 2 and option in err, err


def test_megatron_emitter_and_import_round_trip_a_layout():
    """A plan with a layout split emits --pipeline-model-parallel-layout (MTP as m) and
    reads back as the same layout."""
    from designer.launch.settings import Launch
    from test_launch_round_trip import moe_plan

    spec = V3.model_copy(update={"rope_scaling": None})
    scenario, plan = moe_plan("deepseek-v3", spec)
    job = Launch.from_plan(scenario, plan)
    assert job.layout.pp == 2
    # PP 2 x VP 4, the MTP layer in stage 6 (rank 0's last), so stage 7 holds no layer:
    # Megatron-Core places every decoder layer before the MTP layers
    counts = (7, 8, 8, 8, 8, 8, 14, 0)
    lay = replace(job.layout, vp=4, stage_counts=counts, mtp_rank=0)
    text = emit(replace(job, layout=lay), "megatron")
    assert "--pipeline-model-parallel-layout 'Et*7|t*8|t*8|t*8|t*8|t*8|t*14m|L'" in text
    run = load_megatron(text)
    assert replace(run.layout, sequence_parallel=None) == lay
    assert layout_fields("Et*7|t*8|t*8|t*8|t*8|t*8|t*14m|L", 61, 2, 1)["mtp_rank"] == 0
