"""The hardware as it is built and bought (issue 15): scale-up topology, rack-scale
purchase units, NICs that fit their servers, the fabric choice and memory headroom."""

from __future__ import annotations

import json
import random

import pytest
from click.testing import CliRunner

from catalog import load_catalog
from designer.cli import cli
from designer.questions import DEFAULT_HEADROOM, DEFAULT_RESERVED_GB, build_scenario
from helpers import run_main
from models import Assumptions, Hardware, Layout, comm, evaluate, zoo
from models.layout import Network
from models.scaleup import group_bw_gb_per_s, p2p_bw_gb_per_s, ranks_in_domain, tp_limit
from models.step import step_coefficients, step_from_coefficients, tp_comm_per_microbatch_s
from solvers.cpsat import solve_cpsat


def _mesh(cat, name="mi300x", link=64.0):
    gpu = cat.gpu(name)
    return gpu.model_copy(
        update={"scale_up_topology": "mesh", "scale_up_link_gb_per_s_per_direction": link}
    )


# ------------------------------------------------------------------ scale-up topology
def test_mesh_group_gets_one_link_per_peer(cat):
    gpu = _mesh(cat)
    whole = gpu.scale_up_bw_gb_per_s_per_direction
    assert group_bw_gb_per_s(gpu, 2) == 64.0
    assert group_bw_gb_per_s(gpu, 4) == 3 * 64.0
    assert group_bw_gb_per_s(gpu, 8) == min(whole, 7 * 64.0)
    assert p2p_bw_gb_per_s(gpu) == 64.0
    switched = cat.gpu("h100-sxm")
    assert group_bw_gb_per_s(switched, 2) == switched.scale_up_bw_gb_per_s_per_direction
    assert p2p_bw_gb_per_s(switched) == switched.scale_up_bw_gb_per_s_per_direction


def test_tp_collectives_on_four_mesh_gpus_use_three_links(cat):
    """TP 4 on an MI300X-class mesh: each all-reduce runs over the 3 links to the peers."""
    gpu = _mesh(cat)
    spec = zoo()["llama2-70b"]
    layout = Layout(tp=4, pp=1, dp=1, micro_batch=1, global_batch=1, recompute="none")
    cal = gpu.calibration
    nbytes = 2.0 * spec.seq_len * spec.hidden
    per_call = comm.ring_allreduce_s(
        nbytes, 4, 3 * 64.0 * cal.scale_up_bus_efficiency, cal.collective_latency_us * 1e-6
    )
    expected = spec.layers * 4 * per_call * (1 - cal.tp_overlap_fraction)
    got = tp_comm_per_microbatch_s(spec, layout, spec.seq_len, gpu, Network("-", 8, 50.0))
    assert got == pytest.approx(expected, rel=1e-12)
    # the same group on a switched fabric of equal aggregate bandwidth is faster
    switched = gpu.model_copy(
        update={"scale_up_topology": "switched", "scale_up_link_gb_per_s_per_direction": None}
    )
    assert (
        tp_comm_per_microbatch_s(spec, layout, spec.seq_len, switched, Network("-", 8, 50.0))
        < expected
    )


def test_tp_bandwidth_rule_uses_the_groups_links(cat):
    gpu = _mesh(cat, "gaudi3", 75.0)
    limit2, bw2 = tp_limit(8192, gpu, 2, "bf16")
    limit8, bw8 = tp_limit(8192, gpu, 8, "bf16")
    assert bw2 == 75.0 and bw8 == min(gpu.scale_up_bw_gb_per_s_per_direction, 7 * 75.0)
    assert limit8 == pytest.approx(limit2 * bw8 / bw2)


def test_mesh_entry_needs_its_link_bandwidth(cat):
    gpu = cat.gpu("mi300x")
    data = gpu.model_dump(exclude={"calibration"})
    data.update(scale_up_topology="mesh", scale_up_link_gb_per_s_per_direction=None)
    with pytest.raises(ValueError, match="per-peer link"):
        type(gpu).model_validate(data)
    data.update(scale_up_topology="switched", scale_up_link_gb_per_s_per_direction=64.0)
    with pytest.raises(ValueError, match="only a mesh"):
        type(gpu).model_validate(data)


# ------------------------------------------------------------------ rack-scale domains
def test_dp_group_inside_one_nvl72_rack_puts_no_bytes_on_the_nics(cat):
    """GB200 NVL72: TP 4 x DP 16 = 64 GPUs in one 72-GPU NVLink domain. The gradient
    reduction and the pipeline sends stay on NVLink: the NIC bandwidth changes nothing."""
    gpu = cat.gpu("gb200")
    assert gpu.server.scale_up_domain_gpus == 72 and gpu.server.gpus_per_server == 4
    spec = zoo()["llama2-70b"]
    layout = Layout(tp=4, pp=1, dp=16, micro_batch=1, global_batch=64, recompute="none")
    a = Assumptions()
    c = step_coefficients(spec, layout, spec.seq_len, gpu, Network("-", 4, 50.0), a)
    assert ranks_in_domain(gpu, 4) == 18 and c.dp_bytes > 0
    slow = step_from_coefficients(c, 16, 4, 1.0, 0.0)
    fast = step_from_coefficients(c, 16, 4, 400.0, 0.0)
    assert float(slow.dp_comm) == float(fast.dp_comm)
    # a DP group that leaves the rack does put bytes on the NICs
    assert float(step_from_coefficients(c, 32, 4, 1.0, 0.0).dp_comm) > float(
        step_from_coefficients(c, 32, 4, 400.0, 0.0).dp_comm
    )
    # on 8-GPU servers the same 64-GPU group crosses servers
    h100 = cat.gpu("h100-sxm")
    c8 = step_coefficients(spec, layout, spec.seq_len, h100, Network("-", 8, 50.0), a)
    assert float(step_from_coefficients(c8, 16, 4, 1.0, 0.0).dp_comm) > float(
        step_from_coefficients(c8, 16, 4, 400.0, 0.0).dp_comm
    )


