"""designer/output/study_csv.py: a sweep's results file. The study hash (settings, the files it
reads, the designer's version), the file opened locked and recognised (new, resumed, a row
cut off by a kill dropped), and files that are not this study's results refused with one
line naming --csv. (The sweep through the CLI: tests/test_sweep.py.)"""

from __future__ import annotations

import fcntl
import os

import pytest

from designer.errors import UsageError
from designer.output.study_csv import append_row, open_results, study_hash

COLUMNS = ["scenario", "budget", "status", "study"]
DIGEST = "0123456789abcdef"


def test_the_study_hash_covers_settings_and_file_contents(tmp_path):
    f = tmp_path / "m.json"
    f.write_text("{}")
    a = study_hash('{"budget": [1]}', [f])
    assert len(a) == 16 and all(c in "0123456789abcdef" for c in a)
    assert study_hash('{"budget": [1]}', [f]) == a  # stable
    assert study_hash('{"budget": [2]}', [f]) != a
    f.write_text('{"layers": 2}')
    assert study_hash('{"budget": [1]}', [f]) != a
    gone = study_hash('{"budget": [1]}', [tmp_path / "missing.json"])
    assert gone == study_hash('{"budget": [1]}', [tmp_path / "missing.json"])


def _write(path, rows, resume=False, digest=DIGEST):
    with open_results(path, COLUMNS, digest, resume) as opened:
        for r in rows:
            append_row(opened, r, digest)
        return opened.done


def test_a_new_file_gets_the_header_and_rows_with_the_study(tmp_path):
    out = tmp_path / "r.csv"
    assert _write(out, [{"scenario": "s1", "budget": 1.5, "status": "optimal"}]) == set()
    assert out.read_text() == "scenario,budget,status,study\ns1,1.5,optimal,0123456789abcdef\n"


def test_a_resume_knows_what_is_done_and_drops_a_cut_row(tmp_path):
    out = tmp_path / "r.csv"
    _write(out, [{"scenario": "s1", "status": "optimal"}, {"scenario": "s2", "status": "x"}])
    with out.open("a") as fh:
        fh.write("s3,1,opt")  # a kill mid-row: no newline
    done = _write(out, [{"scenario": "s3", "status": "optimal"}], resume=True)
    assert done == {"s1", "s2"}
    lines = out.read_text().splitlines()
    assert [line.split(",")[0] for line in lines] == ["scenario", "s1", "s2", "s3"]
    assert _write(out, [], resume=False) == set()  # without --resume: replaced
    assert out.read_text() == "scenario,budget,status,study\n"


@pytest.mark.parametrize(
    "content,why",
    [
        (b"\xff\xfe binary", "is not a text file"),
        (b"name,value\nx,1\n", "is not a designer sweep results file"),
        (b"scenario,status\ns1,optimal\n", "was not written by designer sweep"),
    ],
)
def test_a_file_that_is_not_a_results_file_is_refused_unchanged(tmp_path, content, why):
    out = tmp_path / "r.csv"
    out.write_bytes(content)
    for resume in (False, True):
        with pytest.raises(UsageError, match=why) as info:
            _write(out, [], resume=resume)
        assert info.value.option == "--csv" and "\n" not in str(info.value)
    assert out.read_bytes() == content


def test_another_studys_results_are_refused_on_resume(tmp_path):
    out = tmp_path / "r.csv"
    _write(out, [{"scenario": "s1", "status": "optimal"}], digest="fedcba9876543210")
    with pytest.raises(UsageError, match="another study"):
        _write(out, [], resume=True)
    other = tmp_path / "cols.csv"
    other.write_text("scenario,tokens,status,study\n")
    with pytest.raises(UsageError, match="another study's columns"):
        _write(other, [], resume=True)


def test_a_locked_file_is_refused(tmp_path):
    out = tmp_path / "r.csv"
    fd = os.open(out, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(UsageError, match="another sweep is writing"):
            _write(out, [])
    finally:
        os.close(fd)
    assert _write(out, []) == set()  # released: it opens
