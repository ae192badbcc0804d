"""The model as Megatron-LM flags, both ways: the flags that build a TransformerSpec, and
the spec a command builds, Megatron-LM's own defaults applied to every flag it leaves out
(designer/data/launch/megatron_defaults.yaml, pinned to a Megatron-LM commit with the line
of each default). A flag the emitter forgets therefore imports as a different model.

Megatron-LM expresses: learned absolute positions or RoPE (base, rotary share, Llama 3.1
scaling with low 1 / high 4 / original 8192, and YaRN for latent attention: --rope-type
yarn --rotary-scaling-factor --mscale --mscale-all-dim, MLATransformerConfig's
original length 4096 and beta 32 / 1), LayerNorm or RMSNorm, biases on every linear
layer or QKV only, attention and hidden dropout, plain GeLU, tanh GeLU, squared ReLU or
SwiGLU, GQA, an explicit head width (--kv-channels), query/key norms (--qk-layernorm:
Qwen 3's per-head norms; with latent attention, the q_lora and kv_lora norms), tied or
untied embeddings, the router's score function, expert bias, top-k scale and groups.
Models outside that (ALiBi, gated GeLU, other RoPE scalings, GPT-OSS, OLMo 2's
full-width query/key norms, Qwen2-MoE's shared-expert gate) get a one-line refusal.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from typing import Any, NoReturn

import yaml

from models import TransformerSpec
from models.transformer import RopeScaling

# MLATransformerConfig's YaRN constants that no flag sets (megatron-core 0.19
# transformer_config.py: original_max_position_embeddings 4096, beta_fast 32, beta_slow 1)
MLA_YARN_FIXED = {"original_max_position_embeddings": 4096, "beta_fast": 32.0, "beta_slow": 1.0}
# Megatron-LM's Llama 3.1 RoPE scaling (rotary_pos_embedding.py _apply_scaling defaults)
LLAMA3_SCALING = {
    "type": "llama3",
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}
NORMALIZATION = {"layernorm": "LayerNorm", "rmsnorm": "RMSNorm"}
# (activation, gated) -> the switch that selects it (None: Megatron's default GeLU)
ACTIVATION_SWITCH: dict[tuple[str, bool], str | None] = {
    ("gelu", False): None,
    ("silu", True): "swiglu",
    ("squared_relu", False): "squared_relu",
    ("gelu_tanh", False): "openai_gelu",
}


@cache
def defaults() -> dict[str, Any]:
    """designer/data/launch/megatron_defaults.yaml."""
    path = resources.files("designer") / "data" / "launch" / "megatron_defaults.yaml"
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def default(setting: str) -> Any:
    """Megatron-LM's value of one setting when its flag is absent."""
    return defaults()["defaults"][setting]["value"]


def unsupported(spec: TransformerSpec) -> str | None:
    """Why Megatron-LM's pretrain_gpt.py flags cannot build this model, or None."""
    if spec.has_linear_attention or spec.attention_output_gate:
        return (
            "Gated DeltaNet linear-attention layers and the gated attention's output gate "
            "(Qwen3-Next) are not written by the designer's Megatron-LM flags: a launch would "
            "train a different model"
        )
    if spec.qk_norm_full or spec.shared_expert_gate:
        return _unwritten_norm_or_gate(spec)
    if spec.position_embedding == "alibi":
        return (
            "ALiBi positions (BLOOM) have no Megatron-LM flag (--position-embedding-type takes "
            "learned_absolute, rope, mrope, relative, none); BLOOM was trained with "
            "bigscience-workshop/Megatron-DeepSpeed"
        )
    if (spec.activation, spec.gated_mlp) not in ACTIVATION_SWITCH:
        gate = "gated " if spec.gated_mlp else ""
        return (
            f"a {gate}{spec.activation} MLP has no Megatron-LM flag (it builds GeLU, tanh GeLU, "
            "squared ReLU or SwiGLU)"
        )
    scaling = spec.rope_scaling
    if scaling is not None and spec.position_embedding != "rope":
        return "RoPE scaling without RoPE positions"
    if scaling is not None and scaling.type == "yarn":
        return _yarn_unsupported(spec)
    if scaling is not None:
        fixed = {k: getattr(scaling, k) for k in LLAMA3_SCALING}
        if fixed != LLAMA3_SCALING or scaling.factor is None:
            return (
                f"RoPE scaling {scaling.type!r} with these parameters has no Megatron-LM flag "
                "(--use-rope-scaling is Llama 3.1's rule with low 1, high 4, original 8192)"
            )
    return None


