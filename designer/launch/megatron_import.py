"""Read an existing Megatron-LM launch command into a model and a layout.

Megatron-LM's own rules (megatron/training/arguments.py, validate_args) decide what
an absent flag means, from designer/data/launch/megatron_defaults.yaml (pinned to a
commit, with the line of each default): learned absolute positions, LayerNorm, biases,
dropout 0.1, tied embeddings, fp32 gradient reduction with --bf16, no
--global-batch-size is micro-batch x DP, no --ffn-hidden-size is 4h (or the SwiGLU
size), the data-parallel degree is the world size over TP x PP x CP. The flag names
are those of designer/data/launch/megatron.yaml and torchrun.yaml. A flag Megatron-LM
does not have at that commit (megatron_arguments.yaml) nor in the release the launch check
runs (megatron_release_arguments.yaml: megatron-core 0.19.2's parser, checked against the
installed release by bench/launch_check_frameworks.py) is a usage error naming it; a
release flag that builds a model the designer does not read (RELEASE_NOT_MODELLED) is
refused, one whose mechanism it does not price (RELEASE_NOT_PRICED) noted; known flags
that do not shape the model or the layout (data, optimizer, logging) are ignored; ones
that contradict each other are usage errors naming the flag.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from catalog.files import MAX_SCRIPT_BYTES, read_text
from designer.errors import UsageError
from designer.launch.megatron_model import (
    activation_from,
    default,
    head_width,
    layer_pattern,
    spec_fields,
)
from designer.launch.pipeline_layout import layout_fields
from designer.launch.script import ExpansionTooLarge, script_command
from designer.launch.vocab import (
    all_flags,
    flag,
    flag_index,
    normalize,
    release_flags,
    vocabulary,
)
from models import Assumptions, Layout, TransformerSpec
from models.feasibility import divisibility_violations
from models.transformer import RopeScaling

if TYPE_CHECKING:  # models.expert imports numpy: commands that never evaluate skip it
    from models.expert import ExpertLayout

OPTION = "--from-megatron"
NAME = "from-megatron"


# ImportedRun's fields that are models.expert.ExpertLayout's of the same names
MOE_FIELDS = (
    "permute_fusion",
    "router_fp32",
    "dispatch_per_domain",
    "ep_overlap",
    "capacity_factor",
    "recompute_modules",
)


@dataclass(frozen=True)
class ImportedRun:
    spec: TransformerSpec
    layout: Layout
    seq_len: int
    tokens: float | None  # train iterations (or samples) x global batch x sequence
    nnodes: int
    nproc_per_node: int
    notes: tuple[str, ...]  # defaults the import had to assume
    grad_reduce_dtype: str = "fp32"  # Megatron's default with --bf16; "bf16" with the flag
    ep: int = 1  # expert parallelism (a mixture-of-experts model; 1 otherwise)
    etp: int = 1  # expert tensor parallelism
    permute_fusion: bool = True  # --moe-permute-fusion (a MoE model without it: False)
    router_fp32: bool = False  # --moe-router-dtype fp32 or fp64 (a MoE model only)
    # the flex dispatcher with DeepEP or HybridEP (_flex_dispatch): per-domain dispatch
    dispatch_per_domain: bool = False
    ep_overlap: float = 0.0  # --overlap-moe-expert-parallel-comm: 1.0, the all-to-alls hidden
    capacity_factor: float | None = None  # --moe-expert-capacity-factor (None: dropless)
    recompute_modules: frozenset[str] = frozenset()  # --recompute-modules, the MoE ones

    def experts(self) -> ExpertLayout:
        """The command's experts and MoE mechanisms (MOE_FIELDS, ExpertLayout's fields of the
        same names) as models.expert prices them."""
        # lazy: models.expert loads numpy; commands that never evaluate do not
        from models.expert import ExpertLayout

        return ExpertLayout(self.ep, self.etp, **{f: getattr(self, f) for f in MOE_FIELDS})

    @property
    def world_size(self) -> int:
        return self.nnodes * self.nproc_per_node

    def assumptions(self, a: Assumptions) -> Assumptions:
        """``a`` with the command's gradient bytes: Megatron-LM with --bf16 keeps and reduces
        fp32 gradients unless --grad-reduce-in-bf16 (validate_args lines 738-745,
        megatron_defaults.yaml grad_reduce_dtype); evaluate and optimize's diff both ask."""
        if self.grad_reduce_dtype == "fp32":
            return a.model_copy(update={"grad_bytes": 4.0})
        return a

    def as_dict(self) -> dict:
        lay = self.layout
        return {
            "nnodes": self.nnodes,
            "nproc_per_node": self.nproc_per_node,
            "num_gpus": self.world_size,
            "model_spec": self.spec.model_dump(),
            "layout": {**lay.as_dict(self.seq_len), "ep": self.ep, "etp": self.etp},
            "tokens": self.tokens,
            "grad_reduce_dtype": self.grad_reduce_dtype,
            "notes": list(self.notes),
        }


def _fail(flag_name: str, message: str) -> UsageError:
    return UsageError(f"{OPTION}: {flag_name}: {message}")


def split_flags(words: list[str]) -> dict[str, list[str]]:
    """--flag value... and --flag=value, normalized; a later flag wins, as in argparse."""
    out: dict[str, list[str]] = {}
    current: str | None = None
    for w in words:
        if w.startswith("--") and len(w) > 2:
            name, eq, value = w.partition("=")
            current = normalize(name)
            out[current] = [value] if eq else []
        elif current is not None:
            out[current].append(w)
    return out


