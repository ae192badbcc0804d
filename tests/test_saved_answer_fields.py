"""A saved answer's fields that were read without a check (issue 33's audit): a null in its
``question`` read as the field's default (``tokens: null`` exported a launch for 2T tokens),
an answer without its ``question`` blamed ``objective``, and plan columns the readers do not
re-derive (zero, sequence_parallel, num_gpus, nodes, gpus_per_node, global_batch, a dense
model's ep) were ignored whatever they said. Each now exits 2 with one line naming the
file and the field; a genuine answer's nulls and an older answer's absent keys still load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from designer.question.fields import META, answer_key
from helpers import one_line, run_cli, run_main

QUESTION = ["--model", "llama2-7b", "--gpu", "h100-sxm", "--tokens", "100B", "--budget", "5M"]
READERS = {
    "explain": ["explain", "F"],
    "export": ["export", "F", "--format", "slurm"],
    "report": ["report", "F", "--html", "OUT"],
}
FIX = "fix it or regenerate with optimize --json"


def _optimize(args: list[str]) -> dict:
    got = run_cli(["optimize", *args, "--json"])
    assert got.exit_code == 0, got.output
    return json.loads(got.stdout)


@pytest.fixture(scope="module")
def answer() -> dict:
    """llama2-7b on 128 H100s (TP 1, DP 128, micro-batch 2 x 3: global batch 768)."""
    return _optimize(QUESTION)


def _read(capsys, tmp_path: Path, reader: str, doc: dict) -> tuple[int, str, Path]:
    """``doc`` saved and read back by ``reader``: exit code, stderr, the file."""
    path = tmp_path / "a.json"
    path.write_text(json.dumps(doc))
    out = str(tmp_path / "out.html")
    args = [str(path) if a == "F" else out if a == "OUT" else a for a in READERS[reader]]
    code, _, err = run_main(capsys, args)
    return code, err, path


def _edited(answer: dict, part: str, key: str, value) -> dict:
    doc = json.loads(json.dumps(answer))
    (doc["question"] if part == "question" else doc["plans"][0])[key] = value
    return doc


# ---------------------------------------------------------------- nulls in the question
# the keys whose null is a value (no budget, no cap, the model's sequence length, the
# catalog's facility constant): as the question file leaves them out
NULL_IS_A_VALUE = {
    *("seq_len", "budget_usd", "deadline_days", "objective", "power_cap_mw", "max_racks"),
    *("max_gpus", "cloud_max_gpus", "max_batch_tokens", "min_batch_tokens"),
    *("checkpoint_every_min",),
    *(f"facility.{k}" for k in ("pue", "usd_per_kwh", "rack_power_kw", "oversubscription")),
    "facility.lifetime_years",
}
NOT_NULL = sorted({answer_key(n) for n in META} - NULL_IS_A_VALUE) + ["facility"]


@pytest.mark.parametrize("reader", ["explain", "export"])
@pytest.mark.parametrize("key", ["tokens", "model_spec"])
def test_a_null_tokens_or_model_is_refused_not_read_as_the_default(
    answer, tmp_path, capsys, reader, key
):
    """Before: tokens null read 2T (export sized the launch for it), model_spec null read
    llama2-70b; both exited 0 or 1."""
    code, err, path = _read(capsys, tmp_path, reader, _edited(answer, "question", key, None))
    assert code == 2, err
    assert one_line(err) == (
        f"designer: error: {path}: question.{key}: null where a value belongs (null would "
        f"read as the default, {'2000000000000.0' if key == 'tokens' else repr('llama2-70b')}); "
        f"{FIX}"
    )


@pytest.mark.parametrize("key", NOT_NULL)
def test_every_key_without_a_null_meaning_is_refused_null(answer, tmp_path, capsys, key):
    code, err, _ = _read(capsys, tmp_path, "export", _edited(answer, "question", key, None))
    assert code == 2, err
    line = one_line(err)
    assert f": question.{key}: null" in line and line.endswith(FIX), line


def test_a_genuine_answer_s_nulls_still_load(answer, tmp_path, capsys):
    """Every null optimize writes (no deadline, no caps; no budget with a deadline, the
    facility's lifetime) is a field whose null is a value, and such an answer reads back."""
    nullable = NULL_IS_A_VALUE
    cost = _optimize(
        ["--model", "llama2-7b", "--gpu", "h100-sxm", "--tokens", "100B", "--deadline", "30d"]
    )
    for doc in (answer, cost):
        q = doc["question"]
        nulls = {k for k, v in q.items() if v is None}
        nulls |= {f"facility.{k}" for k, v in q["facility"].items() if v is None}
        assert nulls and nulls <= nullable, nulls - nullable
        for reader in ("explain", "export"):
            code, err, _ = _read(capsys, tmp_path, reader, doc)
            assert code == 0, err
    # and a cap given as null is no cap, as absent from the question file
    doc = _edited(answer, "question", "max_gpus", None)
    doc["question"]["facility"]["pue"] = None  # the catalog's PUE
    assert _read(capsys, tmp_path, "export", doc)[0] == 0


def test_an_older_answer_without_the_facility_loads_but_a_null_one_is_refused(
    answer, tmp_path, capsys
):
    doc = json.loads(json.dumps(answer))
    del doc["question"]["facility"]  # saved before the facility constants
    assert _read(capsys, tmp_path, "export", doc)[0] == 0
    for value in (None, 0, []):  # read as "absent" before
        code, err, _ = _read(
            capsys, tmp_path, "export", _edited(answer, "question", "facility", value)
        )
        assert code == 2
        assert ": question.facility: " in one_line(err) and "not a mapping" in err, err


# ---------------------------------------------------------------- the question missing
@pytest.mark.parametrize("reader", sorted(READERS))
def test_an_answer_without_its_question_names_question(answer, tmp_path, capsys, reader):
    """Before: read as a question file, it blamed `objective: Input should be 'time' or
    'cost'` (the answer's objective object)."""
    doc = json.loads(json.dumps(answer))
    del doc["question"]
    code, err, path = _read(capsys, tmp_path, reader, doc)
    assert code == 2
    assert one_line(err) == (
        f"designer: error: {path}: question: missing: a saved optimize --json answer holds "
        "the question it answers there; regenerate it with optimize --json"
    )


# ---------------------------------------------------------------- plan columns
# a plan field, a hand-edited value, what the error must say (llama2-7b, TP 1, 128 H100s)
PLAN_EDITS = [
    ("zero", 7, "less than or equal to 3"),
    ("zero", -1, "greater than or equal to 0"),
    ("zero", 0, "0 is not 1: the designer plans ZeRO-1 (the distributed optimizer) only"),
    ("zero", 3, "3 is not 1: the designer plans ZeRO-1"),
    ("zero", "1", "text where a number"),
    ("sequence_parallel", "yes", "text where a number or true/false belongs"),
    ("sequence_parallel", 1, "1 is not true or false"),
    ("sequence_parallel", True, "true is not false: a plan uses sequence parallelism exactly "),
    ("num_gpus", 999, "999 is not tp x pp x dp x cp = 128"),
    ("gpus_per_node", 3, "3 is not 8, the GPUs of a h100-sxm server in the catalog"),
    ("gpus_per_node", 0, "greater than or equal to 1"),
    ("nodes", 5, "5 is not num_gpus / gpus_per_node rounded up = 16"),
    ("ep", 3, "3 is not 1: llama2-7b has no experts"),
    ("etp", 2, "2 is not 1: llama2-7b has no experts"),
    ("global_batch", 1536, "1536 is not micro_batch x dp x grad_accum = 768"),
]


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize(
    "field, value, says", PLAN_EDITS, ids=[f"{f}={v!r}" for f, v, _ in PLAN_EDITS]
)
def test_an_edited_plan_column_exits_2_naming_it(
    answer, tmp_path, capsys, reader, field, value, says
):
    """Before: each exited 0 and export wrote a launch that ignored it."""
    plan = answer["plans"][0]
    assert (plan["tp"], plan["dp"], plan["micro_batch"], plan["grad_accum"]) == (1, 128, 2, 3)
    code, err, path = _read(capsys, tmp_path, reader, _edited(answer, "plan", field, value))
    assert code == 2, err
    line = one_line(err)
    assert line.startswith(f"designer: error: {path}: plans[0].{field}: "), line
    assert says in line and line.endswith(FIX), line


def test_a_plan_with_tp_has_sequence_parallelism_and_older_plans_load(tmp_path, capsys):
    """A TP 8 plan saves sequence_parallel true and reads back; false is refused; a plan
    saved without the derived columns (an older answer) reads back."""
    doc = _optimize(
        ["--model", "llama2-70b", "--gpu", "a100-40gb", "--tokens", "1T", "--budget", "50M"]
    )
    assert doc["plans"][0]["tp"] > 1 and doc["plans"][0]["sequence_parallel"] is True
    assert _read(capsys, tmp_path, "export", doc)[0] == 0
    code, err, _ = _read(
        capsys, tmp_path, "export", _edited(doc, "plan", "sequence_parallel", False)
    )
    assert code == 2 and "false is not true" in one_line(err)
    for key in ("zero", "sequence_parallel", "num_gpus", "nodes", "gpus_per_node", "global_batch"):
        del doc["plans"][0][key]
    assert _read(capsys, tmp_path, "explain", doc)[0] == 0


@pytest.mark.parametrize("key", sorted(NULL_IS_A_VALUE))
def test_a_key_whose_null_is_a_value_is_not_refused_for_it(answer, tmp_path, capsys, key):
    """Null as the question file's absent key: a budget nulled leaves the time objective
    without one (refused for that), never for the null itself."""
    doc = json.loads(json.dumps(answer))
    head, _, tail = key.partition(".")
    (doc["question"][head] if tail else doc["question"])[tail or head] = None
    code, err, _ = _read(capsys, tmp_path, "export", doc)
    assert code in (0, 2) and "null where a value belongs" not in err, err
    assert code == 0 or key == "budget_usd", err


@pytest.mark.parametrize("value", ["bf16", [], ["bf16", "bf16"], ["fp4"], None])
def test_saved_precisions_must_be_a_list_of_precisions(answer, capsys, tmp_path, value):
    """The text "bf16" was read as "any" (both precisions: its length is over one)."""
    code, err, _ = _read(
        capsys, tmp_path, "explain", _edited(answer, "question", "precisions", value)
    )
    assert code == 2 and "precisions" in one_line(err)
