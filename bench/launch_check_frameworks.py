"""The framework side of bench/launch_check.py: run by the environment ci/frameworks.sh
builds (torch, torchtitan, megatron-core, megatron-bridge pinned in ci/frameworks.txt),
never by the designer's; it imports no designer code and judges the emitted text alone.

    <frameworks python> bench/launch_check_frameworks.py CASES.json
    <frameworks python> bench/launch_check_frameworks.py --release-flags [--write]

It also checks designer/data/launch/megatron_release_arguments.yaml (the flags
--from-megatron accepts from the release) against the installed release's parser;
--release-flags prints that file as the release writes it, --write rewrites it.

CPU substitutions (each where the framework has no CPU path; nothing else is stubbed):
- megatron.training.arguments.get_device_arch_version: it asks the GPU; it answers the
  plan's GPU generation instead (9 for Hopper and older, 10 for Blackwell), which is what
  decides whether Megatron requires CUDA_DEVICE_MAX_CONNECTIONS=1; torch.cuda.
  get_device_capability likewise (validate_args asks it for grouped GEMMs).
- the kernel fusions (rope, bias-activation, bias-dropout, masked softmax, gradient
  accumulation, persistent layer norm, MoE permutation) and FP8 are switched off before the
  TransformerConfig of the parameter count is built, and an MoE model's all-to-all token
  dispatcher (it opens a CUDA stream) is the all-gather one (validate_args judged them as
  emitted): they need Transformer Engine / Apex CUDA kernels and change no parameter.
- the model is built with TP = PP = CP = EP = 1 on the meta device (one CPU process) to count
  the whole model's parameters; the parallel sizes are judged by validate_args.
- megatron.bridge.AutoBridge.from_hf_pretrained: the Llama recipes read the model's
  config.json from the Hugging Face Hub (gated, and CI has no network); it returns a bare
  GPTModelProvider instead, on which the emitted snippet sets every model field.
- megatron.bridge.training.config.get_world_size_safe: it asks torch.distributed (one
  gloo process here); it answers the plan's world size, as torchrun would.
- torchao (torchtitan's FP8 linear layers) is not in ci/frameworks.txt: a torchtitan config
  function with a Float8 converter (llama3_405b) builds it as the identity (no size changes).
- torch.cuda.current_device answers "cpu" while the model is built: YaRN's rotary
  embedding (latent attention, DeepSeek-V3) asks it for the device of its frequency
  buffers and takes no use_cpu_initialization from MLA; buffers hold no parameter.
- megatron-core's local (non-Transformer-Engine) DotProductAttention is given a wrapper
  that drops the k_channels / v_channels latent attention passes (only TE's core
  attention takes them, and TE has no CPU build); core attention holds no parameter.
- megatron.bridge.peft.lora_layers imports transformer_engine.pytorch at module level (TE
  has no CPU build); it is replaced by a module with its four class names, which the
  ConfigContainer checks never use.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import types
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")
BLACKWELL = ("b200", "gb200", "b300", "gb300")


def command_args(text: str, script: str = "pretrain_gpt.py") -> tuple[list[str], list[str], dict]:
    """(torchrun args, script args, exported env) of an emitted Megatron/Slurm text."""
    env = {}
    joined = text.replace("\\\n", " ")
    for line in joined.splitlines():
        s = line.strip()
        if s.startswith("export "):
            k, _, v = s[len("export ") :].partition("=")
            env[k] = v.strip("\"'")
        if script in s and "torchrun" in s:
            words = shlex.split(s.rstrip("&").strip())
            i = words.index(script)
            head = words[words.index("torchrun") + 1 : i]
            return head, words[i + 1 :], env
    raise ValueError("no torchrun ... pretrain_gpt.py line")


def world_size(head: list[str]) -> int:
    opts = dict(zip(head[::2], head[1::2], strict=False))
    return int(opts["--nnodes"]) * int(opts["--nproc-per-node"])


def megatron_check(case: dict, text: str) -> dict[str, str]:
    """parse_args, validate_args, TransformerConfig, meta-device parameter count and the
    interleaved schedule's rule, each 'ok' or the framework's error."""
    import megatron.training.arguments as A

    out: dict[str, str] = {}
    exp = case["expect"]
    head, argv, env = command_args(text)
    out["rank arithmetic"] = (
        "ok"
        if world_size(head) == exp["world"]
        else (f"torchrun starts {world_size(head)} processes, the plan has {exp['world']}")
    )
    for k in ("CUDA_DEVICE_MAX_CONNECTIONS",):
        os.environ.pop(k, None)
    os.environ.update(env)
    os.environ.update(WORLD_SIZE=str(exp["world"]), RANK="0")
    sys.argv = ["pretrain_gpt.py", *argv]
    try:
        args = A.parse_args()
        out["parse_args"] = "ok"
    except SystemExit as e:
        out["parse_args"] = f"exit {e.code}"
        return out
    arch = 10 if case["gpu"] in BLACKWELL else 9
    A.get_device_arch_version = lambda: arch
    A.torch.cuda.get_device_capability = lambda device=None: (arch, 0)
    try:
        A.validate_args(args)
        out["validate_args"] = "ok"
    except BaseException as e:  # noqa: BLE001  (asserts and SystemExit alike)
        out["validate_args"] = f"{type(e).__name__}: {e}"[:300]
        return out
    out["interleaved schedule"] = interleaved_check(args, exp)
    out.update(model_check(A, args, exp))
    return out


def interleaved_check(args, exp: dict) -> str:
    """The interleaved schedule's micro-batch rule at the parsed group size N
    (--microbatch-group-size-per-virtual-pipeline-stage, args.microbatch_group_size_per_vp_stage;
    absent, PP as ModelParallelConfig.__post_init__ sets it): the two raises of
    megatron/core/pipeline_parallel/schedules.py forward_backward_pipelining_with_interleaving
    (N within [PP, m]; a last group m mod N of 0 or at least PP), which runs only on the
    GPU, and N the plan's."""
    m, p = exp["microbatches"], exp["pp"]
    if exp["vp"] <= 1:
        return "ok"
    n = getattr(args, "microbatch_group_size_per_vp_stage", None) or p
    if not p <= n <= m:
        return f"the group size {n} is outside [PP {p}, {m} micro-batches per step]"
    if 0 < m % n < p:
        return f"{m} micro-batches per step in groups of {n} leave {m % n}, fewer than PP {p}"
    want = exp.get("microbatch_group", p)
    return "ok" if n == want else f"groups of {n}, the plan's are {want}"