class _Flags:
    """Typed access to one vocabulary's flags in a split command."""

    def __init__(self, framework: str, found: dict[str, list[str]]) -> None:
        self.framework = framework
        self.raw = found  # every flag of the command, normalized, the vocabulary's or not
        index = flag_index(framework)
        self.values: dict[str, list[str]] = {}
        self.spelled: dict[str, str] = {}
        for name, values in found.items():
            if name in index:
                self.values[index[name]] = values
                self.spelled[index[name]] = name

    def name(self, setting: str) -> str:
        return self.spelled.get(setting) or flag(self.framework, setting)

    def given(self, setting: str) -> bool:
        return setting in self.values

    def switch(self, setting: str) -> bool:
        return setting in self.values

    def text(self, setting: str) -> str | None:
        values = self.values.get(setting)
        if values is None:
            return None
        if not values:
            raise _fail(
                self.name(setting),
                "takes one value, got none (a shell variable the script does not set "
                "expands to nothing); give the value",
            )
        if len(values) != 1:
            raise _fail(self.name(setting), f"takes one value, got {len(values)}: {values}")
        return self._chosen(setting, values)[0]

    def words(self, setting: str) -> list[str] | None:
        """A flag of any number of values (argparse nargs='*'), each checked against its
        choices; None when the flag is absent."""
        values = self.values.get(setting)
        return None if values is None else self._chosen(setting, values)

    def _chosen(self, setting: str, values: list[str]) -> list[str]:
        """``values``, each one of the setting's choices where the vocabulary lists them."""
        choices = vocabulary(self.framework)["flags"][setting].get("choices")
        for value in values:
            if choices and value not in choices:
                raise _fail(self.name(setting), f"{value!r} is not one of {', '.join(choices)}")
        return list(values)

    def integer(self, setting: str, default: int | None = None) -> int | None:
        text = self.text(setting)
        if text is None:
            return default
        try:
            value = int(text)
        except ValueError:
            hint = " (a shell variable the script does not set?)" if "$" in text else ""
            raise _fail(self.name(setting), f"{text!r} is not a whole number{hint}") from None
        if value < 1:
            raise _fail(self.name(setting), f"must be at least 1 (got {value})")
        return value

    def number(self, setting: str) -> float | None:
        text = self.text(setting)
        if text is None:
            return None
        try:
            return float(text)
        except ValueError:
            raise _fail(self.name(setting), f"{text!r} is not a number") from None

    def raw_value(self, name: str) -> str | None:
        """The one value of a flag outside the vocabulary (``name`` normalized), or None."""
        values = self.raw.get(name)
        if values is None:
            return None
        if len(values) != 1:
            raise _fail(name, f"takes one value, got {len(values)}: {values}")
        return values[0]

    def raw_count(self, name: str, default: int) -> int:
        """A whole-number flag outside the vocabulary, ``default`` when absent."""
        text = self.raw_value(name)
        if text is None:
            return default
        try:
            return int(text)
        except ValueError:
            raise _fail(name, f"{text!r} is not a whole number") from None

    def required(self, setting: str, why: str) -> int:
        value = self.integer(setting)
        if value is None:
            raise _fail(flag(self.framework, setting), f"missing; {why}")
        return value


def _nnodes(launcher: _Flags) -> int:
    text = launcher.text("nnodes")
    if text is not None and ":" in text:  # torchrun's elastic MIN:MAX
        low, _, high = text.partition(":")
        if low != high:
            raise _fail(
                launcher.name("nnodes"),
                f"elastic range {text!r}; give one node count to evaluate a fixed layout",
            )
        launcher.values["nnodes"] = [low]
    return launcher.integer("nnodes", 1) or 1


ACTIVATION_SWITCHES = ("swiglu", "squared_relu", "openai_gelu")
# Megatron-LM flags that build a model the designer does not model: refused, never ignored
NOT_MODELLED = {
    "--quick-geglu": "the quick-GeGLU MLP is not modelled",
    "--window-size": "sliding-window attention is not modelled",
    "--num-layers-at-start-in-bf16": "mixed bf16/fp8 layers are not modelled",
}
# flags of the checked release (megatron_release_arguments.yaml) that build a model the
# designer does not read from a command: refused, naming the flag (not priced as another)
RELEASE_NOT_MODELLED = {
    "--experimental-attention-variant": "Gated DeltaNet and DSA layers are not read from a "
    "command (evaluate --model qwen3-next-80b-a3b, or its config.json, has the former)",
    "--linear-attention-freq": "linear-attention layers are not read from a command",
    "--hybrid-layer-pattern": "hybrid (Mamba, Gated DeltaNet, DSA) layer patterns are not modelled",
    "--attention-output-gate": "the attention output gate is not read from a command",
    "--moe-latent-size": "MoE latent projections are not modelled",
    "--mtp-use-repeated-layer": "a repeated MTP layer is not modelled",
    "--moe-shared-expert-gate": "the shared experts' gate is not read from a command",
}
# flags of the checked release that change memory or time by mechanisms the designer does not
# price: read as known and noted (the plan is priced without them)
RELEASE_NOT_PRICED = {
    "--fine-grained-activation-offloading": "activation offloading is not modelled: memory "
    "is priced without it",
    "--moe-paged-stash": "the routed experts' paged activation stash is not modelled: memory "
    "is priced without it",
    "--mlp-chunks-for-training": "the MLP's sequence chunks are not modelled: memory is "
    "priced without them",
    "--overlap-dispatch-backward-with-experts-wgrad": "this overlap is not modelled: the "
    "dispatch backward is priced exposed",
    "--hybrid-context-parallel": "hybrid context parallelism's balancing is not modelled: "
    "priced as plain CP",
    "--tensor-parallel-num-weight-shards": "weight shards beyond TP are not modelled: priced "
    "as TP's",
    "--expert-tensor-parallel-num-weight-shards": "expert weight shards beyond ETP are not "
    "modelled: priced as ETP's",
}
# the flex dispatcher's backends (megatron-core 0.19.2 TransformerConfig
# moe_flex_dispatcher_backend, default deepep): DeepEP and HybridEP send a token once per
# remote scale-up domain (ExpertLayout.dispatch_per_domain); NCCL EP is priced as alltoall
PER_DOMAIN_BACKENDS = ("deepep", "hybridep")
# Megatron-LM's --recompute-modules names that models.memory.MODULES spells otherwise
MODULE_NAMES = {"shared_experts": "shared_expert"}
# ...and those it prices another way: core_attn is the layout's selective recompute
# (_recompute_mode), mlp a dense MLP's (noted, not priced)
LAYOUT_MODULE, DENSE_MLP_MODULE = "core_attn", "mlp"


def megatron_modules(words: list[str], flag_name: str, notes: list[str]) -> frozenset[str]:
    """Megatron-LM's --recompute-modules in models.memory.MODULES' names, without core_attn
    (the layout's selective recompute) or mlp (noted, not priced); other names are kept
    for the caller to check. evaluate's --recompute-modules reads them the same way."""
    modules = frozenset(MODULE_NAMES.get(w, w) for w in words)
    if DENSE_MLP_MODULE in modules:
        notes.append(f"{flag_name} {DENSE_MLP_MODULE}: a dense MLP's recompute, not priced")
    return modules - {LAYOUT_MODULE, DENSE_MLP_MODULE}


def dispatcher_priced(dispatcher: str, flag_name: str, notes: list[str]) -> bool:
    """Whether a dispatcher as Megatron-LM or evaluate names it sends a token once per remote
    scale-up domain: flex (megatron-core 0.19.2's default backend, deepep), deepep and
    hybridep do (_flex_dispatch); alltoall does not, allgather is noted and priced as it."""
    if dispatcher not in ("alltoall", "flex", *PER_DOMAIN_BACKENDS):
        notes.append(
            f"{flag_name} {dispatcher}: modelled as alltoall "
            "(models/expert.py prices Megatron-Core's all-to-all dispatcher)"
        )
    return dispatcher == "flex" or dispatcher in PER_DOMAIN_BACKENDS


