"""The software that runs a launch on each GPU vendor (designer/data/launch/platforms.yaml):
upstream for NVIDIA, AMD's ROCm/Megatron-LM fork (same flags) for AMD Instinct, and a
clear stop for Intel Gaudi, whose Megatron-DeepSpeed / optimum-habana launches take a
DeepSpeed configuration the designer does not write."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import yaml

from designer.errors import Infeasible
from designer.launch.settings import Launch
from designer.launch.shell_text import comment_text


@cache
def platforms() -> dict[str, Any]:
    path = resources.files("designer") / "data" / "launch" / "platforms.yaml"
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def platform_notes(job: Launch, fmt: str) -> list[str]:
    """Comment lines naming the fork that runs the format on the job's GPUs (none for
    upstream); Infeasible when no fork takes the format's settings."""
    entry = (platforms().get(job.vendor) or {}).get(fmt)
    if not entry:
        return []
    if not entry["emit"]:
        raise Infeasible(
            f"{fmt} settings for {job.gpu} ({job.vendor}): {' '.join(entry['why'].split())}"
        )
    return [
        f"# on {comment_text(f'{job.gpu} ({job.vendor})')}: run with {' '.join(entry['fork'].split())}"
    ]
