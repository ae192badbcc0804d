"""What bench/device/moe_kernels.py, moe_layer.py and gdn_kernels.py share: the models'
expert shapes, the device and dtype they measure on, CUDA-event timing, a measurement's
rates, the environment they record and the CSV they write. Imports nothing of this
repository (the scripts run on a GPU machine with PyTorch alone)."""

from __future__ import annotations

import csv
import platform
import statistics
import subprocess
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


def environment(extra: str = "") -> str:
    """The GPU, driver and libraries the numbers were measured with (``extra``: a line of
    the calling script's own libraries)."""
    if DEVICE == "cpu":
        return f"cpu smoke run: torch {torch.__version__}, python {platform.python_version()}"
    smi = subprocess.run(
        [
            "nvidia-smi",
            "--query-gpu=name,driver_version,memory.total,clocks.max.sm",
            "--format=csv,noheader",
        ],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return "\n".join(
        [
            f"nvidia-smi: {smi}",
            f"torch: {torch.__version__}, CUDA {torch.version.cuda}, "
            f"cuDNN {torch.backends.cudnn.version()}",
            f"device: {torch.cuda.get_device_name()}, "
            f"{torch.cuda.get_device_properties(0).multi_processor_count} SMs",
            f"python: {platform.python_version()}",
        ]
        + ([extra] if extra else [])
    )


def rates(times: tuple[float, float], flops: float, both_per_forward: float) -> dict:
    """A measurement's fields: forward and forward + backward milliseconds and TFLOP/s,
    the backward counted as ``both_per_forward`` - 1 forwards."""
    f_ms, fb_ms = times
    return dict(
        ms=f_ms,
        fb_ms=fb_ms,
        tflops=flops / f_ms / 1e9,
        fb_tflops=both_per_forward * flops / fb_ms / 1e9,
    )
