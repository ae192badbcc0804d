"""Measure, on a GPU, the kernels a mixture-of-experts layer runs: the evidence for
models/expert.py's grouped-GEMM roofline, permutation passes and attention kernels.

Usage (a machine with a CUDA GPU and PyTorch; of this repository it imports only gpu_bench.py):
    python bench/device/moe_kernels.py --out DIR [--quick]

Writes DIR/moe_kernels.csv (one row a measurement) and DIR/environment.txt (GPU,
driver, CUDA, PyTorch and cuDNN versions), and prints a table. Every time is
the median of CUDA-event timings after warm-up, on random bf16 data (never zeros):

- ``ceiling``: a 8,192-cube bf16 matmul (TFLOP/s) and a device-to-device copy of 4 GiB
  (TB/s counting bytes read and written): the GPU's measured peaks.
- ``grouped`` / ``dense`` / ``loop``: one expert linear (k -> n) of G local experts with
  m rows each, forward and forward + backward through autograd: ``grouped`` is PyTorch's
  grouped GEMM (``torch._grouped_mm``, the kernel torchtitan's MoE runs), ``loop`` one
  cuBLAS GEMM per expert (as Transformer Engine's GroupedLinear issued them before its
  grouped kernel), ``dense`` one GEMM over the G m rows with one weight: the same FLOPs
  at a dense GEMM's efficiency. Shapes: the up-projection (k = hidden, n = 2 x expert
  FFN, gated) and the down-projection (k = expert FFN, n = hidden) of each model named
  in SHAPES, m from 128 to 8,192 rows per expert.
- ``permute``: Megatron-Core's unfused permutation of T tokens' top-k copies
  (``index_select`` by the sorted routing map) and its unpermutation (probabilities
  applied, ``index_add_``), forward and backward through autograd, with the bytes of one
  pass over the k-expanded tokens (T k h x 2) to read it as HBM passes.
- ``attention``: causal self-attention, forward and backward, through
  ``scaled_dot_product_attention`` with the FlashAttention (FA2) backend and with cuDNN's
  fused attention, FLOPs counted as 4 b heads s^2 d x 3.5 / 2 (causal).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import gpu_bench as gb
import torch
import torch.nn.functional as F

ROWS = [128, 256, 512, 1024, 2048, 4096, 8192]
LOCAL_EXPERTS = [4, 16]
ATTENTION_SEQS = (4096, 8192)
PERMUTE_TOKENS = 32768  # one micro-batch of 8 x 4,096
SHAPES = gb.SHAPES


def ceilings(rows: list[dict]) -> None:
    n = 8192 if gb.DEVICE == "cuda" else 256
    a = torch.randn(n, n, device=gb.DEVICE, dtype=gb.DTYPE)
    b = torch.randn(n, n, device=gb.DEVICE, dtype=gb.DTYPE)
    ms = gb.timed_ms(lambda: a @ b)
    rows.append(dict(kind="ceiling", model="matmul-8192", ms=ms, tflops=2 * n**3 / ms / 1e9))
    src = torch.randn(1 << (30 if gb.DEVICE == "cuda" else 20), device=gb.DEVICE)  # 4 GiB fp32
    dst = torch.empty_like(src)
    ms = gb.timed_ms(lambda: dst.copy_(src))
    tb_per_s = 2 * src.numel() * 4 / ms / 1e9
    rows.append(dict(kind="ceiling", model="copy-4GiB", ms=ms, tb_per_s=tb_per_s))


def _offsets(g: int, m: int) -> torch.Tensor:
    return torch.arange(1, g + 1, device=gb.DEVICE, dtype=torch.int32) * m


def linear_times(kind: str, g: int, m: int, k: int, n: int) -> tuple[float, float]:
    """(forward, forward + backward) milliseconds of one expert linear of ``kind``."""
    x = torch.randn(g * m, k, device=gb.DEVICE, dtype=gb.DTYPE, requires_grad=True)
    dy = torch.randn(g * m, n, device=gb.DEVICE, dtype=gb.DTYPE)
    if kind == "dense":
        w = (torch.randn(n, k, device=gb.DEVICE, dtype=gb.DTYPE) / k**0.5).requires_grad_()

        def fwd():
            return F.linear(x, w)
    else:
        w = (torch.randn(g, n, k, device=gb.DEVICE, dtype=gb.DTYPE) / k**0.5).requires_grad_()
        offs = _offsets(g, m)
        if kind == "grouped":

            def fwd():
                return torch._grouped_mm(x, w.transpose(-2, -1), offs=offs)
        else:

            def fwd():
                return torch.cat([F.linear(x[i * m : (i + 1) * m], w[i]) for i in range(g)])

    return gb.forward_and_both(fwd, [x, w], dy)


def expert_linears(rows: list[dict], quick: bool) -> None:
    shapes = SHAPES[:2] if quick else SHAPES
    for name, h, f, _experts, _k in shapes:
        for proj, k, n in (("up", h, 2 * f), ("down", f, h)):
            for g in LOCAL_EXPERTS:
                for m in ROWS if not quick else ROWS[::3]:
                    for kind in ("grouped", "dense", "loop"):
                        if kind == "loop" and m > 2048:
                            continue  # the loop's launch cost is visible at small m only
                        try:
                            times = linear_times(kind, g, m, k, n)
                        except Exception as err:  # a kernel this build lacks: say so, go on
                            print(f"{kind} {name} {proj} g{g} m{m}: {err}", file=sys.stderr)
                            continue
                        where = dict(kind=kind, model=name, proj=proj, g=g, m=m, k=k, n=n)
                        rows.append(where | gb.rates(times, 2.0 * g * m * k * n, 3.0))
                        gb.free()


def permutation(rows: list[dict]) -> None:
    for name, h, _f, experts, topk in SHAPES:
        rows.append(permute_row(name, h, experts, topk, PERMUTE_TOKENS))
        gb.free()


def permute_row(name: str, h: int, experts: int, topk: int, tokens: int) -> dict:
    """Megatron-Core's unfused permute and unpermute of ``tokens`` tokens' top-k copies."""
    x = torch.randn(tokens, h, device=gb.DEVICE, dtype=gb.DTYPE, requires_grad=True)
    logits = torch.randn(tokens, experts, device=gb.DEVICE, dtype=torch.float32)
    probs, idx = torch.topk(logits.softmax(-1), topk, dim=-1)
    routing = torch.zeros(tokens, experts, dtype=torch.bool, device=gb.DEVICE)
    routing.scatter_(1, idx, True)
    # Megatron-Core's permute: token indices grouped by expert (routing map transposed)
    token_idx = routing.T.contiguous().nonzero()[:, 1]
    weights = torch.zeros(tokens, experts, device=gb.DEVICE, dtype=torch.float32)
    weights.scatter_(1, idx, probs)
    w_sorted = weights.T.contiguous()[routing.T.contiguous()].to(gb.DTYPE)
    dy = torch.randn(tokens, h, device=gb.DEVICE, dtype=gb.DTYPE)

    def permute_unpermute():
        moved = x.index_select(0, token_idx)
        out = torch.zeros(tokens, h, device=gb.DEVICE, dtype=gb.DTYPE)
        return out.index_add(0, token_idx, moved * w_sorted[:, None])

    f_ms, fb_ms = gb.forward_and_both(permute_unpermute, [x], dy)
    where = dict(kind="permute", model=name, m=tokens, k=topk, n=h)
    return where | dict(ms=f_ms, fb_ms=fb_ms, pass_bytes=tokens * topk * h * 2)


def attention(rows: list[dict]) -> None:
    from torch.nn.attention import SDPBackend

    for s in ATTENTION_SEQS:
        for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION):
            try:
                rows.append(attention_row(s, backend))
            except Exception as err:  # a backend this build lacks: say so, go on
                print(f"attention {backend} s{s}: {err}", file=sys.stderr)


def attention_row(s: int, backend, b: int = 2, heads: int = 32, d: int = 128) -> dict:
    """Causal attention of ``b`` x ``heads`` heads of ``d`` at sequence ``s`` on one SDPA
    backend, forward and backward."""
    from torch.nn.attention import sdpa_kernel

    q, k, v = (
        torch.randn(b, heads, s, d, device=gb.DEVICE, dtype=gb.DTYPE, requires_grad=True)
        for _ in range(3)
    )
    dy = torch.randn(b, heads, s, d, device=gb.DEVICE, dtype=gb.DTYPE)
    flops_fwd = 4.0 * b * heads * s * s * d / 2

    def fwd():
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    where = dict(kind="attention", model=backend.name.lower(), m=s, n=d, g=heads)
    return where | gb.rates(gb.forward_and_both(fwd, [q, k, v], dy), flops_fwd, 3.5)


def _smoke() -> None:
    """--smoke: the script's own check on a machine without a GPU, tiny shapes in fp32."""
    global SHAPES, ROWS, ATTENTION_SEQS, PERMUTE_TOKENS
    gb.use_cpu()
    SHAPES, ROWS, ATTENTION_SEQS, PERMUTE_TOKENS = gb.SMOKE_SHAPES, [16, 32], (64,), 64


FIELDS = [
    "kind",
    "model",
    "proj",
    "g",
    "m",
    "k",
    "n",
    "ms",
    "fb_ms",
    "tflops",
    "fb_tflops",
    "tb_per_s",
    "pass_bytes",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    ap.add_argument("--quick", action="store_true", help="two models, every third m")
    ap.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU (a test)")
    args = ap.parse_args()
    if args.smoke:
        _smoke()
    args.out.mkdir(parents=True, exist_ok=True)
    env = gb.environment()
    print(env, flush=True)
    (args.out / "environment.txt").write_text(env + "\n")
    torch.manual_seed(0)
    rows: list[dict] = []
    for step in (ceilings, lambda r: expert_linears(r, args.quick), permutation, attention):
        step(rows)
        gb.write_csv(args.out / "moe_kernels.csv", rows, FIELDS)
        print(f"{len(rows)} rows", flush=True)
    for r in rows:
        if r["kind"] in ("ceiling", "permute", "attention") or r.get("m") in (256, 1024, 4096):
            print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()})


if __name__ == "__main__":
    main()
