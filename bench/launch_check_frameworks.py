"""The framework side of bench/launch_check.py: run by the environment ci/frameworks.sh
builds (torch, torchtitan, megatron-core, megatron-bridge pinned in ci/frameworks.txt),
never by the designer's; it imports no designer code and judges the emitted text alone.

    <frameworks python> bench/launch_check_frameworks.py CASES.json

CPU substitutions (each where the framework has no CPU path; nothing else is stubbed):
- megatron.training.arguments.get_device_arch_version: it asks the GPU; it answers the
  plan's GPU generation instead (9 for Hopper and older, 10 for Blackwell), which is what
  decides whether Megatron requires CUDA_DEVICE_MAX_CONNECTIONS=1; torch.cuda.
  get_device_capability likewise (validate_args asks it for grouped GEMMs).
- the kernel fusions (rope, bias-activation, bias-dropout, masked softmax, gradient
  accumulation, persistent layer norm) and FP8 are switched off before the
  TransformerConfig of the parameter count is built, and an MoE model's all-to-all token
  dispatcher (it opens a CUDA stream) is the all-gather one (validate_args judged them as
  emitted): they need Transformer Engine / Apex CUDA kernels and change no parameter.
- the model is built with TP = PP = CP = EP = 1 on the meta device (one CPU process) to count
  the whole model's parameters; the parallel sizes are judged by validate_args.
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
    m = exp["microbatches"]
    if exp["vp"] > 1 and m % exp["pp"] != 0:
        out["interleaved schedule"] = (
            f"{m} micro-batches per step is not a multiple of PP {exp['pp']}"
        )
    else:
        out["interleaved schedule"] = "ok"
    out.update(model_check(A, args, exp))
    return out


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


def torchtitan_check(case: dict, text: str) -> dict[str, str]:
    """torchtitan's ConfigManager on the emitted command's --module/--config and overrides."""
    from torchtitan.config import ConfigManager

    line = next(
        (
            s
            for s in text.replace("\\\n", " ").splitlines()
            if "torchtitan.train" in s and not s.lstrip().startswith("#")
        ),
        None,
    )
    if line is None:
        return {
            "ConfigManager": "no `torchrun ... -m torchtitan.train` command (a TOML job "
            "file: torchtitan 0.3.0 takes --module/--config and --section.key overrides)"
        }
    words = shlex.split(line)
    argv = words[words.index("torchtitan.train") + 1 :]
    try:
        ConfigManager().parse_args(argv)
        return {"ConfigManager": "ok"}
    except BaseException as e:  # noqa: BLE001
        return {"ConfigManager": f"{type(e).__name__}: {e}"[:300]}


def bridge_check(case: dict, text: str) -> dict[str, str]:
    """Run the emitted Megatron-Bridge snippet and validate its ConfigContainer."""
    if "megatron.bridge" not in text:
        return {"ConfigContainer": "not a Megatron-Bridge recipe (NeMo 2.0 paths)"}
    ns: dict = {}
    try:
        exec(compile(text, "<bridge>", "exec"), ns)  # noqa: S102 (our own emitted text)
        cfg = ns["cfg"]
        cfg.validate()
        return {"ConfigContainer": "ok"}
    except BaseException as e:  # noqa: BLE001
        return {"ConfigContainer": f"{type(e).__name__}: {e}"[:300]}


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


def main(path: str) -> int:
    t0 = time.monotonic()
    known = known_failing()
    stub_lora_layers()
    init_megatron()
    cases = json.load(open(path))
    fails, counts = 0, {}
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
    sys.exit(main(sys.argv[1]))
