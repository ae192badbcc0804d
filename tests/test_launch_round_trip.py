"""Round trips that can fail: every zoo model and 50 random plans from the optimizer's
space (uneven splits and splits only --pipeline-model-parallel-layout expresses
included) are emitted as Megatron-LM commands and imported again with Megatron-LM's
defaults for whatever the command leaves out: the same model (every architecture
field), the same layout and the same step time. The same plans' torchtitan overrides
build the plan's stages under torchtitan's own rule (tests/torchtitan_rule.py, pinned),
and their NeMo overrides leave no recipe default that contradicts the plan
(designer/data/launch/nemo_recipes.yaml, pinned)."""

from __future__ import annotations

import pytest

from catalog import load_catalog
from designer.errors import Infeasible, UsageError
from designer.launch import Launch, emit, load_megatron
from designer.launch.nemo_recipe import choose_recipe, nemo_fields, split_settings
from designer.launch.pipeline_layout import chunk_layers, needs_layout
from designer.launch.torchtitan_config import torchtitan_sections
from helpers import MEGATRON_CANNOT, ZOO, ideal_scenario, plan_of, random_plans, zoo_plan
from models import Hardware, evaluate
from models.expert import ExpertLayout
from models.zoo import zoo
from solvers.space import EVEN, Shape
from torchtitan_rule import command, stages

SPLIT_FIELDS = ("first_stage_layers", "last_stage_layers", "embedding_in_split",
                "loss_in_split", "stage_counts")  # fmt: skip


def _layout_fields(lay, layers: int | None = None) -> dict:
    """The layout's fields; with ``layers``, its split as the layers of every virtual stage
    instead of the fields that give it: a split Megatron-LM's split flags refuse is emitted
    as a --pipeline-model-parallel-layout string, which reads back as the flags' own
    fields where they give the same stages, else as stage_counts."""
    d = lay.as_dict(0)
    d.pop("grad_accum")
    if layers is not None:
        for key in SPLIT_FIELDS:
            d.pop(key, None)
        d["stages"] = chunk_layers(layers, lay)
    return d


def check_megatron_round_trip(scenario, plan) -> None:
    job = Launch.from_plan(scenario, plan)
    run = load_megatron(emit(job, "megatron"))
    assert run.spec.architecture() == scenario.spec.architecture()
    if job.seq_len <= scenario.spec.seq_len:  # --max-position-embeddings: the model's length
        assert run.spec.seq_len == scenario.spec.seq_len
        assert run.spec.params() == scenario.spec.params()
    lay, n = plan.evaluation.layout, scenario.spec.layers
    layers = n if needs_layout(n, lay) and lay.stage_counts is None else None
    assert _layout_fields(run.layout, layers) == _layout_fields(lay, layers)
    assert run.seq_len == plan.evaluation.seq_len and run.world_size == plan.num_gpus
    assert run.grad_reduce_dtype == ("bf16" if job.grad_reduce_bf16 else "fp32")
    hw = Hardware.from_catalog(load_catalog(), job.gpu, plan.config.nic, plan.config.nics_per_node)
    ex = ExpertLayout(run.ep, run.etp)  # 1 and 1 for a dense model
    ev = evaluate(run.spec, hw, run.layout, run.seq_len, scenario.tokens, scenario.assumptions, ex)
    assert ev.step_time_s == pytest.approx(plan.evaluation.step_time_s, rel=1e-12)
    assert ev.memory.total == pytest.approx(plan.evaluation.memory.total, rel=1e-12)


@pytest.mark.parametrize("model", ZOO)
def test_every_zoo_model_round_trips_through_megatron(model):
    scenario, plan = zoo_plan(model)
    if model in MEGATRON_CANNOT:
        with pytest.raises(Infeasible, match=MEGATRON_CANNOT[model]):
            emit(Launch.from_plan(scenario, plan), "megatron")
        return
    check_megatron_round_trip(scenario, plan)


@pytest.mark.parametrize("i", range(50))
def test_random_plans_round_trip_through_megatron(i):
    model, shape, dp, m, seq = random_plans()[i]
    check_megatron_round_trip(*plan_of(model, shape, dp, m, seq))


