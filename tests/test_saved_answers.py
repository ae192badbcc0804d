"""Saved answers read back (issue 33): a hand-edited plan field exits 2 with one line naming
it in every command that reads an answer (explain, report, export), and an answer carries
the content hash of each catalog file it was made with, so that read from another folder
(with another cat.yaml) it uses its own catalog, printing the saved cost, or refuses."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from designer.question.build import build_scenario
from helpers import one_line, run_main

QUESTION = ["--model", "llama2-7b", "--tokens", "1e11", "--budget", "4e7", "--gpu", "h100-sxm"]
READERS = {
    "explain": ["explain", "F"],
    "report": ["report", "F", "--html", "OUT"],
    "export": ["export", "F", "--format", "slurm"],
}
# a plan field, a hand-edited value, what the error must say
EDITS = [
    ("tp", 0, "greater than or equal to 1"),
    ("tp", 10**7, "less than or equal to"),
    ("tp", math.nan, "finite"),
    ("tp", "8", "text where a number"),
    ("tp", True, "not a number"),
    ("pp", -3, "greater than or equal to 1"),
    ("dp", 2.5, "integer"),
    ("micro_batch", None, "integer"),
    ("grad_accum", 10**30, "less than or equal to"),
    ("nics_per_node", [8], "integer"),
    ("precision", "fp3", "'bf16' or 'fp8'"),
    ("recompute", "most", "'none', 'selective' or 'full'"),
    ("gpu", 5, "string"),
    ("gpu", "h100-sxmm", "unknown GPU 'h100-sxmm'; did you mean 'h100-sxm'"),
    ("nic", "cx9", "unknown NIC 'cx9'"),
    ("cost_usd", math.inf, "finite"),
    ("first_stage_layers", -1, "greater than or equal to 0"),
    ("hot_spares_per_100", 1e308, "less than or equal to 100"),
    ("ep", 0, "greater than or equal to 1"),
]


@pytest.fixture(scope="module")
def answer(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("answer")
    (folder / "cat.yaml").write_text("gpus:\n  h100-sxm: {price_usd: 120000}\n")
    import os

    here = os.getcwd()
    os.chdir(folder)
    try:
        from helpers import run_cli

        got = run_cli(["optimize", *QUESTION, "--catalog", "cat.yaml", "--json"])
    finally:
        os.chdir(here)
    assert got.exit_code == 0, got.output
    return {"folder": folder, "doc": json.loads(got.stdout)}


def _run(capsys, tmp_path, reader: str, path: Path) -> tuple[int, str, str]:
    out = str(tmp_path / "out.html")
    args = [str(path) if a == "F" else out if a == "OUT" else a for a in READERS[reader]]
    return run_main(capsys, args)


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("field, value, says", EDITS, ids=[f"{f}={v!r}" for f, v, _ in EDITS])
def test_hand_edited_plan_field_exits_2_naming_it(
    answer, tmp_path, capsys, monkeypatch, reader, field, value, says
):
    monkeypatch.chdir(answer["folder"])
    doc = json.loads(json.dumps(answer["doc"]))
    doc["plans"][0][field] = value
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc))  # NaN and Infinity as Python's json writes them
    before = path.read_bytes()
    code, _, err = _run(capsys, tmp_path, reader, path)
    assert code == 2, err
    line = one_line(err)
    assert f"plans[0].{field}" in line and says in line, line
    assert "Traceback" not in err and "internal error" not in line and "pydantic" not in line
    assert path.read_bytes() == before


def test_extra_keys_in_an_answer_are_ignored(answer, tmp_path, capsys, monkeypatch):
    """Later issues add keys (evidence alternatives, ranking confidence): read unchanged."""
    monkeypatch.chdir(answer["folder"])
    doc = json.loads(json.dumps(answer["doc"]))
    doc["plans"][0]["ranking_confidence"] = {"p_best": 0.9}
    doc["question"]["something_new"] = [1, 2]
    doc["alternatives"] = []
    path = tmp_path / "extra.json"
    path.write_text(json.dumps(doc))
    code, _, err = _run(capsys, tmp_path, "export", path)
    assert code == 0, err


def test_question_field_edited_gives_one_line(answer, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(answer["folder"])
    doc = json.loads(json.dumps(answer["doc"]))
    doc["question"]["seq_len"] = "many"
    path = tmp_path / "q.json"
    path.write_text(json.dumps(doc))
    code, _, err = _run(capsys, tmp_path, "explain", path)
    assert code == 2
    line = one_line(err)
    assert "question.seq_len" in line, line


def test_answer_read_elsewhere_uses_its_own_catalog_or_refuses(
    answer, tmp_path, capsys, monkeypatch
):
    """Saved with --catalog cat.yaml (an H100 at $120,000); read in a folder whose cat.yaml
    prices it at $20,000: the saved catalog is used and the cost is the saved one; once the
    saved catalog changes, the answer is refused."""
    saved = answer["folder"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "cat.yaml").write_text("gpus:\n  h100-sxm: {price_usd: 20000}\n")
    (elsewhere / "a.json").write_text(json.dumps(answer["doc"]))
    monkeypatch.chdir(elsewhere)
    code, out, err = run_main(capsys, ["explain", "a.json", "--json"])
    assert code == 0, err
    assert json.loads(out)["plans"][0]["cost_usd"] == answer["doc"]["plans"][0]["cost_usd"]
    moved = tmp_path / "moved-away"
    shutil.move(saved / "cat.yaml", moved)
    try:
        code, _, err = run_main(capsys, ["explain", "a.json"])
        assert code == 2
        line = one_line(err)
        assert "catalog_files[0]" in line and "content differs" in line, line
        # the catalog restored beside the answer (same content) is used again
        shutil.copy(moved, elsewhere / "cat.yaml")
        code, out, err = run_main(capsys, ["explain", "a.json", "--json"])
        assert code == 0, err
        assert json.loads(out)["plans"][0]["cost_usd"] == answer["doc"]["plans"][0]["cost_usd"]
    finally:
        shutil.move(moved, saved / "cat.yaml")


HOSTILE_VALUES = [0, -1, math.nan, "x", [], {}, True, 10**30, None, "1e400", [["a"]]]


def _question_edits(answer: dict) -> list[tuple[str, object]]:
    keys = sorted(answer["doc"]["question"])
    return [(k, v) for k in keys for v in HOSTILE_VALUES]


def _assert_contract_holds(answer, tmp_path, capsys, edits, readers) -> None:
    """Each edited answer through each reader: exit 0, 1 or 2, one line on error, never an
    internal error (the answer's own folder as the working folder)."""
    for key, value in edits:
        doc = json.loads(json.dumps(answer["doc"]))
        doc["question"][key] = value
        path = tmp_path / "edited.json"
        path.write_text(json.dumps(doc))
        for reader in readers:
            code, _, err = _run(capsys, tmp_path, reader, path)
            assert code in (0, 1, 2), (key, value, reader, err)
            if code:
                line = one_line(err)
                assert "internal error" not in line, (key, value, reader, line)


def test_hand_edited_question_fields_never_give_an_internal_error(
    answer, tmp_path, capsys, monkeypatch
):
    """A seeded sample of (question key, hostile value) through export."""
    import random

    monkeypatch.chdir(answer["folder"])
    edits = random.Random(33).sample(_question_edits(answer), 40)
    _assert_contract_holds(answer, tmp_path, capsys, edits, ["export"])


@pytest.mark.slow
def test_every_hand_edited_question_field_through_every_reader(
    answer, tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(answer["folder"])
    _assert_contract_holds(answer, tmp_path, capsys, _question_edits(answer), ["export", "report"])


@pytest.mark.parametrize("hashes", ["x", [], ["0" * 64, "1" * 64], None])
def test_tampered_catalog_hashes_are_refused(answer, tmp_path, capsys, monkeypatch, hashes):
    """An answer saved with hashes whose hashes were edited is not read as an old answer
    (which would take whatever catalog the working folder holds)."""
    monkeypatch.chdir(answer["folder"])
    doc = json.loads(json.dumps(answer["doc"]))
    doc["question"]["catalog_sha256"] = hashes
    path = tmp_path / "tampered.json"
    path.write_text(json.dumps(doc))
    code, _, err = _run(capsys, tmp_path, "export", path)
    assert code == 2
    assert "catalog" in one_line(err)


def test_saved_answers_keep_headroom_fabric_and_gpu_caps():
    from designer.output.formats import question_dict
    from designer.question.build import _from_answer

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


def test_an_answer_without_its_plans_names_plans(answer, tmp_path, capsys, monkeypatch):
    """Read as a question file before, it blamed `objective` (the answer's object)."""
    monkeypatch.chdir(answer["folder"])
    doc = json.loads(json.dumps(answer["doc"]))
    del doc["plans"]
    path = tmp_path / "noplans.json"
    path.write_text(json.dumps(doc))
    for reader in ("export", "explain"):
        code, _, err = _run(capsys, tmp_path, reader, path)
        assert code == 2
        assert one_line(err) == (
            f"designer: error: {path}: plans: missing: a saved optimize --json answer holds "
            "its plans there; regenerate it"
        )
