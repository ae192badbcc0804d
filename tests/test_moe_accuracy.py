"""The independent MoE rows of bench/moe_accuracy.py (issue 17 item 7): the data file
parses, every row names its source, and the bench scores what it can (nothing fitted)."""

from __future__ import annotations

import json
import re

import pytest

from helpers import load_bench, run_main
from models.zoo import moe_zoo

bench = load_bench("moe_accuracy.py", "bench_moe_accuracy")
ROWS = bench.independent_rows()
# the held-out sources of ../shared/reference/published-runs/README.md, as they appear in URLs
HELD_OUT = (
    "dgxc-benchmarking",
    "performance_summary",
    "performance-summary",
    "automodel",
    "examples/llama",
    "mlperf",
    "bloom",
)


def test_every_row_has_a_source_and_a_consistent_layout():
    assert len(ROWS) >= 15
    names = [r["name"] for r in ROWS]
    assert len(set(names)) == len(names)
    for r in ROWS:
        assert r["source"].strip() and r["notes"].strip(), r["name"]
        assert r["url"].startswith("https://github.com/"), r["name"]
        # a measurement posted in an issue cites the issue; its commit is the config it ran
        cited = r["commit"] in r["url"] or re.search(r"/issues/\d+$", r["url"])
        assert re.fullmatch(r"[0-9a-f]{40}", r["commit"]) and cited, r["name"]
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", r["date"]), r["name"]
        assert not any(h in r["url"].lower() for h in HELD_OUT), r["name"]
        # Megatron-Bridge's own files (its performance summaries, the model verification
        # cards that run their recipes) stay out; a user's measurement posted in one of its
        # issues is not one of them
        bridge = "megatron-bridge" in r["url"].lower()
        assert not bridge or re.search(r"/issues/\d+$", r["url"]), r["name"]
        degrees = [int(r[k]) for k in ("tp", "pp", "dp", "cp")]
        assert degrees[0] * degrees[1] * degrees[2] * degrees[3] == int(r["num_gpus"]), r["name"]
        assert bool(r["step_time_s"]) != bool(r["tflops_per_gpu"]), r["name"]
        if r["tflops_per_gpu"]:
            assert r["flops_convention"] in bench.CONVENTIONS, r["name"]


def test_scoring_runs_on_every_row_the_model_can_take():
    scored, skipped = bench.score_independent(ROWS)
    assert len(scored) >= 10
    for row, predicted, measured, parts in scored:
        assert row["model"] in moe_zoo()
        assert predicted > 0 and measured > 0, row["name"]
        assert sum(parts.values()) == pytest.approx(predicted, rel=1e-6), row["name"]
    for row, reason in skipped:
        assert reason, row["name"]
        listed = row["scored"].startswith("no")
        assert row["model"] not in moe_zoo() or listed, row["name"]
    assert {r["model"] for r, *_ in scored} >= {"mixtral-8x7b", "mixtral-8x22b", "qwen3-235b-a22b"}


def test_tflops_convert_with_the_sources_own_flop_count():
    """The ModelZoo's Qwen3-235B table prints 17.6 s next to 276 TFLOP/s per GPU (256 H100,
    GBS 2048 x 4,096 tokens): Megatron's count since 8873b55d6a reproduces the pairing."""
    spec = moe_zoo()["qwen3-235b-a22b"]
    row = {
        "step_time_s": "",
        "seq_len": "4096",
        "global_batch": "2048",
        "num_gpus": "256",
        "tflops_per_gpu": "276",
        "flops_convention": "megatron-causal-half",
    }
    assert bench.measured_step_s(row, spec) == pytest.approx(17.6, rel=0.01)
    full = bench.megatron_flops_per_token(spec, 4096, "megatron-full-square")
    half = bench.megatron_flops_per_token(spec, 4096, "megatron-causal-half")
    assert full > half
    with pytest.raises(ValueError, match="flops_convention"):
        bench.megatron_flops_per_token(spec, 4096, "6ND")


def test_a_layout_that_does_not_fill_its_gpus_is_refused():
    row = dict(next(r for r in ROWS if bench.skip_reason(r) is None))
    row["num_gpus"] = str(int(row["num_gpus"]) * 2)
    with pytest.raises(ValueError, match="not the GPUs"):
        bench.independent_layout(row)


