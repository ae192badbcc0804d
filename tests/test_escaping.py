"""What leaves the program is escaped for where it lands (issue 33): hostile names (from a
model, catalog or question file) in an emitted shell script run nothing, and no spreadsheet
or CSV cell the program writes starts a formula unless the program wrote one on purpose."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from designer.errors import Infeasible
from designer.launch import Launch, emit
from designer.launch.shell_text import safe_word
from designer.question.build import build_scenario
from solvers import Config
from solvers.plan import build_plan
from solvers.space import Shape

HOSTILE_NAMES = [
    "x$(touch PWNED)",
    "x`touch PWNED`",
    "x'; touch PWNED; '",
    'x"; touch PWNED; "',
    "x;touch PWNED",
    "x\ntouch PWNED",
    "x\r\ntouch PWNED #",
    "x && touch PWNED",
    "x | touch PWNED",
    "$(touch PWNED)",
    "${IFS}touch${IFS}PWNED",
    "<script>alert(1)</script>",
    'x}"; touch PWNED; echo "{',
    "../../../../tmp/PWNED",
    "-rf --no-preserve-root",
    "=cmd|' /C calc'!A0",
    '=HYPERLINK("http://evil/","click")',
    "x\u2028touch PWNED",
    "$((1/0))$HOME",
    "x\\\ntouch PWNED",
]
ROOT = Path(__file__).resolve().parent.parent
STUBS = ("scontrol", "srun", "torchrun", "sbatch")


@pytest.fixture(scope="module")
def base_plan():
    scenario = build_scenario(
        model="llama2-7b", tokens=3e11, seq_len=4096, gpus=("h100-sxm",), max_gpus=100_000
    )
    shape = Shape("h100-sxm", 2, 1, 2, 1, 2, "full", "bf16")
    return scenario, build_plan(scenario, Config(shape, "cx7-400g", 8, 16, 16))


def _job(base_plan, name: str) -> Launch:
    scenario, plan = base_plan
    hostile = replace(scenario, spec=scenario.spec.model_copy(update={"name": name}))
    return Launch.from_plan(hostile, plan)


def _run_script(text: str, folder: Path) -> subprocess.CompletedProcess:
    """Run the script in ``folder`` with the cluster's commands stubbed (each logs its name
    and arguments), then print CKPT_DIR's value."""
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    for stub in STUBS:
        path = bin_dir / stub
        path.write_text(f'#!/bin/sh\necho "{stub} $*" >> "$STUB_LOG"\n')
        path.chmod(0o755)
    work = folder / "work"
    work.mkdir()
    script = folder / "job.sh"
    script.write_text(text + '\necho "CKPT_DIR=${CKPT_DIR-unset}"\n')
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "STUB_LOG": str(folder / "stub.log"),
        "HOME": str(folder),
        "SLURM_JOB_ID": "1",
        "SLURM_JOB_NODELIST": "n1",
    }
    return subprocess.run(
        ["bash", str(script)], cwd=work, env=env, capture_output=True, text=True, timeout=30
    )


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("fmt", ["slurm", "megatron"])
@pytest.mark.parametrize("name", HOSTILE_NAMES, ids=range(len(HOSTILE_NAMES)))
def test_hostile_model_name_runs_nothing_in_emitted_script(base_plan, tmp_path, fmt, name):
    text = emit(_job(base_plan, name), fmt)
    script = tmp_path / "check.sh"
    script.write_text(text)
    syntax = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert syntax.returncode == 0, syntax.stderr
    for line in text.splitlines():  # every line is a comment, an assignment or the command
        assert "PWNED" not in line or line.startswith(("#", "CKPT_DIR=")), line
    run = _run_script(text, tmp_path)
    assert run.returncode == 0, run.stderr
    assert not list(tmp_path.rglob("*PWNED*")) and not Path("/tmp/PWNED").exists()
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == []
    log = (tmp_path / "stub.log").read_text().splitlines()
    # slurm: the master's host name, the run, the requeue (no checkpoint reached the end)
    assert [" ".join(line.split()[:2]) for line in log] == (
        ["scontrol show", "srun torchrun", "scontrol requeue"]
        if fmt == "slurm"
        else ["torchrun --nnodes"]
    )
    if fmt == "slurm":
        assert f"CKPT_DIR=checkpoints/{safe_word(name)}" in run.stdout.splitlines()
        assert "/" not in safe_word(name) and not safe_word(name).startswith((".", "-"))


