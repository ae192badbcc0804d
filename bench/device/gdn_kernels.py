"""Measure, on a GPU, the kernels of a Gated DeltaNet layer between its projections, as
Megatron-Core runs them: the evidence for models/expert.py's ``gdn_chunk_per_microbatch_s``.

Usage (a machine with a CUDA GPU, PyTorch and flash-linear-attention, the ``fla-core``
package Megatron-Core imports: 0.4.0 on Triton 3.6, as 0.6 refuses the gated backward on
Hopper below Triton 3.7.1, fla-org issue #640; of this repository it imports only
gpu_bench.py):
    python bench/device/gdn_kernels.py --out DIR [--smoke]
On a machine without the package registry (the lent GPUs), carry it: here,
``pip download --no-deps -d W fla-core==0.4.0 flash-linear-attention==0.4.0 einops
packaging``, each wheel unzipped into ``.device/site`` (git-ignored), and there
``PYTHONPATH=.device/site``.

Megatron-LM at d98e8a64dd (``megatron/core/ssm/gated_delta_net/gdn.py`` and
``common.py``) runs, between ``in_proj`` and ``out_proj`` (GEMMs, priced as GEMMs):
flash-linear-attention's ``causal_conv1d`` with SiLU over the queries, keys and values
(2 d_qk + d_v' channels, kernel k_c); the split, ``l2norm`` of queries and keys, their
heads repeated to the value heads (``repeat_interleave``), the decay
g = -exp(A_log) softplus(a + dt_bias) and the write strength beta = sigmoid(b) in fp32;
``chunk_gated_delta_rule``; and the gated RMSNorm of its output (RMSNorm x SiLU(z) over
each value head). Qwen3-Next's linear layers (the zoo's widths): 16 key heads, 32 value
heads, 128 channels each, kernel 4.

For one micro-batch of B x 4,096 tokens (B in BATCHES), each piece and the whole chain
(``core``) is timed forward and forward + backward (autograd, inputs and parameters
requiring gradients as in training), the median of CUDA-event timings after warm-up, on
random bf16 data. Each piece runs on its own leaf inputs (``prepare`` returns its
outputs concatenated, for one gradient), so the pieces add to more than the chain; the
model takes the chain. FLOPs are Megatron-LM's ``gdn_layer_flops`` terms per token and
forward: the convolution 2 k_c (2 d_qk + d_v'), the delta rule 8 n_v d_v^2; TFLOP/s
count forward + backward as 3 forwards. Before timing, the chunked kernel's output is
checked against a plain recurrence on a small input (``check`` row: the largest
absolute difference). Writes DIR/gdn_kernels.csv and DIR/environment.txt.

``--smoke`` runs the same harness on the CPU with tiny shapes, every piece in plain
PyTorch (the recurrence in place of the chunked kernel): a test of the script.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import gpu_bench as gb
import torch
import torch.nn.functional as F
from gpu_bench import rand

SEQ = 4096
BATCHES = (1, 4)
NK, NV, DK, DV, KC = 16, 32, 128, 128, 4  # Qwen3-Next-80B-A3B's linear attention
FLA = None  # the fla modules, once imported (not on --smoke)


def load_fla() -> None:
    """Megatron-Core's imports (flash-linear-attention up to 0.5); 0.6 moved two modules."""
    global FLA
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule

    try:
        from fla.modules.convolution import causal_conv1d
        from fla.modules.fused_norm_gate import rms_norm_gated
        from fla.modules.l2norm import l2norm
    except ImportError:
        from fla.modules.causal_conv1d.ops import causal_conv1d
        from fla.modules.norm.fused_norm_gate import rms_norm_gated
        from fla.modules.norm.l2norm import l2norm
    FLA = dict(conv=causal_conv1d, l2=l2norm, rule=chunk_gated_delta_rule, norm=rms_norm_gated)


