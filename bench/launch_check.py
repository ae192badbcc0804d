"""The frameworks judge the launches: every emitted setting checked by torchtitan,
Megatron-LM and Megatron-Bridge themselves (issue 29), run by .ci/run after the tests.

    python bench/launch_check.py [--seed N] [--random 20] [--only NAME]

This side (the designer's venv) builds the plans: a fixed list (FIXED: every zoo family,
PP with and without VP, uneven splits, CP, FP8, GB200/GB300 racks, MI300X, the MoE
models) and --random optimizer plans from random questions (the seed is printed), emits
every format for each, and hands them to bench/launch_check_frameworks.py, run by the
framework environment ci/frameworks.sh builds from ci/frameworks.txt (torch, torchtitan,
megatron-core, megatron-bridge at the pinned releases). That side runs the frameworks'
own code on CPU: Megatron parse_args + validate_args at the plan's world size, the
TransformerConfig / MLATransformerConfig, the model on the meta device against the spec's
parameter count, the interleaved schedule's micro-batch rule (with the parsed
--microbatch-group-size-per-virtual-pipeline-stage: FIXED_GROUPS); torchtitan's ConfigManager,
ParallelDims and its pipeline split; Megatron-Bridge's ConfigContainer.validate(); and
bash -n + shellcheck for the Slurm script. Exit 1 when any check fails; the install and
check times are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from designer.errors import Infeasible, UsageError  # noqa: E402
from designer.launch import Launch, emit  # noqa: E402
from designer.launch.emit import FORMATS  # noqa: E402
from designer.question.build import build_scenario  # noqa: E402
from models.moe import training_params  # noqa: E402
from solvers import Config, solve  # noqa: E402
from solvers.plan import build_plan  # noqa: E402
from solvers.space import Shape  # noqa: E402

# name: (model, seq, tokens, gpu, (tp, cp, pp, vp, mb, recompute, precision[, split]),
#        nic, nics per server, dp, micro-batches per step); split = (first, last, emb, loss)
FIXED: dict[str, tuple] = {
    "gpt3-175b-vp": (
        "gpt3-175b",
        2048,
        3e11,
        "h100-sxm",
        (8, 1, 8, 2, 1, "none", "bf16"),
        "cx7-400g",
        8,
        4,
        64,
    ),
    "llama2-7b-fp8-full": (
        "llama2-7b",
        4096,
        3e11,
        "h100-sxm",
        (2, 1, 2, 1, 2, "full", "fp8"),
        "cx7-400g",
        8,
        16,
        16,
    ),
    "llama2-13b-dp": (
        "llama2-13b",
        4096,
        3e11,
        "a100-80gb",
        (1, 1, 1, 1, 1, "selective", "bf16"),
        "cx6-200g",
        8,
        64,
        8,
    ),
    "llama2-70b-cp": (
        "llama2-70b",
        16384,
        2e12,
        "h100-sxm",
        (2, 4, 8, 1, 1, "selective", "bf16"),
        "cx7-400g",
        8,
        4,
        256,
    ),
    "llama2-70b-vp": (
        "llama2-70b",
        4096,
        2e12,
        "h100-sxm",
        (4, 1, 4, 2, 1, "selective", "bf16"),
        "cx7-400g",
        4,
        8,
        32,
    ),
    "llama3-8b-fp8": (
        "llama3-8b",
        8192,
        1e12,
        "h200",
        (1, 1, 1, 1, 1, "none", "fp8"),
        "cx7-400g",
        8,
        32,
        4,
    ),
    "llama3-70b-pp": (
        "llama3-70b",
        8192,
        1e12,
        "h100-sxm",
        (8, 1, 4, 1, 1, "selective", "bf16"),
        "cx7-400g",
        8,
        8,
        32,
    ),
    "llama3-405b-acct-vp": (
        "llama3-405b",
        8192,
        1e12,
        "h200",
        (8, 1, 8, 8, 1, "selective", "bf16", (0, 0, True, True)),
        "cx7-400g",
        8,
        2,
        64,
    ),
    "llama3-405b-uneven-vp": (
        "llama3-405b",
        8192,
        1e12,
        "h200",
        (8, 1, 8, 2, 1, "selective", "bf16", (16, 14, False, False)),
        "cx7-400g",
        8,
        2,
        64,
    ),
    "mt-nlg-530b-uneven": (
        "mt-nlg-530b",
        2048,
        3e11,
        "h100-sxm",
        (8, 1, 8, 1, 1, "selective", "bf16", (11, 10, False, False)),
        "cx7-400g",
        8,
        2,
        24,
    ),
    "nemotron4-15b": (
        "nemotron4-15b",
        4096,
        1e12,
        "h100-sxm",
        (2, 1, 1, 1, 2, "selective", "bf16"),
        "cx7-400g",
        8,
        16,
        8,
    ),
    "nemotron4-340b-vp": (
        "nemotron4-340b",
        4096,
        1e12,
        "h100-sxm",
        (8, 1, 12, 8, 1, "selective", "bf16"),
        "cx7-400g",
        8,
        2,
        96,
    ),
    "llama3-70b-gb200": (
        "llama3-70b",
        8192,
        1e12,
        "gb200",
        (4, 1, 4, 1, 1, "none", "bf16"),
        "cx7-400g",
        4,
        4,
        64,
    ),
    "llama3-405b-gb300-fp8": (
        "llama3-405b",
        8192,
        1e12,
        "gb300",
        (8, 1, 9, 1, 1, "selective", "fp8"),
        "cx8-800g",
        4,
        2,
        72,
    ),
    "llama3-70b-mi300x": (
        "llama3-70b",
        8192,
        1e12,
        "mi300x",
        (8, 1, 2, 1, 1, "selective", "bf16"),
        "cx7-400g",
        8,
        8,
        16,
    ),
    "llama2-7b-cp-vp": (
        "llama2-7b",
        32768,
        3e11,
        "h100-sxm",
        (2, 2, 2, 2, 1, "selective", "bf16"),
        "cx7-400g",
        8,
        2,
        16,
    ),
    "llama3-8b-pp4": (
        "llama3-8b",
        8192,
        1e12,
        "h100-sxm",
        (1, 1, 4, 1, 2, "full", "bf16"),
        "cx7-400g",
        8,
        8,
        16,
    ),
    "gpt3-175b-uneven": (
        "gpt3-175b",
        2048,
        3e11,
        "h100-sxm",
        (8, 1, 8, 1, 1, "selective", "bf16", (0, 0, True, True)),
        "cx7-400g",
        8,
        4,
        64,
    ),
    "bloom-176b": (
        "bloom-176b",
        2048,
        3.66e11,
        "a100-80gb",
        (4, 1, 12, 1, 2, "selective", "bf16"),
        "cx6-200g",
        8,
        8,
        64,
    ),
}
# mixture-of-experts plans from the optimizer (their EP folding is the solver's to choose)
FIXED_OPTIMIZE: dict[str, dict] = {
    "mixtral-8x7b": dict(model="mixtral-8x7b", tokens=1e12, gpus=("h100-sxm",), max_gpus=64),
    "mixtral-8x22b": dict(model="mixtral-8x22b", tokens=2e12, gpus=("h200",), max_gpus=256),
    "qwen3-30b-a3b": dict(model="qwen3-30b-a3b", tokens=1e12, gpus=("h100-sxm",), max_gpus=64),
    # the flex dispatcher with DeepEP (--dispatcher deepep): TP 2 x EP 16, across servers
    "qwen3-235b-a22b": dict(
        model="qwen3-235b-a22b", tokens=5e12, gpus=("h100-sxm",), max_gpus=512, dispatcher="deepep"
    ),
    "deepseek-v3": dict(model="deepseek-v3", tokens=15e12, budget=100e6),
    "gpt-oss-120b": dict(model="gpt-oss-120b", tokens=2e12, gpus=("h100-sxm",), max_gpus=256),
}
# name: (a FIXED plan with VP > 1, micro-batches per step, Megatron-LM's
# --microbatch-group-size-per-virtual-pipeline-stage): the interleaved schedule runs m
# micro-batches that are no multiple of PP in groups of N (Layout.microbatch_group_size)
FIXED_GROUPS: dict[str, tuple[str, int, int]] = {
    # 15 = 6 + 6 + 3 at PP 2: the last group holds 3, at least PP
    "llama2-7b-cp-vp-group": ("llama2-7b-cp-vp", 15, 6),
}
RANDOM_MODELS = (
    "llama2-7b",
    "llama2-13b",
    "llama2-70b",
    "llama3-8b",
    "llama3-70b",
    "gpt3-175b",
    "nemotron4-15b",
    "mixtral-8x7b",
    "qwen3-30b-a3b",
)
RANDOM_GPUS = ("h100-sxm", "h200", "b200", "gb200", "a100-80gb", "mi300x")


def fixed_plan(name: str, microbatches: int | None = None):
    """The FIXED plan ``name`` (at ``microbatches`` per step where given)."""
    model, seq, tokens, gpu, shape, nic, nics, dp, m = FIXED[name]
    m = m if microbatches is None else microbatches
    scenario = build_scenario(
        model=model, tokens=tokens, seq_len=seq, gpus=(gpu,), max_gpus=100_000, precision=shape[6]
    )
    return scenario, build_plan(scenario, Config(Shape(gpu, *shape), nic, nics, dp, m))


def optimized_plan(question: dict, time_limit_s: float = 20.0):
    """(scenario, best plan); the plan is None when the question has none (or is one the
    CLI would refuse, such as fp8 on a GPU without it)."""
    try:
        scenario = build_scenario(**question)
    except (Infeasible, UsageError):
        return None, None
    res = solve(scenario, time_limit_s=time_limit_s)
    return scenario, res.best


def random_question(r: random.Random) -> dict:
    """A random optimize question: model, GPU, GPU cap, tokens, sequence, precision."""
    return dict(
        model=r.choice(RANDOM_MODELS),
        gpus=(r.choice(RANDOM_GPUS),),
        max_gpus=r.choice((16, 32, 64, 128, 256, 512, 1024)),
        tokens=r.choice((1e11, 3e11, 1e12, 2e12)),
        seq_len=r.choice((2048, 4096, 8192, 16384)),
        precision=r.choice(("bf16", "bf16", "fp8")),
    )


def expected(scenario, plan, job: Launch) -> dict:
    """What the frameworks must build: the plan's parallel sizes, stages and model size."""
    lay = job.layout
    return {
        "world": lay.num_gpus,
        "tp": lay.tp,
        "pp": lay.pp,
        "vp": lay.vp,
        "cp": lay.cp,
        "dp": lay.dp,
        "ep": job.ep,
        "etp": job.etp,
        "micro_batch": lay.micro_batch,
        "global_batch": lay.global_batch,
        "microbatches": lay.global_batch // (lay.micro_batch * lay.dp),
        "microbatch_group": lay.microbatch_group,  # the interleaved schedule's N (pp default)
        # what Megatron builds: the main model and its MTP modules (--mtp-num-layers)
        # at the plan's sequence length: learned absolute positions (GPT-3) are one per token
        # (--max-position-embeddings), whatever length the spec was published with
        "params": training_params(scenario.spec.model_copy(update={"seq_len": job.seq_len})),
        "stage_layers": list(job.stage_layers),
        "layers": scenario.spec.layers,
        "moe": scenario.spec.is_moe,
        "seq_len": job.seq_len,
        "config": config_fields(scenario.spec),
    }