def _unwritten_norm_or_gate(spec: TransformerSpec) -> str:
    """OLMo 2's full-width query/key norms (Megatron-LM core_v0.19's --qk-layernorm builds
    one norm per head) or Qwen2-MoE's shared-expert gate (--moe-shared-expert-gate, which
    the designer does not write): a launch would train a different model."""
    if spec.qk_norm_full:
        return (
            "query and key norms over the whole projection (OLMo 2's qk_norm_full) have no "
            "Megatron-LM flag (--qk-layernorm builds one norm per head): a launch would "
            "train a different model"
        )
    return (
        "the shared experts' sigmoid gate (Qwen2-MoE's shared_expert_gate) is not written by "
        "the designer's Megatron-LM flags: a launch would train a different model"
    )


def _yarn_unsupported(spec: TransformerSpec) -> str | None:
    """YaRN as Megatron-LM builds it for latent attention (DeepSeek-V3), or why not."""
    scaling = spec.rope_scaling
    assert scaling is not None
    if not spec.is_mla:
        return (
            "YaRN RoPE without latent attention is GPT-OSS's, whose attention sinks, "
            "alternating 128-token sliding window and clamped SwiGLU the spec does not hold "
            "(Megatron-LM core_v0.19 would need --softmax-type learnable, --window-size, "
            "--window-attn-skip-freq, --quick-geglu, --glu-linear-offset, "
            "--activation-func-clamp-value): a launch would train a different model"
        )
    got = {k: getattr(scaling, k) for k in MLA_YARN_FIXED}
    if any(v is not None and v != MLA_YARN_FIXED[k] for k, v in got.items()) or not scaling.factor:
        return (
            f"YaRN with {got} has no Megatron-LM flag (latent attention fixes original 4096, "
            "beta_fast 32, beta_slow 1; --rotary-scaling-factor sets the factor)"
        )
    return None


def model_flags(
    spec: TransformerSpec, max_positions: int, dispatcher: str = "alltoall"
) -> list[tuple[str, object]]:
    """(setting, value or None for a switch) for every architecture field, written whether
    or not it equals Megatron's default, so the command says what it trains; a MoE model's
    token ``dispatcher`` as moe_flags writes it."""
    out: list[tuple[str, object]] = [
        ("layers", spec.layers),
        ("hidden", spec.hidden),
        ("ffn_hidden", spec.ffn),
        ("heads", spec.heads),
        ("kv_channels", spec.head_dim),
    ]
    if spec.kv != spec.heads:
        out += [("group_query_attention", None), ("query_groups", spec.kv)]
    if spec.qk_norm or spec.is_mla:
        out.append(("qk_layernorm", None))
    out += moe_flags(spec, dispatcher)
    switch = ACTIVATION_SWITCH[(spec.activation, spec.gated_mlp)]
    if switch is not None:
        out.append((switch, None))
    if not spec.tied_embeddings:
        out.append(("untie_embeddings", None))
    out.append(("position_embedding", spec.position_embedding))
    if spec.position_embedding == "rope":
        out += [("rope_base", _number(spec.rope_base)), ("rope_percent", spec.rope_percent)]
        out += _scaling_flags(spec)
    out += [
        ("normalization", NORMALIZATION[spec.normalization]),
        ("norm_eps", spec.norm_eps),
    ]
    if not spec.linear_bias:
        out.append(("disable_bias_linear", None))
        if spec.qkv_bias:
            out.append(("add_qkv_bias", None))
    out += [
        ("attention_dropout", spec.attention_dropout),
        ("hidden_dropout", spec.hidden_dropout),
        ("max_position_embeddings", max_positions),
        ("vocab", spec.vocab),
    ]
    return out


def _scaling_flags(spec: TransformerSpec) -> list[tuple[str, object]]:
    """Llama 3.1 scaling, or YaRN for latent attention (unsupported() refuses the rest)."""
    scaling = spec.rope_scaling
    if scaling is None:
        return [("rope_type", "rope")] if spec.is_mla else []
    if scaling.type == "yarn":
        return [
            ("rope_type", "yarn"),
            ("rotary_scaling_factor", scaling.factor),
            ("mscale", 1.0 if scaling.mscale is None else scaling.mscale),
            ("mscale_all_dim", 0.0 if scaling.mscale_all_dim is None else scaling.mscale_all_dim),
        ]
    return [("use_rope_scaling", None), ("rope_scaling_factor", scaling.factor)]


