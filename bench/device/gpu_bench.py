"""What bench/device/moe_kernels.py and moe_layer.py share: the models' expert shapes, the
device and dtype they measure on, CUDA-event timing, and the CSV they write. Imports
nothing of this repository (the scripts run on a GPU machine with PyTorch alone)."""

from __future__ import annotations

import csv
import statistics
import time
from pathlib import Path

import torch

# (name, hidden, expert FFN, experts, top-k): the routed experts of each model (the zoo's)
SHAPES = [
    ("qwen3-30b-a3b", 2048, 768, 128, 8),
    ("qwen3-next-80b-a3b", 2048, 512, 512, 10),
    ("gpt-oss-120b", 2880, 2880, 128, 4),
    ("qwen3-235b-a22b", 4096, 1536, 128, 8),
    ("deepseek-v3", 7168, 2048, 256, 8),
    ("mixtral-8x7b", 4096, 14336, 8, 2),
]
SMOKE_SHAPES = [("tiny", 64, 32, 8, 2)]
DEVICE = "cuda"
DTYPE = torch.bfloat16


def use_cpu() -> None:
    """--smoke: the scripts' own check on a machine without a GPU, in fp32."""
    global DEVICE, DTYPE
    DEVICE, DTYPE = "cpu", torch.float32


def timed_ms(fn, warmup: int = 3, repeat: int = 10) -> float:
    """Median milliseconds of ``fn()`` over ``repeat`` runs after ``warmup``, timed with
    CUDA events (the host clock on the CPU)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        if DEVICE == "cpu":
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
            continue
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def forward_and_both(fn, params: list[torch.Tensor], dy: torch.Tensor) -> tuple[float, float]:
    """(forward, forward + backward) milliseconds of ``fn()``; each backward starts from
    fresh gradients of ``params`` (no accumulation pass)."""

    def forward_only():
        with torch.no_grad():
            fn()

    def both():
        for p in params:
            p.grad = None
        fn().backward(dy)

    return timed_ms(forward_only), timed_ms(both)


def rand(*shape, grad: bool = False, scale: float = 1.0) -> torch.Tensor:
    """Random data (never zeros) of ``shape`` at the measured dtype."""
    t = torch.randn(*shape, device=DEVICE, dtype=torch.float32) * scale
    return t.to(DTYPE).requires_grad_(grad)


def free() -> None:
    if DEVICE == "cuda":
        torch.cuda.empty_cache()


def write_csv(path: Path, rows: list[dict], fields: list[str] | None = None) -> None:
    """The rows so far (a run cut short keeps what it measured), floats to 5 digits."""
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields or list(rows[0]))
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.5g}" if isinstance(v, float) else v) for k, v in r.items()})
