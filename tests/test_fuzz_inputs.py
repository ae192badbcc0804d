"""Acceptance of issue 20: no input makes the designer print "internal error".

Hypothesis draws option values (NaN, the infinities, 1e308, -0, huge and negative integers,
suffixed numbers, text) for every numeric option of optimize, compare, evaluate and the
question file, and values for every numeric field of a catalog override (GPU, server,
profile, NIC, switch, facility, read from the catalog's pydantic models so that a new field
is fuzzed too). Every run exits 0, 1 or 2 with no traceback; a refusal is one line. The
commands run in-process on a tiny question (llama2-7b on H100, 20B tokens, 1M-token
batches) so that the draws take seconds; the draws are derandomized (the same in every
run, so CI does not flake), and a slow test runs every option with every extreme value."""

from __future__ import annotations

import contextlib
import io
import tempfile
import types
import typing
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catalog.specs import Calibration, Facility, GPUSpec, NICSpec, ServerSpec, SwitchSpec
from designer.cli import main

TINY = ["--model", "llama2-7b", "--gpu", "h100-sxm", "--tokens", "20B"]
QUESTION = [*TINY, "--max-batch-tokens", "1M", "--budget", "2M", "--no-explain"]
QUESTION += ["--time-limit", "5"]
EXTREMES = ["nan", "NaN", "inf", "-inf", "1e308", "-1e308", "-0", "0", "-0.0", "1e-308", "-1"]
EXTREMES += ["1e17", "1e19", "1e30", "1e300", "9" * 25, "-" + "9" * 25, "2**64", "0x10", ""]
EXTREMES += ["1.5", "3", "30M", "2T", "90d", "1e9d", "abc", "1e-300", "4096", "0.5"]

VALUES = st.one_of(
    st.sampled_from(EXTREMES),
    st.integers(min_value=-(2**80), max_value=2**80).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)

QUESTION_OPTIONS = [
    "--budget", "--deadline", "--tokens", "--seq-len", "--power-cap", "--max-racks",
    "--max-gpus", "--max-batch-tokens", "--min-batch-tokens", "--pue", "--usd-per-kwh",
    "--rack-power-kw", "--oversubscription", "--lifetime-years", "--dp-overlap",
    "--memory-overhead", "--reserved-gb", "--headroom", "--max-virtual-stages",
    "--time-limit", "--top", "--gpu-cap", "--checkpoint-every", "--failure-scale",
    "--cloud-max-gpus",
]  # fmt: skip
EVALUATE_OPTIONS = [
    "--tp", "--pp", "--dp", "--cp", "--vp", "--micro-batch", "--global-batch", "--seq-len",
    "--nics-per-node", "--tokens", "--first-stage-layers", "--last-stage-layers", "--zero",
    "--dp-overlap", "--memory-overhead", "--reserved-gb", "--checkpoint-every",
    "--failure-scale",
]  # fmt: skip


def test_every_numeric_question_option_is_fuzzed():
    """A question field added later (designer/question/fields.py) is fuzzed too, or this fails."""
    from designer.question.fields import META, Question

    numeric = {
        META[name].flag
        for name, info in Question.model_fields.items()
        if name in META
        and any(t in (int, float) for t in typing.get_args(info.annotation) or (info.annotation,))
    }
    assert numeric - {"--model", "--gpu", "--nic"} <= set(QUESTION_OPTIONS), sorted(
        numeric - set(QUESTION_OPTIONS)
    )


DRAWS = {
    "deadline": None,
    "derandomize": True,  # the same draws in every run: CI does not flake
    "database": None,
    "suppress_health_check": [HealthCheck.too_slow],
}


