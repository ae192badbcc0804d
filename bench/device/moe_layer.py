"""Measure, on a GPU, one mixture-of-experts layer's computation as one GPU of an EP
group runs it, piece by piece and whole: the evidence for models/expert.py's MoE
compute terms (router, permutation, grouped GEMMs, routed element-wise work), without
the all-to-all (one GPU: balanced routing makes each GPU receive as many routed copies
as it sends, T x k).

Usage (a machine with a CUDA GPU and PyTorch; of this repository it imports only gpu_bench.py):
    python bench/device/moe_layer.py --out DIR [--smoke]

For each model of SHAPES and EP in EPS, T tokens of hidden h on the GPU, bf16:

- ``router``: the router's GEMM (h -> E), softmax in fp32 and top-k, forward and backward;
- ``permute``: the T k copies gathered expert by expert (``index_select``), as
  Megatron-Core's permutation and Transformer Engine's fused permute do (one read and
  one write of the k-expanded tokens forward, the scatter back in backward);
- ``experts``: E / EP local experts, T k copies spread evenly over them (m = T k EP / E
  rows each): the grouped up-projection (h -> 2 f), SwiGLU, the grouped down-projection
  (f -> h), through ``torch._grouped_mm``;
- ``unpermute``: the copies weighted by their routing probabilities and summed back to
  their tokens; ``scatter`` by ``index_add`` (Megatron-Core's unfused unpermute is a
  ``scatter_add_``), ``gather`` by the inverse permutation and a sum over k (as fused
  unpermute kernels do);
- ``layer``: all of it chained (router -> permute -> experts -> gather unpermute).

Each is timed forward and forward + backward (autograd), the median of CUDA-event
timings after warm-up, on random data. Writes DIR/moe_layer.csv and prints a table.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import gpu_bench as gb
import torch
import torch.nn.functional as F
from gpu_bench import rand

SHAPES = gb.SHAPES
EPS = (2, 8, 32)
TOKENS = (4096, 16384)  # one micro-batch of 1 x 4,096 and 4 x 4,096


class Layer:
    """One EP rank's MoE layer (module docstring): its weights and routing."""

    def __init__(self, t: int, h: int, f: int, experts: int, k: int, ep: int):
        self.t, self.h, self.f, self.k = t, h, f, k
        self.g = experts // ep
        self.rows = t * k // self.g  # per local expert (balanced)
        self.x = rand(t, h, grad=True)
        self.wr = rand(experts, h, grad=True, scale=h**-0.5)
        self.w1 = rand(self.g, 2 * f, h, grad=True, scale=h**-0.5)
        self.w2 = rand(self.g, h, f, grad=True, scale=f**-0.5)
        self.offs = torch.arange(1, self.g + 1, device=gb.DEVICE, dtype=torch.int32) * self.rows
        self.experts = experts

    def route(self, x):
        scores = F.linear(x, self.wr).float().softmax(-1)
        probs, idx = torch.topk(scores, self.k, dim=-1)
        return probs, idx

    def order(self, idx):
        """Copies sorted by expert (stable), and each copy's token."""
        flat = idx.reshape(-1)
        sort = torch.argsort(flat, stable=True)
        return sort, sort // self.k

    def experts_fwd(self, xs):
        up = torch._grouped_mm(xs, self.w1.transpose(-2, -1), offs=self.offs)
        a, b = up.chunk(2, dim=-1)
        return torch._grouped_mm(F.silu(a) * b, self.w2.transpose(-2, -1), offs=self.offs)

    def unpermute_scatter(self, ys, token, probs_sorted):
        out = torch.zeros(self.t, self.h, device=gb.DEVICE, dtype=ys.dtype)
        return out.index_add(0, token, ys * probs_sorted[:, None])

    def unpermute_gather(self, ys, sort, probs):
        inverse = torch.empty_like(sort)
        inverse[sort] = torch.arange(sort.numel(), device=gb.DEVICE)
        back = ys.index_select(0, inverse).view(self.t, self.k, self.h)
        return (back * probs.to(ys.dtype)[..., None]).sum(1)


def pieces(L: Layer):
    """name -> (forward closure producing a tensor, gradient-shaped like its output)."""
    with torch.no_grad():
        probs, idx = L.route(L.x)
    sort, token = L.order(idx)
    probs_sorted = probs.reshape(-1)[sort].to(gb.DTYPE)
    xs = rand(L.t * L.k, L.h, grad=True)  # the received copies, as the experts see them
    ys = rand(L.t * L.k, L.h, grad=True)

    def layer():
        p, i = L.route(L.x)
        s, tok = L.order(i)
        return L.unpermute_gather(L.experts_fwd(L.x.index_select(0, tok)), s, p)

    return {
        "router": lambda: L.route(L.x)[0],
        "permute": lambda: L.x.index_select(0, token),
        "experts": lambda: L.experts_fwd(xs),
        "unpermute_scatter": lambda: L.unpermute_scatter(ys, token, probs_sorted),
        "unpermute_gather": lambda: L.unpermute_gather(ys, sort, probs),
        "layer": layer,
    }


def measure(rows: list[dict], name: str, t: int, h: int, f: int, e: int, k: int, ep: int):
    L = Layer(t, h, f, e, k, ep)
    params = [L.x, L.wr, L.w1, L.w2]
    where = dict(model=name, tokens=t, ep=ep, local_experts=L.g, rows=L.rows, h=h, f=f)
    for piece, fn in pieces(L).items():
        try:
            f_ms, fb_ms = gb.forward_and_both(fn, params, torch.randn_like(fn()))
        except Exception as err:  # a kernel this build lacks: say so, go on
            print(f"{name} ep{ep} t{t} {piece}: {err}", file=sys.stderr)
            continue
        rows.append(where | dict(experts=e, k=k, piece=piece, ms=f_ms, fb_ms=fb_ms))


def main() -> None:
    global SHAPES, EPS, TOKENS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    ap.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU (a test)")
    args = ap.parse_args()
    if args.smoke:
        gb.use_cpu()
        SHAPES, EPS, TOKENS = gb.SMOKE_SHAPES, (2,), (64,)
    args.out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    rows: list[dict] = []
    for name, h, f, e, k in SHAPES:
        for ep in EPS:
            if e // ep < 1:
                continue
            for t in TOKENS:
                measure(rows, name, t, h, f, e, k, ep)
                gb.free()
        gb.write_csv(args.out / "moe_layer.csv", rows)
        print(f"{name}: {len(rows)} rows", flush=True)
    for r in rows:
        print(
            f"{r['model']:20s} t{r['tokens']:6d} ep{r['ep']:3d} g{r['local_experts']:4d} "
            f"m{r['rows']:6d} {r['piece']:18s} {r['ms']:8.3f} {r['fb_ms']:8.3f}"
        )


if __name__ == "__main__":
    main()