def conv(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Causal depthwise convolution of x [B, T, C] by w [C, k_c], then SiLU."""
    if FLA:
        return FLA["conv"](x=x, weight=w, bias=None, activation="silu")[0]
    y = F.conv1d(F.pad(x.transpose(1, 2), (w.shape[1] - 1, 0)), w[:, None], groups=w.shape[0])
    return F.silu(y).transpose(1, 2)


def l2(x: torch.Tensor) -> torch.Tensor:
    return FLA["l2"](x) if FLA else F.normalize(x.float(), dim=-1, eps=1e-6).to(x.dtype)


def recurrence(q, k, v, g, beta):
    """The gated delta rule token by token, in fp32 (S: [B, H, K, V]): S = exp(g) S;
    u = beta (v - S^T k); S += k u^T; o = S^T q / sqrt(K)."""
    q, k, v, g, beta = (x.float() for x in (q, k, v, g, beta))
    b, t, h, dk = k.shape
    s = torch.zeros(b, h, dk, v.shape[-1], device=q.device)
    out = []
    for i in range(t):
        s = s * g[:, i, :, None, None].exp()
        u = beta[:, i, :, None] * (v[:, i] - torch.einsum("bhkv,bhk->bhv", s, k[:, i]))
        s = s + torch.einsum("bhk,bhv->bhkv", k[:, i], u)
        out.append(torch.einsum("bhkv,bhk->bhv", s, q[:, i]) * dk**-0.5)
    return torch.stack(out, 1).to(v.dtype)


def rule(q, k, v, g, beta):
    if FLA:
        return FLA["rule"](q=q, k=k, v=v, g=g, beta=beta, use_qk_l2norm_in_kernel=False)[0]
    return recurrence(q, k, v, g, beta)


def gated_norm(o: torch.Tensor, z: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """RMSNorm over each value head, times SiLU of the gate z."""
    if FLA:
        return FLA["norm"](o, z, w, None, activation="swish", eps=1e-6)
    rms = o.float().pow(2).mean(-1, keepdim=True).add(1e-6).rsqrt()
    return (o.float() * rms * w.float() * F.silu(z.float())).to(o.dtype)


class Layer:
    """One Gated DeltaNet layer's tensors between its projections (module docstring)."""

    def __init__(self, b: int, t: int, nk: int, nv: int, dk: int, dv: int, kc: int):
        self.shape = (b, t, nk, nv, dk, dv)
        self.qkv = rand(b, t, 2 * nk * dk + nv * dv, grad=True)
        self.z = rand(b, t, nv, dv, grad=True)
        self.a = rand(b, t, nv, grad=True)
        self.b = rand(b, t, nv, grad=True)
        self.w_conv = rand(2 * nk * dk + nv * dv, kc, grad=True, scale=kc**-0.5)
        self.a_log = torch.zeros(nv, device=gb.DEVICE, requires_grad=True)
        self.dt_bias = torch.zeros(nv, device=gb.DEVICE, requires_grad=True)
        self.w_norm = torch.ones(dv, device=gb.DEVICE, dtype=gb.DTYPE, requires_grad=True)
        self.params = [self.qkv, self.z, self.a, self.b, self.w_conv, self.a_log]
        self.params += [self.dt_bias, self.w_norm]

    def prepare(self, y: torch.Tensor):
        """Split, l2norm, heads repeated, gates (Megatron's _prepare_input_for_gated_delta_rule)."""
        b, t, nk, nv, dk, dv = self.shape
        qk, v = torch.split(y, [2 * nk * dk, nv * dv], dim=-1)
        qk = l2(qk.reshape(b, t, 2 * nk, dk).contiguous())
        q, k = (x.repeat_interleave(nv // nk, dim=2) for x in torch.split(qk, [nk, nk], dim=2))
        g = -self.a_log.exp() * F.softplus(self.a.float() + self.dt_bias)
        beta = self.b.sigmoid()
        return q, k, v.reshape(b, t, nv, dv).contiguous(), g, beta

    def core(self) -> torch.Tensor:
        o = rule(*self.prepare(conv(self.qkv, self.w_conv)))
        return gated_norm(o, self.z, self.w_norm)


def pieces(layer: Layer) -> dict:
    """Each piece as a function of leaf tensors, the chain last."""
    y = rand(*layer.qkv.shape, grad=True)
    q, k, v, g, beta = (x.detach().requires_grad_() for x in layer.prepare(y))
    o = rand(*layer.z.shape, grad=True)
    return {
        "conv": (lambda: conv(layer.qkv, layer.w_conv), [layer.qkv, layer.w_conv]),
        "prepare": (lambda: torch.cat([x.flatten() for x in layer.prepare(y)[:3]]), [y]),
        "delta_rule": (lambda: rule(q, k, v, g, beta), [q, k, v, g, beta]),
        "gated_norm": (lambda: gated_norm(o, layer.z, layer.w_norm), [o, layer.z]),
        "core": (layer.core, layer.params),
    }


def check(rows: list[dict]) -> None:
    """The chunked kernel against the recurrence on a small input."""
    torch.manual_seed(0)
    b, t, h, d = 1, 256, 4, 64
    q, k = (F.normalize(torch.randn(b, t, h, d, device=gb.DEVICE), dim=-1) for _ in range(2))
    v = torch.randn(b, t, h, d, device=gb.DEVICE)
    g = -F.softplus(torch.randn(b, t, h, device=gb.DEVICE))
    beta = torch.rand(b, t, h, device=gb.DEVICE)
    args = [x.to(gb.DTYPE) for x in (q, k, v)] + [g, beta.to(gb.DTYPE)]
    diff = (rule(*args).float() - recurrence(q, k, v, g, beta).float()).abs().max().item()
    rows.append(dict(piece="check", batch=b, seq=t, max_abs_diff=diff))
    print(f"chunked kernel vs recurrence: max |difference| {diff:.3g}", flush=True)


def measure(rows: list[dict], batch: int, seq: int, widths: tuple) -> None:
    nk, nv, dk, dv, kc = widths
    layer = Layer(batch, seq, nk, nv, dk, dv, kc)
    tokens = batch * seq
    flops = {
        "conv": 2.0 * kc * (2 * nk * dk + nv * dv) * tokens,
        "delta_rule": 8.0 * nv * dv * dv * tokens,
    }
    flops["core"] = flops["conv"] + flops["delta_rule"]
    for piece, (fn, params) in pieces(layer).items():
        out = fn()
        dy = torch.randn_like(out)
        times = gb.forward_and_both(fn, params, dy)
        row = dict(piece=piece, batch=batch, seq=seq)
        row |= gb.rates(times, flops.get(piece, 0.0), 3.0)
        row["out_bytes"] = out.numel() * out.element_size()
        rows.append(row)
        print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()})
        del out, dy
    del layer
    gb.free()


FIELDS = ["piece", "batch", "seq", "ms", "fb_ms", "tflops", "fb_tflops", "out_bytes"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    ap.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU (a test)")
    args = ap.parse_args()
    batches, seq, widths = BATCHES, SEQ, (NK, NV, DK, DV, KC)
    if args.smoke:
        gb.use_cpu()
        batches, seq, widths = (1,), 32, (2, 4, 8, 8, 4)
        extra = ""
    else:
        load_fla()
        import fla
        import triton

        extra = f"flash-linear-attention (fla-core) {fla.__version__}, triton {triton.__version__}"
    args.out.mkdir(parents=True, exist_ok=True)
    env = gb.environment(extra)
    print(env, flush=True)
    (args.out / "environment.txt").write_text(env + "\n")
    rows: list[dict] = []
    check(rows)
    for batch in batches:
        measure(rows, batch, seq, widths)
        gb.write_csv(args.out / "gdn_kernels.csv", rows, FIELDS + ["max_abs_diff"])


if __name__ == "__main__":
    main()