def test_random_plans_cover_uneven_splits():
    plans = random_plans()
    splits = {p[1].split for p in plans}
    assert len(plans) == 50
    assert any(s[0] for s in splits) and any(s[2] or s[3] for s in splits)
    relaxed = [p for p in plans if p[1].split == EVEN and zoo()[p[0]].layers % (p[1].pp * p[1].vp)]
    assert relaxed  # splits only --pipeline-model-parallel-layout expresses
    text = emit(Launch.from_plan(*plan_of(*relaxed[0])), "megatron")
    assert "--pipeline-model-parallel-layout" in text


@pytest.mark.parametrize("i", range(50))
def test_random_plans_torchtitan_split_is_the_plan(i):
    model, shape, dp, m, seq = random_plans()[i]
    scenario, plan = plan_of(model, shape, dp, m, seq)
    job = Launch.from_plan(scenario, plan)
    par = torchtitan_sections(job)["parallelism"]  # the emitted overrides, for any model
    try:
        assert command(emit(job, "torchtitan"))["sections"]["parallelism"] == par
    except Infeasible as err:  # no torchtitan 0.3.0 config for the model or its precision
        assert str(err).startswith("torchtitan 0.3.0 ")
    if shape.pp == 1:
        assert "pipeline_parallel_schedule" not in par
        return
    built = stages(par, scenario.spec.layers)  # raises where torchtitan would
    counts = [sum(n.startswith("layers.") for n in s) for s in built]
    assert counts == chunk_layers(scenario.spec.layers, plan.evaluation.layout)
    names = [n for s in built for n in s if n.startswith("layers.")]
    assert names == [f"layers.{i}" for i in range(scenario.spec.layers)]
    assert built[0][0] == "tok_embeddings" and built[-1][-2:] == ["norm", "lm_head"]


@pytest.mark.parametrize("i", range(50))
def test_random_plans_nemo_overrides_leave_no_recipe_default(i):
    model, shape, dp, m, seq = random_plans()[i]
    scenario, plan = plan_of(model, shape, dp, m, seq)
    job = Launch.from_plan(scenario, plan)
    check_nemo_overrides(job, dict(nemo_fields(job)))


def check_nemo_overrides(job, fields) -> None:
    """Every parallel and pipeline-split field is written with the plan's value, so no
    default of the Bridge recipe survives (the 405B recipe accounts for embedding and loss)."""
    paths = {
        "tp": "model.tensor_model_parallel_size",
        "pp": "model.pipeline_model_parallel_size",
        "vp": "model.virtual_pipeline_model_parallel_size",
        "cp": "model.context_parallel_size",
        "sp": "model.sequence_parallel",
        "first_stage_layers": "model.num_layers_in_first_pipeline_stage",
        "last_stage_layers": "model.num_layers_in_last_pipeline_stage",
        "embedding_in_split": "model.account_for_embedding_in_pipeline_split",
        "loss_in_split": "model.account_for_loss_in_pipeline_split",
        "pipeline_layout": "model.pipeline_model_parallel_layout",
    }
    lay = job.layout
    want = {"tp": lay.tp, "cp": lay.cp, "sp": lay.sp, **split_settings(job)}
    assert {k: fields[paths[k]] for k in want} == want


@pytest.mark.parametrize(
    "model, recipe",
    [
        ("llama3-405b", "llama31_405b"),
        ("llama3-70b", "llama3_70b"),
        ("llama2-70b", "llama3_70b"),
        ("llama3-8b", "llama3_8b"),
        ("llama2-7b", "llama2_7b"),
        ("gpt3-175b", "gpt3_175b"),
        ("nemotron4-340b", "vanilla_gpt"),
        ("nemotron4-15b", "vanilla_gpt"),
    ],
)
def test_nemo_recipe_per_model_size(model, recipe):
    assert choose_recipe(zoo()[model]) == recipe


