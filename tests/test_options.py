"""designer/options.py: the click options of evaluate, of the answer (optimize, compare,
breakeven) and of report, parsed directly by click (``make_context``, no CliRunner): their
defaults, their ranges (a refusal names the option and the range it takes), ``apply``'s
order and the parameter names the commands read back (ANSWER_KEYS, dry_run's options)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pytest

from designer.options import (
    ANSWER_KEYS,
    ANSWER_OPTIONS,
    CATALOG_OPTION,
    EVALUATE_OPTIONS,
    JSON_OPTION,
    REPORT_OPTIONS,
    apply,
    file_option,
)
from solvers import limits


def command(options: list, name: str = "t") -> click.Command:
    """A click command taking ``options`` (through ``apply``) and returning its parameters."""

    @click.command(name)
    @apply(options)
    def f(**kw: Any) -> dict[str, Any]:
        return kw

    return f


def parse(options: list, *args: str) -> dict[str, Any]:
    """The parameters click parses from ``args`` for a command taking ``options``."""
    return command(options).make_context("t", list(args)).params


def refusal(options: list, *args: str) -> str:
    """click's message refusing ``args`` (a usage error, not a traceback)."""
    with pytest.raises(click.UsageError) as info:
        parse(options, *args)
    return info.value.format_message()


# --------------------------------------------------------------------- apply


def test_apply_keeps_the_listed_order():
    """The first option of the list is the first parameter (and the first line of --help)."""
    a = click.option("--alpha")
    b = click.option("--beta")
    c = click.option("--gamma")
    assert [p.name for p in command([a, b, c]).params] == ["alpha", "beta", "gamma"]
    assert [p.name for p in command([c, a, b]).params] == ["gamma", "alpha", "beta"]


def test_every_evaluate_parameter_has_one_name():
    names = [p.name for p in command(EVALUATE_OPTIONS).params]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


# --------------------------------------------------------------------- evaluate's defaults


def test_evaluate_defaults():
    opts = parse(EVALUATE_OPTIONS)
    assert opts["model_name"] == "llama2-70b" and opts["gpu"] == "h100-sxm"
    for degree in ("tp", "pp", "dp", "cp", "vp", "ep", "etp", "micro_batch"):
        assert opts[degree] == 1, degree
    for absent in ("global_batch", "seq_len", "first_stage_layers", "last_stage_layers"):
        assert opts[absent] is None, absent
    assert opts["recompute"] == "selective" and opts["precision"] == "bf16"
    assert opts["zero"] == 1 and opts["sequence_parallel"] is None
    assert opts["moe_overlap"] == "none" and opts["dispatcher"] == "alltoall"
    assert opts["hot_spares"] == 0.0 and opts["checkpoint_storage"] is None
    assert opts["catalog_files"] == () and opts["as_json"] is False
    assert opts["embedding_in_split"] is False and opts["loss_in_split"] is False


def test_evaluate_parses_what_it_is_given():
    opts = parse(
        EVALUATE_OPTIONS,
        *("--tp", "8", "--pp", "4", "--tokens", "2T", "--no-sequence-parallel"),
        *("--catalog", "a.yaml", "--catalog", "b.yaml", "--recompute", "full", "--json"),
        *("--capacity-factor", "1.25", "--moe-overlap", "dualpipe", "--zero", "3"),
    )
    assert (opts["tp"], opts["pp"]) == (8, 4)
    assert opts["tokens"] == 2e12
    assert opts["sequence_parallel"] is False
    assert opts["catalog_files"] == (Path("a.yaml"), Path("b.yaml"))
    assert opts["recompute"] == "full" and opts["as_json"] is True
    assert opts["capacity_factor"] == 1.25 and opts["moe_overlap"] == "dualpipe"
    assert opts["zero"] == 3


def test_help_shows_a_default_only_where_there_is_one():
    cmd = command(EVALUATE_OPTIONS)
    ctx = cmd.make_context("t", [])
    helps = {p.name: p.get_help_record(ctx) for p in cmd.params}
    top = int(limits.MAX_GPUS)
    assert helps["tp"][1].endswith(f"[default: 1; 1<=x<={top}]")  # the default and the range
    assert "default" not in helps["first_stage_layers"][1]  # no default: none shown
    assert helps["first_stage_layers"][1].endswith(f"[1<=x<={top}]")
    assert "[default: micro-batch x dp x pp]" in helps["global_batch"][1]  # said in words


# --------------------------------------------------------------------- ranges


@pytest.mark.parametrize("flag", ["--tp", "--pp", "--dp", "--micro-batch", "--global-batch"])
def test_a_degree_below_one_is_refused_naming_the_option(flag):
    message = refusal(EVALUATE_OPTIONS, flag, "0")
    assert f"'{flag}'" in message and "1<=x<=" in message