# ---------------------------------------------------------------- spreadsheets and CSV
FORMULA = ("=", "+", "-", "@", "\t", "\r")
GPU = "=1+2"
HOSTILE_TEXT = {
    "display_name": '=HYPERLINK("http://evil/","click")',
    "price_source": "=cmd|' /C calc'!A0",
    "vendor": "@SUM(1+1)",
}


def _hostile_inputs(folder: Path) -> tuple[Path, Path]:
    """A catalog file adding a GPU named like a formula (an H100's numbers, its text fields
    formulas) and a model file whose name is one."""
    import yaml

    gpus = yaml.safe_load((ROOT / "catalog" / "data" / "gpus.yaml").read_text(encoding="utf-8"))[
        "gpus"
    ]
    catalog = folder / "cat.yaml"
    catalog.write_text(yaml.safe_dump({"gpus": {GPU: {**gpus["h100-sxm"], **HOSTILE_TEXT}}}))
    model = folder / "m.yaml"
    model.write_text(
        yaml.safe_dump(
            {"name": "-2+3", "layers": 32, "hidden": 4096, "heads": 32, "vocab": 32000}
            | {"seq_len": 4096, "gated_mlp": True}
        )
    )
    return catalog, model


def _csv_cells(path: Path) -> list[str]:
    import csv

    with open(path, newline="", encoding="utf-8") as fh:
        return [cell for row in csv.reader(fh) for cell in row]


def _assert_csv_inert(path: Path) -> None:
    from designer.output.cells import is_number_text

    cells = _csv_cells(path)
    assert any(c.startswith("'=") for c in cells), f"{path}: no hostile text reached it"
    for cell in cells:
        assert not cell.startswith(FORMULA) or is_number_text(cell), (path.name, cell)


def _assert_workbook_inert(path: Path) -> None:
    import openpyxl

    from designer.report.xlsx import BOM_SHEET

    formulas = texts = 0
    for ws in openpyxl.load_workbook(path).worksheets:
        for row in ws.iter_rows():
            for cell in row:
                value = cell.value
                if isinstance(value, (int, float)):  # numbers (negative too) and booleans
                    kind = "b" if isinstance(value, bool) else "n"
                    assert cell.data_type == kind, (ws.title, cell.coordinate)
                elif cell.data_type == "f":  # only the BOM's line totals and their SUM
                    assert ws.title.startswith(BOM_SHEET) and cell.column == 4, cell.coordinate
                    assert re.fullmatch(r"=(B\d+\*C\d+|SUM\(D2:D\d+\))", value), value
                    formulas += 1
                elif isinstance(value, str) and value.startswith(FORMULA):
                    assert cell.data_type == "s" and cell.quotePrefix, (ws.title, value)
                    texts += 1
    assert formulas > 2 and texts >= len(HOSTILE_TEXT), (formulas, texts)


QUESTION = ["--tokens", "1e11", "--budget", "2e7", "--time-limit", "20"]


@pytest.mark.slow
def test_no_csv_or_workbook_cell_is_a_live_formula(tmp_path, monkeypatch):
    """optimize --csv/--bom/--json, compare --csv, sweep --csv and report --xlsx (of the
    answer and of the study) with a catalog and a model whose names and sources are
    formulas: every such text cell is escaped (CSV) or typed text (xlsx); numbers, negative
    ones too, stay numbers; the BOM's formulas are the only formulas."""
    from helpers import run_cli

    monkeypatch.chdir(tmp_path)
    catalog, model = _hostile_inputs(tmp_path)
    base = ["--model", str(model), "--catalog", str(catalog), *QUESTION]
    answer = tmp_path / "a.json"
    got = run_cli(["optimize", *base, "--gpu", GPU, "--csv", "o.csv", "--bom", "b.csv", "--json"])
    assert got.exit_code == 0, got.output
    answer.write_text(got.stdout)
    got = run_cli(["compare", *base, "--gpu", GPU, "--gpu", "h100-sxm", "--csv", "c.csv"])
    assert got.exit_code == 0, got.output
    study = tmp_path / "s.yaml"
    study.write_text(
        f"base: {{model: {model}, tokens: 1e11, catalog: [{catalog}]}}\n"
        f"axes: {{budget: [1e7, 2e7], gpus: [['{GPU}']]}}\n"
    )
    got = run_cli(["sweep", str(study), "--csv", "s.csv", "--workers", "1"])
    assert got.exit_code == 0, got.output
    for name in ("o.csv", "b.csv", "c.csv", "s.csv"):
        _assert_csv_inert(tmp_path / name)
    for source, book in ((answer, "a.xlsx"), (tmp_path / "s.csv", "s.xlsx")):
        got = run_cli(["report", str(source), "--xlsx", book])
        assert got.exit_code == 0, got.output
        _assert_workbook_inert(tmp_path / book)


