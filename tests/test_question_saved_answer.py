"""designer/question/saved_answer.py: a saved answer's plans validated (one line naming the plan and
field, never a traceback) and the catalog files it was made with found again by their
content hash. (Hand-edited answers through every command: tests/test_saved_answers.py.)"""

from __future__ import annotations

import hashlib

import pytest

from designer.errors import UsageError
from designer.question.saved_answer import (
    CATALOG_HASHES,
    CATALOG_PATHS,
    catalog_record,
    check_plans,
    file_sha256,
    saved_catalogs,
    saved_plan,
)


def test_file_sha256_is_the_contents_or_none(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("gpus: {}\n")
    assert file_sha256(f) == hashlib.sha256(b"gpus: {}\n").hexdigest()
    assert file_sha256(tmp_path / "missing.yaml") is None
    assert file_sha256(tmp_path) is None  # a folder is not a file


def test_catalog_record_keeps_absolute_paths_and_hashes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.yaml").write_text("a: 1\n")
    rec = catalog_record(["c.yaml"])
    assert rec[CATALOG_PATHS] == [str(tmp_path / "c.yaml")]
    assert rec[CATALOG_HASHES] == [file_sha256(tmp_path / "c.yaml")]


def _question(tmp_path, text="a: 1\n"):
    f = tmp_path / "c.yaml"
    f.write_text(text)
    return {"catalog_files": ["c.yaml"], **catalog_record([str(f)])}


def test_saved_catalogs_finds_the_file_with_the_same_content(tmp_path, monkeypatch):
    q = _question(tmp_path)
    assert saved_catalogs(q, "a.json") == [str(tmp_path / "c.yaml")]  # where it was saved
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    (moved / "c.yaml").write_text("a: 1\n")
    (tmp_path / "c.yaml").write_text("a: 2\n")  # the saved place changed; the name here did not
    monkeypatch.chdir(moved)
    assert saved_catalogs(q, "a.json") == ["c.yaml"]
    (moved / "c.yaml").write_text("a: 3\n")
    with pytest.raises(UsageError, match=r"a.json: question.catalog_files\[0\]: c.yaml is not"):
        saved_catalogs(q, "a.json")


def test_an_answer_without_hashes_is_read_as_before_and_bad_hashes_are_refused(tmp_path):
    assert saved_catalogs({"catalog_files": ["c.yaml"]}, "a.json") is None
    bad = {"catalog_files": ["c.yaml"], CATALOG_HASHES: []}
    with pytest.raises(UsageError, match="not one hash per catalog file"):
        saved_catalogs(bad, "a.json")


def test_a_plan_that_is_not_an_object_or_a_bad_field_is_named(tmp_path):
    with pytest.raises(UsageError, match=r"^a.json: plans\[0\]: not a plan object"):
        saved_plan([1, 2], "a.json: plans[0]")
    with pytest.raises(UsageError) as info:
        check_plans({"plans": [{"gpu": "h100-sxm", "num_gpus": "many"}]}, "a.json")
    line = str(info.value)
    assert line.startswith("a.json: plans[0].") and "\n" not in line
    assert line.endswith("fix it or regenerate with optimize --json")
    with pytest.raises(UsageError, match="plans: not a list"):
        check_plans({"plans": {}}, "a.json")


def test_a_compare_row_without_a_plan_is_skipped():
    check_plans({"plans": [{"gpu": "h100-sxm", "num_gpus": None, "status": "infeasible"}]}, "c")