def router_flags(spec: TransformerSpec) -> list[tuple[str, object]]:
    """The router: score function, expert bias, top-k scale and group-limited routing."""
    out: list[tuple[str, object]] = [("router_score", spec.router_score)]
    if spec.router_expert_bias:
        out.append(("router_expert_bias", None))
    if spec.router_topk_scale != 1.0:
        out.append(("router_topk_scale", _number(spec.router_topk_scale)))
    if spec.router_groups is not None:
        out += [
            ("router_groups", spec.router_groups),
            ("router_group_topk", spec.router_group_topk),
        ]
    return out


def moe_flags(spec: TransformerSpec, dispatcher: str = "alltoall") -> list[tuple[str, object]]:
    """The experts, latent attention and multi-token prediction as Megatron-LM flags: the
    MoE layers as an explicit --moe-layer-freq pattern (Megatron's integer form puts layer
    0 first, the designer's leading dense layers and every n-th layer need the list),
    the plan's token dispatcher (``dispatcher`` "alltoall": the all-to-all one; "deepep":
    the flex dispatcher with its DeepEP backend, megatron-core 0.19.2's
    --moe-flex-dispatcher-backend), grouped GEMMs and fused permutation that
    models/expert.py prices; n shared experts as one of n x their width
    (--moe-shared-expert-intermediate-size is the total)."""
    out: list[tuple[str, object]] = []
    if spec.is_moe:
        out += [
            ("experts", spec.experts),
            ("moe_topk", spec.experts_per_token),
            ("moe_ffn_hidden", spec.expert_ffn),
            *router_flags(spec),
        ]
        if spec.shared_experts:
            out.append(("moe_shared_ffn", spec.shared_experts * spec.shared_expert_ffn))
        out += [
            ("moe_layer_freq", layer_pattern_text(spec)),
            *(
                [("moe_dispatcher", "flex"), ("moe_flex_backend", "deepep")]
                if dispatcher == "deepep"
                else [("moe_dispatcher", "alltoall")]
            ),
            ("moe_grouped_gemm", None),
            ("moe_permute_fusion", None),
        ]
    if spec.is_mla:
        out.append(("mla", None))
        if spec.q_lora_rank is not None:
            out.append(("q_lora_rank", spec.q_lora_rank))
        out += [
            ("kv_lora_rank", spec.kv_lora_rank),
            ("qk_head_dim", spec.qk_head_dim),
            ("qk_rope_head_dim", spec.qk_rope_head_dim),
            ("v_head_dim", spec.v_head_dim),
        ]
    if spec.mtp_layers:
        out.append(("mtp_layers", spec.mtp_layers))
    return out


def layer_pattern_text(spec: TransformerSpec) -> str:
    """--moe-layer-freq as Megatron's list expression: the leading dense layers, then every
    n-th layer MoE (models.moe.moe_layer_pattern), e.g. "([0]*3+[1]*58)" or
    "(([0]*1+[1])*24)"."""
    d, n = spec.dense_layers, spec.moe_layer_every
    rest = spec.layers - d
    terms = [f"[0]*{d}"] if d else []
    if n == 1:
        terms.append(f"[1]*{rest}")
    else:
        terms.append(f"([0]*{n - 1}+[1])*{rest // n}")
        if rest % n:
            terms.append(f"[0]*{rest % n}")
    return "(" + "+".join(terms) + ")"


MAX_PATTERN_CHARS = 100_000
"""The longest --moe-layer-freq read: a list of 0 and 1 for ten thousand layers is 30,000
characters; a repeat such as ``([0]*1+[1])*24`` spells any published model in a few."""
MAX_PATTERN_LAYERS = 100_000
"""The most layers a --moe-layer-freq list may hold at any step of its evaluation, checked
before each ``+`` or ``*`` builds it (as designer/launch/pipeline_layout.py's
MAX_UNROLLED_CHARS caps a layout): a thousand times a published model's ~100 layers.
``[1]*99999999999`` would otherwise build gigabytes (or run out of memory) before any check."""
MAX_PATTERN_INT = 10**18
"""The largest integer a pattern may hold (a literal or a product of them)."""
MAX_PATTERN_DEPTH = 32
"""The deepest parentheses a pattern may nest (Python's parser stops at 200)."""