def invoke(args: list[str]) -> tuple[int, str, str]:
    """designer.cli.main in-process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    code: object = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(args)
        except SystemExit as done:
            code = 0 if done.code is None else done.code
    return int(code), out.getvalue(), err.getvalue()  # type: ignore[call-overload]


def assert_contract(args: list[str]) -> tuple[int, str]:
    code, _, err = invoke(args)
    assert code in (0, 1, 2), (args, code, err)
    assert "internal error" not in err, (args, err)
    assert "Traceback" not in err, (args, err)
    if code == 2:
        assert len(err.strip("\n").split("\n")) == 1, (args, err)
    return code, err


@settings(max_examples=60, **DRAWS)
@given(option=st.sampled_from(QUESTION_OPTIONS), value=VALUES)
def test_optimize_options_never_give_an_internal_error(option, value):
    if option == "--gpu-cap":
        value = f"h100-sxm={value}"
    assert_contract(["optimize", *QUESTION, option, value])


@settings(max_examples=40, **DRAWS)
@given(option=st.sampled_from(EVALUATE_OPTIONS), value=VALUES)
def test_evaluate_options_never_give_an_internal_error(option, value):
    assert_contract(["evaluate", *TINY, option, value])


@settings(max_examples=15, **DRAWS)
@given(value=VALUES)
def test_compare_budget_never_gives_an_internal_error(value):
    assert_contract(["compare", *QUESTION[:4], "--gpu", "h200", "--budget", value])


def _numeric_fields(model: type) -> list[str]:
    """The float and int fields of a pydantic model (optional ones too)."""
    out = []
    for name, info in model.model_fields.items():
        ann = info.annotation
        args = typing.get_args(ann) if isinstance(ann, types.UnionType) else (ann,)
        if any(a in (int, float) for a in args):
            out.append(name)
    return out


# (YAML path above the field, field): one entry of each kind the shipped catalog has
CATALOG_FIELDS = [
    *((("gpus", "h100-sxm"), f) for f in _numeric_fields(GPUSpec)),
    *((("gpus", "h100-sxm", "server"), f) for f in _numeric_fields(ServerSpec)),
    *((("gpus", "h100-sxm", "calibration"), f) for f in _numeric_fields(Calibration)),
    *((("nics", "cx7-400g"), f) for f in _numeric_fields(NICSpec)),
    *((("switches", "qm9700"), f) for f in _numeric_fields(SwitchSpec)),
    *((("facility",), f) for f in _numeric_fields(Facility)),
]
CATALOG_VALUES = st.one_of(
    st.sampled_from(EXTREMES[:-5] + ["1e6", "1e9", "1e-9", "100000", "0.001", "1e12"]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)
_FOLDER = Path(tempfile.mkdtemp(prefix="designer-fuzz-"))


def _override(path: tuple[str, ...], field: str, value: str) -> Path:
    lines, indent = [], ""
    for part in path:
        lines.append(f"{indent}{part}:")
        indent += "  "
    lines.append(f"{indent}{field}: {value if value else '~'}")
    file = _FOLDER / "override.yaml"
    file.write_text("\n".join(lines) + "\n")
    return file


def test_the_catalog_fuzz_covers_every_kind_of_field():
    kinds = {path[0] for path, _ in CATALOG_FIELDS}
    assert kinds == {"gpus", "nics", "switches", "facility"}
    assert len(CATALOG_FIELDS) > 40


@settings(max_examples=60, **DRAWS)
@given(entry=st.sampled_from(CATALOG_FIELDS), value=CATALOG_VALUES)
def test_catalog_fields_never_give_an_internal_error(entry, value):
    path, field = entry
    file = str(_override(path, field, value))
    assert_contract(["optimize", *QUESTION, "--catalog", file])
    assert_contract(["evaluate", *TINY, "--tp", "8", "--catalog", file, "--json"])


@pytest.mark.slow
@pytest.mark.parametrize("option", QUESTION_OPTIONS + [f"evaluate {o}" for o in EVALUATE_OPTIONS])
def test_every_option_with_every_extreme_value(option):
    """The grid behind the draws: each option with each extreme value (slow: ~1,300 runs)."""
    for value in EXTREMES:
        if option.startswith("evaluate "):
            assert_contract(["evaluate", *TINY, option.split()[1], value])
        elif option == "--gpu-cap":
            assert_contract(["optimize", *QUESTION, option, f"h100-sxm={value}"])
        else:
            assert_contract(["optimize", *QUESTION, option, value])
