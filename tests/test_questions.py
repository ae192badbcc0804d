"""designer/questions.py: building the scenario from a question (the rack power a server
needs). From issue 20's checklist (reproduction 21)."""

from __future__ import annotations

import time

from designer.questions import cached_catalog
from helpers import OPTIMIZE, refused, run_main


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
