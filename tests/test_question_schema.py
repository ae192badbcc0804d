"""The question schema (designer/question/fields.py): one declaration of every question field,
and the round trips through a question file, a saved answer and the command line."""

from __future__ import annotations

import dataclasses
import json
from typing import Literal, get_args, get_origin

import click
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from catalog.cloud import cloud_offers
from catalog.specs import FABRICS, MIN_LIFETIME_YEARS, STACKS
from designer.cli import cli, main
from designer.errors import UsageError
from designer.numbers import parse_quantity
from designer.question.build import _from_answer, build_scenario
from designer.question.fields import META, QUESTION_FIELDS, Question, answer_key, answer_question
from designer.sweep import AXIS_FIELDS
from helpers import OPTIMIZE, refused
from models.batch_tokens import MODELS as BATCH_MODELS
from solvers.scenario import PRICINGS


def _suffixed(low: float = 1e-3, high: float = 1e12):
    """A number in [low, high] (solvers/limits.py bounds the question's), or suffixed text."""
    return st.one_of(
        st.floats(min_value=low, max_value=high, allow_nan=False),
        st.sampled_from([t for t in ("30M", "2T", "1.5e9", "4,096") if parse_quantity(t) <= high]),
    )


SUFFIXED = _suffixed()
NAMES = st.lists(st.sampled_from(["h100-sxm", "h200", "b200", "a100-80gb"]), max_size=3)


def _choice(name: str):
    annotation = Question.model_fields[name].annotation
    literal = next(a for a in (annotation, *get_args(annotation)) if get_origin(a) is Literal)
    return st.sampled_from(get_args(literal))


def _optional(strategy):
    return st.none() | strategy


# one strategy per question field: a field the schema gains fails the coverage test below
FIELD_VALUES = {
    "model": st.sampled_from(["llama2-7b", "llama2-70b"])
    | st.fixed_dictionaries({"layers": st.integers(1, 96), "hidden": st.sampled_from([4096])}),
    "tokens": _suffixed(1, 1e15),
    "seq_len": _optional(st.integers(1, 1 << 20)),
    "budget": _optional(_suffixed(high=1e13)),
    "deadline": _optional(st.floats(1e-3, 1e4) | st.sampled_from(["90d", "36h"])),
    "objective": _optional(_choice("objective")),
    "pricing": _choice("pricing"),
    "power_cap": _optional(st.floats(1e-3, 1e3)),
    "max_racks": _optional(st.integers(1, 10_000) | st.just("1K")),
    "pue": _optional(st.floats(1, 5)),
    "usd_per_kwh": _optional(st.floats(0, 100)),
    "rack_power_kw": _optional(st.floats(1e-3, 10_000)),
    "oversubscription": _optional(st.floats(1, 16)),
    "lifetime_years": _optional(st.floats(MIN_LIFETIME_YEARS, 50)),
    "gpus": NAMES,
    "nics": st.lists(st.sampled_from(["cx7-400g", "cx6-200g"]), max_size=2),
    "catalog": st.lists(st.sampled_from(["extra.yaml", "/abs/cat.yaml"]), max_size=2),
    "max_gpus": _optional(st.integers(1, 1 << 20) | st.just("16K")),
    "cloud_max_gpus": _optional(st.integers(1, 1 << 20) | st.just("2K")),
    "gpu_caps": st.dictionaries(st.sampled_from(["h100-sxm", "h200"]), st.integers(1, 1 << 20)),
    "max_batch_tokens": _optional(SUFFIXED),
    "min_batch_tokens": _optional(SUFFIXED),
    "precision": _choice("precision"),
    "ignore": st.lists(st.sampled_from(["tp_bandwidth", "memory", "max_racks"]), max_size=2),
    "stack": _choice("stack"),
    "evidence": _choice("evidence"),
    "dp_overlap": st.floats(0, 1),
    "memory_overhead": st.floats(0, 1),
    "reserved_gb": st.floats(0, 80),
    "headroom": st.floats(0, 0.99),
    "fabric": _choice("fabric"),
    "max_virtual_stages": st.integers(1, 128),
    "no_failures": st.booleans(),
    "checkpoint_every": _optional(st.floats(0.01, 1e6)),
    "failure_scale": st.floats(0, 1e4),
    "ep_in_domain": st.booleans(),
    "cp_across_servers": st.booleans(),
    "dispatcher": _choice("dispatcher"),
    "batch_tokens_model": _choice("batch_tokens_model"),
}