def test_pipeline_inside_one_rack_stays_on_nvlink(cat):
    gpu = cat.gpu("gb200")
    spec = zoo()["llama2-70b"]
    layout = Layout(tp=4, pp=4, dp=4, micro_batch=1, global_batch=16, recompute="none")
    c = step_coefficients(spec, layout, spec.seq_len, gpu, Network("-", 4, 50.0), Assumptions())
    assert float(step_from_coefficients(c, 4, 4, 1.0, 0.0).pp_comm) == float(
        step_from_coefficients(c, 4, 4, 400.0, 0.0).pp_comm
    )


@pytest.mark.parametrize("gpu, nic", [("gb200", "cx7-400g"), ("gb300", "cx8-800g")])
def test_nvl72_plans_come_in_whole_racks_with_four_nics_per_tray(gpu, nic):
    scenario = build_scenario(budget=30e6, gpus=(gpu,), evidence="any")
    res = solve_cpsat(scenario)
    assert res.status == "optimal"
    plan = res.plans[0]
    assert plan.num_gpus % 72 == 0
    assert plan.config.nics_per_node == 4 and plan.config.nic == nic
    assert plan.evaluation.cluster.racks == plan.num_gpus // 72


def test_evaluate_charges_whole_racks(cat):
    spec = zoo()["llama2-70b"]
    hw = Hardware.from_catalog(cat, "gb200")
    layout = Layout(tp=4, pp=4, dp=4, micro_batch=1, global_batch=64, recompute="none")
    ev = evaluate(spec, hw, layout, spec.seq_len, 2e12, Assumptions())
    gpu_line = next(line for line in ev.cluster.bom() if line.item.startswith("GPU"))
    assert ev.cluster.num_gpus == 64 and gpu_line.quantity == 72


# ------------------------------------------------------------------ NICs that fit
def test_no_server_takes_a_nic_its_pcie_slots_cannot_host(cat):
    for gpu in cat.gpus.values():
        for nic in cat.nics_for(gpu):
            if gpu.server.nics is None:
                assert nic.pcie_gen <= gpu.host_pcie_gen and not nic.integrated
            else:
                assert nic.name in gpu.server.nics


def test_published_runs_are_evaluated_on_nics_their_servers_take(cat):
    from designer.published import GPU_NAMES

    for printed, (gpu, nic, count) in GPU_NAMES.items():
        server = cat.gpu(gpu)
        assert cat.nic_fits(server, cat.nic(nic)), printed
        assert count in server.server.allowed_nic_counts(), printed


@pytest.mark.slow
def test_random_questions_never_pair_a_nic_with_a_server_that_cannot_host_it(cat):
    rng = random.Random(15)
    gpus = sorted(cat.gpus_for_sale())
    for _ in range(12):
        chosen = tuple(rng.sample(gpus, rng.randint(1, 3)))
        fabric = rng.choice(["any", "ib", "ethernet"])
        try:
            scenario = build_scenario(
                budget=rng.choice([3e6, 30e6, 300e6]),
                gpus=chosen,
                fabric=fabric,
                pricing=rng.choice(["capex", "cloud"]),
                evidence="any",
            )
        except Exception as err:  # a named GPU without a NIC on that fabric: a usage error
            assert "--fabric" in str(err) or "--nic" in str(err)
            continue
        res = solve_cpsat(scenario)
        for plan in res.plans:
            cfg = plan.config
            gpu, nic = cat.gpu(cfg.shape.gpu), cat.nic(cfg.nic)
            assert cat.nic_fits(gpu, nic), (gpu.name, nic.name)
            assert cfg.nics_per_node in scenario.nic_counts(gpu.name)
            if fabric != "any":
                assert cat.fabric_of(nic) == {"ib": "infiniband", "ethernet": "ethernet"}[fabric]


def test_gaudi3_uses_its_own_ports_and_an_ethernet_fabric(cat):
    res = solve_cpsat(build_scenario(budget=30e6, gpus=("gaudi3",), evidence="any"))
    plan = res.plans[0]
    nic = cat.nic(plan.config.nic)
    assert nic.integrated and cat.fabric_of(nic) == "ethernet"
    items = [line.item for line in plan.evaluation.cluster.bom()]
    assert not any(item.startswith("NIC ") for item in items)
    assert any(cat.switch_for(nic).name in item for item in items)


