"""The real-framework launch check (bench/launch_check.py, issue 29): its plan list covers
what the issue names, its pins live in one place, and what the emitters say they were
checked against is that place. The check itself runs in .ci/run (it needs the framework
environment ci/frameworks.sh builds)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from designer.launch import Launch, emit
from designer.launch.vocab import checked_release, releases
from models.zoo import moe_zoo, zoo
from test_launch import make_plan

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import launch_check  # noqa: E402


def pins() -> dict[str, str]:
    text = (ROOT / "ci" / "frameworks.txt").read_text(encoding="utf-8")
    return dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)$", text, re.M))


def test_requirements_pin_every_package_exactly():
    lines = [
        ln.strip()
        for ln in (ROOT / "ci" / "frameworks.txt").read_text(encoding="utf-8").splitlines()
        if ln.strip() and not ln.startswith("#")
    ]
    assert lines and all(re.fullmatch(r"[A-Za-z0-9_.-]+==\S+", ln) for ln in lines)


def test_emitters_name_the_pinned_releases():
    got = pins()
    for package, version in releases()["releases"].items():
        assert got[package] == version, package
    job = Launch.from_plan(*make_plan("interleaved"))
    for fmt in ("megatron", "slurm"):
        line = checked_release(fmt)
        assert line is not None and line in emit(job, fmt).splitlines()
        assert "megatron-core " + got["megatron-core"] in line
    tt = checked_release("torchtitan")
    assert tt is not None and "torchtitan " + got["torchtitan"] + " (ConfigManager" in tt
    llama3 = Launch.from_plan(*make_plan("llama3_8b_interleaved"))
    assert tt in emit(llama3, "torchtitan").splitlines()


def test_fixed_plans_cover_the_issue_list():
    fixed = launch_check.FIXED
    models = {v[0] for v in fixed.values()} | set(launch_check.FIXED_OPTIMIZE)
    assert len(fixed) + len(launch_check.FIXED_OPTIMIZE) >= 24
    assert set(zoo()) <= models  # every zoo family
    assert {"mixtral-8x7b", "qwen3-235b-a22b", "deepseek-v3", "gpt-oss-120b"} <= models
    assert set(launch_check.FIXED_OPTIMIZE) <= set(moe_zoo())
    shapes = [v[4] for v in fixed.values()]
    assert any(s[2] > 1 and s[3] > 1 for s in shapes)  # PP with VP
    assert any(s[2] > 1 and s[3] == 1 for s in shapes)  # PP without VP
    assert any(len(s) == 8 for s in shapes)  # uneven splits
    assert any(s[1] > 1 for s in shapes)  # CP
    assert any(s[6] == "fp8" for s in shapes)
    assert {"gb200", "gb300", "mi300x"} <= {v[3] for v in fixed.values()}


def test_random_questions_are_seeded():
    import random

    a = [launch_check.random_question(random.Random(7)) for _ in range(3)]
    b = [launch_check.random_question(random.Random(7)) for _ in range(3)]
    assert a == b
