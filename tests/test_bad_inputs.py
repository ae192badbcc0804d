"""Bad input must give exit code 2 and ONE line on stderr naming the file or field (no traceback).

The corpus is tests/data/bad/ (see its README.md): model spec files go through
`evaluate --model FILE`, catalog override files through `catalog --catalog FILE`, question and
saved-answer files through `explain FILE`. Command-line cases need no files. Everything here is
rejected before any solve, and the questions are tiny (llama2-7b on h100-sxm, 1M-token batches)
so a case that wrongly passes validation still finishes fast.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from helpers import TINY, run_main

REPO = Path(__file__).resolve().parent.parent
BAD = Path("tests/data/bad")  # relative to REPO, the working directory of every test here


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch):
    monkeypatch.chdir(REPO)


def assert_usage_error(capsys, args: list[str], *needles: str) -> str:
    """Exit 2, nothing on stdout, one non-empty 'designer: error:' line containing every needle."""
    code, out, err = run_main(capsys, args)
    assert "Traceback" not in out + err
    assert code == 2, f"exit {code}, stderr {err!r}"
    lines = err.rstrip("\n").split("\n")
    assert len(lines) == 1, f"stderr is not one line: {err!r}"
    line = lines[0].strip()
    assert line, "stderr is empty"
    assert line.startswith("designer: error:"), line
    assert "internal error" not in line
    for needle in needles:
        assert needle in line, f"{needle!r} not named in {line!r}"
    return line


# --- files: (file name, fields the line must name besides the file's path) -----------------

MODEL_FILES = [
    ("model_yaml_syntax.yaml", ()),
    ("model_yaml_bad_indent.yaml", ()),
    ("model_layers_string.yaml", ("layers",)),
    ("model_layers_fraction.yaml", ("layers",)),
    ("model_gated_mlp_string.yaml", ("gated_mlp",)),
    ("model_missing_hidden.yaml", ("hidden",)),
    ("model_missing_seq_len.yaml", ("seq_len",)),
    ("model_unknown_key.yaml", ("dropout",)),
    ("model_misspelled_key.yaml", ("hiden",)),
    ("model_negative_layers.yaml", ("layers",)),
    ("model_zero_hidden.yaml", ("hidden",)),
    ("model_zero_vocab.yaml", ("vocab",)),
    ("model_negative_ffn.yaml", ("ffn_hidden",)),
    ("model_heads_not_dividing_hidden.yaml", ("hidden", "heads")),
    ("model_kv_not_dividing_heads.yaml", ("kv_heads",)),
    ("model_layers_1e30.yaml", ("layers",)),  # spec caps layers at 100,000
    ("model_hidden_1e12.yaml", ("hidden",)),  # spec caps hidden at 10,000,000
    ("model_empty_name.yaml", ("name",)),
    ("model_empty.yaml", ()),
    ("model_comments_only.yaml", ()),
    ("model_list_top.yaml", ()),
    ("model_scalar_top.yaml", ()),
    ("model_json_syntax.json", ()),
    ("model_list_top.json", ()),
    ("model_not_utf8.yaml", ()),
    ("model_layers_true.yaml", ("layers", "not a number")),  # issue 20, 22: read as 1
    ("model_duplicate_key.yaml", ("'layers' given twice",)),
    ("model_duplicate_key.json", ("'hidden' given twice",)),
    ("model_name_control_chars.yaml", ("name", "control character")),
    ("hf_llama_missing_num_hidden_layers.json", ("num_hidden_layers",)),
    ("hf_llama_missing_hidden_size.json", ("hidden_size",)),
    ("hf_llama_string_layers.json", ("layers",)),
    ("hf_llama_kv_not_dividing_heads.json", ("kv_heads",)),
    ("hf_gpt2_missing_n_embd.json", ("n_embd",)),
    ("hf_unknown_activation.json", ("hidden_act", "tanhshrink")),
    ("hf_attention_bias_only.json", ("attention_bias",)),
]

CATALOG_FILES = [
    ("catalog_unknown_field.yaml", ("gpus.h100-sxm.memory_gib",)),
    ("catalog_unknown_server_field.yaml", ("server.nic_slot",)),
    ("catalog_negative_memory.yaml", ("memory_gb",)),
    ("catalog_memory_string.yaml", ("memory_gb",)),
    ("catalog_memory_nan.yaml", ("memory_gb",)),
    ("catalog_price_zero.yaml", ("price_usd",)),
    ("catalog_cloud_price_negative.yaml", ("cloud_usd_per_gpu_hour",)),
    ("catalog_unknown_section.yaml", ("tpus",)),
    ("catalog_new_gpu_incomplete.yaml", ("gpus.my-gpu",)),
    ("catalog_bad_date.yaml", ("price_date",)),
    ("catalog_nic_unknown_switch.yaml", ("switch",)),
    ("catalog_yaml_syntax.yaml", ()),
    ("catalog_yaml_unclosed_quote.yaml", ()),
    ("catalog_empty.yaml", ()),
    ("catalog_list_top.yaml", ()),
    ("catalog_section_not_mapping.yaml", ("gpus",)),
    ("catalog_entry_not_mapping.yaml", ("gpus.h100-sxm",)),
    ("catalog_domain_not_dividing.yaml", ("gpus_per_server", "scale_up_domain_gpus")),
    ("catalog_efficiency_above_one.yaml", ("matmul_efficiency",)),
    ("catalog_switch_one_port.yaml", ("ports",)),
    ("catalog_pcie_gen_2.yaml", ("pcie_gen",)),
    ("catalog_overhead_1e300.yaml", ("server.overhead_usd",)),  # issue 20, 14: overflowed
    ("catalog_host_power_1e300.yaml", ("server.host_power_w",)),
    ("catalog_switch_price_1e300.yaml", ("switches.qm9700.price_usd",)),
    ("catalog_tdp_true.yaml", ("tdp_w", "not a number")),
    pytest.param("catalog_switch_price_inf.yaml", ("price_usd",)),
    pytest.param("catalog_nic_price_inf.yaml", ("price_usd",)),
    pytest.param("catalog_port_speed_inf.yaml", ("port_speed_gbit_per_s",)),
    pytest.param("catalog_kernel_overhead_inf.yaml", ("kernel_overhead_us_per_layer",)),
]

# (file name, fields, path the line must name: None = the question file itself)
QUESTION_FILES = [
    ("question_unknown_key.yaml", ("budgett",), None),
    ("question_objective_wrong_type.yaml", ("objective",), None),
    ("question_objective_unknown.yaml", ("objective",), None),
    ("question_budget_30Q.yaml", ("budget",), None),
    ("question_negative_budget.yaml", ("budget",), None),
    ("question_budget_list.yaml", ("budget",), None),
    ("question_deadline_10w.yaml", ("deadline",), None),
    ("question_tokens_zero.yaml", ("tokens",), None),
    ("question_max_gpus_fraction.yaml", ("max_gpus",), None),
    ("question_dp_overlap_above_one.yaml", ("dp_overlap",), None),
    ("question_precision_unknown.yaml", ("precision",), None),
    ("question_gpus_string.yaml", ("gpus",), None),
    ("question_budget_1e17.yaml", ("budget", "1e13"), None),  # issue 20, 13: int64
    ("question_max_gpus_1e19.yaml", ("max_gpus", "1,048,576"), None),
    ("question_duplicate_key.yaml", ("'budget' given twice",), None),
    ("question_empty.yaml", (), None),
    ("question_list_top.yaml", (), None),
    ("question_syntax.yaml", (), None),
    ("question_syntax.json", (), None),
    ("question_inline_model_bad.yaml", ("model", "heads"), None),
    # errors inside a file the question names: the line names that file
    ("question_model_file_bad.yaml", ("hidden",), "model_zero_hidden.yaml"),
    ("question_catalog_missing.yaml", (), "no-such-override.yaml"),
    ("question_catalog_bad.yaml", ("memory_gb",), "catalog_negative_memory.yaml"),
    # saved optimize --json answers
    ("answer_plan_missing_fields.json", ("plans[0]",), None),
    ("answer_question_missing_tokens.json", ("tokens",), None),
    ("answer_plans_not_list.json", ("plans",), None),
    # rejected with exit 2 and one line, but the line names a command-line option, not the file
    pytest.param("question_unknown_gpu.yaml", ("gpus",), None),
    pytest.param("question_unknown_nic.yaml", ("nics",), None),
    pytest.param("question_unknown_ignore.yaml", ("ignore",), None),
    pytest.param("question_unknown_model.yaml", ("model",), None),
    pytest.param("question_no_budget.yaml", ("budget",), None),
    pytest.param(
        "question_batch_below_sequence.yaml",
        ("max_batch_tokens",),
        None,
    ),
]


def _name(case) -> str:
    return case.values[0] if hasattr(case, "values") else case[0]


@pytest.mark.parametrize("name,fields", MODEL_FILES, ids=[_name(c) for c in MODEL_FILES])
def test_bad_model_file(capsys, name, fields):
    path = str(BAD / name)
    assert_usage_error(capsys, ["evaluate", "--model", path], path, *fields)


@pytest.mark.parametrize("name,fields", CATALOG_FILES, ids=[_name(c) for c in CATALOG_FILES])
def test_bad_catalog_file(capsys, name, fields):
    path = str(BAD / name)
    assert_usage_error(capsys, ["catalog", "--catalog", path], path, *fields)


@pytest.mark.parametrize(
    "name,fields,named", QUESTION_FILES, ids=[_name(c) for c in QUESTION_FILES]
)
def test_bad_question_file(capsys, name, fields, named):
    path = str(BAD / name)
    expected = path if named is None else str(BAD / named)
    assert_usage_error(capsys, ["explain", path], expected, *fields)


def test_corpus_is_complete():
    """Every file in the corpus is run by a test above, and there are at least 40."""
    listed = {_name(c) for c in (*MODEL_FILES, *CATALOG_FILES, *QUESTION_FILES)}
    on_disk = {p.name for p in (REPO / BAD).iterdir() if p.name != "README.md"}
    assert on_disk == listed
    assert len(on_disk) >= 40


# --- a directory where a file is expected ----------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["explain", str(BAD)],
        ["evaluate", "--model", str(BAD)],
        ["catalog", "--catalog", str(BAD)],
        [*TINY, "--budget", "30M", "--catalog", str(BAD)],
    ],
    ids=["explain", "evaluate-model", "catalog", "optimize-catalog"],
)
def test_directory_given_as_file(capsys, args):
    line = assert_usage_error(capsys, args, str(BAD))
    assert "directory" in line


# --- command-line cases ---------------------------------------------------------------------

EVALUATE = ["evaluate", "--model", "llama2-7b", "--gpu", "h100-sxm"]

CLI_CASES = [
    ([*TINY, "--budget", "30Q"], "--budget"),
    ([*TINY, "--budget", "-30M"], "--budget"),
    ([*TINY, "--budget", "nan"], "--budget"),
    ([*TINY, "--budget", "1e400"], "--budget"),
    ([*TINY, "--budget", "30M", "--tokens", "abc"], "--tokens"),
    ([*TINY, "--deadline", "10w"], "--deadline"),
    ([*TINY, "--budget", "30M", "--max-gpus", "2.5"], "--max-gpus"),
    ([*TINY, "--budget", "30M", "--max-gpus", "0"], "--max-gpus"),
    ([*TINY, "--budget", "30M", "--min-batch-tokens", "abc"], "--min-batch-tokens"),
    ([*TINY, "--budget", "30M", "--seq-len", "0"], "--seq-len"),
    ([*TINY, "--budget", "30M", "--objective", "speed"], "--objective"),
    ([*TINY, "--budget", "30M", "--pricing", "lease"], "--pricing"),
    ([*TINY, "--budget", "30M", "--precision", "fp4"], "--precision"),
    ([*TINY, "--budget", "30M", "--dp-overlap", "1.5"], "--dp-overlap"),
    ([*TINY, "--budget", "30M", "--top", "101"], "--top"),
    ([*TINY, "--budget", "30M", "--csv", str(BAD)], "--csv"),
    ([*TINY, "--budget", "30M", "--bogus"], "--bogus"),
    ([*TINY, "--budget", "30M", "--model", str(BAD / "nope.yaml")], str(BAD / "nope.yaml")),
    (["compare", "--model", "llama2-7b", "--budget", "30Q"], "--budget"),
    (["compare", "--model", "llama2-7b", "--budget", "1e308"], "--budget"),  # issue 20, 13
    ([*TINY, "--budget", "1e17"], "--budget"),
    ([*TINY, "--budget", "30M", "--max-gpus", "1e19"], "--max-gpus"),
    ([*TINY, "--deadline", "1e9d"], "--deadline"),
    ([*TINY, "--budget", "30M", "--gpu-cap", "h100-sxm=1e30"], "--gpu-cap"),
    ([*TINY, "--budget", "30M", "--max-racks", "1e30"], "--max-racks"),
    ([*TINY, "--budget", "30M", "--max-batch-tokens", "1e30"], "--max-batch-tokens"),
    ([*TINY, "--budget", "30M", "--power-cap", "1e300"], "--power-cap"),
    ([*TINY, "--budget", "30M", "--rack-power-kw", "0.001"], "--rack-power-kw"),
    ([*EVALUATE, "--dp", "100000000000000000000"], "--dp"),
    ([*EVALUATE, "--nics-per-node", "100000000000000000000"], "--nics-per-node"),
    ([*EVALUATE, "--tp", "0"], "--tp"),
    ([*EVALUATE, "--tp", "3"], "--tp"),
    ([*EVALUATE, "--pp", "5"], "--pp"),
    ([*EVALUATE, "--cp", "3"], "--cp"),
    ([*EVALUATE, "--vp", "2"], "--vp"),
    ([*EVALUATE, "--micro-batch", "2", "--global-batch", "3"], "--global-batch"),
    ([*EVALUATE, "--recompute", "sometimes"], "--recompute"),
    ([*EVALUATE, "--nics-per-node", "-1"], "--nics-per-node"),
    ([*EVALUATE, "--zero", "4"], "--zero"),
    ([*EVALUATE, "--seq-len", "0"], "--seq-len"),
    ([*EVALUATE, "--tokens", "-2T"], "--tokens"),
    (["evaluate", "--model", "llama2-7b", "--gpu", "tpu-v5p"], "--gpu"),
    ([*EVALUATE, "--nic", "cx9-1600g"], "--nic"),
    (
        ["evaluate", "--model", "llama2-7b", "--gpu", "a100-80gb", "--precision", "fp8"],
        "--precision",
    ),
    (["evaluate", "--model", "no-such-model"], "--model"),
    (["evaluate", "--model", str(BAD / "nope.yaml")], str(BAD / "nope.yaml")),
    (["catalog", "--catalog", str(BAD / "nope.yaml")], str(BAD / "nope.yaml")),
    (["catalog", "show", "tpu-v5p"], "tpu-v5p"),
    (["models", "show", "no-such-model"], "no-such-model"),
    (["explain", str(BAD / "nope.yaml")], str(BAD / "nope.yaml")),
    (["explain", str(BAD / "README.md")], str(BAD / "README.md")),
    pytest.param(
        [*TINY, "--budget", "30M", "--catalog", str(BAD / "catalog_nic_price_inf.yaml")],
        "catalog_nic_price_inf.yaml",
    ),
    pytest.param(
        [*EVALUATE, "--catalog", str(BAD / "catalog_kernel_overhead_inf.yaml")],
        "catalog_kernel_overhead_inf.yaml",
    ),
]


def _cli_id(case) -> str:
    args = case.values[0] if hasattr(case, "values") else case[0]
    if args[: len(TINY)] == TINY:
        args = ["optimize", *args[len(TINY) :]]
    elif args[: len(EVALUATE)] == EVALUATE:
        args = ["evaluate", *args[len(EVALUATE) :]]
    return " ".join(a.replace(str(BAD) + "/", "") for a in args)


@pytest.mark.parametrize("args,named", CLI_CASES, ids=[_cli_id(c) for c in CLI_CASES])
def test_bad_command_line(capsys, args, named):
    assert_usage_error(capsys, args, named)


# --- finer points of the messages (known bugs) ------------------------------------------------


def test_question_deadline_hint_names_day_suffixes(capsys):
    path = str(BAD / "question_deadline_10w.yaml")
    line = assert_usage_error(capsys, ["explain", path], path, "deadline")
    assert "d or h" in line


@pytest.mark.parametrize(
    "name,field",
    [
        ("question_budget_list.yaml", "budget"),
        ("question_max_gpus_fraction.yaml", "max_gpus"),
        ("question_inline_model_bad.yaml", "model"),
    ],
)
def test_question_field_named_as_in_the_file(capsys, name, field):
    path = str(BAD / name)
    line = assert_usage_error(capsys, ["explain", path], path)
    assert f"{path}: {field}: " in line
    assert "Value error" not in line


def test_question_model_path_relative_to_question_file(capsys, tmp_path):
    (tmp_path / "tiny.yaml").write_text(
        "layers: 2\nhidden: 0\nheads: 1\nvocab: 128\nseq_len: 128\n", encoding="utf-8"
    )
    question = tmp_path / "q.yaml"
    question.write_text(
        "model: tiny.yaml\ngpus: [h100-sxm]\ntokens: 1B\nbudget: 30M\nmax_batch_tokens: 1M\n",
        encoding="utf-8",
    )
    # found next to the question, the spec is read and its bad field reported
    assert_usage_error(capsys, ["explain", str(question)], "hidden")


@pytest.mark.parametrize(
    "field", ["tokens", "budget", "deadline", "max_gpus", "max_racks", "max_batch_tokens"]
)
def test_true_in_a_suffixed_number_field_is_refused(tmp_path, capsys, field):
    """A question file's suffixed numbers (30M, 2T: a number or text) once read `true` as 1
    ('trains llama2-7b on 1 tokens'); like every other number field they refuse it, in a
    question file, a sweep axis and a saved answer, naming the field."""
    question = {"model": "llama2-7b", "tokens": "100B", "budget": "2M", "gpus": ["h100-sxm"]}
    path = tmp_path / "q.yaml"
    path.write_text(yaml.safe_dump(question | {field: True}))
    assert_usage_error(capsys, ["explain", str(path)], str(path), field, "not a number")
    study = tmp_path / "s.yaml"
    study.write_text(yaml.safe_dump({"base": question, "axes": {field: [True]}}))
    assert_usage_error(
        capsys, ["sweep", str(study), "--csv", str(tmp_path / "s.csv")], f"axes.{field}"
    )


def test_a_bad_value_in_a_profile_another_stack_derives_from_is_named_as_written(tmp_path, capsys):
    """pytorch-fsdp2 derives from megatron-core (its compute scaled): a megatron-core value
    out of range once surfaced as the derived stack's scaled copy ('pytorch-fsdp2...
    (got 0.004)' for 0.005). The error names the stack and the value the file gave."""
    path = tmp_path / "c.yaml"
    path.write_text(
        yaml.safe_dump(
            {"gpus": {"h100-sxm": {"stacks": {"megatron-core": {"matmul_efficiency": 0.005}}}}}
        )  # fmt: skip
    )
    line = assert_usage_error(
        capsys, ["catalog", "--catalog", str(path)], str(path), "stacks.megatron-core"
    )
    assert "matmul_efficiency" in line and "0.005" in line and "pytorch-fsdp2" not in line