def config_fields(spec) -> dict:
    """The (ML)TransformerConfig fields the flags must set for this spec: query/key norms,
    MTP, the router, latent attention's YaRN (issue 29)."""
    out: dict = {
        "qk_layernorm": spec.qk_norm or spec.is_mla,
        "mtp_num_layers": spec.mtp_layers or None,
    }
    if spec.is_moe:
        scale = spec.router_topk_scale
        out.update(
            moe_router_score_function=spec.router_score,
            moe_router_enable_expert_bias=spec.router_expert_bias,
            moe_router_topk_scaling_factor=None if scale == 1.0 else scale,
            moe_router_num_groups=spec.router_groups,
            moe_router_group_topk=spec.router_group_topk,
        )
    yarn = spec.rope_scaling
    if spec.is_mla and yarn is not None:
        out.update(rope_type="yarn", rotary_scaling_factor=yarn.factor, mscale=yarn.mscale,
                   mscale_all_dim=yarn.mscale_all_dim)  # fmt: skip
    return out


def case(name: str, scenario, plan, group: int | None = None) -> dict:
    """Every format's text (or its refusal) for one plan (its interleaved schedule in
    micro-batch groups of ``group`` where given)."""
    job = Launch.from_plan(scenario, plan)
    if group is not None:
        job = replace(job, layout=replace(job.layout, microbatch_group_size=group))
    texts, refused = {}, {}
    for fmt in FORMATS:
        try:
            texts[fmt] = emit(job, fmt)
        except (Infeasible, UsageError) as err:
            refused[fmt] = str(err)
    return {
        "name": name,
        "model": scenario.spec.name,
        "gpu": job.gpu,
        "expect": expected(scenario, plan, job),
        "texts": texts,
        "refused": refused,
    }