def test_fused_attention_only_on_hopper_rows_of_the_modelzoo():
    """``attention_kernels``: fused (models.expert.HOPPER_FUSED_ATTENTION_SPEEDUP) for the
    Megatron-MoE-ModelZoo runs and Megatron-Bridge issue #949's (its GPTModelProvider builds
    Transformer Engine layers) on Hopper, the profile's rate for the others."""
    assert bench.ATTENTION_KERNELS == {"profile": 1.0, "fused": 1.61}
    for r in ROWS:
        te = "ModelZoo" in r["source"] or "Megatron-Bridge" in r["source"]
        fused = r["gpu"] in ("h100-sxm", "h800", "h200") and te
        assert r["attention_kernels"] == ("fused" if fused else "profile"), r["name"]
        assert (
            bench.independent_layout(r)[1].attention_kernel_speedup
            == (bench.ATTENTION_KERNELS[r["attention_kernels"]])
        )


def test_fp32_router_where_the_rows_config_sets_it():
    """``router_dtype``: fp32 for the Qwen3, Qwen3-Next and DeepSeek-V3 rows (their
    configs set --moe-router-dtype fp32), bf16 for Mixtral, Pai-Megatron-Patch's Qwen3
    example and Megatron-Bridge's Qwen3 MoE provider (not set): ExpertLayout's router_fp32
    follows the column; any other value is refused."""
    assert bench.ROUTER_DTYPES == {"bf16": False, "fp32": True}
    for r in ROWS:
        unset = ("Pai-Megatron-Patch", "Megatron-Bridge")
        fp32 = not r["model"].startswith("mixtral") and not any(u in r["source"] for u in unset)
        assert r["router_dtype"] == ("fp32" if fp32 else "bf16"), r["name"]
        assert bench.independent_layout(r)[1].router_fp32 is fp32, r["name"]
    with pytest.raises(KeyError):
        bench.independent_layout({**ROWS[0], "router_dtype": "fp16"})


def test_unfused_permutation_where_the_rows_release_or_script_runs_it():
    """``permute_fusion``: no for Pai-Megatron-Patch's Qwen3 example (its script sets no
    --moe-permute-fusion) and the 2024 Mixtral README rows (Megatron-Core v0.8 / v0.9,
    before the fused path), yes for every other row (their configs set it); the Grok-1
    rows (NeMo 24.11) run unfused. Priced unfused, the two Pai rows are within 5%; fused,
    both are more than 15% fast (the fine-grained bias the README recorded)."""
    assert bench.PERMUTE_FUSION == {"yes": True, "no": False}
    for r in ROWS:
        unfused = "Pai-Megatron-Patch issue #643" in r["source"] or "mcore-v0." in r["name"]
        assert r["permute_fusion"] == ("no" if unfused else "yes"), r["name"]
        assert bench.independent_layout(r)[1].permute_fusion is not unfused, r["name"]
    assert bench.grok_expert_layout(bench.grok_rows()[0], 1.0).permute_fusion is False
    pai = [r for r in ROWS if "pai 643" in r["name"]]
    assert len(pai) == 2
    for r in pai:
        pred, meas, _ = bench.predict_independent(r)
        assert abs(pred / meas - 1) < 0.05, r["name"]
        fused = bench.evaluate_independent({**r, "permute_fusion": "yes"}).step_time_s
        assert fused / meas - 1 < -0.15, r["name"]
    with pytest.raises(KeyError):
        bench.independent_layout({**ROWS[0], "permute_fusion": "maybe"})


def test_dropless_load_is_implied_by_the_twin_and_used_leave_one_out():
    """Each dropless row with a forced-balance twin implies the load at which the model's
    step ratio is the measured one; a row is predicted at the mean of its model's OTHER
    pairs, so changing its own measurement leaves its load unchanged and moves the
    others'; a model without two other pairs keeps 1.0."""
    pairs = bench.dropless_pairs(ROWS)
    loads = bench.dropless_loads(ROWS)
    qwen = [(r, load) for r, load in pairs if r["model"] == "qwen3-235b-a22b"]
    assert len(qwen) == 4
    for row, implied in qwen:
        forced = next(
            f
            for f in ROWS
            if f["routing"] == "forced-balance" and bench._twin_key(f) == bench._twin_key(row)
        )
        spec = bench.independent_spec(row)
        ratio = bench.measured_step_s(row, spec) / bench.measured_step_s(forced, spec)
        at = bench.predict_independent(row, True, implied)[0]
        assert at / bench.predict_independent(row)[0] == pytest.approx(ratio, rel=1e-6)
        others = [load for r, load in qwen if r is not row]
        assert loads[row["name"]] == pytest.approx(sum(others) / 3)
    assert "mixtral-8x22b dropless 128xH100 bf16" not in loads  # one pair: nothing to fit on
    changed = [dict(r) for r in ROWS]
    first = next(r for r in changed if r["name"] == qwen[0][0]["name"])
    first["tflops_per_gpu"] = str(float(first["tflops_per_gpu"]) * 0.9)
    moved = bench.dropless_loads(changed)
    assert moved[first["name"]] == pytest.approx(loads[first["name"]], rel=1e-9)
    assert moved[qwen[1][0]["name"]] != pytest.approx(loads[qwen[1][0]["name"]], rel=1e-6)


