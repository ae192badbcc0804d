"""Megatron-Core's --pipeline-model-parallel-layout for splits the first/last-stage flags
do not express (issue 34 item 3): DeepSeek-V3's 61 layers with its MTP layer on PP 8 x
VP 4 or PP 16 x VP 2, in evaluate, --from-megatron and the Megatron emitter."""

from __future__ import annotations

import json
import re
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


# the audit's two refusals of layouts Megatron-Core runs
GB200 = ["evaluate", "--model", "deepseek-v3", "--gpu", "gb200", "--tp", "1", "--pp", "4",
         "--dp", "64", "--ep", "64", "--global-batch", "2048", "--precision", "fp8"]  # fmt: skip
NO_MTP = "Et*4|(t*4|)*14tL"  # DeepSeek-V3 GB200's layout, run without --mtp-num-layers


def test_a_layout_without_m_evaluates_the_model_without_its_mtp_layer(capsys):
    """Megatron-Core takes a string with no m only without --mtp-num-layers: the run has
    no MTP layer. It was refused ("places 0 MTP layers (m)... the model has 1")."""
    code, out, err = run_main(capsys, [*GB200, "--pipeline-layout", NO_MTP, "--json"])
    assert code in (0, 1), err
    doc = json.loads(out)
    assert doc["notes"] == [
        "the layout places no MTP layer (m): evaluated without the model's 1 MTP layer, as "
        "Megatron-LM runs it without --mtp-num-layers"
    ]
    assert doc["stage_layers"] == [16, 16, 16, 13] and doc["layout"]["vp"] == 4
    # a layout with the m: the model's MTP layer, no note, a longer step
    with_m = NO_MTP[:-1] + "mL"
    code, out1, _ = run_main(capsys, [*GB200, "--pipeline-layout", with_m, "--json"])
    assert json.loads(out1)["notes"] == []
    assert json.loads(out1)["step_time_s"] > doc["step_time_s"]
    code, text, _ = run_main(capsys, [*GB200, "--pipeline-layout", NO_MTP])
    assert [ln for ln in text.splitlines() if "MTP" in ln] == [f"note: {doc['notes'][0]}"]
    # an m for a model without MTP layers (Kimi K2): refused
    kimi = [*GB200[:2], "kimi-k2", *GB200[3:], "--pipeline-layout", "Et*4|(t*4|)*14tmL"]
    code, _, err = run_main(capsys, kimi)
    assert code == 2 and "places 1 MTP layers (m)" in err and "the model has 0" in err, err


def _megatron(tmp_path, layout: str, drop_mtp: bool = False, **sizes: int) -> str:
    """An emitted DeepSeek-V3 command (YaRN off, as Megatron-LM builds it) with the
    layout and the parallel sizes swapped in, written to a file for --from-megatron."""
    from designer.launch.settings import Launch
    from test_launch_round_trip import moe_plan

    text = emit(Launch.from_plan(*moe_plan("deepseek-v3", V3_NO_YARN)), "megatron")
    for flag, value in {**sizes, "--pipeline-model-parallel-layout": f"'{layout}'"}.items():
        text = re.sub(rf"{flag} \S+", f"{flag} {value}", text)
    if drop_mtp:
        text = text.replace("--mtp-num-layers 1", "")
    path = tmp_path / "megatron.sh"
    path.write_text(text)
    return str(path)


V3_NO_YARN = V3.model_copy(update={"rope_scaling": None})


def _sizes(tp: int, pp: int, dp: int, ep: int, gb: int) -> tuple[dict[str, int], list[str]]:
    """(the emitted command's sizes, evaluate's options) of one DeepSeek-V3 layout on H100."""
    megatron = {"--nnodes": tp * pp * dp // 8, "--tensor-model-parallel-size": tp,
                "--pipeline-model-parallel-size": pp, "--expert-model-parallel-size": ep,
                "--global-batch-size": gb}  # fmt: skip
    cli = ["evaluate", "--model", "deepseek-v3", "--gpu", "h100-sxm", "--no-sequence-parallel"]
    for flag, value in (("--tp", tp), ("--pp", pp), ("--dp", dp), ("--ep", ep),
                        ("--global-batch", gb)):  # fmt: skip
        cli += [flag, str(value)]
    return megatron, cli