def model_check(A, args, exp: dict) -> dict[str, str]:
    import torch
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import (
        get_gpt_decoder_block_spec,
        get_gpt_mtp_block_spec,
    )

    for k in (
        "apply_rope_fusion",
        "gradient_accumulation_fusion",
        "bias_gelu_fusion",
        "bias_swiglu_fusion",
        "bias_dropout_fusion",
        "masked_softmax_fusion",
        "persist_layer_norm",
        "moe_grouped_gemm",
        "moe_permute_fusion",
    ):
        setattr(args, k, False)
    args.no_persist_layer_norm = True
    args.fp8 = None  # FP8 recipes need Transformer Engine; they change no parameter
    # the all-to-all dispatcher opens a CUDA stream when built; dispatchers hold no parameter
    args.moe_token_dispatcher_type = "allgather"
    args.tensor_model_parallel_size = args.pipeline_model_parallel_size = 1
    args.context_parallel_size = args.expert_model_parallel_size = 1
    args.expert_tensor_parallel_size = 1
    args.sequence_parallel = False
    args.use_cpu_initialization, args.perform_initialization = True, False  # no GPU here
    args.virtual_pipeline_model_parallel_size = None
    args.decoder_first_pipeline_num_layers = args.decoder_last_pipeline_num_layers = None
    args.num_layers_in_first_pipeline_stage = args.num_layers_in_last_pipeline_stage = None
    args.pipeline_model_parallel_layout = None
    args.account_for_embedding_in_pipeline_split = False
    args.account_for_loss_in_pipeline_split = False
    try:
        cfg = A.core_transformer_config_from_args(args)
        out = {"TransformerConfig": f"ok ({type(cfg).__name__})"}
        for k in ("persist_layer_norm", "masked_softmax_fusion", "bias_dropout_fusion"):
            setattr(cfg, k, False)
        wrong = {
            k: getattr(cfg, k, "absent")
            for k, v in exp.get("config", {}).items()
            if getattr(cfg, k, "absent") != v
        }
        out["architecture"] = (
            "ok"
            if not wrong
            else f"the config has {wrong}, the spec needs "
            + str({k: exp["config"][k] for k in wrong})
        )
    except BaseException as e:  # noqa: BLE001
        return {"TransformerConfig": f"{type(e).__name__}: {e}"[:300]}
    try:
        block = get_gpt_decoder_block_spec(
            cfg, use_transformer_engine=False, normalization=args.normalization
        )
        mtp = (
            get_gpt_mtp_block_spec(cfg, block, use_transformer_engine=False)
            if getattr(args, "mtp_num_layers", None)
            else None
        )
        torch.cuda.current_device = lambda: "cpu"  # YaRN's buffers (module docstring)
        _drop_latent_channels()
        with torch.device("meta"):
            model = GPTModel(
                cfg,
                block,
                vocab_size=args.vocab_size,
                max_sequence_length=args.max_position_embeddings,
                position_embedding_type=args.position_embedding_type,
                share_embeddings_and_output_weights=not args.untie_embeddings_and_output_weights,
                mtp_block_spec=mtp,
            )
        n = sum(p.numel() for p in model.parameters())
    except BaseException as e:  # noqa: BLE001
        where = traceback.extract_tb(e.__traceback__)[-3:]
        out["parameters"] = (
            f"{type(e).__name__}: {e}"[:300]
            + " at "
            + "; ".join(f"{f.filename.split('site-packages/')[-1]}:{f.lineno}" for f in where)
        )
        return out
    out["parameters"] = (
        "ok"
        if n == exp["params"]
        else (f"megatron-core builds {n:,}, the spec has {exp['params']:,}")
    )
    return out


