"""designer/question/build.py: building the scenario from a question (the rack power a server
needs). From issue 20's checklist (reproduction 21)."""

from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner

from catalog import load_catalog
from designer.cli import cli
from designer.question.build import cached_catalog
from helpers import OPTIMIZE, refused, run_main
from solvers.scenario import DEFAULT_HEADROOM, DEFAULT_RESERVED_GB


def test_a_rack_smaller_than_one_server_is_refused(tmp_path, capsys):
    """Reproduction 21: --rack-power-kw 0.001 put 10 kW servers one to a 1 W rack with no
    violation. A GPU whose server exceeds its rack is refused (named with --gpu) or left out
    of the search; none left is exit 2 naming --rack-power-kw and the least that fits."""
    line = refused(capsys, [*OPTIMIZE, "--model", "llama2-7b", "--rack-power-kw", "0.001"])
    assert "--rack-power-kw" in line and "h100-sxm server draws 10.0 kW" in line
    args = ["optimize", "--model", "llama2-7b", "--tokens", "20B", "--budget", "1M"]
    args += ["--max-batch-tokens", "1M", "--no-explain", "--evidence", "any"]
    code, out, err = run_main(capsys, [*args, "--rack-power-kw", "5"])
    assert code == 0, err
    plan = next(line for line in out.splitlines() if line.startswith("Best plan"))
    assert any(g in plan for g in ("h100-pcie", "l40s", "rtx4090"))  # servers under 5 kW
    s = tmp_path / "s.yaml"
    s.write_text("base:\n  model: llama2-7b\n  budget: 1M\naxes:\n  rack_power_kw: [42, 0.001]\n")
    refused(capsys, ["sweep", str(s), "--csv", str(tmp_path / "s.csv")], "axes.rack_power_kw")


def test_catalog_is_parsed_once_per_process_for_unchanged_files(tmp_path):
    path = tmp_path / "extra.yaml"
    path.write_text("facility:\n  pue: 1.3\n", encoding="utf-8")
    first = cached_catalog((path,))
    assert cached_catalog((path,)) is first
    time.sleep(0.01)
    path.write_text("facility:\n  pue: 1.4\n", encoding="utf-8")
    again = cached_catalog((path,))
    assert again is not first and again.facility.pue == 1.4


# ------------------------------------------------------------------ memory headroom
def test_default_plans_keep_the_documented_headroom():
    result = CliRunner().invoke(cli, ["optimize", "--budget", "30M", "--json", "--no-explain"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["question"]["headroom"] == DEFAULT_HEADROOM
    assert doc["question"]["reserved_gb"] == DEFAULT_RESERVED_GB
    cat = load_catalog()
    for plan in doc["plans"]:
        physical = cat.gpu(plan["gpu"]).memory_gb
        assert plan["memory_gb_per_gpu"] <= physical * (1 - DEFAULT_HEADROOM) + 1e-6


def test_headroom_shrinks_the_usable_memory():
    base = ["evaluate", "--gpu", "h100-sxm", "--tp", "8", "--pp", "4", "--json"]
    seed = json.loads(
        CliRunner().invoke(cli, [*base, "--headroom", "0", "--reserved-gb", "0"]).output
    )
    planned = json.loads(CliRunner().invoke(cli, base).output)
    assert seed["memory_gb"]["capacity"] == planned["memory_gb"]["capacity"] == 80.0
    assert seed["memory_gb"]["usable"] == 80.0
    assert planned["memory_gb"]["usable"] == pytest.approx(80.0 * (1 - DEFAULT_HEADROOM))
    assert planned["memory_gb"]["other"] == pytest.approx(
        seed["memory_gb"]["other"] + DEFAULT_RESERVED_GB
    )
    bad = CliRunner().invoke(cli, [*base, "--headroom", "1"])
    assert bad.exit_code == 2 and "--headroom" in bad.output  # click's own usage error
