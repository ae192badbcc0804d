"""designer/output/files.py: outputs that cannot be inputs, are written whole (renamed into
place) and are checked before any work (a read-only folder, a missing folder, a full
device, a plot without its suffix). From issue 20's checklist (reproductions 4, 7, 15, 20)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from helpers import OPTIMIZE, SPEC, refused, run_main, study


# ---------------------------------------------------------------- 4: outputs never inputs
def test_an_output_that_is_an_input_is_refused(tmp_path, capsys):
    """Reproduction 4: the study file, a model file, a catalog file, another output."""
    s = study(tmp_path)
    model = tmp_path / "m.json"
    model.write_text(SPEC)
    catalog = tmp_path / "cat.yaml"
    catalog.write_text("gpus: {}\n")
    kept = {p: p.read_bytes() for p in (s, model, catalog)}
    refused(capsys, ["sweep", str(s), "--csv", str(s)], "--csv", "STUDY_FILE")
    refused(capsys, [*OPTIMIZE, "--model", str(model), "--csv", str(model)], "--csv", "--model")
    refused(capsys, [*OPTIMIZE, "--catalog", str(catalog), "--bom", str(catalog)], "--catalog")
    x = tmp_path / "x"
    refused(capsys, [*OPTIMIZE, "--csv", str(x), "--bom", str(x)], "--bom", "--csv")
    assert not x.exists()
    refused(capsys, ["sweep", str(s), "--csv", str(x), "--plot", str(x)], "--plot", "--csv")
    assert {p: p.read_bytes() for p in kept} == kept


def test_a_sweep_output_that_is_a_file_the_study_reads_is_refused(tmp_path, capsys):
    """Reproduction 4: a model spec the study names is an input too."""
    (tmp_path / "m.json").write_text(SPEC)
    s = tmp_path / "s.yaml"
    s.write_text("base:\n  model: m.json\n  tokens: 1B\naxes:\n  budget: [1M]\n")
    refused(capsys, ["sweep", str(s), "--csv", str(tmp_path / "m.json")], "--csv", "study")
    assert (tmp_path / "m.json").read_text() == SPEC


def test_whole_file_outputs_are_renamed_into_place(tmp_path, capsys, monkeypatch):
    """Outputs go to a temporary file first: a failed write keeps the old file, leaves no
    temporary behind, and exits 2 naming the path."""
    from designer.output import files as outputs

    out = tmp_path / "plans.csv"
    out.write_text("old\n")
    out.chmod(0o640)
    code, _, err = run_main(capsys, [*OPTIMIZE, "--model", "llama2-7b", "--csv", str(out)])
    assert code == 0, err
    assert out.read_text().startswith("rank,") and (out.stat().st_mode & 0o777) == 0o640

    def full(fh, text):
        fh.write(text[:10])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(outputs, "_write", full)
    out.write_text("old\n")
    refused(capsys, [*OPTIMIZE, "--model", "llama2-7b", "--csv", str(out)], str(out), "space")
    assert out.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plans.csv"]


# ---------------------------------------------------------------- 7 and 15: output paths
def test_the_default_csv_in_a_read_only_study_folder_is_refused(tmp_path, capsys, monkeypatch):
    """Reproduction 7: checked before any scenario runs, naming the path and --csv."""
    from designer.output import files as outputs

    folder = tmp_path / "shared"
    folder.mkdir()
    s = study(folder)
    real = os.access
    monkeypatch.setattr(
        outputs.os, "access", lambda p, mode: False if Path(p) == folder else real(p, mode)
    )  # a read-only folder (a chmod does not stop root, who runs some CI)
    refused(capsys, ["sweep", str(s)], "--csv", str(folder / "small.csv"), "read-only")
    assert not (folder / "small.csv").exists()


def test_os_errors_on_outputs_exit_2_naming_the_path(tmp_path, capsys):
    """Reproduction 15: a missing folder before any work; /dev/full when written."""
    s = study(tmp_path)
    missing = tmp_path / "no" / "such" / "out.csv"
    start = time.perf_counter()
    refused(capsys, ["sweep", str(s), "--csv", str(missing)], str(missing), "does not exist")
    refused(capsys, ["sweep", str(s), "--plot", str(missing)], "--plot", "does not exist")
    assert time.perf_counter() - start < 5  # refused before the scenarios run
    refused(capsys, ["sweep", str(s), "--plot", str(tmp_path / "p")], "--plot", ".png")
    refused(capsys, [*OPTIMIZE, "--model", "llama2-7b", "--bom", str(missing)], "--bom")
    refused(capsys, [*OPTIMIZE, "--model", "llama2-7b", "--csv", str(tmp_path)], "directory")
    if Path("/dev/full").exists():
        refused(capsys, [*OPTIMIZE, "--model", "llama2-7b", "--csv", "/dev/full"], "/dev/full")


def test_compare_plot_without_a_suffix_is_refused_before_work(tmp_path, capsys):
    """Reproduction 20: compare --plot /dev/full wrote /dev/full.png, --plot p wrote p.png."""
    args = [*OPTIMIZE[:-1], "--model", "llama2-7b"]
    args[0] = "compare"
    for path in ("/dev/full", str(tmp_path / "p")):
        refused(capsys, [*args, "--plot", path], "--plot", ".png")
    assert list(tmp_path.iterdir()) == []