def _moe_fields(m: _Flags, layers: int, ffn: int, notes: list[str]) -> dict:
    """The experts, latent attention and MTP fields (designer/launch/megatron_model.py
    moe_flags, read back; Megatron's defaults for what is absent)."""
    out: dict = {}
    given = m.text("experts")  # 0 is a dense model (validate_args, arguments.py 1024-1025)
    dense = given is not None and given.strip().isdigit() and int(given) == 0
    experts = None if dense else m.integer("experts")
    if experts is not None:
        text = m.text("moe_layer_freq") or str(default("moe_layer_freq"))
        try:
            pattern = layer_pattern(text, layers)
        except ValueError as err:
            raise _fail(m.name("moe_layer_freq"), str(err)) from None
        found = _dense_and_every(pattern)
        if found is None:
            raise _fail(
                m.name("moe_layer_freq"),
                f"{text!r}: the designer models leading dense layers, then every n-th layer "
                "MoE; this pattern is neither",
            )
        shared = m.integer("moe_shared_ffn")
        out.update(
            experts=experts,
            experts_per_token=m.integer("moe_topk", default("moe_topk")),
            expert_ffn_hidden=m.integer("moe_ffn_hidden") or ffn,
            shared_experts=1 if shared else 0,
            shared_expert_ffn_hidden=shared,
            dense_layers=found[0],
            moe_layer_every=found[1],
        )
        dispatcher = m.text("moe_dispatcher") or default("moe_dispatcher")
        dispatcher_priced(dispatcher, m.name("moe_dispatcher"), notes)  # flex: _flex_dispatch
    if m.switch("mla"):
        out.update(
            q_lora_rank=m.integer("q_lora_rank"),
            kv_lora_rank=m.integer("kv_lora_rank", default("kv_lora_rank")),
            qk_head_dim=m.integer("qk_head_dim", default("qk_head_dim")),
            qk_rope_head_dim=m.integer("qk_rope_head_dim", default("qk_rope_head_dim")),
            v_head_dim=m.integer("v_head_dim", default("v_head_dim")),
        )
    mtp = m.integer("mtp_layers")
    if mtp:
        out["mtp_layers"] = mtp
    if experts is not None:
        out.update(_router_fields(m))
    return out


def _router_fields(m: _Flags) -> dict:
    """The router flags (megatron_model.router_flags, read back; absent: Megatron's
    softmax router without bias, scale or groups)."""
    score = m.text("router_score") or "softmax"
    if score not in ("softmax", "sigmoid"):
        raise _fail(m.name("router_score"), f"{score!r} is not modelled (softmax or sigmoid)")
    groups = m.integer("router_groups")
    return {
        "router_score": score,
        "router_expert_bias": m.switch("router_expert_bias"),
        "router_topk_scale": m.number("router_topk_scale") or 1.0,
        "router_groups": groups,
        "router_group_topk": m.integer("router_group_topk") if groups else None,
    }


def _dense_and_every(pattern: tuple[bool, ...]) -> tuple[int, int] | None:
    """(dense_layers, moe_layer_every) whose MoE layers are ``pattern`` (models.moe), or None."""
    layers = len(pattern)
    for dense in range(layers):
        for every in range(1, layers - dense + 1):
            rule = tuple(i >= dense and (i - dense + 1) % every == 0 for i in range(layers))
            if rule == pattern:
                return dense, every
    return None


def _expert_degrees(m: _Flags, spec: TransformerSpec, tp: int, cp: int, dp: int) -> tuple[int, int]:
    """EP and ETP (absent: 1 and TP, validate_args), checked as Megatron-Core folds them."""
    ep = m.integer("ep", default("ep")) or 1
    etp = m.integer("etp") or tp
    if ep > 1 and not spec.is_moe:  # validate_args, arguments.py lines 1036-1042
        raise _fail(
            m.name("ep"),
            f"EP {ep} on a dense model: Megatron-LM needs {flag('megatron', 'experts')} for "
            "expert parallelism (validate_args, arguments.py lines 1037-1038); drop it or "
            "give the experts",
        )
    if ep > 1 and m.switch("fp16"):
        raise _fail(
            m.name("ep"),
            f"Megatron-LM does not run expert parallelism with {m.name('fp16')} "
            "(validate_args, arguments.py lines 1041-1042); train with --bf16 or EP 1",
        )
    if not spec.is_moe:
        return 1, 1
    assert spec.experts is not None
    if spec.experts % ep:
        raise _fail(m.name("ep"), f"{ep} does not divide the {spec.experts} experts")
    if (tp * cp * dp) % (ep * etp):
        raise _fail(
            m.name("ep"),
            f"EP {ep} x ETP {etp} does not divide TP x CP x DP = {tp * cp * dp} "
            "(Megatron-Core's parallel folding)",
        )
    return ep, etp


# a spec field's validation error names this setting's flag; the shape's own fields name
# their own flags (issue 20, 17: --num-layers 200000 and --vocab-size 999999999 blamed
# --num-attention-heads)
FIELD_SETTINGS = {
    "kv_heads": "query_groups",
    "head_dim": "kv_channels",
    "rope_percent": "rope_percent",
    "norm_eps": "norm_eps",
    "attention_dropout": "attention_dropout",
    "hidden_dropout": "hidden_dropout",
    "rope_base": "rope_base",
    "experts_per_token": "moe_topk",
    "expert_ffn_hidden": "moe_ffn_hidden",
    "kv_lora_rank": "kv_lora_rank",
    "qk_head_dim": "qk_head_dim",
    "v_head_dim": "v_head_dim",
    "mtp_layers": "mtp_layers",
    **{k: k for k in ("router_topk_scale", "router_groups", "router_group_topk")},
    **{k: k for k in ("layers", "hidden", "ffn_hidden", "vocab")},
}


# RopeScaling's fields that a flag sets besides the factor (megatron_model.mla_yarn)
ROPE_SCALING_SETTINGS = {"mscale": "mscale", "mscale_all_dim": "mscale_all_dim"}


def _architecture_values(m: _Flags, position: str | None) -> dict:
    """The flags megatron_model.spec_fields reads (a switch as True or False)."""
    return {
        "kv_channels": m.integer("kv_channels"),
        "position_embedding": position,
        "rope_base": m.number("rope_base"),
        "rope_percent": m.number("rope_percent"),
        "use_rope_scaling": m.switch("use_rope_scaling"),
        "rope_scaling_factor": m.number("rope_scaling_factor"),
        "normalization": m.text("normalization"),
        "norm_eps": m.number("norm_eps"),
        "disable_bias_linear": m.switch("disable_bias_linear"),
        "add_qkv_bias": m.switch("add_qkv_bias"),
        "attention_dropout": m.number("attention_dropout"),
        "hidden_dropout": m.number("hidden_dropout"),
        "untie_embeddings": m.switch("untie_embeddings"),
        "qk_layernorm": m.switch("qk_layernorm") and not m.switch("mla"),
        "mla": m.switch("mla"),
        "rope_type": m.text("rope_type"),
        "rotary_scaling_factor": m.number("rotary_scaling_factor"),
        "mscale": m.number("mscale"),
        "mscale_all_dim": m.number("mscale_all_dim"),
    }


