"""designer/output/text.py: the CLI's plain-text tables and numbers (numbers right-aligned, text
left-aligned, thousands separated, money and counts with suffixes)."""

from __future__ import annotations

import pytest

from designer.output.text import count, fmt, number, si, table, usd


def test_a_table_aligns_numbers_right_and_text_left():
    text = table(["gpu", "count"], [["h100-sxm", 8], ["b200", 1024]])
    assert text.splitlines() == [
        "gpu       count",
        "--------  -----",
        "h100-sxm      8",
        "b200      1,024",
    ]


def test_a_mixed_column_is_text_and_an_empty_table_has_its_header():
    text = table(["x"], [[1], ["two"]])
    assert text.splitlines() == ["x", "---", "1", "two"]  # left-aligned: not all numbers
    assert table(["a", "bb"], []).splitlines() == ["a  bb", "-  --"]


@pytest.mark.parametrize(
    "value,shown",
    [
        (None, "-"),
        (True, "yes"),
        (False, "no"),
        (1234567, "1,234,567"),
        (2.0, "2"),
        (1e15, "1,000,000,000,000,000"),  # past the integer shortcut: number()
        (12.345, "12.35"),
        (0.012345, "0.0123"),
        (float("nan"), "nan"),
        (float("inf"), "inf"),
        ("text", "text"),
    ],
)
def test_fmt(value, shown):
    assert fmt(value) == shown


@pytest.mark.parametrize(
    "value,shown",
    [(123456.7, "123,457"), (100.0, "100"), (99.5, "99.50"), (1.0, "1.00"), (0.5, "0.5")],
)
def test_number_reads_by_size(value, shown):
    assert number(value) == shown
    assert number(5.0, ".1f") == "5.0"


@pytest.mark.parametrize(
    "value,shown",
    [
        (None, "-"),
        (12.0, "$12"),
        (1500.0, "$1.5K"),
        (2_480_000.0, "$2.48M"),
        (3.2e9, "$3.20B"),
        (-2e6, "$-2.00M"),
    ],
)
def test_usd(value, shown):
    assert usd(value) == shown


@pytest.mark.parametrize(
    "value,shown",
    [
        (2e12, "2T"),
        (3.5e8, "350M"),
        (1.5e9, "1.5B"),
        (2048.0, "2.048K"),
        (999.0, "999"),
        (12345678.9, "12.35M"),
    ],
)
def test_si_is_the_clis_own_suffixes(value, shown):
    assert si(value) == shown


@pytest.mark.parametrize(
    "n,noun,want",
    [
        (1, "server", "1 server"),
        (2, "server", "2 servers"),
        (0.4, "interruption", "0 interruptions"),
        (1.2, "interruption", "1 interruption"),
        (1_035_890.3, "interruption", "1,035,890 interruptions"),
        (1, "switch", "1 switch"),
    ],
)
def test_a_count_agrees_with_its_noun(n, noun, want):
    """The plan's lines said "1 servers in 1 racks" and "1 interruptions expected"."""
    assert count(n, noun, "switches" if noun == "switch" else None) == want


def test_the_cluster_line_of_one_server_is_singular(capsys):
    from helpers import run_main

    args = ["optimize", "--model", "llama2-7b", "--tokens", "1B", "--budget", "400K"]
    code, out, err = run_main(capsys, [*args, "--gpu", "h100-sxm", "--no-explain"])
    assert code == 0, err
    assert "cluster: 1 server in 1 rack;" in out
    assert " in 1 server with " in out  # the plan's sentence ("in 1 servers with")


def test_one_micro_batch_per_step_is_singular(capsys):
    from helpers import run_main

    args = ["optimize", "--model", "llama2-7b", "--tokens", "1e18", "--budget", "1e13"]
    args += ["--gpu", "h100-sxm", "--no-explain", "--time-limit", "5"]
    code, out, err = run_main(capsys, args)
    assert code == 0, err
    assert ", 1 micro-batch per step " in out, out.splitlines()[0]


def test_evaluates_layout_line_counts_one_micro_batch_singular(capsys):
    """evaluate's layout line said "(1 micro-batches/step)"."""
    from helpers import run_main

    args = ["evaluate", "--model", "llama2-7b", "--gpu", "h100-sxm", "--dp", "8"]
    code, out, err = run_main(capsys, args)
    assert code in (0, 1), err
    assert "(1 micro-batch/step)" in out.splitlines()[1]
    code, out, err = run_main(capsys, [*args, "--global-batch", "16"])
    assert "(2 micro-batches/step)" in out.splitlines()[1]