def test_nemo_family_without_a_bridge_recipe_starts_from_vanilla_gpt():
    # Nemotron-4: Bridge 0.6.2 has no recipe; the bare GPTModelProvider one, every field set
    scenario, plan = zoo_plan("nemotron4-15b")
    text = emit(Launch.from_plan(scenario, plan), "nemo")
    assert "from megatron.bridge.recipes.gpt import vanilla_gpt_pretrain_config" in text
    assert "from megatron.core.activations import squared_relu" in text
    assert "cfg.model.activation_func = squared_relu" in text
    assert "cfg.model.gated_linear_unit = False" in text


def test_nemo_refuses_bloom_in_one_line():
    scenario, plan = zoo_plan("bloom-176b")
    with pytest.raises(Infeasible) as err:
        emit(Launch.from_plan(scenario, plan), "nemo")
    assert "\n" not in str(err.value) and "ALiBi" in str(err.value)


@pytest.mark.parametrize(
    "model, fmt, fix",
    [
        ("llama2-7b", "torchtitan", "use {} megatron"),  # no torchtitan config
        ("bloom-176b", "nemo", "{} nemo: ALiBi"),  # no Bridge recipe: "use {} torchtitan"
        ("mixtral-8x7b", "torchtitan", "use {} megatron or slurm"),  # dense-only emitter
    ],
)
def test_an_emitters_refusal_names_the_option_of_the_command(model, fmt, fix):
    """export's refusals said `use --emit megatron`, an optimize option that export does not
    take: the fix names the option that picks the format in the command running it."""
    if model in MOE_PLANS:
        scenario, plan = moe_plan(model)
    else:
        scenario, plan = zoo_plan(model)
    job = Launch.from_plan(scenario, plan)
    for option in ("--format", "--emit"):
        with pytest.raises(Infeasible) as err:
            emit(job, fmt, option)
        text = str(err.value)
        assert fix.format(option) in text and "\n" not in text
        other = "--emit" if option == "--format" else "--format"
        assert other not in text and "{option}" not in text
    with pytest.raises(Infeasible, match=fix.format("--emit")):  # optimize's, by default
        emit(job, fmt)


def test_nemo_405b_at_pp9_clears_the_recipe_accounting():
    # 126 layers on 9 stages: even, so the recipe's embedding/loss accounting must go
    shape = Shape("h100-sxm", 8, 1, 9, 1, 1, "selective", "bf16")
    scenario, plan = plan_of("llama3-405b", shape, 2, 18)
    job = Launch.from_plan(scenario, plan)
    text = emit(job, "nemo")
    assert "cfg = llama31_405b_pretrain_config()" in text
    assert "cfg.model.account_for_embedding_in_pipeline_split = False" in text
    assert "cfg.model.account_for_loss_in_pipeline_split = False" in text
    assert "cfg.model.virtual_pipeline_model_parallel_size = None" in text
    check_nemo_overrides(job, dict(nemo_fields(job)))


# ------------------------------------------------ mixture-of-experts (issue 17 item 6)
MOE_PLANS = {  # model: (tp, pp, dp, ep, etp)
    "mixtral-8x7b": (2, 4, 8, 8, 1),
    "mixtral-8x22b": (4, 8, 4, 8, 2),
    "qwen3-30b-a3b": (2, 4, 16, 32, 1),
    "qwen3-235b-a22b": (4, 2, 16, 64, 1),
    "llama4-scout": (4, 4, 8, 16, 2),
    "llama4-maverick": (4, 4, 16, 64, 1),
    "gpt-oss-120b": (4, 4, 8, 32, 1),
    "gpt-oss-20b": (2, 2, 16, 32, 1),
    "deepseek-v3": (1, 2, 64, 64, 1),
    "kimi-k2": (1, 2, 64, 64, 1),
    "grok-1": (4, 8, 4, 8, 1),
}


def moe_plan(model: str, spec=None):
    from models.zoo import moe_zoo
    from solvers.plan import Config, build_plan

    spec = spec or moe_zoo()[model]
    tp, pp, dp, ep, etp = MOE_PLANS[model]
    cat = load_catalog()
    s = ideal_scenario(
        spec=spec, catalog=cat, seq_len=spec.seq_len, tokens=1e12, gpus=("h100-sxm",),
        nics=tuple(cat.nics),
    )  # fmt: skip
    shape = Shape("h100-sxm", tp, 1, pp, 1, 1, "selective", "bf16", EVEN, ep, etp)
    nic = s.nics_for("h100-sxm")[0].name
    return s, build_plan(s, Config(shape, nic, 8, dp, 2 * pp))