def test_a_degree_past_the_gpu_cap_is_refused_but_the_cap_is_taken():
    top = int(limits.MAX_GPUS)
    assert parse(EVALUATE_OPTIONS, "--dp", str(top))["dp"] == top
    message = refusal(EVALUATE_OPTIONS, "--dp", str(top + 1))
    assert "'--dp'" in message and f"x<={top}" in message


def test_batch_and_sequence_take_the_batch_token_limit_not_the_gpu_cap():
    """--global-batch and --seq-len count sequences and tokens, not GPUs: their ceiling is
    MAX_BATCH_TOKENS (larger than MAX_GPUS)."""
    big = int(limits.MAX_GPUS) + 1
    assert limits.MAX_BATCH_TOKENS > big
    assert parse(EVALUATE_OPTIONS, "--global-batch", str(big))["global_batch"] == big
    assert parse(EVALUATE_OPTIONS, "--seq-len", str(big))["seq_len"] == big
    message = refusal(EVALUATE_OPTIONS, "--seq-len", str(int(limits.MAX_BATCH_TOKENS) + 1))
    assert "'--seq-len'" in message


@pytest.mark.parametrize(
    "args,flag,words",
    [
        (("--zero", "4"), "--zero", "0<=x<=3"),
        (("--capacity-factor", "0"), "--capacity-factor", "0.01<=x<=100"),
        (("--checkpoint-storage", "0"), "--checkpoint-storage", "0<x<=10000"),
        (("--hot-spares", "101"), "--hot-spares", "0<=x<=100"),
        (("--recompute", "some"), "--recompute", "'none', 'selective', 'full'"),
        (("--dispatcher", "nccl"), "--dispatcher", "'alltoall', 'deepep'"),
        (("--precision", "fp4x"), "--precision", "bf16"),
    ],
)
def test_out_of_range_values_name_the_option_and_the_range(args, flag, words):
    message = refusal(EVALUATE_OPTIONS, *args)
    assert f"'{flag}'" in message and words in message, message


@pytest.mark.parametrize(
    "value,words",
    [
        ("2X", "unknown suffix 'X'; use K, M, B or T"),
        ("abc", "is not a number; write e.g. 30M, 2T, 1.5e9"),
        ("0", "must be positive"),
        ("2e18", "more than the largest value allowed"),
    ],
)
def test_tokens_refusals_say_the_fix(value, words):
    message = refusal(EVALUATE_OPTIONS, "--tokens", value)
    assert "'--tokens'" in message and words in message, message


# --------------------------------------------------------------------- the answer and report


def test_answer_keys_are_the_answer_options_parameters():
    """optimize pops ANSWER_KEYS off its parameters: each must be one ANSWER_OPTIONS sets."""
    opts = parse(ANSWER_OPTIONS)
    assert tuple(opts) == ANSWER_KEYS
    assert opts == {"time_limit": 60.0, "explain": True, "as_json": False, "csv_file": None}


def test_answer_options_parse():
    opts = parse(ANSWER_OPTIONS, "--time-limit", "2.5", "--no-explain", "--json", "--csv", "x.csv")
    assert opts == {"time_limit": 2.5, "explain": False, "as_json": True, "csv_file": Path("x.csv")}


@pytest.mark.parametrize("value", ["0", "nan", "inf"])
def test_time_limit_refuses_zero_and_non_finite(value):
    message = refusal(ANSWER_OPTIONS, "--time-limit", value)
    assert "'--time-limit'" in message


def test_report_options_share_the_answer_time_limit():
    assert REPORT_OPTIONS[-1] is ANSWER_OPTIONS[0]
    opts = parse(REPORT_OPTIONS, "--html", "r.html", "--xlsx", "r.xlsx", "--open")
    assert opts == {
        "html_file": Path("r.html"),
        "xlsx_file": Path("r.xlsx"),
        "open_page": True,
        "study_file": None,
        "time_limit": 60.0,
    }


def test_a_file_option_refuses_a_directory(tmp_path):
    option = file_option("--plot", "plot_file", "Write a picture.")
    assert parse([option], "--plot", str(tmp_path / "p.png")) == {"plot_file": tmp_path / "p.png"}
    message = refusal([option], "--plot", str(tmp_path))
    assert "'--plot'" in message and "is a directory" in message


def test_catalog_and_json_options_are_shared_objects():
    """evaluate carries the very --catalog and --json options the other commands use."""
    assert CATALOG_OPTION in EVALUATE_OPTIONS and JSON_OPTION in EVALUATE_OPTIONS
    assert JSON_OPTION in ANSWER_OPTIONS


@pytest.mark.parametrize("flag", ["--capacity-factor", "--hot-spares", "--checkpoint-storage"])
@pytest.mark.parametrize("value", ["nan", "-nan", "NaN"])
def test_a_float_option_refuses_nan(flag, value):
    """NaN compares false with both bounds, so click.FloatRange let it through: the three
    float options of evaluate took --hot-spares nan. Finite (designer.numbers) refuses it."""
    message = refusal(EVALUATE_OPTIONS, flag, value)
    assert f"'{flag}'" in message and "is not a finite number" in message, message