def build_cases(seed: int, n_random: int, only: str | None) -> list[dict]:
    cases = []
    for name in FIXED:
        if only in (None, name):
            cases.append(case(name, *fixed_plan(name)))
    for name, (base, m, group) in FIXED_GROUPS.items():
        if only in (None, name):
            cases.append(case(name, *fixed_plan(base, m), group=group))
    for name, q in FIXED_OPTIMIZE.items():
        if only in (None, name):
            scenario, plan = optimized_plan(q)
            if plan is None:
                cases.append({"name": name, "error": "optimize found no plan"})
            else:
                cases.append(case(name, scenario, plan))
    r = random.Random(seed)
    found = 0
    for i in range(n_random * 5):  # some random questions have no plan
        if found == n_random or only is not None:
            break
        q = random_question(r)
        scenario, plan = optimized_plan(q, time_limit_s=10.0)
        if plan is None:
            continue
        found += 1
        cases.append(case(f"random-{seed}-{i}-{q['model']}-{q['gpus'][0]}", scenario, plan))
    return cases


def framework_python() -> str:
    out = subprocess.run(
        [str(ROOT / "ci" / "frameworks.sh")], check=True, capture_output=True, text=True
    )
    sys.stderr.write(out.stderr)
    return out.stdout.strip().splitlines()[-1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=None, help="random plans' seed (default: time)")
    ap.add_argument("--random", type=int, default=20, help="random optimizer plans")
    ap.add_argument("--only", default=None, help="one fixed plan by name")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else int(time.time()) % 100_000
    print(f"launch check: seed {seed} (rerun: python bench/launch_check.py --seed {seed})")
    t0 = time.monotonic()
    py = framework_python()
    t_install = time.monotonic() - t0
    cases = build_cases(seed, args.random, args.only)
    t_plans = time.monotonic() - t0 - t_install
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cases.json"
        path.write_text(json.dumps(cases))
        env = dict(os.environ, PYTHONWARNINGS="ignore")
        proc = subprocess.run(
            [py, str(ROOT / "bench" / "launch_check_frameworks.py"), str(path)], env=env
        )
    t_check = time.monotonic() - t0 - t_install - t_plans
    print(
        f"launch check: environment {t_install:.0f} s, {len(cases)} plans emitted in "
        f"{t_plans:.0f} s, frameworks checked them in {t_check:.0f} s"
    )
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
