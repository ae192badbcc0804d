"""What leaves the program is escaped for where it lands (issue 33): hostile names (from a
model, catalog or question file) in an emitted shell script run nothing, and no spreadsheet
or CSV cell the program writes starts a formula unless the program wrote one on purpose."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from designer.launch import Launch, emit
from designer.launch.shell_text import safe_word
from designer.questions import build_scenario
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
