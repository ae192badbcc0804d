"""optimize --emit and export of the same saved plan print the same launch, and export
never refuses a plan the optimizer returned (issue 29: export re-evaluated a Qwen3-235B
plan and refused it). Random optimizer questions (bench/launch_check.random_question),
slow: 200 of them in CI's --run-slow, 3 in the fast suite."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

from helpers import run_main

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from launch_check import random_question  # noqa: E402


def question_args(q: dict) -> list[str]:
    return [
        "--model", q["model"], "--gpu", q["gpus"][0], "--max-gpus", str(q["max_gpus"]),
        "--tokens", str(q["tokens"]), "--seq-len", str(q["seq_len"]),
        "--precision", q["precision"], "--time-limit", "5", "--no-explain",
    ]  # fmt: skip


def emit_equals_export(capsys, tmp_path, seed: int) -> None:
    q = random_question(random.Random(seed))
    fmt = ("megatron", "slurm", "torchtitan", "nemo")[seed % 4]
    args = ["optimize", *question_args(q), "--emit", fmt, "--json"]
    code, out, _ = run_main(capsys, args)
    if code != 0:  # no plan, or a question the CLI refuses
        return
    doc = json.loads(out)
    plan = tmp_path / f"plan{seed}.json"
    plan.write_text(out)
    code, text, err = run_main(capsys, ["export", str(plan), "--format", fmt])
    launch = doc.get("launch")
    if launch is None:  # the emitter refused the model or platform: so does export
        assert code == 1, err
        return
    assert code == 0, f"export refused an optimizer plan: {err}"
    assert text == launch["text"]


@pytest.mark.parametrize("seed", range(3))
def test_emit_equals_export(capsys, tmp_path, seed):
    emit_equals_export(capsys, tmp_path, seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3, 200))
def test_emit_equals_export_random(capsys, tmp_path, seed):
    emit_equals_export(capsys, tmp_path, seed)