@pytest.mark.parametrize("command", [["evaluate", "--model"], ["optimize", "--model"]])
@pytest.mark.parametrize("empty", ["", "  "])
def test_an_empty_model_name_names_the_option(capsys, command, empty):
    """'' once read as the working directory ('.: is a directory'), naming no option."""
    line = assert_usage_error(capsys, [*command, empty], "--model: empty")
    assert "is a directory" not in line


@pytest.mark.parametrize(
    "args",
    [
        ["optimize", "--budget", "2M", "--model", "llama2-7b", "--csv", "-"],
        ["compare", "--budget", "2M", "--model", "llama2-7b", "--plot", "-"],
        ["optimize", "--budget", "2M", "--model", "llama2-7b", "--bom", "-"],
    ],
)
def test_a_dash_output_is_refused_not_written_as_a_file(tmp_path, capsys, monkeypatch, args):
    """'-' once created a file named '-' in the working folder; it is the stdout idiom, which
    these options do not take: exit 2 naming the option, nothing written."""
    monkeypatch.chdir(tmp_path)
    line = assert_usage_error(capsys, args, f"{args[-2]}: '-' would write a file named '-'")
    assert "--json" in line and not (tmp_path / "-").exists()


@pytest.mark.parametrize(
    "args, option",
    [
        (["evaluate", "--seq-len", "8K"], "--seq-len"),
        (["optimize", "--budget", "3M", "--seq-len", "8K"], "--seq-len"),
        (["evaluate", "--global-batch", "1K"], "--global-batch"),
        (["evaluate", "--tp", "1k"], "--tp"),
    ],
)
def test_a_suffixed_count_is_refused_with_the_number_it_would_mean(capsys, args, option):
    """Counts (sequence length, batch, degrees) are whole numbers in digits: '8K' would be
    8,000 under the contract's K, where a user means 8,192, so it is refused with the fix
    rather than read as either."""
    line = assert_usage_error(capsys, args, option, "write the whole number in digits")
    assert "K as 1,000" in line