PP16, CLI16 = _sizes(4, 16, 38, 8, 7296)


@pytest.mark.parametrize(
    "layout, stage_layers",
    [
        ("E|(t*4|)*14t*5mL", [0, *[4] * 14, 5]),  # the first rank holds no transformer layer
        ("Et*5|(t*4|)*14mL", [5, *[4] * 14, 0]),  # the last: its MTP layer and the loss
    ],
)
def test_a_rank_without_layers_evaluates_as_from_megatron_does(capsys, tmp_path, layout,
                                                                stage_layers):  # fmt: skip
    """A first or last rank of 0 layers: evaluate refused the string ("--first-stage-layers:
    must be at least 1 (got 0)": layout_split returned a split its flags cannot say) and
    --from-megatron read it as infeasible by the same rule; both now take stage_counts."""
    code, out, err = run_main(capsys, [*CLI16, "--pipeline-layout", layout, "--json"])
    assert code in (0, 1), err
    mine = json.loads(out)
    command = _megatron(tmp_path, layout, **PP16)
    code, out, err = run_main(capsys, ["evaluate", "--gpu", "h100-sxm", "--from-megatron",
                                       command, "--json"])  # fmt: skip
    assert code in (0, 1), err
    theirs = json.loads(out)
    assert mine["stage_layers"] == theirs["stage_layers"] == stage_layers
    assert mine["layout"]["stage_counts"] == theirs["layout"]["stage_counts"] == stage_layers
    assert mine["violations"] == theirs["violations"]
    assert mine["feasible"] == theirs["feasible"]
    assert mine["step_time_s"] == theirs["step_time_s"]


PP4, CLI4 = _sizes(2, 4, 32, 64, 1024)


@pytest.mark.parametrize(
    "layout, first, last",
    [("Et*15|t*15|t*15|t*16mL", 15, 16), ("Et*16|t*15|t*15|t*15mL", 16, 15)],
)
def test_an_uneven_split_the_flags_say_is_not_refused(capsys, tmp_path, layout, first, last):
    """61 layers on PP 4 as 15/15/15/16: the string matched the designer's own split of
    layers p does not divide (no split fields), which Megatron-LM's flags refuse, so
    evaluate refused it ("--pp: pp 4 does not divide the model's 61 layers") and
    --from-megatron read it as infeasible; both now read the first/last-stage layers
    that say it (layout_split keeps only splits split_violation allows)."""
    code, out, err = run_main(capsys, [*CLI4, "--pipeline-layout", layout, "--json"])
    assert code in (0, 1), err
    mine = json.loads(out)
    assert (mine["layout"]["first_stage_layers"], mine["layout"]["last_stage_layers"]) == (
        first, last,
    )  # fmt: skip
    assert not [v for v in mine["violations"] if v["constraint"] == "divisibility"]
    command = _megatron(tmp_path, layout, **PP4)
    code, out, err = run_main(capsys, ["evaluate", "--gpu", "h100-sxm", "--from-megatron",
                                       command, "--json"])  # fmt: skip
    assert code in (0, 1), err
    theirs = json.loads(out)
    assert mine["stage_layers"] == theirs["stage_layers"]
    assert mine["violations"] == theirs["violations"]
    assert mine["step_time_s"] == theirs["step_time_s"]


