"""designer/launch/platform.py: the software that runs a launch on each GPU vendor
(designer/data/launch/platforms.yaml). Nothing to say for NVIDIA (upstream), a comment
naming AMD's fork for the formats it takes, and a clear stop (Infeasible, naming the
format and the GPU) where no fork takes the settings."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from designer.errors import Infeasible
from designer.launch.platform import platform_notes, platforms


def _job(vendor: str, gpu: str):
    return SimpleNamespace(vendor=vendor, gpu=gpu)  # only these two are read


def test_every_entry_either_emits_with_a_fork_or_says_why_not():
    table = platforms()
    assert table["NVIDIA"] == {}
    for vendor, formats in table.items():
        for fmt, entry in (formats or {}).items():
            assert entry["emit"] in (True, False), (vendor, fmt)
            assert entry.get("fork" if entry["emit"] else "why"), (vendor, fmt)


@pytest.mark.parametrize("fmt", ["megatron", "slurm", "torchtitan", "nemo"])
def test_nvidia_runs_upstream(fmt):
    assert platform_notes(_job("NVIDIA", "h100-sxm"), fmt) == []


def test_amd_names_its_fork_in_one_comment_line():
    (line,) = platform_notes(_job("AMD", "mi300x"), "megatron")
    assert line.startswith("# on mi300x (AMD): run with AMD's ROCm/Megatron-LM fork")
    assert "\n" not in line and "  " not in line  # the YAML's folded text on one line


def test_a_format_no_fork_takes_stops_naming_it():
    with pytest.raises(Infeasible, match=r"^nemo settings for mi300x \(AMD\): Megatron-Bridge"):
        platform_notes(_job("AMD", "mi300x"), "nemo")
    with pytest.raises(Infeasible, match="gaudi3"):
        platform_notes(_job("Intel", "gaudi3"), "megatron")


def test_an_unknown_vendor_or_format_adds_nothing():
    assert platform_notes(_job("Acme", "x1"), "megatron") == []
    assert platform_notes(_job("AMD", "mi300x"), "no-such-format") == []