@pytest.mark.parametrize("model", sorted(MOE_PLANS))
def test_moe_models_round_trip_through_megatron(model):
    """Every MoE zoo model Megatron-LM can build imports as the same model, EP and ETP; the
    others name why (GPT-OSS: its architecture without YaRN round-trips; Grok-1: its
    gated GELU has no flag, the rest round-trips with SwiGLU)."""
    from designer.launch.megatron_model import unsupported
    from models.zoo import moe_zoo

    spec = moe_zoo()[model]
    scenario, plan = moe_plan(model)
    if unsupported(spec) is not None:
        with pytest.raises(Infeasible):
            emit(Launch.from_plan(scenario, plan), "megatron")
        spec = spec.model_copy(update={"rope_scaling": None, "activation": "silu"})
        assert unsupported(spec) is None
        scenario, plan = moe_plan(model, spec)
    text = emit(Launch.from_plan(scenario, plan), "megatron")
    for flag in ("--num-experts", "--moe-router-topk", "--expert-model-parallel-size",
                 "--expert-tensor-parallel-size", "--moe-ffn-hidden-size", "--moe-layer-freq",
                 "--moe-token-dispatcher-type alltoall", "--moe-grouped-gemm",
                 "--moe-permute-fusion"):  # fmt: skip
        assert flag in text
    if spec.shared_experts:
        assert "--moe-shared-expert-intermediate-size" in text
    if spec.is_mla:
        assert "--multi-latent-attention" in text and "--kv-lora-rank" in text
    if spec.mtp_layers:
        assert f"--mtp-num-layers {spec.mtp_layers}" in text
    check_megatron_round_trip(scenario, plan)
    run = load_megatron(text)
    assert (run.ep, run.etp) == (plan.config.shape.ep, plan.config.shape.etp)
    assert run.permute_fusion  # what the plan prices (models.expert PERMUTE_HBM_PASSES)


def test_moe_layer_freq_forms():
    from designer.launch.megatron_model import layer_pattern

    assert layer_pattern("1", 3) == (True, True, True)
    assert layer_pattern("2", 4) == (True, False, True, False)  # Megatron: i % N == 0
    assert layer_pattern("([0]*1+[1]*3)", 4) == (False, True, True, True)
    assert layer_pattern("(([0]*1+[1])*2)", 4) == (False, True, False, True)
    for bad in ("__import__('os')", "[2]*4", "[1]*3", "0"):
        with pytest.raises(ValueError):
            layer_pattern(bad, 4)


def test_moe_flags_without_designer_rule_are_refused(capsys):
    from helpers import run_main

    base = (
        "torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 4 --hidden-size 1024 "
        "--num-attention-heads 16 --seq-length 1024 --max-position-embeddings 1024 "
        "--micro-batch-size 1 --bf16 --num-experts 8 --expert-model-parallel-size 8"
    )
    code, out, err = run_main(capsys, ["evaluate", "--from-megatron", base])
    assert code == 0, err  # --moe-layer-freq 1 (every layer), ETP = TP 1: EP 8 folds into DP 8
    bad = base + " --moe-layer-freq ([1]*2+[0]*2)"
    code, out, err = run_main(capsys, ["evaluate", "--from-megatron", bad])
    assert code == 2 and "--moe-layer-freq" in err
    code, out, err = run_main(
        capsys, ["evaluate", "--from-megatron", base + " --expert-model-parallel-size 16"]
    )
    assert code == 2 and "--expert-model-parallel-size" in err


SMALL_MOE_COMMAND = (
    "torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 4 --hidden-size 1024 "
    "--num-attention-heads 16 --seq-length 1024 --max-position-embeddings 1024 "
    "--micro-batch-size 1 --bf16 --num-experts 8 --expert-model-parallel-size 8"
)