def test_a_first_or_last_rank_without_layers_is_read_as_stage_counts():
    """Megatron-LM's first/last-stage flags take at least 1 layer; a string whose end rank
    holds none is every stage's count, as with any other split the flags cannot say."""
    for text, counts in (
        ("E|t*61mL", (0, 61)),
        ("Et*61|mL", (61, 0)),
        ("E|t*30|t*31|mL", (0, 30, 31, 0)),
    ):
        pp = len(counts)
        assert layout_fields(text, 61, pp, 1) == {"vp": 1, "stage_counts": counts}, text
    # with a layer on each end rank the flags still say it
    assert layout_fields("Et*16|t*15|t*15|t*15mL", 61, 4, 1) == {
        "vp": 1, "first_stage_layers": 16, "last_stage_layers": 15,
    }  # fmt: skip


def test_a_layout_without_m_evaluates_as_a_command_without_mtp(capsys, tmp_path):
    """The m-less string agrees with the Megatron-LM command that runs it (no
    --mtp-num-layers): same stage layers and step time."""
    cli = [*GB200[:4], "h100-sxm", *GB200[5:-2], "--pipeline-layout", NO_MTP, "--json"]
    code, out, err = run_main(capsys, cli)
    assert code in (0, 1), err
    mine = json.loads(out)
    sizes = {"--nnodes": 32, "--tensor-model-parallel-size": 1,
             "--pipeline-model-parallel-size": 4, "--expert-model-parallel-size": 64,
             "--global-batch-size": 2048}  # fmt: skip
    command = _megatron(tmp_path, NO_MTP, drop_mtp=True, **sizes)
    code, out, err = run_main(capsys, ["evaluate", "--gpu", "h100-sxm", "--from-megatron",
                                       command, "--json"])  # fmt: skip
    assert code in (0, 1), err
    theirs = json.loads(out)
    assert theirs["from_megatron"]["model_spec"]["mtp_layers"] == 0
    assert mine["stage_layers"] == theirs["stage_layers"] == [16, 16, 16, 13]
    assert mine["step_time_s"] == theirs["step_time_s"]


def test_mtp_layers_option_builds_the_run_without_or_with_mtp(capsys, tmp_path):
    """--mtp-layers N (Megatron-LM --mtp-num-layers): 0 drops DeepSeek-V3's MTP layer with a
    note, as a layout string without m does; it must agree with the string's m count; and
    --from-megatron, whose command says it, refuses it."""
    base = [*CLI16, "--first-stage-layers", "1", "--last-stage-layers", "4", "--json"]
    code, out, err = run_main(capsys, [*base, "--mtp-layers", "0"])
    assert code in (0, 1), err
    none = json.loads(out)
    assert none["notes"] == [
        "--mtp-layers 0: evaluated with 0 multi-token-prediction layers (Megatron-LM "
        "--mtp-num-layers), where the model has 1"
    ]
    code, out, err = run_main(capsys, base)
    assert code in (0, 1), err
    one = json.loads(out)
    assert one["notes"] == [] and one["step_time_s"] > none["step_time_s"]
    code, out, _ = run_main(capsys, [*base, "--mtp-layers", "1"])  # the model's: no note
    assert json.loads(out)["notes"] == [] and json.loads(out)["step_time_s"] == one["step_time_s"]
    # with a layout string: no m and 0 agree; an m with 0 is refused by the m count
    layout = ["--pipeline-layout", "E|(t*4|)*14t*5L"]
    code, out, err = run_main(capsys, [*CLI16, "--json", *layout, "--mtp-layers", "0"])
    assert code in (0, 1), err
    code, out2, err = run_main(capsys, [*CLI16, "--json", *layout])
    assert json.loads(out)["step_time_s"] == json.loads(out2)["step_time_s"]
    code, _, err = run_main(capsys, [*CLI16, "--pipeline-layout", "E|(t*4|)*14t*5mL",
                                     "--mtp-layers", "0"])  # fmt: skip
    assert code == 2 and "--pipeline-layout" in err and "the model has 0" in err
    command = _megatron(tmp_path, "E|(t*4|)*14t*5mL", **PP16)
    code, _, err = run_main(capsys, ["evaluate", "--gpu", "h100-sxm", "--from-megatron", command,
                                     "--mtp-layers", "0"])  # fmt: skip
    assert code == 2 and "--mtp-layers" in err