def test_qwen3_next_row_runs_its_configs_mtp_layer():
    """The ModelZoo's Qwen3-Next row (b0b92ff3) runs model_configs/benchmarking/
    Qwen3-Next-80B-A3B.yaml of the same commit, which sets --mtp-num-layers 1: the row
    carries it, and the MTP layer (a layer and a second logits on the last rank) slows
    the prediction."""
    (row,) = [r for r in ROWS if r["model"] == "qwen3-next-80b-a3b"]
    assert row["mtp_layers"] == "1" and "--mtp-num-layers 1" in row["notes"]
    assert "b0b92ff329df45050e1978fe66d3b626d78d613b" in row["url"]
    # run_next_80b.sh's launch line forces balanced routing: expert_load 1.0, no fitted load
    assert (
        row["routing"] == "forced-balance" and "--moe-router-force-load-balancing" in row["notes"]
    )
    assert row["name"] not in bench.dropless_loads(ROWS)
    with_mtp, measured, _ = bench.predict_independent(row)
    without, _, _ = bench.predict_independent(dict(row, mtp_layers=""))
    assert measured == 2.2 and without < with_mtp < measured


def test_grok_rows_run_their_recipes_experts():
    """The Grok-1 recipe (dgxc-benchmarking v24.11.1 grok1_314b.yaml) sets no expert TP
    and grad_sync_dtype bf16: every row prices its experts at ETP = TP with bf16 gradient
    buffers (2 + 2 bytes a weight element in the weight-gradient GEMM). At ETP 1 and fp32
    buffers the 8-GPU rows' local experts take a quarter of the rows (512) and the step
    overshoots by more than 20%; as the recipe runs them, the error is smaller (BF16 under
    15%, FP8 under 21%)."""
    rows = bench.grok_rows()
    for row in rows:
        ex = bench.grok_expert_layout(row, 1.0)
        assert (ex.ep, ex.etp) == (int(row["ep"]), int(row["tp"]))
        assert ex.wgrad_accumulation_bytes == bench.GROK_WGRAD_ACCUMULATION_BYTES == 4.0
    small = [r for r in rows if r["num_gpus"] == "8"]
    assert len(small) == 2
    errors = {
        r["precision"]: bench.predict(r, 1.0)[0] / bench.predict(r, 1.0)[1] - 1 for r in small
    }
    assert abs(errors["BF16"]) < 0.15 and abs(errors["FP8"]) < 0.21
    original = bench.grok_expert_layout
    try:
        bench.grok_expert_layout = lambda row, load: bench.ExpertLayout(ep=int(row["ep"]), etp=1)
        for r in small:
            pred, meas, _ = bench.predict(r, 1.0)
            assert pred / meas - 1 > 0.2
            assert abs(pred / meas - 1) > abs(errors[r["precision"]])
    finally:
        bench.grok_expert_layout = original


def test_megatron_bridge_949_rows_run_the_user_s_layout_both_ways():
    """Megatron-Bridge issue #949 (2025-10-16): a user's Qwen3-30B-A3B layout on 16 H100
    (TP 1, PP 2, VP 2, EP 2, MBS 8, GBS 512, full recompute), 14.44 s dropless and 13.61 s in
    the script's token-drop mode (capacity 1.0, padded). Both score; with no forced /
    dropless pair of this model to fit on, both run at expert_load 1.0 and so are predicted
    alike, fast against both figures (the fine-grained bias, README "Not yet done")."""
    rows = [r for r in ROWS if r["url"].endswith("/Megatron-Bridge/issues/949")]
    assert sorted(r["routing"] for r in rows) == ["capacity-1.0", "dropless"]
    assert {r["step_time_s"] for r in rows} == {"14.44", "13.61"}
    scored = {r["name"]: (p, m) for r, p, m, _ in bench.score_independent(ROWS)[0]}
    predicted = {scored[r["name"]][0] for r in rows}
    assert len(predicted) == 1  # one prediction: the routing does not change the load here
    for r in rows:
        layout, ex = bench.independent_layout(r)
        assert (layout.tp, layout.pp, layout.vp, layout.dp, ex.ep, ex.etp) == (1, 2, 2, 8, 2, 1)
        assert (layout.micro_batch, layout.recompute) == (8, "full")
        assert r["name"] not in bench.dropless_loads(ROWS)
        pred, meas = scored[r["name"]]
        assert -0.2 < pred / meas - 1 < 0