def evaluate_each(capsys, **commands: tuple[str, list[str]]) -> dict[str, dict]:
    """``designer evaluate --from-megatron CMD --json EXTRA`` of each named (CMD, EXTRA):
    its JSON answer by name (each must succeed)."""
    import json

    from helpers import run_main

    got = {}
    for name, (cmd, extra) in commands.items():
        code, out, err = run_main(capsys, ["evaluate", "--from-megatron", cmd, "--json", *extra])
        assert code == 0, err
        got[name] = json.loads(out)
    return got


def test_a_moe_command_without_permute_fusion_is_priced_unfused(capsys):
    """--from-megatron: a MoE command without --moe-permute-fusion runs Megatron-Core's
    unfused permutation (its default), priced at UNFUSED_PERMUTE_HBM_PASSES and noted; with
    the flag, the fused passes; --permute-fusion overrides the command; a dense command has
    nothing to fuse."""
    base = SMALL_MOE_COMMAND
    got = evaluate_each(
        capsys,
        unfused=(base, []),
        fused=(base + " --moe-permute-fusion", []),
        overridden=(base, ["--permute-fusion"]),
    )
    assert "unfused permutation" in got["unfused"]["moe_plan"]
    assert "unfused permutation" not in got["fused"]["moe_plan"]
    notes = " ".join(got["unfused"]["from_megatron"]["notes"])
    assert "no --moe-permute-fusion" in notes
    assert got["unfused"]["step_time_s"] > got["fused"]["step_time_s"]
    assert got["overridden"]["step_time_s"] == got["fused"]["step_time_s"]
    dense = load_megatron(base.replace(" --num-experts 8 --expert-model-parallel-size 8", ""))
    assert dense.permute_fusion and not any("permute" in n for n in dense.notes)


def test_a_moe_command_with_an_fp32_router_is_priced_so(capsys):
    """--from-megatron reads --moe-router-dtype: fp32 prices the router's backward GEMMs at
    the TF32 rate (models.expert.router_fp32_per_microbatch_s), as evaluate --router-fp32
    does; fp64 is priced alike and noted; another value is refused naming the flag; a
    dense command has no router to price."""
    from helpers import run_main

    base = SMALL_MOE_COMMAND + " --moe-permute-fusion"
    got = evaluate_each(
        capsys,
        bf16=(base, []),
        fp32=(base + " --moe-router-dtype fp32", []),
        fp64=(base + " --moe-router-dtype fp64", []),
        option=(base, ["--router-fp32"]),
    )
    assert got["fp32"]["step_time_s"] > got["bf16"]["step_time_s"]
    assert got["fp32"]["step_time_s"] == got["fp64"]["step_time_s"]
    assert got["fp32"]["step_time_s"] == got["option"]["step_time_s"]
    assert got["fp32"]["moe_plan"] == got["option"]["moe_plan"] != got["bf16"]["moe_plan"]
    assert any("fp64: priced as fp32" in n for n in got["fp64"]["from_megatron"]["notes"])
    assert load_megatron(base + " --moe-router-dtype fp32").router_fp32
    assert not load_megatron(base).router_fp32
    code, out, err = run_main(
        capsys, ["evaluate", "--from-megatron", base + " --moe-router-dtype bf16"]
    )
    assert code == 2 and "--moe-router-dtype" in err and "fp32, fp64" in err
    dense = base.replace(" --num-experts 8 --expert-model-parallel-size 8", "")
    assert not load_megatron(dense + " --moe-router-dtype fp32").router_fp32


TWO_NODE_MOE_COMMAND = (
    "torchrun --nnodes 2 --nproc-per-node 8 pretrain_gpt.py --num-layers 4 --hidden-size 1024 "
    "--num-attention-heads 16 --seq-length 1024 --max-position-embeddings 1024 "
    "--micro-batch-size 1 --global-batch-size 64 --bf16 --num-experts 16 --expert-model-parallel-size 16 "
    "--moe-permute-fusion --moe-grouped-gemm --moe-token-dispatcher-type alltoall"
)  # EP 16 over two servers: the all-to-all crosses the NICs; 4 micro-batches a step


