"""Numbers in the user's YAML files as YAML 1.2 writes them (catalog/files.py): PyYAML
reads 4e3 and 1.0e300 as text (YAML 1.1 floats need a dot and a signed exponent), so an
unquoted ``seq_len: 4e3`` was refused as "text, not a number; give the number unquoted"."""

from __future__ import annotations

import re

import pytest

from catalog.files import read_document
from designer.errors import UsageError
from helpers import one_line, run_main


@pytest.mark.parametrize(
    "text, value",
    [("4e3", 4000.0), ("1.0e300", 1e300), ("-2.5E-3", -0.0025), ("1_000e2", 1e5), ("+3e0", 3.0)],
)
def test_exponent_numbers_are_floats(tmp_path, text, value):
    path = tmp_path / "a.yaml"
    path.write_text(f"x: {text}\n")
    assert read_document(path, UsageError, "a file") == {"x": value}


@pytest.mark.parametrize("text", ["'4e3'", "e3", "4e", "v1e3", "4e3x", "1.5", "0x10"])
def test_other_text_reads_as_before(tmp_path, text):
    import yaml

    path = tmp_path / "a.yaml"
    path.write_text(f"x: {text}\n")
    assert read_document(path, UsageError, "a file") == yaml.safe_load(f"x: {text}\n")


def test_a_model_file_takes_an_exponent(capsys, tmp_path):
    spec = tmp_path / "m.yaml"
    spec.write_text("layers: 80\nhidden: 8192\nheads: 64\nvocab: 32000\nseq_len: 4e3\n")
    code, out, err = run_main(capsys, ["models", "show", str(spec)])
    assert code == 0, err
    assert re.search(r"^seq_len +4,000$", out, re.M)
    spec.write_text("layers: 80\nhidden: 8192\nheads: 64\nvocab: 32000\nseq_len: 4.5e-3\n")
    code, _, err = run_main(capsys, ["models", "show", str(spec)])
    assert code == 2 and "seq_len" in one_line(err) and "unquoted" not in err