def _drop_latent_channels() -> None:
    """The local DotProductAttention, taking (and ignoring) MLA's k/v_channels."""
    from megatron.core.transformer.dot_product_attention import DotProductAttention

    init = DotProductAttention.__init__
    if getattr(init, "drops_latent_channels", False):
        return

    def wrapped(self, *a, k_channels=None, v_channels=None, **kw):
        init(self, *a, **kw)

    wrapped.drops_latent_channels = True
    DotProductAttention.__init__ = wrapped


def slurm_check(text: str) -> dict[str, str]:
    out = {}
    with tempfile.NamedTemporaryFile("w", suffix=".sbatch", delete=False) as f:
        f.write(text)
    try:
        r = subprocess.run(["bash", "-n", f.name], capture_output=True, text=True)
        out["bash -n"] = "ok" if r.returncode == 0 else r.stderr.strip()[:300]
        if shutil.which("shellcheck"):
            r = subprocess.run(
                ["shellcheck", "-S", "warning", f.name], capture_output=True, text=True
            )
            out["shellcheck"] = "ok" if r.returncode == 0 else r.stdout.strip()[:300]
        else:
            out["shellcheck"] = "shellcheck is not installed"
    finally:
        os.unlink(f.name)
    return out


def torchtitan_argv(text: str) -> tuple[list[str], list[str]]:
    """(torchrun args, torchtitan.train args) of the emitted command."""
    for line in text.replace("\\\n", " ").splitlines():
        if "torchtitan.train" in line and not line.lstrip().startswith("#"):
            words = shlex.split(line)
            i = words.index("torchtitan.train")
            return words[words.index("torchrun") + 1 : i - 1], words[i + 1 :]
    raise ValueError("no `torchrun ... -m torchtitan.train` command")


def without_torchao() -> None:
    """CPU substitution: torchao (FP8 linear layers, not in ci/frameworks.txt) and an SM89+
    GPU are what Float8LinearConverter needs; a config function that carries one
    (llama3_405b) builds it as the identity: it changes no parallel size and no split."""
    import importlib.util

    if importlib.util.find_spec("torchao") is not None:
        return
    from torchtitan.components.quantization import float8

    float8.Float8LinearConverter.__init__ = lambda self, config: setattr(self, "config", config)
    float8.Float8LinearConverter.convert = lambda self, model_config: model_config