@pytest.mark.parametrize(
    "flags, option",
    [
        (" --moe-enable-deepep", ["--dispatcher", "deepep"]),
        (" --overlap-moe-expert-parallel-comm", ["--moe-overlap", "a2a"]),
        (
            " --moe-expert-capacity-factor 1.5 --moe-pad-expert-input-to-capacity",
            ["--capacity-factor", "1.5"],
        ),
        (
            " --recompute-granularity selective --recompute-modules moe_act layernorm",
            ["--recompute-modules", "moe_act,layernorm"],
        ),
    ],
    ids=["deepep", "a2a-overlap", "capacity", "recompute-modules"],
)
def test_a_moe_commands_mechanisms_price_as_evaluate_options_do(capsys, flags, option):
    """--from-megatron reads DeepEP's dispatch (with the flex dispatcher), the batch-level
    all-to-all overlap, the capacity factor and --recompute-modules: the command with the
    flag prices (step, memory, the moe line) as the plain command with the evaluate option
    that switches the same ExpertLayout field, and differently from the plain command."""
    base = TWO_NODE_MOE_COMMAND
    cmd = base + flags
    if "deepep" in flags:
        cmd = cmd.replace(
            "--moe-token-dispatcher-type alltoall", "--moe-token-dispatcher-type flex"
        )
    got = evaluate_each(capsys, plain=(base, []), flag=(cmd, []), option=(base, option))
    for key in ("step_time_s", "moe_plan", "memory_gb"):
        assert got["flag"][key] == got["option"][key], key
    assert (got["flag"]["step_time_s"], got["flag"]["memory_gb"]) != (
        got["plain"]["step_time_s"],
        got["plain"]["memory_gb"],
    )
    notes = " ".join(got["flag"]["from_megatron"]["notes"])
    assert "modelled as alltoall" not in notes


def test_recompute_modules_map_onto_the_layout_and_the_moe_modules():
    """Megatron-Core's --recompute-modules under selective granularity (or its shorthand
    --recompute-activations): core_attn is the layout's selective recompute (without it
    the layout recomputes none), shared_experts is models.memory's shared_expert, mlp is
    noted and not priced; under full recomputation the flag is not read (noted); a module
    Megatron does not know is refused naming the flag."""
    sel = TWO_NODE_MOE_COMMAND + " --recompute-granularity selective --recompute-modules"
    run = load_megatron(sel + " core_attn moe_act shared_experts mlp")
    assert run.layout.recompute == "selective"
    assert run.experts().recompute_modules == frozenset({"moe_act", "shared_expert"})
    assert any("mlp: a dense MLP's recompute, not priced" in n for n in run.notes)
    run = load_megatron(sel + " moe")
    assert run.layout.recompute == "none" and run.experts().recompute_modules == {"moe"}
    short = sel.replace("--recompute-granularity selective", "--recompute-activations")
    run = load_megatron(short + " moe")  # the shorthand for selective granularity
    assert run.layout.recompute == "none" and run.experts().recompute_modules == {"moe"}
    full = "full --recompute-method uniform --recompute-num-layers 1"  # as Megatron needs
    run = load_megatron(sel.replace("selective", full) + " moe")
    assert run.layout.recompute == "full" and not run.experts().recompute_modules
    assert any("not read under full recomputation" in n for n in run.notes)
    assert load_megatron(TWO_NODE_MOE_COMMAND).layout.recompute == "none"
    with pytest.raises(UsageError, match="--recompute-modules: 'attn' is not one of"):
        load_megatron(sel + " attn")
    dense = sel.replace(" --num-experts 16 --expert-model-parallel-size 16", "")
    run = load_megatron(dense + " core_attn layernorm")
    assert run.layout.recompute == "selective"
    assert any("a dense model's recompute of layernorm is not priced" in n for n in run.notes)


def test_a_capacity_factor_without_padding_is_priced_padded_and_noted():
    cmd = TWO_NODE_MOE_COMMAND + " --moe-expert-capacity-factor 1.25"
    run = load_megatron(cmd)
    assert run.experts().capacity_factor == 1.25
    assert any("priced padded to it" in n for n in run.notes)
    padded = load_megatron(cmd + " --moe-pad-expert-input-to-capacity")
    assert padded.experts() == run.experts() and not any("padded" in n for n in padded.notes)
    with pytest.raises(UsageError, match="--moe-expert-capacity-factor: 0 is not from"):
        load_megatron(TWO_NODE_MOE_COMMAND + " --moe-expert-capacity-factor 0")