def test_evaluate_refuses_a_nic_the_server_cannot_host(capsys):
    code, _, err = run_main(
        capsys, ["evaluate", "--gpu", "h100-sxm", "--nic", "cx8-800g", "--tp", "8", "--pp", "4"]
    )
    assert code == 2
    assert err.count("\n") == 1 and "--nic" in err and "PCIe Gen 6" in err


def test_fabric_option_is_validated(capsys):
    code, _, err = run_main(capsys, ["optimize", "--budget", "30M", "--fabric", "token-ring"])
    assert code == 2 and "--fabric" in err


def test_fabric_option_is_recorded():
    good = CliRunner().invoke(
        cli, ["optimize", "--budget", "30M", "--fabric", "ib", "--json", "--no-explain"]
    )
    assert good.exit_code == 0, good.output
    doc = json.loads(good.output)
    assert doc["question"]["fabric"] == "ib"
    cat = load_catalog()
    for plan in doc["plans"]:
        assert cat.fabric_of(cat.nic(plan["nic"])) == "infiniband"


# ------------------------------------------------------------------ memory headroom
def test_default_plans_keep_the_documented_headroom():
    result = CliRunner().invoke(cli, ["optimize", "--budget", "30M", "--json", "--no-explain"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["question"]["headroom"] == DEFAULT_HEADROOM
    assert doc["question"]["reserved_gb"] == DEFAULT_RESERVED_GB
    cat = load_catalog()
    for plan in doc["plans"]:
        physical = cat.gpu(plan["gpu"]).memory_gb
        assert plan["memory_gb_per_gpu"] <= physical * (1 - DEFAULT_HEADROOM) + 1e-6


def test_headroom_shrinks_the_usable_memory():
    base = ["evaluate", "--gpu", "h100-sxm", "--tp", "8", "--pp", "4", "--json"]
    seed = json.loads(
        CliRunner().invoke(cli, [*base, "--headroom", "0", "--reserved-gb", "0"]).output
    )
    planned = json.loads(CliRunner().invoke(cli, base).output)
    assert seed["memory_gb"]["capacity"] == planned["memory_gb"]["capacity"] == 80.0
    assert seed["memory_gb"]["usable"] == 80.0
    assert planned["memory_gb"]["usable"] == pytest.approx(80.0 * (1 - DEFAULT_HEADROOM))
    assert planned["memory_gb"]["other"] == pytest.approx(
        seed["memory_gb"]["other"] + DEFAULT_RESERVED_GB
    )
    bad = CliRunner().invoke(cli, [*base, "--headroom", "1"])
    assert bad.exit_code == 2 and "--headroom" in bad.output  # click's own usage error


def test_saved_answers_keep_headroom_fabric_and_gpu_caps():
    from designer.questions import _from_answer
    from designer.report import question_dict

    s = build_scenario(
        budget=30e6, headroom=0.1, fabric="ib", gpu_caps={"h100-sxm": 512}, evidence="any"
    )
    q = question_dict(s)
    # a whole-catalog search also caps a consumer card at its max_cluster_gpus (issue 30)
    caps = {"h100-sxm": 512, "rtx4090": s.catalog.gpu("rtx4090").max_cluster_gpus}
    assert q["headroom"] == 0.1 and q["fabric"] == "ib" and q["gpu_caps"] == caps
    back, _ = _from_answer(json.loads(json.dumps({"question": q, "plans": []})), "answer.json")
    assert back.assumptions.memory_headroom_fraction == 0.1
    assert back.fabric == "infiniband" and back.gpu_caps == tuple(sorted(caps.items()))


# ------------------------------------------------------------------ launch matches memory
def test_emitted_megatron_launch_sets_the_gradient_precision_the_plan_counts(tmp_path, capsys):
    """The plan counts 2-byte gradients; its Megatron command says --grad-reduce-in-bf16 and
    imports to the same memory. Without the flag Megatron keeps fp32 gradients: the import
    counts 4 bytes, so the dropped flag shows up as more memory."""
    script = tmp_path / "train.sh"
    code, text, err = run_main(
        capsys,
        [
            "optimize",
            "--model",
            "llama2-7b",
            "--tokens",
            "100B",
            "--gpu",
            "h100-sxm",
            "--budget",
            "2M",
            "--no-explain",
            "--emit",
            "megatron",
        ],
    )
    assert code == 0, err
    script.write_text(text)
    assert "--grad-reduce-in-bf16" in text
    plan_code, plan_out, _ = run_main(
        capsys, ["evaluate", "--from-megatron", str(script), "--json"]
    )
    assert plan_code in (0, 1)
    with_flag = json.loads(plan_out)["memory_gb"]
    fp32 = tmp_path / "fp32.sh"
    fp32.write_text(text.replace("--grad-reduce-in-bf16", ""))
    _, out, _ = run_main(capsys, ["evaluate", "--from-megatron", str(fp32), "--json"])
    without = json.loads(out)["memory_gb"]
    assert without["gradients"] == pytest.approx(2 * with_flag["gradients"])