def torchtitan_check(case: dict, text: str) -> dict[str, str]:
    """torchtitan's ConfigManager on the emitted --module/--config and overrides, then
    ParallelDims at the plan's world size, torchtitan's own pipeline split and the
    model's parameter count."""
    from torchtitan.config import ConfigManager

    exp = case["expect"]
    out: dict[str, str] = {}
    try:
        head, argv = torchtitan_argv(text)
    except ValueError as e:
        return {"command": str(e)}
    out["rank arithmetic"] = (
        "ok"
        if world_size(head) == exp["world"]
        else f"torchrun starts {world_size(head)} processes, the plan has {exp['world']}"
    )
    without_torchao()
    try:
        cfg = ConfigManager().parse_args(argv)
        out["ConfigManager"] = "ok"
    except BaseException as e:  # noqa: BLE001  (tyro exits on an unknown flag)
        return {**out, "ConfigManager": f"{type(e).__name__}: {e}"[:300]}
    out.update(torchtitan_sizes(cfg, exp))
    out.update(torchtitan_split(cfg, exp))
    out.update(torchtitan_params(cfg, exp))
    return out


def torchtitan_params(cfg, exp: dict) -> dict[str, str]:
    """The config function's model, built on the meta device, against the spec's count."""
    import torch

    try:
        with torch.device("meta"):
            model = cfg.model_spec.model.build()
        n = sum(p.numel() for p in model.parameters())
    except BaseException as e:  # noqa: BLE001
        return {"parameters": f"{type(e).__name__}: {e}"[:300]}
    ok = n == exp["params"]
    return {
        "parameters": "ok" if ok else f"torchtitan builds {n:,}, the spec has {exp['params']:,}"
    }


def torchtitan_sizes(cfg, exp: dict) -> dict[str, str]:
    """ParallelDims (its own validation) against the plan's sizes, batch and sequence."""
    from torchtitan.distributed import ParallelDims

    try:
        dims = ParallelDims.from_config(cfg.parallelism, exp["world"])
    except BaseException as e:  # noqa: BLE001
        return {"ParallelDims": f"{type(e).__name__}: {e}"[:300]}
    got = {
        "tp": dims.tp,
        "pp": dims.pp,
        "cp": dims.cp,
        "dp": dims.dp_replicate * dims.dp_shard,
        "global_batch": cfg.training.global_batch_size,
        "seq_len": cfg.training.seq_len,
        "layers": len(cfg.model_spec.model.layers),
    }
    bad = [f"{k} {v} (plan {exp[k]})" for k, v in got.items() if v != exp[k]]
    return {"ParallelDims": "ok" if not bad else "differs: " + ", ".join(bad)}


def torchtitan_split(cfg, exp: dict) -> dict[str, str]:
    """torchtitan's pipeline split (_get_pipeline_metadata, _generate_llm_fqn_per_model_part,
    the loop placement of stage s on rank s mod PP): layers per rank against the plan's."""
    if cfg.parallelism.pipeline_parallel_degree == 1:
        return {}
    from torchtitan.distributed import ParallelDims
    from torchtitan.distributed import pipeline_parallel as P

    par = cfg.parallelism
    try:
        dims = ParallelDims.from_config(par, exp["world"])
        n, layers, first, last = P._get_pipeline_metadata(dims, par, cfg.model_spec.model)
        parts = par.module_fqns_per_model_part or P._generate_llm_fqn_per_model_part(
            n, layers, first, last
        )
    except BaseException as e:  # noqa: BLE001
        return {"pipeline split": f"{type(e).__name__}: {e}"[:300]}
    per_rank = [0] * dims.pp
    for s, names in enumerate(parts):
        per_rank[s % dims.pp] += sum(name.startswith("layers.") for name in names)
    order = [name for names in parts for name in names]
    want = ["tok_embeddings", *(f"layers.{i}" for i in range(layers)), "norm", "lm_head"]
    if order != want:
        return {"pipeline split": f"the stages do not hold the model's modules in order: {parts}"}
    return {
        "pipeline split": "ok"
        if per_rank == exp["stage_layers"] and len(parts) == dims.pp * exp["vp"]
        else f"{len(parts)} stages, layers per rank {per_rank}; the plan: {exp['stage_layers']}"
    }