def _spec(m: _Flags, seq_len: int, notes: list[str]) -> TransformerSpec:
    why = "the model's shape needs it"
    layers = m.required("layers", why)
    hidden = m.required("hidden", why)
    heads = m.required("heads", why)
    given = [s for s in ACTIVATION_SWITCHES if m.switch(s)]
    if len(given) > 1:
        raise _fail(m.name(given[1]), f"contradicts {m.name(given[0])}; give one activation")
    activation, gated = activation_from(set(given))
    ffn = m.integer("ffn_hidden")
    if ffn is None:
        ffn = int((4 * hidden * 2 / 3) / 64) * 64 if gated else 4 * hidden
    kv = heads
    if m.switch("group_query_attention"):
        kv = m.integer("query_groups", default("query_groups")) or 1
    elif m.given("query_groups"):
        notes.append(f"{m.name('query_groups')} ignored without --group-query-attention")
    vocab = m.integer("vocab")
    if vocab is None:
        vocab = int(vocabulary("megatron")["defaults"]["vocab"])
        notes.append(
            f"no {flag('megatron', 'vocab')}: assumed {vocab:,} (Megatron takes it from the "
            "tokenizer; pass --vocab-size for the real one)"
        )
    position = m.text("position_embedding")
    if position in ("mrope", "relative"):
        raise _fail(m.name("position_embedding"), f"{position!r} positions are not modelled")
    values = _architecture_values(m, position)
    try:
        head_width(values["kv_channels"], hidden, heads)
    except ValueError:
        raise _fail(
            m.name("hidden"),
            f"{hidden} is not a multiple of {m.name('heads')} {heads}, which Megatron-LM "
            f"asserts without {flag('megatron', 'kv_channels')} (validate_args, arguments.py "
            f"lines 839-841); give {flag('megatron', 'kv_channels')} (the head width) or a "
            f"multiple of {heads}",
        ) from None
    max_pos = m.required(
        "max_position_embeddings",
        "Megatron-LM requires it whatever the position embedding (validate_args, "
        "arguments.py lines 821-825); give the position table's size, at least the sequence",
    )
    if max_pos < seq_len:
        raise _fail(
            m.name("max_position_embeddings"),
            f"{max_pos} is below {m.name('seq_len')} {seq_len}; Megatron-LM requires it at "
            "least as long (validate_args)",
        )
    try:
        return TransformerSpec(
            name=NAME,
            layers=layers,
            hidden=hidden,
            heads=heads,
            kv_heads=kv if kv != heads else None,
            ffn_hidden=ffn,
            gated_mlp=gated,
            activation=activation,
            vocab=vocab,
            seq_len=max_pos or seq_len,
            **spec_fields(values, hidden, heads),
            **_moe_fields(m, layers, ffn, notes),
        )
    except ValidationError as err:
        culprit, detail = _culprit(err, values, max_pos is not None)
        raise _fail(m.name(culprit), detail) from err


def _culprit(err: ValidationError, values: dict, max_pos: bool) -> tuple[str, str]:
    """The setting a spec's validation error blames (``values``: _architecture_values;
    ``max_pos``: whether --max-position-embeddings was given), and the error's message.
    The RoPE scaling spec_fields builds names its flags (--rope-scaling-factor nan was
    blamed on --num-attention-heads)."""
    first = err.errors()[0]
    detail = first["msg"].removeprefix("Value error, ")
    loc = str(first["loc"][0]) if first["loc"] else ""
    if err.title == RopeScaling.__name__:  # Llama 3.1's scaling, or latent attention's YaRN
        scaling = "rope_scaling_factor" if values.get("use_rope_scaling") else None
        return ROPE_SCALING_SETTINGS.get(loc, scaling or "rotary_scaling_factor"), detail
    named = detail.split(maxsplit=1)[0] if detail else ""  # a whole-spec check's field
    if not loc and named in FIELD_SETTINGS and named not in ("hidden", "layers"):
        loc = named  # --moe-router-topk 1000 blamed on --num-attention-heads (issue 33)
    if loc == "seq_len":
        return ("max_position_embeddings" if max_pos else "seq_len"), detail
    return FIELD_SETTINGS.get(loc, "query_groups" if "kv_heads" in detail else "heads"), detail


def _unknown(words: list[str]) -> list[str]:
    """A flag Megatron-LM does not have (at the pinned commit or in the checked release),
    or one that builds a model the designer does not model: a usage error naming it. The
    notes of the release's flags whose mechanism the designer does not price
    (RELEASE_NOT_PRICED)."""
    known = all_flags("megatron")
    notes = []
    for name in split_flags(words):
        if name in NOT_MODELLED:
            raise _fail(name, NOT_MODELLED[name] + "; remove it to plan the dense model")
        if name in RELEASE_NOT_MODELLED:
            raise _fail(name, RELEASE_NOT_MODELLED[name] + "; remove it to plan without it")
        if name not in known:
            raise _fail(
                name,
                "not a Megatron-LM flag (megatron/training/arguments.py at the pinned commit, "
                f"designer/data/launch/megatron_arguments.yaml, nor {release_flags('megatron')}'s "
                "parser, megatron_release_arguments.yaml); check its spelling",
            )
        if name in RELEASE_NOT_PRICED:
            notes.append(f"{name}: {RELEASE_NOT_PRICED[name]}")
    return notes