def test_every_question_field_has_a_strategy_a_flag_and_an_axis():
    assert set(FIELD_VALUES) == set(QUESTION_FIELDS)
    flags = {p.opts[0] for p in cli.commands["optimize"].params if isinstance(p, click.Option)}
    for name, meta in META.items():
        assert meta.flag in flags, name
        assert name in AXIS_FIELDS
        assert Question.model_fields[name].description, f"{name}: no help"
    # the choices the schema spells out are the catalog's and the solver's
    assert get_args(Question.model_fields["stack"].annotation) == STACKS
    assert get_args(Question.model_fields["fabric"].annotation) == tuple(FABRICS)
    assert get_args(Question.model_fields["pricing"].annotation) == PRICINGS
    assert get_args(Question.model_fields["batch_tokens_model"].annotation) == BATCH_MODELS


@settings(max_examples=200, deadline=None)
@given(st.fixed_dictionaries(FIELD_VALUES))
def test_question_json_round_trip_is_the_identity(values):
    q = Question.model_validate(values)
    back = Question.model_validate_json(q.model_dump_json())
    assert back == q
    assert back.model_dump() == q.model_dump()
    assert Question.model_validate(json.loads(q.model_dump_json())) == q


# questions build_scenario accepts (the catalog's GPUs; a limit for the objective)
SCENARIO_VALUES = st.fixed_dictionaries(
    {
        "budget": st.sampled_from([5e6, 30e6]),
        "pricing": st.sampled_from(PRICINGS),
        "gpus": st.sampled_from([(), ("h100-sxm",), ("h100-sxm", "h200")]),
        "gpu_caps": st.dictionaries(st.sampled_from(["h100-sxm", "h200"]), st.integers(1, 4096)),
        "max_gpus": st.none() | st.integers(8, 4096),
        "cloud_max_gpus": st.none() | st.integers(8, 4096),
        "precision": st.sampled_from(["bf16", "fp8", "any"]),
        "evidence": st.sampled_from(["measured", "any"]),
        "fabric": st.sampled_from(["any", "ib"]),
        "headroom": st.sampled_from([0.0, 0.05, 0.2]),
        "reserved_gb": st.sampled_from([0.0, 3.0]),
        "dp_overlap": st.sampled_from([0.0, 0.5]),
        "power_cap": st.none() | st.sampled_from([1.0, 2.5]),
        "max_racks": st.none() | st.integers(1, 64),
        "pue": st.none() | st.sampled_from([1.1, 1.4]),
        "lifetime_years": st.none() | st.sampled_from([4.0]),
        "ignore": st.sampled_from([(), ("tp_bandwidth",)]),
        "min_batch_tokens": st.none() | st.sampled_from([1e6]),
    }
)


def _same_scenario(a, b) -> None:
    for f in dataclasses.fields(a):
        if f.compare:
            assert getattr(a, f.name) == getattr(b, f.name), f.name


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SCENARIO_VALUES)
def test_saved_answer_keeps_every_question_field(kw):
    try:
        s = build_scenario(**kw)
    except UsageError:  # e.g. no measured fp8 run on the named GPUs
        assume(False)
        return
    saved = json.loads(json.dumps({"question": answer_question(s), "plans": []}))
    for name in QUESTION_FIELDS:  # every field is written, --gpu-cap included
        head, _, tail = answer_key(name).partition(".")
        assert head in saved["question"] and (not tail or tail in saved["question"][head])
    back, config = _from_answer(saved, "answer.json")
    assert config is None
    _same_scenario(s, back)
    caps = dict(kw["gpu_caps"])
    for g in () if kw.get("gpus") else s.gpus:  # a whole-catalog search caps consumer cards
        limit = s.catalog.gpu(g).max_cluster_gpus
        if limit is not None:
            caps[g] = min(caps.get(g, limit), limit)
    for g in s.gpus if s.pricing == "cloud" else ():  # renting caps each type at its block
        block = cloud_offers().rentable_gpus(g, s.cloud_max_gpus)
        caps[g] = min(caps.get(g, block), block)
    assert back.gpu_caps == s.gpu_caps == tuple(sorted(caps.items()))


