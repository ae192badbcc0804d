"""Tests of the hardware catalog: shipped data, seed facts, overrides and error messages."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from catalog import CatalogError, load_catalog
from helpers import OPTIMIZE, refused

EXPECTED_GPUS = {
    "h100-sxm",
    "rtx4090",
    "l40s",
    "a100-40gb",
    "a100-80gb",
    "h100-pcie",
    "h200",
    "b200",
    "gb200",
    "mi300x",
    "gaudi3",
}
EXPECTED_NICS = {"cx6-200g", "cx7-400g", "cx8-800g"}


def _write(tmp_path: Path, text: str, name: str = "override.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _error(paths: list[Path]) -> str:
    with pytest.raises(CatalogError) as info:
        load_catalog(paths)
    message = str(info.value)
    assert "\n" not in message, f"error message is not one line: {message!r}"
    return message


# --- the shipped catalog -------------------------------------------------------------


@pytest.mark.parametrize("fname", ["gpus.yaml", "network.yaml"])
def test_shipped_files_parse_the_same_with_libyaml(fname):
    """The shipped files are read with libyaml where PyYAML has it: the same documents as
    the pure-Python loader gives (values and their types)."""
    from catalog.loader import SHIPPED_LOADER

    text = (Path(__file__).resolve().parent.parent / "catalog" / "data" / fname).read_text(
        encoding="utf-8"
    )
    fast, pure = yaml.load(text, SHIPPED_LOADER), yaml.safe_load(text)
    assert fast == pure
    assert repr(fast) == repr(pure)  # the same types too (1 and 1.0 compare equal)


def test_shipped_catalog_loads_with_expected_entries(cat):
    assert EXPECTED_GPUS <= set(cat.gpus)
    assert EXPECTED_NICS <= set(cat.nics)
    for nic in cat.nics.values():
        assert nic.switch in cat.switches


def test_every_gpu_has_sources(cat):
    for name, gpu in cat.gpus.items():
        assert gpu.name == name
        for field in ("price_source", "cloud_price_source", "spec_source"):
            assert getattr(gpu, field).strip(), f"{name}.{field} is empty"
        assert gpu.server.overhead_source.strip(), f"{name}.server.overhead_source is empty"


def test_every_gpu_has_both_stack_profiles(cat):
    from catalog.specs import DEFAULT_STACK, STACKS

    for name, gpu in cat.gpus.items():
        assert set(gpu.stacks) == set(STACKS), name
        assert gpu.stack == DEFAULT_STACK
        assert gpu.calibration == gpu.stacks[DEFAULT_STACK]


def test_vtrain_profile_is_shared_and_modern_profiles_are_per_platform(cat):
    """The 2022 fit is one A100 fit reused everywhere; the modern profiles are fitted per
    platform, and chips that share a die share a profile (h100/h200; b200/gb200 but for
    GB200's BF16 GEMM efficiency, tests/test_blackwell_gemm.py)."""
    vtrain = {g.stacks["vtrain-2022"] for g in cat.gpus.values()}
    assert len(vtrain) == 1
    mc = {n: g.stacks["megatron-core"] for n, g in cat.gpus.items()}
    assert mc["h200"] == mc["h100-sxm"] and mc["gb300"] == mc["b200"]
    assert mc["gb200"].model_copy(update={"matmul_efficiency": 0.0, "note": ""}) == mc[
        "b200"
    ].model_copy(update={"matmul_efficiency": 0.0, "note": ""})
    assert mc["a100-80gb"] == mc["a100-40gb"] != mc["h100-sxm"]
    assert mc["mi300x"].matmul_efficiency < mc["h100-sxm"].matmul_efficiency


def test_with_stack_switches_every_gpu(cat):
    old = cat.with_stack("vtrain-2022")
    for name, gpu in old.gpus.items():
        assert gpu.calibration == cat.gpus[name].stacks["vtrain-2022"]
        assert gpu.calibration.attention_efficiency is None  # the 2022 model: unfused


def test_unknown_stack_is_one_line_error(cat):
    from catalog import CatalogError

    with pytest.raises(CatalogError, match="no profile for stack 'nope'"):
        cat.with_stack("nope")


def test_evidence_only_where_runs_were_measured(cat):
    """measured: entries exist for the platforms with calibration runs; others are
    extrapolated (None)."""
    measured = {n for n, g in cat.gpus.items() if g.evidence is not None}
    assert {"h100-sxm", "a100-80gb", "b200", "gb200"} <= measured  # gb200: MLPerf v5.0 runs
    for name in ("gaudi3", "l40s", "rtx4090", "h100-pcie"):
        assert cat.gpus[name].evidence is None, name
    assert cat.gpus["a100-80gb"].with_stack("vtrain-2022").evidence.runs == 1549


def test_legacy_calibration_block_fills_every_stack(tmp_path):
    """A user's new GPU with one `calibration:` block gets it for every stack."""
    import yaml

    from catalog import load_catalog

    shipped_yaml = yaml.safe_load(
        (Path(__file__).resolve().parent.parent / "catalog/data/gpus.yaml").read_text()
    )
    entry = dict(shipped_yaml["gpus"]["h100-sxm"])
    cal = dict(entry.pop("stacks")["vtrain-2022"])
    entry.pop("measured", None)
    entry["calibration"] = cal
    path = tmp_path / "new.yaml"
    path.write_text(yaml.safe_dump({"gpus": {"my-gpu": entry}}))
    gpu = load_catalog([path]).gpu("my-gpu")
    assert gpu.stacks["megatron-core"] == gpu.stacks["vtrain-2022"]
    assert gpu.calibration.matmul_efficiency == cal["matmul_efficiency"]
    assert gpu.evidence is None


# --- seed facts ----------------------------------------------------------------------


def test_h100_sxm_seed_facts(cat):
    h100 = cat.gpu("h100-sxm")
    assert h100.dense_bf16_tflops == pytest.approx(989)
    assert h100.peak_tflops("bf16") == pytest.approx(989)
    assert h100.scale_up_bw_gb_per_s_per_direction == pytest.approx(450)


def test_h200_seed_facts(cat):
    h200 = cat.gpu("h200")
    assert h200.memory_gb == pytest.approx(141)
    assert h200.memory_bw_tb_per_s == pytest.approx(4.8)


def test_rtx4090_is_the_true_dense_bf16_rate(cat):
    rtx = cat.gpu("rtx4090")
    assert rtx.dense_bf16_tflops == pytest.approx(165.2)
    assert rtx.peak_tflops("bf16") == pytest.approx(165.2)


def test_h100_sxm_and_h200_share_the_bf16_peak(cat):
    assert cat.gpu("h100-sxm").peak_tflops("bf16") == pytest.approx(
        cat.gpu("h200").peak_tflops("bf16")
    )


def test_ampere_has_no_fp8(cat):
    for name in ("a100-40gb", "a100-80gb"):
        assert cat.gpu(name).peak_tflops("fp8") is None


# --- overrides -----------------------------------------------------------------------


def test_override_merges_and_keeps_other_fields(tmp_path, cat):
    path = _write(
        tmp_path,
        "gpus:\n"
        "  rtx4090:\n"
        "    dense_bf16_tflops: 330\n"
        "    scale_up_bw_gb_per_s_per_direction: 32\n",
    )
    merged = load_catalog([path])
    rtx = merged.gpu("rtx4090")
    base = cat.gpu("rtx4090")
    assert rtx.dense_bf16_tflops == 330
    assert rtx.scale_up_bw_gb_per_s_per_direction == 32
    unchanged = base.model_dump(exclude={"dense_bf16_tflops", "scale_up_bw_gb_per_s_per_direction"})
    assert (
        rtx.model_dump(exclude={"dense_bf16_tflops", "scale_up_bw_gb_per_s_per_direction"})
        == unchanged
    )
    # other entries and the shipped data stay as they were
    assert merged.gpu("h100-sxm") == cat.gpu("h100-sxm")
    assert load_catalog().gpu("rtx4090").dense_bf16_tflops == pytest.approx(165.2)


def test_override_merges_nested_server_fields(tmp_path, cat):
    path = _write(
        tmp_path, "gpus:\n  h100-sxm:\n    server:\n      nic_slots: 4\n      nic_counts: [4]\n"
    )
    server = load_catalog([path]).gpu("h100-sxm").server
    assert server.nic_slots == 4
    assert server.gpus_per_server == cat.gpu("h100-sxm").server.gpus_per_server
    assert server.overhead_usd == cat.gpu("h100-sxm").server.overhead_usd


def test_override_below_the_shipped_nic_counts_is_refused(tmp_path):
    path = _write(tmp_path, "gpus:\n  h100-sxm:\n    server:\n      nic_slots: 4\n")
    with pytest.raises(CatalogError, match=r"gpus.h100-sxm.server: .*nic_counts"):
        load_catalog([path])


def test_later_override_wins(tmp_path):
    first = _write(tmp_path, "gpus:\n  l40s:\n    price_usd: 7000\n", "first.yaml")
    second = _write(tmp_path, "gpus:\n  l40s:\n    price_usd: 9000\n", "second.yaml")
    assert load_catalog([first, second]).gpu("l40s").price_usd == 9000


def _complete_entry(cat) -> dict:
    fields = cat.gpu("h100-sxm").model_dump()
    fields.pop("name")
    fields["display_name"] = "Test accelerator"
    fields["memory_gb"] = 96
    return fields


def test_new_complete_entry_can_be_added(tmp_path, cat):
    path = _write(tmp_path, yaml.safe_dump({"gpus": {"test-gpu": _complete_entry(cat)}}))
    catalog = load_catalog([path])
    assert catalog.gpu("test-gpu").memory_gb == 96
    assert catalog.gpu("test-gpu").name == "test-gpu"
    assert EXPECTED_GPUS <= set(catalog.gpus)


# --- bad input: one-line CatalogError naming the file and the field ------------------


# A bad override file (its text) and what the one-line message names besides the file.
BAD_OVERRIDES = {
    "unknown_field": (
        "gpus:\n  h100-sxm:\n    memry_gb: 80\n",
        ["gpus.h100-sxm.memry_gb", "unknown field"],
    ),
    "negative_memory": (
        "gpus:\n  h100-sxm:\n    memory_gb: -80\n",
        ["gpus.h100-sxm.memory_gb", "-80"],
    ),
    "new_entry_with_a_few_fields_is_rejected": (
        "gpus:\n  tiny:\n    memory_gb: 16\n",
        ["gpus.tiny.", "missing"],
    ),
    "malformed_yaml": ("gpus:\n  h100-sxm: [memory_gb: 80\n", ["YAML syntax error"]),
    "empty_file": ("", ["empty"]),
    "unknown_section": ("gpu:\n  h100-sxm:\n    memory_gb: 80\n", ["gpu: unknown section"]),
    "nic_with_unknown_switch": (
        "nics:\n  cx7-400g:\n    switch: no-such-switch\n",
        ["nics.cx7-400g.switch", "no-such-switch"],
    ),
    "top_level_not_a_mapping": ("- gpus\n- nics\n", []),
}


@pytest.mark.parametrize("text,needles", list(BAD_OVERRIDES.values()), ids=list(BAD_OVERRIDES))
def test_bad_override_names_the_file_and_the_field(tmp_path, text, needles):
    path = _write(tmp_path, text)
    message = _error([path])
    assert str(path) in message
    for needle in needles:
        assert needle in message, message


def test_new_incomplete_entry_names_the_missing_field(tmp_path, cat):
    fields = _complete_entry(cat)
    del fields["tdp_w"]
    path = _write(tmp_path, yaml.safe_dump({"gpus": {"half-gpu": fields}}))
    message = _error([path])
    assert str(path) in message
    assert "gpus.half-gpu.tdp_w" in message
    assert "missing" in message


def test_directory_given_as_file(tmp_path):
    folder = tmp_path / "overrides"
    folder.mkdir()
    message = _error([folder])
    assert str(folder) in message
    assert "directory" in message


def test_missing_file(tmp_path):
    path = tmp_path / "nope.yaml"
    message = _error([path])
    assert str(path) in message
    assert "not found" in message


# ---------------------------------------------------------------- 14: large catalog values
@pytest.mark.parametrize(
    "entry",
    [
        "gpus:\n  h100-sxm:\n    server:\n      overhead_usd: 1e300\n",
        "gpus:\n  h100-sxm:\n    server:\n      host_power_w: 1e300\n",
        "nics:\n  cx7-400g:\n    price_usd: 1e300\n",
        "switches:\n  qm9700:\n    price_usd: 1e300\n",
        "nics:\n  cx7-400g:\n    transceiver_usd: 1e300\n",
        "gpus:\n  h100-sxm:\n    calibration:\n      collective_latency_us: 1e300\n",
    ],
    ids=["overhead", "host-power", "nic-price", "switch-price", "transceiver", "latency"],
)
def test_huge_catalog_values_are_refused_naming_file_and_field(tmp_path, capsys, entry):
    """Reproduction 14: 1e300 in a catalog override crashed the solvers (OverflowError);
    catalog fields have physical upper bounds, exit 2 naming the file and the field."""
    cat = tmp_path / "big.yaml"
    cat.write_text(entry)
    field = entry.split(":")[-2].strip()
    refused(capsys, [*OPTIMIZE, "--model", "llama2-7b", "--catalog", str(cat)], "big.yaml", field)


def test_bool_numbers_are_refused_in_questions_and_catalogs(tmp_path, capsys):
    q = tmp_path / "q.yaml"
    q.write_text("model: llama2-7b\nbudget: 1M\nseq_len: true\n")
    refused(capsys, ["explain", str(q)], "seq_len", "not a number")
    cat = tmp_path / "c.yaml"
    cat.write_text("gpus:\n  h100-sxm:\n    tdp_w: true\n")
    refused(capsys, ["catalog", "--catalog", str(cat)], "gpus.h100-sxm.tdp_w", "not a number")


def test_a_catalog_of_more_than_max_entries_is_refused(tmp_path):
    """1,000 copies of one GPU in a --catalog file made optimize take 50 s and 1.3 GB,
    past any --time-limit; the count is refused before any entry is validated."""
    from catalog import CatalogError
    from catalog.loader import MAX_ENTRIES

    shipped = len(load_catalog().gpus)
    path = tmp_path / "many.yaml"
    path.write_text(
        "gpus:\n" + "".join(f"  g{i}: {{}}\n" for i in range(MAX_ENTRIES - shipped + 1))
    )
    with pytest.raises(CatalogError) as err:
        load_catalog([path])
    assert str(err.value) == (
        f"{path}: gpus: the catalog would hold {MAX_ENTRIES + 1} entries, more than "
        f"{MAX_ENTRIES} (the shipped ones included); keep the ones the question compares, or "
        "study prices with a sweep's price_scale"
    )
    path.write_text("gpus:\n" + "".join(f"  g{i}: {{}}\n" for i in range(MAX_ENTRIES - shipped)))
    with pytest.raises(CatalogError, match="required field is missing"):  # counted, then read
        load_catalog([path])