def _vp(m: _Flags, layers: int, pp: int) -> int:
    """Virtual stages per rank: --num-virtual-stages-per-pipeline-rank, or the layers per
    pipeline stage (the embedding and loss counted when accounted for) over
    --num-layers-per-virtual-pipeline-stage, as validate_args derives it."""
    per_stage = m.integer("layers_per_virtual_stage")
    stages = m.integer("virtual_stages")
    vp = stages or 1
    if per_stage is not None and stages is not None:  # whether or not they agree
        raise _fail(
            m.name("virtual_stages"),
            f"{stages} virtual stages contradict {m.name('layers_per_virtual_stage')} "
            f"{per_stage}: Megatron-LM takes at most one of the two (validate_args, "
            "arguments.py lines 532-543); give one",
        )
    if per_stage is not None:
        name = m.name("layers_per_virtual_stage")
        for setting in ("first_stage_layers", "last_stage_layers"):
            if m.given(setting):
                raise _fail(
                    name,
                    f"Megatron-LM does not take it with {m.name(setting)}; give "
                    f"{flag('megatron', 'virtual_stages')} instead",
                )
        counted = layers + m.switch("embedding_in_split") + m.switch("loss_in_split")
        if counted % pp or (counted // pp) % per_stage:
            raise _fail(
                name,
                f"{per_stage} layers per virtual stage do not divide the {counted} layers over "
                f"{pp} pipeline stages evenly",
            )
        layers = counted
        vp = layers // pp // per_stage
    return vp


def unread_group_note(group: int, flag_name: str) -> str:
    """The note of a micro-batch group size without interleaving, as the command or
    evaluate's option (``flag_name``) gives it: only Megatron-Core's interleaved schedule
    reads it (forward_backward_pipelining_with_interleaving; the 1F1B schedule,
    forward_backward_pipelining_without_interleaving, never does)."""
    return (
        f"{flag_name} {group}: not read without interleaving (vp 1), as Megatron-LM's 1F1B "
        "schedule ignores it"
    )


def _group_size(m: _Flags, vp: int, notes: list[str]) -> int | None:
    """--microbatch-group-size-per-virtual-pipeline-stage (Layout.microbatch_group_size):
    read with interleaving (vp > 1); without it the size is dropped and noted
    (``unread_group_note``). Its checks against the micro-batches are ``_check_shapes``'."""
    group = m.integer("microbatch_group_size")
    if group is None or vp > 1:
        return group
    notes.append(unread_group_note(group, m.name("microbatch_group_size")))
    return None


def _split_fields(m: _Flags, layers: int, pp: int, mtp_layers: int = 0) -> dict:
    """vp and the uneven-split fields: from --pipeline-model-parallel-layout, or from the
    virtual-stage, first/last-stage and accounting flags (at most one form, as
    validate_args requires)."""
    text = m.text("pipeline_layout")
    fields = {
        "vp": _vp(m, layers, pp),
        "first_stage_layers": m.integer("first_stage_layers"),
        "last_stage_layers": m.integer("last_stage_layers"),
        "embedding_in_split": m.switch("embedding_in_split"),
        "loss_in_split": m.switch("loss_in_split"),
    }
    if text is None:
        return fields
    name = m.name("pipeline_layout")
    for setting in ("virtual_stages", "layers_per_virtual_stage", "first_stage_layers",
                    "last_stage_layers", "embedding_in_split", "loss_in_split"):  # fmt: skip
        if m.given(setting):
            raise _fail(
                m.name(setting),
                f"contradicts {name}, which spells out every stage; give one of the two",
            )
    try:
        return {**fields, **layout_fields(text, layers, pp, mtp_layers)}
    except ValueError as err:
        raise _fail(name, str(err)) from None


def _flag_sets(words: list[str]) -> tuple[_Flags, _Flags, list[str]]:
    """The launcher's flags and Megatron-LM's (unknown ones refused), and the notes of
    Megatron-LM's flags the designer does not price (_unknown)."""
    script = next((i for i, w in enumerate(words) if w.endswith(".py")), None)
    launch_words, megatron_words = (
        (words[:script], words[script + 1 :]) if script is not None else (words, words)
    )
    launcher = _Flags("torchrun", split_flags(launch_words))
    if script is None:  # flags alone: torchrun's are the launcher's, not Megatron's
        torchrun = flag_index("torchrun")
        megatron_words = _without(megatron_words, torchrun)
    notes = _unknown(megatron_words)
    return launcher, _Flags("megatron", split_flags(megatron_words)), notes


def _gpus(launcher: _Flags) -> tuple[int, int]:
    """(nodes, GPUs per node) the command runs on."""
    nproc = launcher.integer("nproc_per_node")
    if nproc is None:
        raise _fail(
            flag("torchrun", "nproc_per_node"),
            "missing; the command must say how many GPUs it runs on "
            "(torchrun --nnodes N --nproc-per-node G pretrain_gpt.py ...)",
        )
    return _nnodes(launcher), nproc


def _seq_len(m: _Flags, notes: list[str]) -> int:
    """--seq-length, or --encoder-seq-length without it, as validate_args reads them
    (arguments.py lines 847-853 at 000c4ac24f61: not both; one of the two is needed)."""
    seq = m.integer("seq_len")
    encoder = m.raw_count("--encoder-seq-length", 0) if "--encoder-seq-length" in m.raw else None
    if seq is not None and encoder is not None:
        raise _fail(
            "--encoder-seq-length",
            f"contradicts {m.name('seq_len')}; Megatron-LM takes one of the two "
            "(validate_args, arguments.py line 849); give --seq-length",
        )
    if seq is None and encoder is None:
        raise _fail(
            flag("megatron", "seq_len"),
            "missing; give the training sequence length (Megatron-LM reads --seq-length, "
            "or --encoder-seq-length without it: arguments.py lines 847-853)",
        )
    if seq is None:
        if encoder is not None and encoder < 1:
            raise _fail("--encoder-seq-length", f"must be at least 1 (got {encoder})")
        notes.append(f"no {flag('megatron', 'seq_len')}: --encoder-seq-length {encoder}")
        return int(encoder or 1)
    return seq


def _degrees(m: _Flags, launcher: _Flags, nnodes: int, nproc: int) -> tuple[int, int, int, int]:
    """TP, PP, CP as given (Megatron's defaults otherwise) and DP from the world size."""
    world = nnodes * nproc
    tp = m.integer("tp", default("tp")) or 1
    pp = m.integer("pp", default("pp")) or 1
    cp = m.integer("cp", default("cp")) or 1
    if world % (tp * pp * cp):
        raise _fail(
            m.name("tp"),
            f"TP {tp} x PP {pp} x CP {cp} = {tp * pp * cp} does not divide the world size {world} "
            f"({launcher.name('nnodes')} {nnodes} x {launcher.name('nproc_per_node')} {nproc}); "
            "fix the parallel sizes or the GPU count",
        )
    return tp, pp, cp, world // (tp * pp * cp)


def _granularity(m: _Flags) -> str | None:
    """--recompute-granularity, or selective for its shorthand --recompute-activations."""
    granularity = m.text("recompute_granularity")
    if granularity is None and m.switch("recompute_activations"):
        return "selective"
    return granularity


def _recompute_refusals(m: _Flags) -> None:
    """What TransformerConfig.__post_init__ refuses of the recomputation flags
    (megatron/core/transformer/transformer_config.py at 000c4ac24f61): full without
    --recompute-method (lines 940-944) or --recompute-num-layers (946-952), selective
    with --recompute-num-layers (953-958), and any recomputation beside CPU offloading
    (--cpu-offloading-num-layers, lines 923-926)."""
    granularity = _granularity(m)
    if granularity is None:
        return
    named = m.name("recompute_granularity") if m.given("recompute_granularity") else None
    given = f"{named or m.name('recompute_activations')} {granularity}"
    if granularity == "full":
        for setting, example in (("recompute_method", "uniform"), ("recompute_num_layers", "1")):
            if not m.given(setting):
                raise _fail(
                    flag("megatron", setting),
                    f"missing; Megatron-Core refuses {given} without it (TransformerConfig); "
                    f"add e.g. {flag('megatron', setting)} {example}",
                )
    elif m.given("recompute_num_layers"):
        raise _fail(
            m.name("recompute_num_layers"),
            f"Megatron-Core refuses it with {given} (TransformerConfig); drop it",
        )
    if m.raw_count("--cpu-offloading-num-layers", 0) > 0:
        raise _fail(
            "--cpu-offloading-num-layers",
            f"Megatron-Core does not offload with {given} (TransformerConfig); drop one",
        )


def _recompute_mode(m: _Flags, notes: list[str]) -> str:
    _recompute_refusals(m)
    recompute = _granularity(m) or default("recompute")
    if recompute == "full" and (m.text("recompute_method") == "block"):
        notes.append("--recompute-method block: modelled as full recomputation of every layer")
    modules = m.words("recompute_modules")
    if modules is not None and recompute == "selective" and LAYOUT_MODULE not in modules:
        recompute = "none"  # the layout's selective recompute is Megatron's core_attn
    if modules is not None and recompute == "full":
        notes.append(
            f"{m.name('recompute_modules')}: not read under full recomputation "
            "(Megatron-Core reads it with --recompute-granularity selective)"
        )
    return str(recompute)


# Megatron-FSDP's --data-parallel-sharding-strategy as a ZeRO level (megatron/core/
# distributed/fsdp/src/README.md line 156 at 000c4ac24f61: "no_shard (0) / optim (1) /
# optim_grads (2) / optim_grads_params (3)")
FSDP_ZERO = {"no_shard": 0, "optim": 1, "optim_grads": 2, "optim_grads_params": 3}
# (what Megatron-LM refuses beside --use-torch-fsdp2, arguments.py line): validate_args
# lines 633-649 at 000c4ac24f61 (the fix is the message's)
TORCH_FSDP2_REFUSES = (
    ("pp", "pipeline parallelism", "636-637", "use --use-megatron-fsdp, or PP 1"),
    ("ep", "expert parallelism", "638-639", "use --use-megatron-fsdp, or EP 1"),
    ("distributed_optimizer", "the distributed optimizer", "640-641", "drop one of the two"),
    ("fusion", "gradient accumulation fusion", "642-643",
     "add --no-gradient-accumulation-fusion"),
    ("tied", "tied embeddings", "646-647", "add --untie-embeddings-and-output-weights"),
    ("fp16", "--fp16", "648-649", "train with --bf16"),
)  # fmt: skip
# flags of the pinned commit whose mechanism the designer does not price: noted when set
# (arguments.py lines of their add_argument calls)
PINNED_NOT_PRICED = {
    "--optimizer-cpu-offload": "optimizer state offloaded to the CPU (line 2248) is not "
    "modelled: memory and the optimizer step are priced on the GPU",
    "--cpu-offloading-num-layers": "activation offloading of these layers (line 2105) is "
    "not modelled: memory is priced without it",
    "--num-distributed-optimizer-instances": "several distributed-optimizer copies (line "
    "2752) are not modelled: the optimizer is priced sharded over the whole DP group",
}


def _zero_level(m: _Flags, pp: int, notes: list[str]) -> int:
    """The layout's ZeRO level as the command shards: --use-torch-fsdp2 is ZeRO 3 (2 with
    --torch-fsdp2-no-reshard-after-forward, its help: "Set to enable FSDP ZeRO-2",
    arguments.py line 2757), --use-megatron-fsdp its --data-parallel-sharding-strategy
    (FSDP_ZERO, default no_shard, line 2733), else 1 with --use-distributed-optimizer
    and 0 without. Torch FSDP2 wins over Megatron-FSDP (megatron/training/training.py lines
    957-961); what validate_args refuses beside either is a usage error naming the flag.
    Offloads and optimizer instances it does not price are noted (PINNED_NOT_PRICED)."""
    used = {
        "--optimizer-cpu-offload": "--optimizer-cpu-offload" in m.raw,
        "--cpu-offloading-num-layers": m.raw_count("--cpu-offloading-num-layers", 0) > 0,
        "--num-distributed-optimizer-instances": m.raw_count(
            "--num-distributed-optimizer-instances", 1
        )
        > 1,
    }
    notes += [f"{name}: {why}" for name, why in PINNED_NOT_PRICED.items() if used[name]]
    strategy = m.raw_value("--data-parallel-sharding-strategy")
    if strategy is not None and strategy not in FSDP_ZERO:
        raise _fail(
            "--data-parallel-sharding-strategy",
            f"{strategy!r} is not one of {', '.join(FSDP_ZERO)}",
        )
    if m.raw.get("--use-torch-fsdp2") is not None:
        _torch_fsdp2_refusals(m, pp)
        if m.raw.get("--use-megatron-fsdp") is not None:
            notes.append("--use-megatron-fsdp: Megatron-LM runs --use-torch-fsdp2 instead")
        return 2 if m.raw.get("--torch-fsdp2-no-reshard-after-forward") is not None else 3
    if m.raw.get("--use-megatron-fsdp") is not None:
        if m.raw_value("--ckpt-format") != "fsdp_dtensor":
            raise _fail(
                "--use-megatron-fsdp",
                "Megatron-LM runs it only with --ckpt-format fsdp_dtensor (validate_args, "
                "arguments.py lines 718-719); add it",
            )
        return FSDP_ZERO[strategy or "no_shard"]
    if strategy not in (None, "no_shard"):
        notes.append(
            f"--data-parallel-sharding-strategy {strategy}: read by Megatron-FSDP only; "
            "without --use-megatron-fsdp the optimizer shards as "
            "--use-distributed-optimizer says"
        )
    return 1 if m.switch("distributed_optimizer") else int(default("zero"))


def _torch_fsdp2_refusals(m: _Flags, pp: int) -> None:
    """What validate_args refuses beside --use-torch-fsdp2 (TORCH_FSDP2_REFUSES)."""
    given = {
        "pp": pp > 1,
        "ep": (m.integer("ep") or 1) > 1,
        "distributed_optimizer": m.switch("distributed_optimizer"),
        "fusion": m.raw.get("--no-gradient-accumulation-fusion") is None,
        "tied": not m.switch("untie_embeddings"),
        "fp16": m.switch("fp16"),
    }
    for key, what, lines, fix in TORCH_FSDP2_REFUSES:
        if given[key]:
            raise _fail(
                "--use-torch-fsdp2",
                f"Megatron-LM does not run it with {what} (validate_args, arguments.py lines "
                f"{lines}); {fix}",
            )


def _precision_of(m: _Flags, notes: list[str]) -> tuple[str, str]:
    """(training precision, gradient-reduction dtype); fp32 training is refused."""
    if m.switch("bf16") and m.switch("fp16"):
        raise _fail(m.name("fp16"), f"contradicts {m.name('bf16')}; give one (validate_args)")
    if not (m.switch("bf16") or m.switch("fp16")):
        raise _fail(
            flag("megatron", "bf16"),
            "missing; without --bf16 or --fp16 Megatron-LM trains in fp32, which the designer "
            "does not model (megatron_defaults.yaml: precision); add --bf16",
        )
    precision = "fp8" if m.text("fp8_format") is not None else "bf16"
    if m.switch("fp16"):
        notes.append("--fp16: modelled as bf16 (same bytes and tensor-core rate)")
    grad_reduce = "bf16" if m.switch("grad_reduce_in_bf16") else str(default("grad_reduce_dtype"))
    return precision, grad_reduce


def _check_shapes(m: _Flags, spec: TransformerSpec, layout: Layout, seq: int) -> None:
    """Shapes the model cannot take are usage errors naming the Megatron-LM flag, their
    fixes in Megatron-LM's flags too (the violation's evaluate options translated)."""
    per_stage = m.given("layers_per_virtual_stage")
    seq_flag = "--encoder-seq-length" if not m.given("seq_len") else m.name("seq_len")
    names = {
        "--tp": m.name("tp"),
        "--pp": m.name("pp"),
        "--global-batch": m.name("global_batch"),
        "--cp": m.name("cp"),
        "--vp": m.name("layers_per_virtual_stage" if per_stage else "virtual_stages"),
        "--first-stage-layers": m.name("first_stage_layers"),
        "--last-stage-layers": m.name("last_stage_layers"),
        "--embedding-in-split": m.name("embedding_in_split"),
        "--loss-in-split": m.name("loss_in_split"),
        "--seq-len": seq_flag,
        "--no-sequence-parallel": f"drop {m.name('sequence_parallel')}",
    }
    broken = divisibility_violations(spec, layout, seq)
    if m.given("pipeline_layout"):  # the layout string decides the split: Megatron runs it
        broken = [v for v in broken if v.option not in PIPELINE_SPLIT_OPTIONS]
    if broken:
        detail = re.sub(r"--[a-z][a-z-]*", lambda f: names.get(f.group(0), f.group(0)),
                        broken[0].detail)  # fmt: skip
        raise _fail(names.get(broken[0].option, broken[0].option), detail)


def _tokens(m: _Flags, global_batch: int, seq: int) -> float | None:
    """Training tokens: iterations x global batch x sequence, or samples x sequence (not
    both: validate_args asserts train_samples is None with train_iters, "expected
    iteration-based training")."""
    iters = m.integer("train_iters")
    samples = m.integer("train_samples")
    if iters is not None and samples is not None:
        raise _fail(
            m.name("train_samples"),
            f"contradicts {m.name('train_iters')}; give one (validate_args: expected "
            "iteration-based training)",
        )
    if iters is not None:
        return float(iters) * global_batch * seq
    if samples is not None:
        return float(samples) * seq
    return None


def parse_megatron(words: list[str]) -> ImportedRun:
    """A Megatron-LM command (torchrun ... pretrain_gpt.py --flags, or just the flags)."""
    launcher, m, notes = _flag_sets(words)
    nnodes, nproc = _gpus(launcher)
    seq = _seq_len(m, notes)
    spec = _spec(m, seq, notes)
    tp, pp, cp, dp = _degrees(m, launcher, nnodes, nproc)
    split = _split_fields(m, spec.layers, pp, spec.mtp_layers)
    split["microbatch_group_size"] = _group_size(m, split["vp"], notes)
    micro = m.required("micro_batch", "give the per-GPU micro-batch")
    global_batch = m.integer("global_batch")
    if global_batch is None:
        global_batch = micro * dp
        notes.append(f"no {flag('megatron', 'global_batch')}: micro-batch x DP = {global_batch}")
    recompute = _recompute_mode(m, notes)
    precision, grad_reduce = _precision_of(m, notes)
    layout = Layout(
        tp=tp,
        pp=pp,
        dp=dp,
        cp=cp,
        sequence_parallel=m.switch("sequence_parallel") and tp > 1,
        micro_batch=micro,
        global_batch=global_batch,
        recompute=recompute,
        zero=_zero_level(m, pp, notes),
        precision=precision,
        **split,
    )
    _check_shapes(m, spec, layout, seq)
    ep, etp = _expert_degrees(m, spec, tp, cp, dp)
    tokens = _tokens(m, global_batch, seq)
    mechanisms = _moe_mechanisms(m, spec, notes)
    run = ImportedRun(
        spec, layout, seq, tokens, nnodes, nproc, tuple(notes), grad_reduce, ep, etp, **mechanisms
    )
    _check_overlap(m, run)
    return run


def _check_overlap(m: _Flags, run: ImportedRun) -> None:
    """A command with --overlap-moe-expert-parallel-comm on a layout Megatron-Core refuses it
    for (models.expert.a2a_overlap_violation) is refused, naming the flag."""
    if not run.ep_overlap:
        return
    # lazy: models.expert loads numpy; commands that never evaluate do not
    from models.expert import a2a_overlap_violation

    why = a2a_overlap_violation(run.spec, run.layout, run.experts())
    if why is not None:
        raise _fail(m.name("moe_ep_overlap"), f"Megatron-Core refuses it for this layout: {why}")


def _permute_fusion(m: _Flags, notes: list[str]) -> bool:
    """--moe-permute-fusion as the command sets it; a MoE command without it runs
    Megatron-Core's unfused permutation (its default), which the import notes."""
    if m.switch("moe_permute_fusion"):
        return True
    notes.append(
        f"no {m.name('moe_permute_fusion')}: Megatron-Core's unfused permutation "
        "(models.expert.UNFUSED_PERMUTE_HBM_PASSES)"
    )
    return False


def _router_fp32(m: _Flags, notes: list[str]) -> bool:
    """--moe-router-dtype as the command sets it: fp32 (or fp64, priced as fp32 and noted)
    runs the router's backward GEMMs in fp32 (models.expert.router_fp32_per_microbatch_s);
    absent, the router runs in the model's dtype."""
    dtype = m.text("moe_router_dtype")
    if dtype is None:
        return False
    if dtype == "fp64":
        notes.append(f"{m.name('moe_router_dtype')} fp64: priced as fp32 (the TF32 rate)")
    return True


def _moe_mechanisms(m: _Flags, spec: TransformerSpec, notes: list[str]) -> dict:
    """ImportedRun's MoE mechanisms (MOE_FIELDS) as the command sets them
    (models.expert.ExpertLayout's fields, as evaluate's options set them): the permutation
    (_permute_fusion), the router's dtype (_router_fp32), the flex dispatcher's DeepEP or
    HybridEP backend (_flex_dispatch, as --dispatcher deepep), the batch-level all-to-all overlap
    (--overlap-moe-expert-parallel-comm, as --moe-overlap a2a), the capacity factor
    (--moe-expert-capacity-factor, as --capacity-factor) and the MoE modules of a selective
    recomputation (--recompute-modules, as evaluate's). A dense command sets none (the
    fields' defaults)."""
    if not spec.is_moe:
        given = m.words("recompute_modules")
        if given and _granularity(m) == "selective" and set(given) - {LAYOUT_MODULE}:
            notes.append(
                f"{m.name('recompute_modules')}: a dense model's recompute of "
                f"{', '.join(sorted(set(given) - {LAYOUT_MODULE}))} is not priced"
            )
        return {}
    fused, router = _permute_fusion(m, notes), _router_fp32(m, notes)
    factor = m.number("moe_capacity_factor")
    if factor is not None and not 0.01 <= factor <= 100:
        raise _fail(m.name("moe_capacity_factor"), f"{factor:g} is not from 0.01 to 100")
    if factor is not None and not m.switch("moe_pad_to_capacity"):
        notes.append(
            f"{m.name('moe_capacity_factor')} {factor:g} without "
            f"{m.name('moe_pad_to_capacity')}: priced padded to it, the busiest expert at "
            f"{factor:g} x the balanced share"
        )
    return dict(
        permute_fusion=fused,
        router_fp32=router,
        dispatch_per_domain=_flex_dispatch(m, notes),
        ep_overlap=1.0 if m.switch("moe_ep_overlap") else 0.0,
        capacity_factor=factor,
        recompute_modules=_recompute_modules(m, notes),
    )


def _flex_dispatch(m: _Flags, notes: list[str]) -> bool:
    """Whether the command dispatches per scale-up domain: Megatron-Core's flex dispatcher
    with the DeepEP or HybridEP backend (--moe-enable-deepep, its deprecated form, or
    --moe-flex-dispatcher-backend, default deepep in megatron-core 0.19.2); NCCL EP is
    priced as alltoall and noted. What TransformerConfig.__post_init__ refuses (DeepEP
    without flex, two backends, ncclep without flex, DeepEP padded to capacity) is a usage
    error naming the flag."""
    dispatcher = m.text("moe_dispatcher") or default("moe_dispatcher")
    deepep, backend = m.switch("moe_enable_deepep"), m.text("moe_flex_backend")
    flex = m.name("moe_dispatcher") + " flex"
    if deepep and dispatcher != "flex":
        raise _fail(m.name("moe_enable_deepep"), f"Megatron-Core runs DeepEP only with {flex}")
    if deepep and backend not in (None, "deepep"):
        raise _fail(
            m.name("moe_flex_backend"),
            f"{backend} beside {m.name('moe_enable_deepep')}: the flex dispatcher takes one "
            "backend",
        )
    if backend == "ncclep" and dispatcher != "flex":
        raise _fail(m.name("moe_flex_backend"), f"ncclep runs only with {flex}")
    if dispatcher != "flex":
        return False
    chosen = "deepep" if deepep else backend or "deepep"
    if not deepep and backend is None:
        notes.append(f"{flex} without a backend: megatron-core 0.19.2's default, deepep")
    if chosen == "deepep" and m.switch("moe_pad_to_capacity"):
        raise _fail(
            m.name("moe_pad_to_capacity"), "the flex dispatcher's deepep backend pads nothing"
        )
    if chosen == "ncclep":
        notes.append(
            f"{m.name('moe_flex_backend')} ncclep: NCCL EP priced as the alltoall dispatcher "
            "(every routed copy sent)"
        )
        return False
    return chosen in PER_DOMAIN_BACKENDS


def _recompute_modules(m: _Flags, notes: list[str]) -> frozenset[str]:
    """The MoE modules of --recompute-granularity selective --recompute-modules, in
    models.memory.MODULES' names (Megatron's shared_experts is shared_expert); core_attn is
    the layout's selective recompute (_recompute_mode), mlp (a dense MLP's) is noted and
    not priced."""
    # lazy: models.memory loads numpy; commands that never evaluate do not
    from models.memory import MODULES

    given = m.words("recompute_modules")
    if given is None or _granularity(m) != "selective":
        return frozenset()
    return megatron_modules(given, m.name("recompute_modules"), notes) & frozenset(MODULES)


PIPELINE_SPLIT_OPTIONS = {
    "--pp", "--vp", "--first-stage-layers", "--last-stage-layers", "--embedding-in-split",
    "--loss-in-split",
}  # fmt: skip


def _without(words: list[str], drop: dict[str, str]) -> list[str]:
    """The words with the flags in ``drop`` (and their values) removed."""
    out: list[str] = []
    skipping = False
    for w in words:
        if w.startswith("--") and len(w) > 2:
            skipping = normalize(w.partition("=")[0]) in drop
        if not skipping:
            out.append(w)
    return out


SCRIPT_SUFFIXES = (".sh", ".bash", ".sbatch", ".slurm")  # a missing one is a file not found


def load_megatron(value: str) -> ImportedRun:
    """--from-megatron's value: the command itself, or a file (launch script) holding it."""
    path = _script_path(value)
    if path is not None:
        text = read_text(
            path, UsageError, "a launch script or the command itself", OPTION, MAX_SCRIPT_BYTES
        )
        found = _command(text, str(path))
        if found is None:
            raise UsageError(
                f"{OPTION}: {path}: no torchrun or python ... .py command found; pass the "
                "script that launches pretrain_gpt.py, or the command itself in quotes"
            )
    else:
        found = _command(value, "the command") or (_split_command(value), [])
    run = parse_megatron(found[0])
    return replace(run, notes=(*found[1], *run.notes)) if found[1] else run


def _split_command(value: str) -> list[str]:
    """The command's words as the shell splits them; an unclosed quote or a trailing
    backslash refused naming the option (shlex's ValueError was an internal error)."""
    try:
        return shlex.split(value, comments=True)
    except ValueError as err:  # "No closing quotation", "No escaped character"
        raise UsageError(
            f"{OPTION}: the command does not split into words as the shell would "
            f"({str(err).lower()}); close its quotes (a trailing backslash escapes nothing), "
            "or pass the launch script that holds it"
        ) from None


def _script_path(value: str) -> Path | None:
    """The file --from-megatron names, or None when ``value`` is the command itself. One
    line without a leading flag that names anything on disk is a file, so a directory, a
    FIFO or a device is refused as such by read_text (``/tmp`` once read as a command with
    no flags: "--nproc-per-node: missing"); a single word that is not there but has a
    ``/`` or a script's suffix is a file not found; empty is refused."""
    if not value.strip():
        raise UsageError(
            f"{OPTION}: empty; pass a launch script or the Megatron-LM command itself in quotes"
        )
    if "\n" in value or value.lstrip().startswith("-"):
        return None
    path = Path(value).expanduser()
    try:
        exists = path.exists()
    except (OSError, ValueError):  # a command too long to be a file name, a NUL byte
        exists = False
    if exists:
        return path
    if len(value.split()) == 1 and ("/" in value or value.endswith(SCRIPT_SUFFIXES)):
        raise UsageError(f"{OPTION}: {value}: file not found; pass a launch script or a command")
    return None


def _command(text: str, where: str) -> tuple[list[str], list[str]] | None:
    """script_command's words, its expansion bounded (exit 2 past the bound), and the note
    of the unset variables it dropped (_unset_note)."""
    try:
        found = script_command(text)
    except ExpansionTooLarge as err:
        raise UsageError(f"{where}: {err}; expand them by hand", OPTION) from err
    if found is None:
        return None
    words, dropped = found
    return words, _unset_note(words, dropped)


def _unset_note(words: list[str], dropped: list[tuple[int, str]]) -> list[str]:
    """A note naming the unset variables bash expands to nothing where they stood for
    flags (after a value or a switch, as ``$EXTRA_ARGS`` does): whatever flags they would
    carry from the environment are not read. One that stood after a flag taking a value
    was that value: a flag the import reads then says it has none, one it ignores
    (``--data-path $DATA_PATH``) needs no note."""
    valued = {
        name
        for framework in ("megatron", "torchrun")
        for name, setting in flag_index(framework).items()
        if vocabulary(framework)["flags"][setting]["takes"] != "bool"
    }
    names: list[str] = []
    for at, name in dropped:
        before = normalize(words[at - 1]) if at else ""
        is_value = before.startswith("--") and "=" not in before
        if is_value and (before in valued or before not in flag_index("megatron")):
            continue
        names += [] if name in names else [name]
    if not names:
        return []
    shown = ", ".join(f"${n}" for n in names)
    return [
        f"{shown}: not set in the script; expanded to nothing, as bash does (flags the "
        "environment would give there are not read: set them in the script to import them)"
    ]
