"""Read an existing Megatron-LM launch command into a model and a layout.

Megatron-LM's own rules (megatron/training/arguments.py, validate_args) decide what
an absent flag means: no --global-batch-size is micro-batch x DP, no --ffn-hidden-size
is 4h (or the SwiGLU size), embeddings are tied unless untied, the data-parallel
degree is the world size over TP x PP x CP. The flag names are those of
designer/data/launch/megatron.yaml and torchrun.yaml. Flags that do not shape the
layout (data, optimizer, logging) are ignored; ones that contradict each other are
usage errors naming the flag.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from catalog.files import read_text
from designer.errors import UsageError
from designer.launch.script import command_from_script
from designer.launch.vocab import flag, flag_index, normalize, vocabulary
from models import Layout, TransformerSpec
from models.feasibility import divisibility_violations

OPTION = "--from-megatron"
NAME = "from-megatron"


@dataclass(frozen=True)
class ImportedRun:
    spec: TransformerSpec
    layout: Layout
    seq_len: int
    tokens: float | None  # train iterations (or samples) x global batch x sequence
    nnodes: int
    nproc_per_node: int
    notes: tuple[str, ...]  # defaults the import had to assume

    @property
    def world_size(self) -> int:
        return self.nnodes * self.nproc_per_node

    def as_dict(self) -> dict:
        lay = self.layout
        return {
            "nnodes": self.nnodes,
            "nproc_per_node": self.nproc_per_node,
            "num_gpus": self.world_size,
            "model_spec": self.spec.model_dump(),
            "layout": lay.as_dict(self.seq_len),
            "tokens": self.tokens,
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
        if len(values) != 1:
            raise _fail(self.name(setting), f"takes one value, got {len(values)}: {values}")
        choices = vocabulary(self.framework)["flags"][setting].get("choices")
        if choices and values[0] not in choices:
            raise _fail(self.name(setting), f"{values[0]!r} is not one of {', '.join(choices)}")
        return values[0]

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


def _spec(m: _Flags, seq_len: int, notes: list[str]) -> TransformerSpec:
    why = "the model's shape needs it"
    layers = m.required("layers", why)
    hidden = m.required("hidden", why)
    heads = m.required("heads", why)
    swiglu = m.switch("swiglu")
    ffn = m.integer("ffn_hidden")
    if ffn is None:
        ffn = int((4 * hidden * 2 / 3) / 64) * 64 if swiglu else 4 * hidden
    kv = heads
    if m.switch("group_query_attention"):
        kv = m.integer("query_groups", 1) or 1  # Megatron's default is one group
    elif m.given("query_groups"):
        notes.append(f"{m.name('query_groups')} ignored without --group-query-attention")
    kv_channels = m.integer("kv_channels")
    if kv_channels is not None and kv_channels * heads != hidden:
        raise _fail(
            m.name("kv_channels"),
            f"{kv_channels} x {heads} heads is not the hidden size {hidden}; the designer's "
            "model needs head size = hidden / heads",
        )
    vocab = m.integer("vocab")
    if vocab is None:
        vocab = int(vocabulary("megatron")["defaults"]["vocab"])
        notes.append(
            f"no {flag('megatron', 'vocab')}: assumed {vocab:,} (Megatron takes it from the "
            "tokenizer; pass --vocab-size for the real one)"
        )
    max_pos = m.integer("max_position_embeddings")
    try:
        return TransformerSpec(
            name=NAME,
            layers=layers,
            hidden=hidden,
            heads=heads,
            kv_heads=kv if kv != heads else None,
            ffn_hidden=ffn,
            gated_mlp=swiglu,
            vocab=vocab,
            seq_len=max(seq_len, max_pos or 0),
            tied_embeddings=not m.switch("untie_embeddings"),
        )
    except ValidationError as err:
        detail = err.errors()[0]["msg"].removeprefix("Value error, ")
        culprit = "query_groups" if "kv_heads" in detail else "heads"
        raise _fail(m.name(culprit), detail) from err


def _vp(m: _Flags, layers: int, pp: int) -> int:
    """Virtual stages per rank: --num-virtual-stages-per-pipeline-rank, or the layers per
    pipeline stage (the embedding and loss counted when accounted for) over
    --num-layers-per-virtual-pipeline-stage, as validate_args derives it."""
    per_stage = m.integer("layers_per_virtual_stage")
    stages = m.integer("virtual_stages")
    vp = stages or 1
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
        from_layers = layers // pp // per_stage
        if stages is not None and stages != from_layers:
            raise _fail(
                m.name("virtual_stages"),
                f"{stages} virtual stages contradict {name} {per_stage} ({from_layers} stages); "
                "give one of the two",
            )
        vp = from_layers
    return vp


def parse_megatron(words: list[str]) -> ImportedRun:
    """A Megatron-LM command (torchrun ... pretrain_gpt.py --flags, or just the flags)."""
    script = next((i for i, w in enumerate(words) if w.endswith(".py")), None)
    launch_words, megatron_words = (
        (words[:script], words[script + 1 :]) if script is not None else (words, words)
    )
    launcher = _Flags("torchrun", split_flags(launch_words))
    m = _Flags("megatron", split_flags(megatron_words))
    notes: list[str] = []

    nproc = launcher.integer("nproc_per_node")
    if nproc is None:
        raise _fail(
            flag("torchrun", "nproc_per_node"),
            "missing; the command must say how many GPUs it runs on "
            "(torchrun --nnodes N --nproc-per-node G pretrain_gpt.py ...)",
        )
    nnodes = _nnodes(launcher)
    world = nnodes * nproc

    seq = m.integer("seq_len")
    if seq is None:
        seq = m.integer("max_position_embeddings")
        if seq is None:
            raise _fail(flag("megatron", "seq_len"), "missing; give the training sequence length")
        notes.append(f"no {flag('megatron', 'seq_len')}: used --max-position-embeddings {seq}")
    spec = _spec(m, seq, notes)

    tp = m.integer("tp", 1) or 1
    pp = m.integer("pp", 1) or 1
    cp = m.integer("cp", 1) or 1
    if world % (tp * pp * cp):
        raise _fail(
            m.name("tp"),
            f"TP {tp} x PP {pp} x CP {cp} = {tp * pp * cp} does not divide the world size {world} "
            f"({launcher.name('nnodes')} {nnodes} x {launcher.name('nproc_per_node')} {nproc}); "
            "fix the parallel sizes or the GPU count",
        )
    dp = world // (tp * pp * cp)
    vp = _vp(m, spec.layers, pp)
    micro = m.required("micro_batch", "give the per-GPU micro-batch")
    global_batch = m.integer("global_batch")
    if global_batch is None:
        global_batch = micro * dp
        notes.append(f"no {flag('megatron', 'global_batch')}: micro-batch x DP = {global_batch}")

    granularity = m.text("recompute_granularity")
    if granularity is None and m.switch("recompute_activations"):
        granularity = "selective"
    recompute = granularity or "none"
    if recompute == "full" and (m.text("recompute_method") == "block"):
        notes.append("--recompute-method block: modelled as full recomputation of every layer")

    precision = "fp8" if m.text("fp8_format") is not None else "bf16"
    if m.switch("fp16") and precision == "bf16":
        notes.append("--fp16: modelled as bf16 (same bytes and tensor-core rate)")

    layout = Layout(
        tp=tp,
        pp=pp,
        dp=dp,
        cp=cp,
        vp=vp,
        micro_batch=micro,
        global_batch=global_batch,
        recompute=recompute,
        sequence_parallel=m.switch("sequence_parallel") and tp > 1,
        zero=1 if m.switch("distributed_optimizer") else 0,
        precision=precision,
        first_stage_layers=m.integer("first_stage_layers"),
        last_stage_layers=m.integer("last_stage_layers"),
        embedding_in_split=m.switch("embedding_in_split"),
        loss_in_split=m.switch("loss_in_split"),
    )
    vp_flag = m.name("virtual_stages" if m.given("virtual_stages") else "layers_per_virtual_stage")
    names = {
        "--tp": m.name("tp"),
        "--pp": m.name("pp"),
        "--global-batch": m.name("global_batch"),
        "--cp": m.name("cp"),
        "--vp": vp_flag,
        "--first-stage-layers": m.name("first_stage_layers"),
        "--last-stage-layers": m.name("last_stage_layers"),
        "--embedding-in-split": m.name("embedding_in_split"),
        "--loss-in-split": m.name("loss_in_split"),
    }
    broken = divisibility_violations(spec, layout, seq)
    if broken:
        raise _fail(names.get(broken[0].option, broken[0].option), broken[0].detail)

    iters = m.integer("train_iters")
    samples = m.integer("train_samples")
    tokens = None
    if iters is not None:
        tokens = float(iters) * global_batch * seq
    elif samples is not None:
        tokens = float(samples) * seq
    return ImportedRun(spec, layout, seq, tokens, nnodes, nproc, tuple(notes))


def load_megatron(value: str) -> ImportedRun:
    """--from-megatron's value: the command itself, or a file (launch script) holding it."""
    path = Path(value).expanduser()
    looks_like_path = "\n" not in value and not value.lstrip().startswith("-")
    try:
        is_file = looks_like_path and path.is_file()
    except OSError:  # a command too long to be a file name
        is_file = False
    if is_file:
        text = read_text(path, UsageError, "a launch script or the command itself", OPTION)
        words = command_from_script(text)
        if words is None:
            raise UsageError(
                f"{OPTION}: {path}: no torchrun or python ... .py command found; pass the "
                "script that launches pretrain_gpt.py, or the command itself in quotes"
            )
    else:
        if looks_like_path and value.endswith((".sh", ".sbatch", ".slurm")) and " " not in value:
            raise UsageError(
                f"{OPTION}: {value}: file not found; pass a launch script or a command"
            )
        words = command_from_script(value) or shlex.split(value, comments=True)
    return parse_megatron(words)