def bridge_check(case: dict, text: str) -> dict[str, str]:
    """Run the emitted Megatron-Bridge snippet and validate its ConfigContainer."""
    if "megatron.bridge" not in text:
        return {"ConfigContainer": "not a Megatron-Bridge recipe (NeMo 2.0 paths)"}
    import megatron.bridge.training.config as bridge_config

    offline_hf_configs()
    # one CPU process stands for the plan's world (validate() divides it into TP x PP x CP x DP)
    bridge_config.get_world_size_safe = lambda: case["expect"]["world"]
    ns: dict = {}
    try:
        exec(compile(text, "<bridge>", "exec"), ns)  # noqa: S102 (our own emitted text)
        cfg = ns["cfg"]
        cfg.validate()
        m, exp = cfg.model, case["expect"]
        got = {
            "tp": m.tensor_model_parallel_size,
            "pp": m.pipeline_model_parallel_size,
            "vp": m.virtual_pipeline_model_parallel_size or 1,
            "cp": m.context_parallel_size,
            "dp": cfg.data_parallel_size,
        }
        wrong = {k: (v, exp[k]) for k, v in got.items() if v != exp[k]}
        if wrong:
            return {"ConfigContainer": f"validated, but (built, plan) differ: {wrong}"}
        return {"ConfigContainer": "ok"}
    except BaseException as e:  # noqa: BLE001
        return {"ConfigContainer": f"{type(e).__name__}: {e}"[:300]}


def offline_hf_configs() -> None:
    """AutoBridge.from_hf_pretrained(id).to_megatron_provider() gives a bare GPTModelProvider
    (no Hub access); the snippet under test sets every model field on it."""
    from megatron.bridge import AutoBridge
    from megatron.bridge.models.gpt_provider import GPTModelProvider

    class Offline:
        def to_megatron_provider(self, load_weights: bool = True, **_kw):
            return GPTModelProvider()

    AutoBridge.from_hf_pretrained = classmethod(lambda cls, path, **kw: Offline())


def stub_lora_layers() -> None:
    stub = types.ModuleType("megatron.bridge.peft.lora_layers")
    for n in ("LinearAdapter", "LoRALinear", "LoRATopKRouter", "TEFusedLoRALinear"):
        setattr(stub, n, type(n, (), {}))
    sys.modules[stub.__name__] = stub


def init_megatron() -> None:
    import torch.distributed as dist
    from megatron.core import parallel_state

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(29500 + os.getpid() % 1000))
    dist.init_process_group("gloo", rank=0, world_size=1)
    parallel_state.initialize_model_parallel(1, 1)


CHECKS = {
    "megatron": megatron_check,
    "slurm": None,
    "torchtitan": torchtitan_check,
    "nemo": bridge_check,
}


def check_case(case: dict) -> dict[str, dict[str, str]]:
    results: dict[str, dict[str, str]] = {}
    for fmt, text in case["texts"].items():
        try:
            if fmt == "slurm":
                r = slurm_check(text)
                r.update({f"megatron {k}": v for k, v in megatron_check(case, text).items()})
            else:
                r = CHECKS[fmt](case, text)
        except BaseException as e:  # noqa: BLE001
            r = {"check": f"{type(e).__name__}: {e}"[:300] + traceback.format_exc()[-300:]}
        results[fmt] = r
    return results


def known_failing() -> dict[str, str]:
    """Formats whose emitter the frameworks still refuse (ci/launch_known_failures.txt: one
    ``format: why`` a line): their failures are printed and counted but do not fail the
    check, and a format listed there that passes every plan fails it (strict, so the list
    only shrinks: remove the line once the emitter is fixed)."""
    path = Path(__file__).resolve().parent.parent / "ci" / "launch_known_failures.txt"
    rows = [ln.split(":", 1) for ln in path.read_text().splitlines() if ln.strip()[:1] not in "#"]
    return {fmt.strip(): why.strip() for fmt, why in rows}