# ---------------------------------------------------------------- fuzz: names through every emitter
_PIECES = [
    *("$(", ")", "`", "'", '"', ";", "&", "|", "<", ">", "\\", "{", "}", "[", "]", "#", "*"),
    *("\n", "\r", "\t", "\u2028", "\u2029", "\x85", " ", "=", "+", "-", "@", "%", "!", "~"),
    *("touch PWNED", "${IFS}", "$HOME", "../", "é", "\u202e", "<script>", "]]", "'''", '"""'),
]


def hostile_names(seed: int, count: int) -> list[str]:
    """``count`` names built from shell, TOML, Python and spreadsheet metacharacters and line
    breaks, each holding the word PWNED (a fixed seed: the same names every run)."""
    import random

    rng = random.Random(seed)
    names = []
    for _ in range(count):
        parts = rng.choices(_PIECES, k=rng.randint(1, 8))
        parts.insert(rng.randint(0, len(parts)), "PWNED")
        names.append("".join(parts))
    return names


def _check_every_format(job: Launch, tmp_path: Path) -> None:

    with pytest.raises(Infeasible, match="torchtitan 0.3.0 has no config for"):
        emit(job, "torchtitan")  # a model torchtitan has no config function for: refused
    for fmt in ("slurm", "megatron", "nemo"):
        text = emit(job, fmt)
        for line in text.splitlines():  # the name only in comments (and CKPT_DIR, sanitised)
            assert "PWNED" not in line or line.startswith(("#", "CKPT_DIR=")), (fmt, line)
        if fmt == "nemo":
            compile(text, "nemo-recipe", "exec")
        else:
            script = tmp_path / f"{fmt}.sh"
            script.write_text(text)
            syntax = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
            assert syntax.returncode == 0, (fmt, syntax.stderr)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_fuzzed_names_are_inert_in_every_format(base_plan, tmp_path):
    for name in hostile_names(33, 25):
        _check_every_format(_job(base_plan, name), tmp_path)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_fuzzed_names_are_inert_in_every_format_many(base_plan, tmp_path):
    for name in hostile_names(3333, 400):
        _check_every_format(_job(base_plan, name), tmp_path)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_hostile_model_file_through_optimize_emit_and_export(tmp_path, monkeypatch):
    """The issue's reproduction end to end: a config.json named x$(touch PWNED) through
    optimize --emit slurm and export --format slurm; the scripts run with stubbed cluster
    commands create nothing."""
    import json

    from helpers import run_cli

    monkeypatch.chdir(tmp_path)
    spec = {"name": "x$(touch PWNED)`touch PWNED`", "layers": 32, "hidden": 4096, "heads": 32}
    Path("inj.yaml").write_text(json.dumps(spec | {"vocab": 32000, "seq_len": 4096}))
    question = ["--model", "inj.yaml", "--tokens", "1e11", "--budget", "1e7", "--gpu", "h100-sxm"]
    got = run_cli(["optimize", *question, "--emit", "slurm"])
    assert got.exit_code == 0, got.output
    emitted = got.stdout[got.stdout.index("#!/bin/bash") :]
    got = run_cli(["optimize", *question, "--json"])
    Path("plan.json").write_text(got.stdout)
    exported = run_cli(["export", "plan.json", "--format", "slurm"])
    assert exported.exit_code == 0, exported.output
    for i, text in enumerate((emitted, exported.stdout)):
        folder = tmp_path / f"run{i}"
        folder.mkdir()
        assert _run_script(text, folder).returncode == 0
        assert not list(tmp_path.rglob("PWNED"))


@pytest.mark.slow
def test_report_html_escapes_a_hostile_model_name(tmp_path, monkeypatch):
    """HTML: every value escaped (it was before issue 33; kept by this test)."""
    import json

    from helpers import run_cli

    monkeypatch.chdir(tmp_path)
    name = "<script>alert('PWNED')</script><img src=x onerror=alert(1)>"
    spec = {"name": name, "layers": 32, "hidden": 4096, "heads": 32, "vocab": 32000}
    Path("m.yaml").write_text(json.dumps(spec | {"seq_len": 4096}))
    got = run_cli(["optimize", "--model", "m.yaml", *QUESTION, "--gpu", "h100-sxm", "--json"])
    assert got.exit_code == 0, got.output
    Path("a.json").write_text(got.stdout)
    assert run_cli(["report", "a.json", "--html", "a.html"]).exit_code == 0
    page = Path("a.html").read_text()
    assert "PWNED" in page and name not in page and "<img src=x" not in page
    assert "&lt;script&gt;" in page