def layer_pattern(text: str, layers: int) -> tuple[bool, ...]:
    """--moe-layer-freq's value as Megatron reads it (``moe_freq_type``: an integer N, layer
    i MoE when i % N == 0; or a list expression of 0 and 1), evaluated without ``eval`` or
    ``ast`` (whose parser recursed past Python's limit on ~5,000 ``+`` terms): integers,
    lists of integer literals, parentheses, + and * only, every list's length checked
    before it is built. ValueError on anything else."""
    if len(text) > MAX_PATTERN_CHARS:
        raise ValueError(
            f"{len(text):,} characters; a pattern has at most {MAX_PATTERN_CHARS:,} (write "
            "repeats, such as ([0]*1+[1])*24)"
        )
    shown = repr(text) if len(text) <= 60 else repr(text[:57] + "...")
    reader = _PatternReader(re.findall(r"\d+|\S", text), shown)
    got = reader.expression(0)
    if reader.peek() is not None:
        reader.fail(f"unexpected {reader.peek()!r}")
    if isinstance(got, int):
        if got < 1:
            raise ValueError(f"{got} must be at least 1")
        return tuple(i % got == 0 for i in range(layers))
    if len(got) != layers or set(got) - {0, 1}:
        listed = f"; it lists {len(got):,}" if len(got) != layers else ""
        raise ValueError(f"{shown} must list 0 or 1 for each of the {layers} layers{listed}")
    return tuple(bool(x) for x in got)


_Value = int | tuple[int, ...]


class _PatternReader:
    """A --moe-layer-freq expression's tokens (integers and single characters), read by
    precedence: ``+`` of ``*`` of integers, lists and parenthesised expressions. Only
    parentheses recurse, at most MAX_PATTERN_DEPTH deep."""

    def __init__(self, tokens: list[str], shown: str) -> None:
        self.tokens, self.shown, self.i = tokens, shown, 0

    def fail(self, why: str) -> NoReturn:
        raise ValueError(f"{self.shown} is not an integer or a list pattern of 0 and 1 ({why})")

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> str | None:
        token = self.peek()
        self.i += 1
        return token

    def expression(self, depth: int) -> _Value:
        total = self.product(depth)
        while self.peek() == "+":
            self.i += 1
            total = self.combine(total, "+", self.product(depth))
        return total

    def product(self, depth: int) -> _Value:
        out = self.atom(depth)
        while self.peek() == "*":
            self.i += 1
            out = self.combine(out, "*", self.atom(depth))
        return out

    def atom(self, depth: int) -> _Value:
        token = self.take()
        if token is not None and token.isdigit():
            return self.integer(token)
        if token == "[":
            return self.listing()
        if token == "(":
            if depth >= MAX_PATTERN_DEPTH:
                self.fail(f"parentheses nested more than {MAX_PATTERN_DEPTH} deep")
            inner = self.expression(depth + 1)
            if self.take() != ")":
                self.fail("a '(' without its ')'")
            return inner
        self.fail("the end of the text" if token is None else f"unexpected {token!r}")

    def listing(self) -> tuple[int, ...]:
        items: list[int] = []
        while self.peek() != "]":
            token = self.take()
            if token is None or not token.isdigit():
                self.fail(f"a list holds the integers 0 and 1, got {token or 'the end'!r}")
            items.append(self.integer(token))
            if self.peek() == ",":
                self.i += 1
            elif self.peek() != "]":
                self.fail("a list's integers are separated by commas")
            self.sized(len(items))
        self.i += 1
        return tuple(items)

    def integer(self, token: str) -> int:
        if len(token) > len(str(MAX_PATTERN_INT)) or int(token) > MAX_PATTERN_INT:
            self.fail(f"{token[:20]}{'...' if len(token) > 20 else ''} is past 10^18")
        return int(token)

    def sized(self, n: int) -> None:
        if n > MAX_PATTERN_LAYERS:
            raise ValueError(
                f"{self.shown} would list {n:,} layers; a pattern lists at most "
                f"{MAX_PATTERN_LAYERS:,} (one 0 or 1 per layer)"
            )

    def combine(self, a: _Value, op: str, b: _Value) -> _Value:
        """``a op b`` as Python computes it, the result's size checked before it is built."""
        if isinstance(a, int) and isinstance(b, int):
            out = a + b if op == "+" else a * b
            if abs(out) > MAX_PATTERN_INT:
                self.fail("a number past 10^18")
            return out
        if op == "+":
            if isinstance(a, int) or isinstance(b, int):
                self.fail("+ joins two lists or two integers")
            self.sized(len(a) + len(b))
            return a + b
        if isinstance(a, tuple) and isinstance(b, int):
            items, n = a, b
        elif isinstance(a, int) and isinstance(b, tuple):
            items, n = b, a
        else:
            self.fail("* repeats a list a whole number of times")
        self.sized(len(items) * max(n, 0))
        return items * n


