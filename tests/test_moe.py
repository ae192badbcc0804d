"""Mixture-of-experts groundwork (issue 17 items 1-3): until MoE, latent attention and
multi-token prediction are modelled end to end, every model input that uses them is
refused for planning with exit 2 naming the key and the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import run_main

HF_MOE = Path(__file__).resolve().parent / "data" / "hf_moe"
EVAL = ["--gpu", "h100-sxm", "--tp", "1", "--pp", "1", "--dp", "8"]


def one_line(err: str) -> str:
    assert "Traceback" not in err
    lines = err.strip("\n").split("\n")
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize(
    ("name", "key"),
    [("DeepSeek-V3.json", "n_routed_experts"), ("Mixtral-8x7B-v0.1.json", "num_local_experts")],
)
def test_real_moe_config_is_refused_naming_the_key(capsys, name, key):
    path = HF_MOE / name
    code, _, err = run_main(capsys, ["evaluate", "--model", str(path), *EVAL])
    line = one_line(err)
    assert code == 2
    assert str(path) in line and f"{key}:" in line and "issue 17" in line


@pytest.mark.parametrize(
    "key",
    ["num_experts", "router_aux_loss_coef", "n_routed_experts", "kv_lora_rank",
     "moe_topk_something_new", "interleave_moe_layer_step", "num_nextn_predict_layers"],
)  # fmt: skip
def test_moe_looking_config_key_is_never_ignored(capsys, tmp_path, key):
    cfg = json.loads((Path(__file__).parent / "data" / "hf" / "Qwen3-0.6B.json").read_text())
    cfg[key] = 4
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    code, _, err = run_main(capsys, ["evaluate", "--model", str(path), *EVAL])
    line = one_line(err)
    assert code == 2 and f"{path}: {key}:" in line


@pytest.mark.parametrize("key", ["experts", "kv_lora_rank", "mtp_layers", "dense_layers"])
def test_spec_file_with_moe_key_is_refused(capsys, tmp_path, key):
    spec = {"layers": 4, "hidden": 256, "heads": 4, "vocab": 1000, "seq_len": 512, key: 2}
    path = tmp_path / "moe.yaml"
    path.write_text(yaml.safe_dump(spec))
    code, _, err = run_main(capsys, ["evaluate", "--model", str(path), *EVAL])
    line = one_line(err)
    assert code == 2 and f"{path}: {key}:" in line