def test_old_answers_without_the_new_fields_still_load():
    s = build_scenario(budget=30e6)
    q = answer_question(s)
    for key in ("gpu_caps", "headroom", "reserved_gb", "fabric", "unmeasured", "facility"):
        q.pop(key)
    back, _ = _from_answer({"question": q, "plans": []}, "old.json")
    # planned as they were then: no headroom or reserved memory, every searched pair measured
    assert back.assumptions.memory_headroom_fraction == 0.0
    assert back.assumptions.runtime_reserved_gb == 0.0
    assert back.gpus == s.gpus and back.gpu_caps == () and back.unmeasured == frozenset()


def _binding(doc) -> list[tuple[str, bool]]:
    return [(b["constraint"], b["binding"]) for b in doc["binding"]]


def test_explain_on_a_saved_answer_gives_the_solve_binding_list(tmp_path, capsys):
    """A GPU cap that binds: the saved answer keeps it, so explain prices the same
    constraints as binding (the saved plan re-evaluated, then explained)."""
    args = ["--model", "llama2-7b", "--tokens", "1T", "--gpu", "h100-sxm"]
    for cap in (["--gpu-cap", "h100-sxm=80"], ["--max-gpus", "80"]):
        try:
            main(["optimize", *args, *cap, "--json"])
        except SystemExit as ex:
            assert ex.code in (0, None)
        solved = json.loads(capsys.readouterr().out)
        assert ("max_gpus", True) in _binding(solved)
        saved = tmp_path / "answer.json"
        saved.write_text(json.dumps(solved))
        try:
            main(["explain", str(saved), "--json"])
        except SystemExit as ex:
            assert ex.code in (0, None)
        explained = json.loads(capsys.readouterr().out)
        assert explained["question"] == solved["question"]
        assert _binding(explained) == _binding(solved)


def test_question_file_errors_name_the_field(tmp_path, capsys):
    """A question file's bad value names the file and its field, not the flag."""
    f = tmp_path / "q.yaml"
    f.write_text("budget: 30M\ngpu_caps: {nope: 8}\n")
    try:
        main(["explain", str(f)])
    except SystemExit as ex:
        assert ex.code == 2
    err = capsys.readouterr().err
    assert f"{f}: gpu_caps: unknown GPU 'nope'" in err and "--gpu-cap" not in err


@pytest.mark.parametrize(
    "text, line",
    [
        ("gpu: [h100-sxm]", "gpu: unknown field; did you mean gpus? (the field of --gpu)"),
        ("nic: [cx7-400g]", "nic: unknown field; did you mean nics? (the field of --nic)"),
        ("gpu_cap: {h100-sxm: 8}", "gpu_cap: unknown field; did you mean gpu_caps?"),
        ("time_limit: 5", "time_limit: not allowed in a question: --time-limit says how"),
        ("budgt: 30M", "budgt: unknown field; did you mean budget?"),
        ("bogus_field: 1", "bogus_field: unknown field; use optimize's option names"),
    ],
)
def test_a_question_files_unknown_field_names_the_right_one(tmp_path, capsys, text, line):
    """`gpu:` in a question file was "unknown field; use optimize's option names", but the
    option --gpu's field is gpus (nic: nics, gpu_cap: gpu_caps), and time_limit is no
    question field at all: the error names the field meant, or why it is not allowed."""
    f = tmp_path / "q.yaml"
    f.write_text(f"model: llama2-7b\ntokens: 100B\nbudget: 1M\n{text}\n")
    with pytest.raises(SystemExit) as ex:
        main(["explain", str(f)])
    assert ex.value.code == 2
    err = capsys.readouterr().err
    assert f"{f}: {line}" in err and len(err.strip().splitlines()) == 1
    if "time_limit" in text:
        assert err.strip().endswith("give --time-limit on the command line")


# ---------------------------------------------------------------- 12: NaN and infinities
@pytest.mark.parametrize(
    "option",
    ["--power-cap", "--memory-overhead", "--dp-overlap", "--reserved-gb", "--time-limit"],
)
@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_float_options_refuse_nan_and_infinities(capsys, option, value):
    """Reproduction 12: exit 2 naming the option, before any solve."""
    refused(capsys, [*OPTIMIZE, "--model", "llama2-7b", option, value], option)


@pytest.mark.parametrize("option", ["--memory-overhead", "--dp-overlap", "--reserved-gb"])
def test_evaluate_float_options_refuse_nan(capsys, option):
    refused(capsys, ["evaluate", "--model", "llama2-7b", option, "nan"], option)