@pytest.mark.parametrize("command", ["export", "explain"])
def test_an_evaluate_analysis_is_named_not_read_as_a_question(tmp_path, capsys, command):
    """evaluate --json saves an analysis, not a question: passing it on says so (it was
    read as a question file and blamed `evidence` with the whole evidence record)."""
    args = ["evaluate", "--model", "llama2-7b", "--gpu", "h100-sxm", "--tp", "1", "--pp", "1",
            "--dp", "8", "--global-batch", "64", "--tokens", "1B", "--json"]  # fmt: skip
    code, out, _ = run_main(capsys, args)
    assert code == 0
    path = tmp_path / "analysis.json"
    path.write_text(out)
    code, out, err = run_main(capsys, [command, str(path)])
    assert code == 2 and out == ""
    assert err.strip().endswith(
        "analysis.json: a `designer evaluate --json` analysis, which holds no question or "
        "plan to re-solve; pass a question file or a saved optimize/compare --json answer"
    )
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("command", ["export", "explain"])
def test_a_breakeven_result_is_named_not_read_as_a_question(tmp_path, capsys, command):
    """breakeven --json saves a price and two plans, no question: it was read as a question
    file and blamed `objective` ("Input should be 'time' or 'cost'") as if it were a
    malformed optimize answer."""
    doc = {"gpu": "h200", "against": "h100-sxm", "pricing": "capex",
           "catalog_price_usd": 35000.0, "breakeven_price_usd": 31619.6,
           "objective": {"name": "time_to_train", "unit": "days"},
           "plans": {"gpu": None, "against": None}}  # fmt: skip
    path = tmp_path / "be.json"
    path.write_text(json.dumps(doc))
    code, out, err = run_main(capsys, [command, str(path)])
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert "be.json: a `designer breakeven --json` result" in err
    assert "no question" in err and "objective" not in err


@pytest.mark.parametrize(
    "deadline,says",
    [
        ("5m", "m is millions (5m = 5,000,000 days); for minutes give hours (e.g. 0.1h)"),
        ("3B", "B is billions (3B = 3,000,000,000 days)"),
    ],
)
def test_a_deadline_past_the_limit_by_its_suffix_says_how_it_was_read(capsys, deadline, says):
    """--deadline 5m said only that it was more than 1,000,000 days: the reader meant five
    minutes and was not told that m is millions."""
    args = ["optimize", "--model", "llama2-7b", "--tokens", "1B", "--deadline", deadline]
    line = assert_usage_error(capsys, args, "--deadline", "1,000,000 days", says)
    assert "minutes" not in line or deadline.lower().endswith("m")
    plain = assert_usage_error(capsys, [*args[:-1], "5000000"], "--deadline")
    assert " is " not in plain.split("1,000,000 days", 1)[1]  # no suffix, no hint