RELEASE_FLAGS = (
    Path(__file__).resolve().parent.parent
    / "designer"
    / "data"
    / "launch"
    / "megatron_release_arguments.yaml"
)


def release_flags() -> list[str]:
    """Every --flag the installed megatron-core's pretrain_gpt.py parser accepts
    (megatron.training.arguments.add_megatron_arguments, which parse_args calls), --help
    aside, sorted."""
    import argparse

    from megatron.training.arguments import add_megatron_arguments

    parser = argparse.ArgumentParser(allow_abbrev=False)
    add_megatron_arguments(parser)
    names = {o for a in parser._actions for o in a.option_strings if o.startswith("--")}
    return sorted(names - {"--help"})


def release_flags_text() -> str:
    """designer/data/launch/megatron_release_arguments.yaml as this release writes it."""
    from importlib.metadata import version

    lines = [
        "# Every command-line flag of the megatron-core release the launch check runs: its",
        "# pretrain_gpt.py parser (megatron.training.arguments.add_megatron_arguments, many",
        "# flags made from TransformerConfig's fields), written by",
        "#   <frameworks python> bench/launch_check_frameworks.py --release-flags --write",
        "# and checked equal to the installed release by every launch check. --from-megatron",
        "# accepts these beside megatron_arguments.yaml's (the pinned commit's).",
        f"release: megatron-core {version('megatron-core')}",
        "flags:",
        *(f"  - {name}" for name in release_flags()),
    ]
    return "\n".join(lines) + "\n"


def release_flags_check() -> int:
    """1 (printed) when the committed release flag list is not the installed release's."""
    want = release_flags_text()
    have = RELEASE_FLAGS.read_text() if RELEASE_FLAGS.exists() else ""
    if have == want:
        print(f"release flags: {RELEASE_FLAGS.name} is the installed release's")
        return 0
    print(
        f"FAIL release flags: {RELEASE_FLAGS.name} is not the installed megatron-core's; "
        "rewrite it with bench/launch_check_frameworks.py --release-flags --write"
    )
    return 1


def main(path: str) -> int:
    t0 = time.monotonic()
    known = known_failing()
    stub_lora_layers()
    init_megatron()
    cases = json.load(open(path))
    fails, counts = release_flags_check(), {}
    for case in cases:
        if "error" in case:
            print(f"FAIL {case['name']}: {case['error']}")
            fails += 1
            continue
        results = check_case(case)
        for fmt, r in results.items():
            bad = {k: v for k, v in r.items() if not v.startswith("ok")}
            c = counts.setdefault(fmt, [0, 0])
            c[1] += 1
            if bad:
                fails += fmt not in known
                print(
                    f"{'known failure' if fmt in known else 'FAIL'} {case['name']} {fmt}: "
                    + "; ".join(f"{k}: {v}" for k, v in bad.items())
                )
            else:
                c[0] += 1
        for fmt, why in case["refused"].items():
            print(f"refused {case['name']} {fmt}: {why}")
    print(
        f"frameworks: {len(cases)} plans in {time.monotonic() - t0:.0f} s; passed "
        + ", ".join(f"{fmt} {ok}/{n}" for fmt, (ok, n) in counts.items())
    )
    for fmt, why in known.items():
        ok, n = counts.get(fmt, (0, 0))
        print(f"known failing ({fmt}: {why}): {n - ok} of {n} plans failed")
        if n and ok == n:
            print(f"FAIL {fmt} passes every plan: remove it from ci/launch_known_failures.txt")
            fails += 1
    return 1 if fails else 0


if __name__ == "__main__":
    if sys.argv[1] == "--release-flags":
        if sys.argv[2:] == ["--write"]:
            RELEASE_FLAGS.write_text(release_flags_text())
        else:
            sys.stdout.write(release_flags_text())
        sys.exit(0)
    sys.exit(main(sys.argv[1]))