def _number(x: float) -> object:
    return int(x) if float(x).is_integer() else x


def activation_from(switches: set[str]) -> tuple[str, bool]:
    """(activation, gated) from the activation switches given (at most one)."""
    for (activation, gated), switch in ACTIVATION_SWITCH.items():
        if switch is not None and switch in switches:
            return activation, gated
    return str(default("activation")), bool(default("gated_mlp"))


def spec_fields(flags: dict[str, Any], hidden: int, heads: int) -> dict[str, Any]:
    """The architecture fields of the spec for parsed flag values (``flags`` maps a setting
    to its value, or True for a switch given), Megatron's defaults for the absent ones."""

    def get(setting: str, key: str | None = None) -> Any:
        value = flags.get(setting)
        return default(key or setting) if value is None else value

    position = get("position_embedding")
    scaling = None
    if flags.get("use_rope_scaling"):
        factor = flags.get("rope_scaling_factor")  # 0 is refused by RopeScaling, not missing
        factor = default("rope_scaling_factor") if factor is None else factor
        scaling = RopeScaling(**LLAMA3_SCALING, factor=float(factor))
    elif flags.get("mla") and (flags.get("rope_type") or "yarn") == "yarn":
        scaling = mla_yarn(flags)
    linear_bias = not flags.get("disable_bias_linear") and bool(default("linear_bias"))
    normalization = {v: k for k, v in NORMALIZATION.items()}[
        flags.get("normalization") or NORMALIZATION[default("normalization")]
    ]
    return {
        "head_dim": head_width(flags.get("kv_channels"), hidden, heads),
        "position_embedding": position,
        "rope_base": float(get("rope_base")),
        "rope_percent": float(get("rope_percent")),
        "rope_scaling": scaling if position == "rope" else None,
        "normalization": normalization,
        "norm_eps": float(get("norm_eps")),
        "linear_bias": linear_bias,
        "qkv_bias": bool(flags.get("add_qkv_bias")) and not linear_bias,
        "attention_dropout": float(get("attention_dropout")),
        "hidden_dropout": float(get("hidden_dropout")),
        "tied_embeddings": not flags.get("untie_embeddings") and bool(default("tied_embeddings")),
        "qk_norm": bool(flags.get("qk_layernorm")),
    }


def head_width(kv_channels: int | None, hidden: int, heads: int) -> int:
    """--kv-channels, or hidden / heads as validate_args derives it when absent; ValueError
    when the heads do not divide the hidden size, which validate_args asserts
    (megatron/training/arguments.py lines 839-841 at NVIDIA/Megatron-LM 000c4ac24f61)."""
    if kv_channels:
        return kv_channels
    if hidden % heads:
        raise ValueError(f"{heads} heads do not divide the hidden size {hidden} (no --kv-channels)")
    return hidden // heads


def mla_yarn(flags: dict[str, Any]) -> RopeScaling | None:
    """YaRN as latent attention builds it (Megatron's default --rope-type for MLA): the
    factor and mscales from the flags (defaults 1.0, 1.0, 0.0), MLA_YARN_FIXED for the
    rest; a factor of 1 scales nothing (None)."""
    given = flags.get("rotary_scaling_factor")  # 0 is refused by RopeScaling, not missing
    factor = 1.0 if given is None else float(given)
    if factor == 1.0:
        return None
    mscale = flags.get("mscale")
    all_dim = flags.get("mscale_all_dim")
    return RopeScaling(
        type="yarn",
        factor=factor,
        mscale=1.0 if mscale is None else float(mscale),
        mscale_all_dim=0.0 if all_dim is None else float(all_dim),
        **MLA_YARN_FIXED,
    )