@pytest.mark.parametrize(
    "flags, why",
    [
        (" --recompute-granularity full --recompute-method uniform --recompute-num-layers 1",
         "full recomputation"),
        (" --recompute-granularity selective --recompute-modules moe", "drop moe"),
        (" --pipeline-model-parallel-size 2", "set VP above 1"),
    ],
    ids=["full", "moe-module", "pp-no-vp"],
)  # fmt: skip
def test_an_overlap_megatron_core_refuses_is_refused(flags, why):
    """--overlap-moe-expert-parallel-comm on a layout TransformerConfig refuses it for:
    the import names the flag and the fix; with virtual stages the same PP imports."""
    base = TWO_NODE_MOE_COMMAND.replace(
        "--expert-model-parallel-size 16", "--expert-model-parallel-size 8"
    )
    with pytest.raises(UsageError, match=f"--overlap-moe-expert-parallel-comm: .*{why}"):
        load_megatron(base + " --overlap-moe-expert-parallel-comm" + flags)
    ok = load_megatron(
        base + " --overlap-moe-expert-parallel-comm --pipeline-model-parallel-size 2"
        " --num-virtual-stages-per-pipeline-rank 2"
    )
    assert ok.ep_overlap == 1.0 and ok.layout.vp == 2


@pytest.mark.parametrize("fmt", ["nemo", "torchtitan"])
def test_dense_only_emitters_refuse_moe_plans(fmt):
    scenario, plan = moe_plan("mixtral-8x7b")
    with pytest.raises(Infeasible, match="dense models only"):
        emit(Launch.from_plan(scenario, plan), fmt)
    assert "--num-experts 8" in emit(Launch.from_plan(scenario, plan), "slurm")


def test_every_moe_zoo_model_has_a_round_trip_plan():
    """README: every MoE zoo model round-trips through Megatron (or names why not): each
    has its plan here (Qwen3-Next's is added by tests/test_linear_attention.py)."""
    from models.zoo import moe_zoo

    assert set(moe_zoo()) - set(MOE_PLANS) <= {"qwen3-next-80b-a3b"}


@pytest.mark.parametrize(
    "flags, per_domain, note",
    [
        (" --moe-token-dispatcher-type flex --moe-enable-deepep", True, None),
        (" --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep", True, None),
        (" --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep", True, None),
        (" --moe-token-dispatcher-type flex", True, "default, deepep"),
        (" --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend ncclep", False,
         "NCCL EP priced as the alltoall dispatcher"),
    ],
    ids=["enable-deepep", "deepep", "hybridep", "flex-default", "ncclep"],
)  # fmt: skip
def test_the_flex_dispatchers_backend_decides_the_per_domain_dispatch(
    capsys, flags, per_domain, note
):
    """megatron-core 0.19.2's flex dispatcher: DeepEP (its default backend, or the
    deprecated --moe-enable-deepep) and HybridEP send a token once per remote domain, as
    evaluate --dispatcher deepep prices it; NCCL EP is priced as alltoall, noted."""
    base = TWO_NODE_MOE_COMMAND.replace(" --moe-token-dispatcher-type alltoall", "")
    run = load_megatron(base + flags)
    assert run.experts().dispatch_per_domain is per_domain
    assert (note is None) == (not any("flex" in n or "ncclep" in n for n in run.notes))
    if note is not None:
        assert any(note in n for n in run.notes), run.notes
    got = evaluate_each(
        capsys, flag=(base + flags, []), option=(TWO_NODE_MOE_COMMAND, ["--dispatcher", "deepep"])
    )
    same = got["flag"]["step_time_s"] == got["option"]["step_time_s"]
    assert same is per_domain


