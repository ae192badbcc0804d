"""Issue 29: the Megatron-LM flags build the zoo's exact model. DeepSeek-V3's sigmoid
router with expert bias, top-k scale and group-limited routing, its YaRN RoPE and MTP;
Qwen 3's query/key norms (--qk-layernorm, counted by the spec); GPT-OSS refused in one
line naming what the spec lacks. bench/launch_check.py builds these in megatron-core."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from designer.errors import Infeasible
from designer.launch import Launch, emit, load_megatron
from designer.launch.megatron_model import unsupported
from models import TransformerSpec
from models.hf_config import hf_fields
from models.transformer import RopeScaling
from models.zoo import moe_zoo
from test_launch_round_trip import check_megatron_round_trip, moe_plan

HF = Path(__file__).parent / "data" / "hf_moe" / "DeepSeek-V3.json"
DEEPSEEK_FLAGS = (
    "--moe-router-score-function sigmoid",
    "--moe-router-enable-expert-bias",
    "--moe-router-topk-scaling-factor 2.5",
    "--moe-router-num-groups 8",
    "--moe-router-group-topk 4",
    "--mtp-num-layers 1",
    "--rope-type yarn",
    "--rotary-scaling-factor 40.0",
    "--mscale 1.0",
    "--mscale-all-dim 1.0",
    "--qk-layernorm",  # latent attention's q_lora and kv_lora norms
)


def test_deepseek_v3_emits_its_router_yarn_and_mtp_and_round_trips():
    scenario, plan = moe_plan("deepseek-v3")
    text = emit(Launch.from_plan(scenario, plan), "megatron")
    for flag in DEEPSEEK_FLAGS:
        assert f"{flag} \\" in text, flag
    assert "--use-rope-scaling" not in text
    check_megatron_round_trip(scenario, plan)
    spec = load_megatron(text).spec
    assert spec.router_score == "sigmoid" and spec.router_expert_bias
    assert (spec.router_groups, spec.router_group_topk, spec.router_topk_scale) == (8, 4, 2.5)
    assert spec.rope_scaling is not None and spec.rope_scaling.type == "yarn"


def test_softmax_router_writes_no_bias_scale_or_groups():
    scenario, plan = moe_plan("mixtral-8x7b")
    text = emit(Launch.from_plan(scenario, plan), "megatron")
    assert "--moe-router-score-function softmax \\" in text
    for flag in ("--moe-router-enable-expert-bias", "--moe-router-topk-scaling-factor",
                 "--moe-router-num-groups", "--qk-layernorm"):  # fmt: skip
        assert flag not in text


@pytest.mark.parametrize("model", ["qwen3-30b-a3b", "qwen3-235b-a22b"])
def test_qwen3_emits_qk_layernorm_and_the_spec_counts_the_norms(model):
    spec = moe_zoo()[model]
    assert spec.qk_norm
    without = spec.model_copy(update={"qk_norm": False})
    assert spec.params() - without.params() == spec.layers * 2 * spec.head_dim
    scenario, plan = moe_plan(model)
    text = emit(Launch.from_plan(scenario, plan), "megatron")
    assert "--qk-layernorm \\" in text
    check_megatron_round_trip(scenario, plan)
    assert load_megatron(text).spec.qk_norm
    plain = load_megatron(text.replace("--qk-layernorm \\\n", ""))
    assert not plain.spec.qk_norm  # the flag is what builds the norms


def test_dense_qwen3_config_has_query_key_norms():
    cfg = {
        "model_type": "qwen3", "num_hidden_layers": 28, "hidden_size": 1024,
        "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
        "intermediate_size": 3072, "vocab_size": 151936, "hidden_act": "silu",
        "rms_norm_eps": 1e-6, "rope_theta": 1000000, "tie_word_embeddings": True,
    }  # fmt: skip
    spec = TransformerSpec(**hf_fields(cfg, "config.json"))
    assert (
        spec.qk_norm
        and spec.layer_params() - spec.model_copy(update={"qk_norm": False}).layer_params()
        == 2 * 128
    )


def test_deepseek_v3_config_reads_the_router_and_yarn(tmp_path):
    from models.zoo import read_model_file

    spec = read_model_file(HF)
    assert (spec.router_score, spec.router_expert_bias) == ("sigmoid", True)
    assert (spec.router_groups, spec.router_group_topk, spec.router_topk_scale) == (8, 4, 2.5)
    assert spec.rope_scaling == moe_zoo()["deepseek-v3"].rope_scaling
    cfg = json.loads(HF.read_text())
    cfg["scoring_func"] = "tanh"
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(Exception, match="scoring_func: 'tanh'"):
        read_model_file(path)


def test_gpt_oss_is_refused_naming_what_the_spec_lacks():
    scenario, plan = moe_plan("gpt-oss-120b")
    with pytest.raises(Infeasible, match="attention sinks.*sliding window.*--softmax-type"):
        emit(Launch.from_plan(scenario, plan), "megatron")


def test_yarn_megatron_cannot_express_is_refused():
    spec = moe_zoo()["deepseek-v3"]
    assert unsupported(spec) is None
    assert spec.rope_scaling is not None
    odd = RopeScaling(**{**spec.rope_scaling.model_dump(), "beta_fast": 16.0})
    why = unsupported(spec.model_copy(update={"rope_scaling": odd}))
    assert why is not None and "beta_fast" in why


@pytest.mark.parametrize(
    ("update", "needle"),
    [({"qk_norm": True, "qk_norm_full": True}, "OLMo 2's qk_norm_full"),
     ({"shared_experts": 1, "shared_expert_gate": True}, "Qwen2-MoE's shared_expert_gate")],
)  # fmt: skip
def test_norms_and_gates_megatron_flags_do_not_build_are_refused(update, needle):
    """Megatron-LM's --qk-layernorm builds one norm per head, not OLMo 2's full-width
    ones, and the designer writes no --moe-shared-expert-gate: a launch of either model
    would train another, so it is refused in one line naming what is missing."""
    spec = moe_zoo()["mixtral-8x7b"]
    assert unsupported(spec) is None
    why = unsupported(spec.model_copy(update=update))
    assert why is not None and needle in why and "\n" not in why
    scenario, plan = moe_plan("mixtral-8x7b")
    job = Launch.from_plan(scenario, plan)
    job = replace(job, spec=job.spec.model_copy(update=update))
    with pytest.raises(Infeasible, match=needle):
        emit(job, "megatron")


def test_a_bad_router_flag_is_a_usage_error_naming_it():
    from designer.errors import UsageError

    scenario, plan = moe_plan("deepseek-v3")
    text = emit(Launch.from_plan(scenario, plan), "megatron")
    bad = text.replace(
        "--moe-router-topk-scaling-factor 2.5", "--moe-router-topk-scaling-factor -2"
    )
    with pytest.raises(UsageError, match="--moe-router-topk-scaling-factor"):
        load_megatron(bad)
    tanh = text.replace("--moe-router-score-function sigmoid", "--moe-router-score-function tanh")
    with pytest.raises(UsageError, match="--moe-router-score-function: 'tanh'"):
        load_megatron(tanh)