def test_rows_the_model_puts_over_their_memory_are_explained():
    """Every independent row ran, so a row whose predicted memory exceeds its GPU's must be
    one bench/moe_accuracy.py explains (MEMORY_EXPLAINED), and every explained row must
    still be over (an explanation for a row that fits is stale). For Megatron-Bridge
    #949's layout the explanation is numeric: with its loss's 2 bytes a logit instead of 4
    (half the fp32 logits priced) its tensors fit 80 GB; under the planning defaults (3 GB
    reserved, 5% headroom) they fit only an H100's 80 GiB counted in bytes."""
    from models.memory import logits_gb

    over = {
        row["name"]: mem
        for row, mem in bench.memory_of_rows(ROWS)
        if mem["total"] > mem["capacity"]
    }
    assert set(over) == set(bench.MEMORY_EXPLAINED)
    for name, mem in over.items():
        if "mbridge 949" not in name:
            continue
        row = next(r for r in ROWS if r["name"] == name)
        layout, _ = bench.independent_layout(row)
        fp32_logits = logits_gb(bench.independent_spec(row), layout, 4096, "last")
        assert fp32_logits == pytest.approx(4 * 4096 * 8 * 151936 / 1e9)
        tensors = mem["total"] - fp32_logits / 2
        assert tensors < mem["capacity"]
        planned = tensors + 3.0  # designer's --reserved-gb default, then its 5% headroom
        assert mem["capacity"] * 0.95 < planned < mem["capacity"] * 2**30 / 1e9 * 0.95


def test_memory_report_names_each_row_over_and_why(capsys):
    """``python bench/moe_accuracy.py --memory``: a line per scored row with its predicted
    GB against its GPU's, "over" on the rows above it, then each of those with its parts
    and MEMORY_EXPLAINED's reason (never "NOT EXPLAINED")."""
    bench.report_memory(ROWS)
    out = capsys.readouterr().out
    scored = bench.score_independent(ROWS)[0]
    rows = [line for line in out.splitlines() if re.search(r" \d+\.\d +\d+(  over)?$", line)]
    assert len(rows) == len(scored)
    assert sum(line.endswith("  over") for line in rows) == len(bench.MEMORY_EXPLAINED)
    for name, why in bench.MEMORY_EXPLAINED.items():
        assert f"{name}: weights " in out and f"ran because {why}" in out
    assert "NOT EXPLAINED" not in out


def test_rows_that_ran_the_overlap_meet_megatron_cores_rules_and_expose_their_warm_up():
    """The rows with ``ep_overlap`` yes ran it, so their layouts meet TransformerConfig's
    rules (models.expert.a2a_overlap_violation); each leaves W / (v m) of its all-to-alls
    exposed (models.pipeline.a2a_overlap_exposed_share), which makes it slower than the
    overlap hiding them all, toward its measurement (every such row is fast)."""
    from models.expert import a2a_overlap_violation
    from models.pipeline import a2a_overlap_exposed_share

    ran = [r for r in ROWS if r["ep_overlap"] == "yes" and bench.skip_reason(r) is None]
    assert len(ran) == 4
    for r in ran:
        layout, ex = bench.independent_layout(r)
        assert a2a_overlap_violation(bench.independent_spec(r), layout, ex) is None, r["name"]
        alone = a2a_overlap_exposed_share(layout.pp, layout.vp, layout.grad_accum)
        assert 0 < alone < 1 and ex.hidden_share(layout) == pytest.approx(1 - alone)
        pred, meas, _ = bench.predict_independent(r)
        assert pred < meas, r["name"]


def test_the_no_mtp_row_evaluates_from_the_command_line_as_the_bench_predicts(capsys):
    """The released-set DeepSeek-V3 GB200 row runs without --mtp-num-layers (its
    ``mtp_layers`` 0) and a layout string without m: ``designer evaluate`` refused the
    string for the zoo model's MTP layer; it now evaluates the model without it."""
    row = next(r for r in ROWS if r["pipeline_layout"] and r["mtp_layers"] == "0")
    args = ["evaluate", "--model", row["model"], "--gpu", row["gpu"], "--no-failures", "--json",
            "--pipeline-layout", row["pipeline_layout"], "--precision", row["precision"],
            "--recompute", "none", "--recompute-modules", "moe_act", "--dispatcher", "deepep",
            "--router-fp32", "--global-batch", row["global_batch"]]  # fmt: skip
    for k in ("tp", "pp", "dp", "ep"):
        args += [f"--{k}", row[k]]
    assert (row["recompute"], row["dispatcher"], row["router_dtype"]) == (
        "module: moe_act", "hybridep", "fp32",
    )  # fmt: skip
    code, out, err = run_main(capsys, args)
    assert code in (0, 1), err  # 1: its memory estimate passes the GPU's
    doc = json.loads(out)
    assert "places no MTP layer (m)" in doc["notes"][0]
    assert doc["step_time_s"] == pytest.approx(bench.predict_independent(row)[0], rel=1e-12)
