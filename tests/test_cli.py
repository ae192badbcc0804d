"""Tests of the `designer` command line against ../shared/CLI-CONTRACT.md."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from designer.cli import cli
from designer.numbers import parse_days, parse_quantity
from helpers import one_line, run_main
from models import moe_zoo, zoo

EVALUATE_70B = [
    "evaluate",
    "--model", "llama2-70b",
    "--gpu", "h100-sxm",
    "--tp", "8",
    "--pp", "4",
    "--dp", "4",
    "--micro-batch", "1",
    "--global-batch", "1024",
]  # fmt: skip
RTX_OOM = [
    "evaluate",
    "--model",
    "llama2-70b",
    "--gpu",
    "rtx4090",
    "--tp",
    "1",
    "--pp",
    "1",
    "--dp",
    "8",
]

MEMORY_KEYS = {"weights", "gradients", "optimizer", "activations", "other", "total", "capacity"}
BREAKDOWN_KEYS = {"compute", "bubble", "tp_comm", "cp_comm", "pp_comm", "dp_comm", "optimizer"}


# --- helpers ---------------------------------------------------------------------------------


def invoke(runner: CliRunner, args: list[str]):
    result = runner.invoke(cli, args, catch_exceptions=False)
    return result


def assert_one_line_error(err: str, *needles: str) -> str:
    assert "Traceback" not in err
    lines = err.strip("\n").split("\n")
    assert len(lines) == 1, f"stderr is not one line: {err!r}"
    line = lines[0]
    assert line.startswith("designer: ")
    for needle in needles:
        assert needle in line, f"{needle!r} not in {line!r}"
    return line


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# --- numbers ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,value",
    [
        ("2T", 2e12),
        ("30M", 3e7),
        ("30000K", 3e7),
        ("1.5e9", 1.5e9),
        ("$30,000,000", 3e7),
        ("16M", 1.6e7),
        ("1.5B", 1.5e9),
        ("42", 42.0),
        ("2t", 2e12),
    ],
)
def test_parse_quantity(text, value):
    assert parse_quantity(text) == pytest.approx(value, rel=1e-12)


@pytest.mark.parametrize("text", ["30Q", "", "abc", "1..2", "M", "2TT"])
def test_parse_quantity_rejects(text):
    with pytest.raises(ValueError):
        parse_quantity(text)


def test_parse_quantity_message_names_suffix():
    with pytest.raises(ValueError, match="Q"):
        parse_quantity("30Q")


@pytest.mark.parametrize(
    "text,days", [("90d", 90.0), ("36h", 1.5), ("30", 30.0), ("0.5d", 0.5), ("48H", 2.0)]
)
def test_parse_days(text, days):
    assert parse_days(text) == pytest.approx(days)


@pytest.mark.parametrize("text", ["90w", "90dd", "5hd", "5dh", "5hh", "d", ""])
def test_parse_days_rejects_quoting_the_text(text):
    """The message quotes what was written ('90dd' was reported as "'90d' has unknown
    suffix 'd'; use d or h", which contradicts itself)."""
    with pytest.raises(ValueError) as err:
        parse_days(text)
    assert str(err.value) == (
        f"{text!r} is not a duration; write days with d or hours with h after the number "
        "(90d, 36h), or a plain number of days"
    )


def test_deadline_option_and_question_file_quote_the_text(capsys, tmp_path):
    code, _, err = run_main(capsys, ["optimize", "--deadline", "90dd"])
    assert code == 2
    assert one_line(err) == (
        "designer: error: Invalid value for '--deadline': '90dd' is not a duration; write days "
        "with d or hours with h after the number (90d, 36h), or a plain number of days"
    )
    q = tmp_path / "q.yaml"
    q.write_text("deadline: 90dd\n")
    code, _, err = run_main(capsys, ["explain", str(q)])
    assert code == 2 and "'90dd' is not a duration" in one_line(err)


# --- models ------------------------------------------------------------------------------------


def test_models_table(runner):
    result = invoke(runner, ["models"])
    assert result.exit_code == 0
    dense, _, experts = result.output.partition("Mixture-of-experts")
    for name in zoo():
        assert name in dense
    assert "params_b" in dense
    # the MoE zoo, planned by name, is listed too, with its active parameters
    rows = {line.split()[0]: line.split() for line in experts.splitlines()[3:] if line.strip()}
    assert set(rows) == set(moe_zoo())
    assert "active_b" in experts
    assert rows["deepseek-v3"][1:3] == ["671", "37.55"]


def test_unknown_model_names_every_zoo_model_and_the_close_one(capsys):
    code, _, err = run_main(capsys, ["models", "show", "deepseek-v4"])
    assert code == 2
    assert_one_line_error(err, "did you mean 'deepseek-v3'?")
    assert "qwen3-30b-a3b" in err and "llama2-70b" in err
    code, _, err = run_main(capsys, ["models", "show", "zzz"])
    assert code == 2 and "did you mean" not in err


def test_a_model_named_as_its_release_or_an_alias_reads_the_zoo_entry(capsys):
    """The dense audit's three (exit 2 before): another spelling of a zoo name, a Hugging
    Face repository name or an entry's alias is that entry (models.zoo.name_key)."""
    code, out, _ = run_main(capsys, ["models", "show", "nemotron-4-340b", "--json"])
    assert code == 0 and json.loads(out)["name"] == "nemotron4-340b"
    code, out, _ = run_main(capsys, ["models", "show", "deepseekv3", "--json"])
    assert code == 0 and json.loads(out)["name"] == "deepseek-v3"
    args = ["--gpu", "h100-sxm", "--tp", "8", "--pp", "9", "--dp", "2", "--global-batch", "72"]
    code, out, _ = run_main(capsys, ["evaluate", "--model", "llama3.1-405b", *args, "--json"])
    alias = json.loads(out)
    code2, out, _ = run_main(capsys, ["evaluate", "--model", "llama3-405b", *args, "--json"])
    assert code == code2 and alias == json.loads(out)


def test_models_json(runner):
    result = invoke(runner, ["models", "--json"])
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert isinstance(data, list)
    assert {d["name"] for d in data} == set(zoo()) | set(moe_zoo())
    moe_entry = next(d for d in data if d["name"] == "qwen3-30b-a3b")
    assert moe_entry["active_params"] < moe_entry["params"]
    for d in data:
        assert isinstance(d["params"], int) and d["params"] > 0
    by_name = {d["name"]: d for d in data}
    assert by_name["llama2-70b"]["params"] == zoo()["llama2-70b"].params()
    assert by_name["llama2-70b"]["kv_heads"] == 8


def test_models_show(runner):
    result = invoke(runner, ["models", "show", "llama2-70b"])
    assert result.exit_code == 0
    for field in (
        "layers",
        "hidden",
        "heads",
        "kv_heads",
        "ffn_hidden",
        "vocab",
        "seq_len",
        "params",
        "source",
    ):
        assert field in result.output
    assert "8,192" in result.output or "8192" in result.output


def test_models_show_json(runner):
    result = invoke(runner, ["models", "show", "llama2-70b", "--json"])
    assert result.exit_code == 0
    d = json.loads(result.output)
    assert d["name"] == "llama2-70b"
    assert (d["layers"], d["hidden"], d["heads"], d["kv_heads"]) == (80, 8192, 64, 8)
    assert d["params"] == zoo()["llama2-70b"].params()


def test_models_show_file(runner, tmp_path):
    path = _write(
        tmp_path / "tiny.yaml", "layers: 2\nhidden: 64\nheads: 4\nvocab: 1000\nseq_len: 128\n"
    )
    result = invoke(runner, ["models", "show", str(path), "--json"])
    assert result.exit_code == 0
    d = json.loads(result.output)
    assert d["name"] == "tiny"
    assert d["ffn_hidden"] == 256
    text = invoke(runner, ["models", "show", str(path)])
    assert text.exit_code == 0
    assert "tiny" in text.output


def test_models_show_unknown(capsys):
    code, out, err = run_main(capsys, ["models", "show", "no-such-model"])
    assert code == 2
    assert_one_line_error(err, "no-such-model")


# --- catalog -----------------------------------------------------------------------------------


def test_catalog_table(runner):
    result = invoke(runner, ["catalog"])
    assert result.exit_code == 0
    for word in ("GPUs", "NICs", "Switches", "h100-sxm", "rtx4090", "cx7-400g", "qm9700"):
        assert word in result.output
    assert "Facility" in result.output and "PUE 1.25" in result.output


def test_catalog_json(runner):
    result = invoke(runner, ["catalog", "--json"])
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert {"gpus", "nics", "switches", "facility"} <= set(data)
    assert data["facility"]["usd_per_kwh"] == 0.0826
    assert data["gpus"]["h100-sxm"]["memory_gb"] == 80
    assert "cx7-400g" in data["nics"]
    assert data["nics"]["cx7-400g"]["switch"] in data["switches"]


def test_catalog_show_gpu(runner):
    result = invoke(runner, ["catalog", "show", "h100-sxm"])
    assert result.exit_code == 0
    for field in (
        "price_source",
        "cloud_price_source",
        "spec_source",
        "calibration",
        "matmul_efficiency",
        "server",
    ):
        assert field in result.output


def test_catalog_show_gpu_json(runner):
    result = invoke(runner, ["catalog", "show", "h100-sxm", "--json"])
    assert result.exit_code == 0
    d = json.loads(result.output)
    assert d["name"] == "h100-sxm"
    assert d["price_source"]
    assert "matmul_efficiency" in d["calibration"]


def test_catalog_show_nic(runner):
    result = invoke(runner, ["catalog", "show", "cx7-400g"])
    assert result.exit_code == 0
    for field in ("speed_gbit_per_s", "price_source", "switch", "qm9700"):
        assert field in result.output


def test_catalog_override(runner, tmp_path):
    path = _write(
        tmp_path / "override.yaml", "gpus:\n  rtx4090:\n    memory_gb: 48\n    price_usd: 1234\n"
    )
    result = invoke(runner, ["catalog", "--catalog", str(path), "show", "rtx4090", "--json"])
    assert result.exit_code == 0
    d = json.loads(result.output)
    assert d["memory_gb"] == 48
    assert d["price_usd"] == 1234
    plain = json.loads(invoke(runner, ["catalog", "show", "rtx4090", "--json"]).output)
    assert plain["memory_gb"] == 24
    assert d["calibration"] == plain["calibration"]  # untouched fields kept


def test_catalog_override_reaches_evaluate(runner, tmp_path):
    path = _write(tmp_path / "override.yaml", "gpus:\n  rtx4090:\n    memory_gb: 2000\n")
    result = invoke(runner, [*RTX_OOM, "--catalog", str(path), "--json"])
    d = json.loads(result.output)
    assert d["memory_gb"]["capacity"] == 2000
    assert "memory" not in {v["constraint"] for v in d["violations"]}


def test_catalog_show_unknown(capsys):
    code, out, err = run_main(capsys, ["catalog", "show", "nope-9000"])
    assert code == 2
    assert_one_line_error(err, "nope-9000")


# --- evaluate ------------------------------------------------------------------------------------


def test_evaluate_json_contract(capsys):
    code, out, err = run_main(capsys, [*EVALUATE_70B, "--json"])
    assert code == 0, err
    d = json.loads(out)
    assert d["feasible"] is True
    assert d["violations"] == []
    assert MEMORY_KEYS <= set(d["memory_gb"])
    assert d["memory_gb"]["capacity"] == 80
    assert d["memory_gb"]["total"] == pytest.approx(
        sum(d["memory_gb"][k] for k in MEMORY_KEYS - {"total", "capacity"})
    )
    assert d["step_time_s"] > 0
    assert BREAKDOWN_KEYS <= set(d["breakdown_s"])
    assert sum(d["breakdown_s"][k] for k in BREAKDOWN_KEYS) == pytest.approx(d["step_time_s"])
    assert d["model_tflops_per_gpu"] > 0
    assert 0 < d["mfu"] < 1
    assert d["tokens_per_s"] == pytest.approx(1024 * 4096 / d["step_time_s"])
    assert d["time_to_train_days"] is None
    assert d["cost_usd"]["capex"] > 0
    assert d["cost_usd"]["cloud"] is None


def test_evaluate_json_with_tokens(capsys):
    code, out, err = run_main(capsys, [*EVALUATE_70B, "--json", "--tokens", "2T"])
    assert code == 0, err
    d = json.loads(out)
    days = d["time_to_train_days"]
    assert isinstance(days, float) and days > 0
    # the ideal time is tokens / throughput; the expected time adds failures (models/goodput.py)
    assert d["ideal_time_days"] == pytest.approx(2e12 / d["tokens_per_s"] / 86400)
    assert days == pytest.approx(d["ideal_time_days"] / d["goodput"])
    assert d["cost_usd"]["cloud"] > 0


def test_evaluate_text(runner):
    result = invoke(runner, [*EVALUATE_70B, "--tokens", "2T"])
    assert result.exit_code == 0
    for word in ("feasible: yes", "memory per GPU", "step time", "MFU", "time to train"):
        assert word in result.output


def test_evaluate_options_reach_layout(capsys):
    args = [*EVALUATE_70B, "--vp", "2", "--recompute", "full", "--zero", "3", "--precision", "fp8",
            "--no-sequence-parallel", "--nic", "cx6-200g", "--nics-per-node", "4", "--seq-len", "2048", "--json"]  # fmt: skip
    code, out, err = run_main(capsys, args)
    assert code in (0, 1), err
    lay = json.loads(out)["layout"]
    assert (lay["vp"], lay["recompute"], lay["zero"], lay["precision"]) == (2, "full", 3, "fp8")
    assert (lay["sequence_parallel"], lay["nic"], lay["nics_per_node"], lay["seq_len"]) == (
        False,
        "cx6-200g",
        4,
        2048,
    )


def test_evaluate_default_global_batch(capsys):
    code, out, err = run_main(
        capsys,
        ["evaluate", "--model", "llama2-7b", "--tp", "2", "--pp", "2", "--dp", "2", "--json"],
    )
    assert code in (0, 1), err
    lay = json.loads(out)["layout"]
    assert lay["global_batch"] == 1 * 2 * 2  # micro-batch x dp x pp
    assert lay["sequence_parallel"] is True  # default on when tp > 1


def test_evaluate_infeasible_exit_1_with_json(capsys):
    code, out, err = run_main(capsys, [*RTX_OOM, "--json"])
    assert code == 1
    d = json.loads(out)
    assert d["feasible"] is False
    assert "memory" in {v["constraint"] for v in d["violations"]}
    assert all(v["detail"] for v in d["violations"])
    assert "Traceback" not in err


def test_evaluate_infeasible_text(runner):
    result = runner.invoke(cli, RTX_OOM)
    assert result.exit_code == 1
    assert "feasible: NO" in result.output
    assert "violation memory" in result.output


@pytest.mark.parametrize(
    "args,needles",
    [
        (["evaluate", "--model", "no-such-model"], ["--model", "no-such-model"]),
        (["evaluate", "--gpu", "tpu-v9"], ["--gpu", "tpu-v9"]),
        (["evaluate", "--nic", "cx99"], ["--nic", "cx99"]),
        (["evaluate", "--tp", "3"], ["--tp"]),
        (["evaluate", "--global-batch", "-1"], ["--global-batch"]),
        (["evaluate", "--dp", "4", "--global-batch", "6"], ["--global-batch"]),
        (
            ["evaluate", "--micro-batch", "2", "--dp", "2", "--global-batch", "6"],
            ["--global-batch"],
        ),
        (["evaluate", "--pp", "7"], ["--pp"]),
        (["evaluate", "--gpu", "a100-80gb", "--precision", "fp8"], ["--precision", "a100-80gb"]),
        (["evaluate", "--tokens", "30Q"], ["--tokens", "30Q"]),
        (["evaluate", "--no-such-option"], ["--no-such-option"]),
        (["evaluate", "--recompute", "sometimes"], ["--recompute"]),
        (["evaluate", "--zero", "4"], ["--zero"]),
        (["evaluate", "--tp", "0"], ["--tp"]),
        (["no-such-command"], ["no-such-command"]),
    ],
)
def test_evaluate_bad_input_exit_2(capsys, args, needles):
    code, out, err = run_main(capsys, args)
    assert code == 2
    assert_one_line_error(err, *needles)
    assert out == ""


def test_evaluate_malformed_model_file(capsys, tmp_path):
    path = _write(tmp_path / "broken.yaml", "layers: [80\nhidden: 8192\n")
    code, out, err = run_main(capsys, ["evaluate", "--model", str(path)])
    assert code == 2
    assert_one_line_error(err, str(path))


def test_evaluate_model_file_unknown_field(capsys, tmp_path):
    path = _write(
        tmp_path / "typo.yaml",
        "layers: 2\nhidden: 64\nheads: 4\nvocab: 100\nseq_len: 16\nhiden: 3\n",
    )
    code, out, err = run_main(capsys, ["evaluate", "--model", str(path)])
    assert code == 2
    assert_one_line_error(err, str(path), "hiden")


def test_evaluate_catalog_unknown_field(capsys, tmp_path):
    path = _write(tmp_path / "cat.yaml", "gpus:\n  rtx4090:\n    memroy_gb: 48\n")
    code, out, err = run_main(capsys, [*EVALUATE_70B, "--catalog", str(path)])
    assert code == 2
    assert_one_line_error(err, str(path), "memroy_gb")


def test_catalog_command_bad_override(capsys, tmp_path):
    path = _write(tmp_path / "cat.yaml", "gpus:\n  rtx4090:\n    memroy_gb: 48\n")
    code, out, err = run_main(capsys, ["catalog", "--catalog", str(path)])
    assert code == 2
    assert_one_line_error(err, str(path), "memroy_gb")


def test_evaluate_hf_config(capsys, tmp_path):
    # the contract's Llama-family keys alone, no model_type: read as Llama (gated MLP)
    cfg = {
        "num_hidden_layers": 80, "hidden_size": 8192, "num_attention_heads": 64, "num_key_value_heads": 8,
        "intermediate_size": 28672, "vocab_size": 32000, "max_position_embeddings": 4096,
        "tie_word_embeddings": False, "hidden_act": "silu",
    }  # fmt: skip
    path = _write(tmp_path / "config.json", json.dumps(cfg))
    code, out, err = run_main(
        capsys, [*EVALUATE_70B[:1], "--model", str(path), *EVALUATE_70B[3:], "--json"]
    )
    assert code == 0, err
    code_zoo, out_zoo, _ = run_main(capsys, [*EVALUATE_70B, "--json"])
    assert json.loads(out)["step_time_s"] == pytest.approx(json.loads(out_zoo)["step_time_s"])


def test_debug_shows_the_traceback_and_keeps_the_exit_code(capsys):
    """--debug prints the traceback; the exit code stays the contract's (issue 20, 22: it
    was 1 for bad input)."""
    code, _, err = run_main(capsys, ["--debug", "evaluate", "--model", "no-such-model"])
    assert code == 2 and "Traceback" in err and "no-such-model" in err
    code, _, err = run_main(capsys, ["--debug", "evaluate", "--tp", "3"])
    assert code == 2 and "Traceback" in err and "UsageError" in err


def test_debug_with_good_input_succeeds(capsys):
    code, out, err = run_main(capsys, ["--debug", *EVALUATE_70B, "--json"])
    assert code == 0
    assert json.loads(out)["feasible"] is True


def test_help_and_version(capsys):
    code, out, _ = run_main(capsys, ["--help"])
    assert code == 0
    for command in ("models", "catalog", "evaluate"):
        assert command in out
    code, out, _ = run_main(capsys, ["evaluate", "--help"])
    assert code == 0
    for option in ("--model", "--gpu", "--catalog", "--tp", "--pp", "--dp", "--cp", "--vp", "--micro-batch",
                   "--global-batch", "--seq-len", "--recompute", "--sequence-parallel", "--zero", "--precision",
                   "--nic", "--nics-per-node", "--tokens", "--json"):  # fmt: skip
        assert option in out
    code, out, _ = run_main(capsys, ["--version"])
    assert code == 0
    assert "0." in out or "1." in out


def test_python_m_designer_help():
    proc = subprocess.run(
        [sys.executable, "-m", "designer", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "evaluate" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_python_m_designer_bad_input():
    proc = subprocess.run(
        [sys.executable, "-m", "designer", "evaluate", "--tp", "3"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert_one_line_error(proc.stderr, "--tp")


def test_json_output_is_standard_json_and_tiny_peaks_are_refused(tmp_path, capsys):
    """Reproductions 14 and 19: a catalog override of 1e-300 TFLOPS (or a $1e-300 GPU) is
    refused naming the field; and a quantity that is not finite prints as null in --json,
    never the invalid Infinity."""
    import json

    from designer.cli import emit_json

    tiny = tmp_path / "tiny.yaml"
    for field in ("dense_bf16_tflops", "price_usd"):
        tiny.write_text(f"gpus:\n  h100-sxm:\n    {field}: 1e-300\n")
        code, _, err = run_main(capsys, ["evaluate", "--catalog", str(tiny)])
        assert code == 2 and f"gpus.h100-sxm.{field}" in one_line(err)
    capsys.readouterr()
    emit_json({"days": float("inf"), "rows": [float("nan"), 1.5], "n": 2})
    assert json.loads(capsys.readouterr().out) == {"days": None, "rows": [None, 1.5], "n": 2}


ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("args", [["--help"], ["catalog"], ["models"]])
def test_commands_that_never_solve_do_not_import_the_solvers(args):
    code = (
        "import sys, atexit\n"
        "heavy = ('ortools', 'pandas', 'numpy')\n"
        "atexit.register(lambda: print('HEAVY ' + ' '.join(sorted({m.split('.')[0] for m in "
        "sys.modules if m.split('.')[0] in heavy})), file=sys.stderr))\n"
        "from designer.cli import main\n"
        f"main({args!r})\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "HEAVY", proc.stderr


@pytest.mark.parametrize(
    "args, key",
    [
        (["catalog", "--json", "show", "h100-sxm"], "display_name"),
        (["models", "--json", "show", "llama2-7b"], "layers"),
    ],
)
def test_json_before_show_prints_json(capsys, args, key):
    """--json given to the group applies to `show` (it printed the text table, exit 0)."""
    code, out, err = run_main(capsys, args)
    assert code == 0, err
    assert key in json.loads(out)
    code, text, _ = run_main(capsys, [a for a in args if a != "--json"])
    assert code == 0 and not text.lstrip().startswith("{")


def test_a_gpu_capped_twice_differently_is_a_usage_error(capsys):
    """The last --gpu-cap of a GPU type silently won; the same cap twice is one."""
    code, _, err = run_main(
        capsys, ["optimize", "--gpu-cap", "h100-sxm=8", "--gpu-cap", "h100-sxm=16"]
    )
    assert code == 2
    assert one_line(err) == (
        "designer: error: --gpu-cap: h100-sxm is capped twice (8 and 16); give one cap per GPU type"
    )
    twice = ["--gpu", "h100-sxm", "--gpu-cap", "h100-sxm=64", "--gpu-cap", "h100-sxm=64"]
    once = ["--gpu", "h100-sxm", "--gpu-cap", "h100-sxm=64"]
    small = ["optimize", "--model", "llama2-7b", "--tokens", "20B", "--no-explain", "--json"]
    code, a, err = run_main(capsys, [*small, *twice])
    assert code == 0, err
    code, b, _ = run_main(capsys, [*small, *once])
    assert json.loads(a)["plans"][0]["num_gpus"] == json.loads(b)["plans"][0]["num_gpus"] <= 64


@pytest.mark.parametrize(
    "args, line",
    [
        (
            ["evaluate", "--model", "llama2-7b", "--catalog", ""],
            "Invalid value for '--catalog': an empty path; give a YAML file or leave the option out",
        ),
        (
            ["optimize", "--catalog", " "],
            "Invalid value for '--catalog': an empty path; give a YAML file or leave the option out",
        ),
        (
            ["catalog", "--catalog", ""],
            "Invalid value for '--catalog': an empty path; give a YAML file or leave the option out",
        ),
        (
            ["evaluate", "--model", "llama2-7b", "--nic", ""],
            "Invalid value for '--nic': empty; give a catalog name (designer catalog lists them) "
            "or leave the option out",
        ),
    ],
)
def test_empty_file_and_name_options_are_refused(capsys, args, line):
    """--catalog "" was read as the working folder (".: is a directory", not naming the
    option) and evaluate --nic "" as no NIC (the default, silently)."""
    code, _, err = run_main(capsys, args)
    assert code == 2
    assert one_line(err) == f"designer: error: {line}"


def test_evaluate_refuses_a_layout_of_more_gpus_than_planned_for(capsys):
    """Each degree had its cap and their product none: 687 billion GPUs were 'feasible'."""
    code, _, err = run_main(
        capsys, ["evaluate", "--tp", "8", "--pp", "80", "--dp", "1048576", "--cp", "1024"]
    )
    assert code == 2
    assert one_line(err) == (
        "designer: error: --dp: the layout takes 687,194,767,360 GPUs (tp x pp x dp x cp), "
        "more than the 1,048,576 the designer plans for; lower a degree"
    )
    command = (
        "torchrun --nnodes 1000000 --nproc-per-node 8 pretrain_gpt.py --num-layers 2 "
        "--hidden-size 64 --num-attention-heads 4 --seq-length 128 "
        "--max-position-embeddings 128 --micro-batch-size 1 --global-batch-size 8000000 --bf16"
    )
    code, _, err = run_main(capsys, ["evaluate", "--from-megatron", command])
    assert code == 2 and "--from-megatron: the layout takes 8,000,000 GPUs" in err
    code, out, err = run_main(
        capsys, ["evaluate", "--model", "llama2-7b", "--tp", "8", "--dp", "131072"]
    )
    assert code in (0, 1) and "1,048,576 x h100-sxm" in out


def test_models_show_says_which_widths_mla_and_shared_experts_use(runner):
    """DeepSeek-V3's hidden / heads (56) is not its attention width, and its shared
    expert, given no width, is a routed expert's 2,048 wide: the text says both."""
    lines = invoke(runner, ["models", "show", "deepseek-v3"]).output.splitlines()
    by_key = {line.split()[0]: line for line in lines if line.strip()}
    assert "unused: multi-latent attention" in by_key["head_dim"]
    assert "a routed expert's: 2,048" in by_key["shared_expert_ffn_hidden"]
    dense = invoke(runner, ["models", "show", "llama2-70b"]).output
    assert "unused" not in dense and "routed expert" not in dense
    starts = {len(line) - len(line.split(maxsplit=1)[1]) for line in lines if line.strip()}
    assert len(starts) == 1  # every value in one column, the longest key's included


def test_catalog_show_prints_every_digit_the_catalog_holds(runner):
    """catalog show is the catalog as written: 1.555 TB/s and 1,307.4 TFLOP/s, not the
    three figures an answer rounds to (1.55, 1,307)."""
    a100 = invoke(runner, ["catalog", "show", "a100-40gb"]).output
    assert re.search(r"^memory_bw_tb_per_s +1\.555$", a100, re.M)
    mi300x = invoke(runner, ["catalog", "show", "mi300x"]).output
    assert re.search(r"^dense_bf16_tflops +1,307\.4$", mi300x, re.M)
    facility = invoke(runner, ["catalog", "show", "facility"]).output
    assert re.search(r"per_gpu_hour +1\.1583e-05$", facility, re.M)


@pytest.mark.parametrize(
    "args, line",
    [
        ([], "designer: error: no command given; run designer --help for the commands"),
        (["--debug"], "designer: error: no command given; run designer --help for the commands"),
        (
            ["bogus"],
            "designer: error: No such command 'bogus'; commands: breakeven, catalog, compare, "
            "evaluate, explain, export, models, optimize, report, sweep",
        ),
        (["optimise"], "did you mean 'optimize'? commands: breakeven, catalog"),
        (["models", "bogus"], "No such command 'bogus' in designer models; commands: show"),
    ],
)
def test_a_missing_or_unknown_command_is_one_line_naming_the_commands(capsys, args, line):
    """A bare `designer` printed its whole usage squashed into one error line, and
    `designer bogus` said "No such command 'bogus'." without the commands there are."""
    code, out, err = run_main(capsys, args)
    assert code == 2 and not out
    assert line in one_line(err)
    assert "Usage:" not in err
