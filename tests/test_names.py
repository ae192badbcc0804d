"""catalog/names.py: the one message for an unknown name, with the names it likely means."""

from __future__ import annotations

import pytest

from catalog.names import close_names, unknown_name
from helpers import refused

GPUS = ["a100-80gb", "h100-pcie", "h100-sxm", "h200", "h800", "mi300x"]


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("H100-SXM", ["h100-sxm"]),  # case only
        ("h100", ["h100-pcie", "h100-sxm"]),  # a prefix: every name it begins, not h800
        ("mi300", ["mi300x"]),
        ("h900", []),  # as close to h200 as to h800: no guess
        ("zzz", []),
        ("", []),
    ],
)
def test_close_names(given, expected):
    assert close_names(given, GPUS) == expected


def test_a_misspelling_is_suggested():
    assert close_names("memroy", ["memory", "budget", "deadline"]) == ["memory"]
    assert close_names("deepseekv3", ["deepseek-v3", "kimi-k2"]) == ["deepseek-v3"]


def test_unknown_name_lists_every_name_sorted():
    msg = unknown_name("GPU", "h100", reversed(GPUS))
    assert msg == (
        "unknown GPU 'h100'; did you mean 'h100-pcie' or 'h100-sxm'? "
        "choose one of " + ", ".join(GPUS)
    )
    assert unknown_name("GPU", "zzz", GPUS) == "unknown GPU 'zzz'; choose one of " + ", ".join(GPUS)


@pytest.mark.parametrize(
    ("args", "option", "hint"),
    [
        (["optimize", "--gpu", "h100", "--budget", "30M"], "--gpu", "'h100-pcie' or 'h100-sxm'"),
        (["optimize", "--ignore", "memroy", "--budget", "30M"], "--ignore", "'memory'"),
        (["optimize", "--nic", "cx7", "--budget", "30M"], "--nic", "'cx7-400g'"),
        (["evaluate", "--gpu", "H100-SXM", "--tp", "8"], "--gpu", "'h100-sxm'"),
        (["catalog", "show", "mi300"], "NAME", "'mi300x'"),
        (["models", "show", "llama3-71b"], "NAME", "'llama3-70b'"),  # (Llama3-70B is its name)
    ],
)
def test_the_cli_suggests_the_name_meant(capsys, args, option, hint):
    refused(capsys, args, option, f"did you mean {hint}?")