@pytest.mark.parametrize(
    "flags, named",
    [
        (" --moe-token-dispatcher-type alltoall --moe-enable-deepep", "--moe-enable-deepep"),
        (" --moe-token-dispatcher-type flex --moe-enable-deepep --moe-flex-dispatcher-backend"
         " hybridep", "--moe-flex-dispatcher-backend"),
        (" --moe-token-dispatcher-type alltoall --moe-flex-dispatcher-backend ncclep",
         "--moe-flex-dispatcher-backend"),
        (" --moe-token-dispatcher-type flex --moe-expert-capacity-factor 1.0"
         " --moe-pad-expert-input-to-capacity", "--moe-pad-expert-input-to-capacity"),
        (" --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend nvshmem",
         "--moe-flex-dispatcher-backend"),
    ],
    ids=["deepep-alltoall", "two-backends", "ncclep-alltoall", "deepep-padded", "unknown"],
)  # fmt: skip
def test_a_flex_setting_megatron_core_refuses_is_refused(flags, named):
    base = TWO_NODE_MOE_COMMAND.replace(" --moe-token-dispatcher-type alltoall", "")
    with pytest.raises(UsageError, match=f"--from-megatron: {named}: "):
        load_megatron(base + flags)


def test_the_checked_releases_flags_import_beside_the_pinned_commits():
    """megatron_release_arguments.yaml lists the parser of the release frameworks.yaml pins
    (the launch check compares the file with the installed release): its flags import
    beside the pinned commit's, the ones that build a model the designer does not read
    from a command are refused naming the flag, and unpriced mechanisms are noted."""
    from designer.launch.megatron_import import RELEASE_NOT_MODELLED, RELEASE_NOT_PRICED
    from designer.launch.vocab import all_flags, release_flags, releases

    pinned = releases()["releases"]["megatron-core"]
    assert release_flags("megatron") == f"megatron-core {pinned}"
    known = all_flags("megatron")
    assert {"--moe-flex-dispatcher-backend", "--moe-enable-deepep", "--nvtx-ranges"} <= known
    assert load_megatron(TWO_NODE_MOE_COMMAND + " --nvtx-ranges").ep == 16
    for name in RELEASE_NOT_MODELLED:
        assert name in known, name
        with pytest.raises(UsageError, match=f"--from-megatron: {name}: .*not"):
            load_megatron(TWO_NODE_MOE_COMMAND + f" {name} 1")
    for name, why in RELEASE_NOT_PRICED.items():
        assert name in known, name
        run = load_megatron(TWO_NODE_MOE_COMMAND + f" {name}")
        assert f"{name}: {why}" in run.notes
    with pytest.raises(UsageError, match="nor megatron-core 0.19.2's parser"):
        load_megatron(TWO_NODE_MOE_COMMAND + " --moe-flex-dispatcher-backendz deepep")


def test_a_deepep_plan_emits_the_flex_dispatcher_and_imports_to_the_same_step(capsys):
    """optimize --dispatcher deepep: the plan's Megatron launch runs the flex dispatcher with
    the DeepEP backend (megatron-core 0.19.2's flags), which --from-megatron reads back to the
    same step and the same dispatcher; an alltoall plan's launch is unchanged."""
    import json
    import re

    from helpers import run_main

    q = ["--model", "qwen3-235b-a22b", "--tokens", "5T", "--gpu", "h100-sxm"]
    q += ["--max-gpus", "512", "--no-explain", "--no-failures"]
    code, out, err = run_main(capsys, ["optimize", *q, "--dispatcher", "deepep", "--json"])
    assert code == 0, err
    plan = json.loads(out)["plans"][0]
    assert plan["dispatcher"] == "deepep" and plan["ep"] * plan["tp"] > 8  # across servers
    code, text, err = run_main(
        capsys, ["optimize", *q, "--dispatcher", "deepep", "--emit", "megatron"]
    )
    assert code == 0, err
    flags = " ".join(text.replace("\\\n", " ").split())
    assert "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep" in flags
    run = load_megatron(text)
    assert run.experts().dispatch_per_domain
    got = evaluate_each(capsys, emitted=(text, ["--no-failures"]))["emitted"]
    assert got["step_time_s"] == pytest.approx(plan["step_time_s"], rel=1e-12)
    code, plain, _ = run_main(capsys, ["optimize", *q, "--emit", "megatron"])
    assert re.search(r"--moe-token-dispatcher-type alltoall", plain)
    assert "flex" not in plain
