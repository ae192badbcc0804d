"""designer/exit_codes.py and designer/errors.py: every error as the CLI contract reports it
(../shared/CLI-CONTRACT.md): one line on stderr prefixed ``designer:``, exit code 2 for bad
usage or input, 1 for no answer, a stop, or a bug (named as an internal error)."""

from __future__ import annotations

import errno

import click
import pytest

from catalog import CatalogError
from designer.errors import Infeasible, Interrupted, UsageError, name_too_long
from designer.exit_codes import NoAnswer, Reported, report_error
from models import ModelError


@pytest.mark.parametrize(
    "err,code,line",
    [
        (UsageError("must be positive", "--budget"), 2, "error: --budget: must be positive"),
        (ModelError("layers: 0"), 2, "error: layers: 0"),
        (CatalogError("gpus.x: unknown"), 2, "error: gpus.x: unknown"),
        (click.BadParameter("not a number"), 2, "error: Invalid value: not a number"),
        (Infeasible("no plan under $1"), 1, "infeasible: no plan under $1"),
        (Interrupted("a worker died"), 1, "stopped: a worker died"),
        (KeyError("x"), 1, "internal error: KeyError: 'x' (rerun with --debug)"),
    ],
    ids=["usage", "model", "catalog", "click", "infeasible", "interrupted", "bug"],
)
def test_each_error_gets_the_contracts_code_and_line(err, code, line):
    got = report_error(err)
    assert isinstance(got, Reported) and got.exit_code == code
    assert got.message == line
    assert isinstance(got, NoAnswer) == (code == 1)


def test_a_reported_error_is_passed_on_unchanged():
    err = NoAnswer("infeasible: already said")
    assert report_error(err) is err


def test_the_line_is_one_line_whatever_the_message_holds(capsys):
    Reported("error: a\nfile\rname").show()
    assert capsys.readouterr().err == "designer: error: a\\nfile\\rname\n"
    report_error(click.UsageError("two\nlines")).show()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "two lines" in err


def test_a_name_too_long_is_a_usage_error_with_the_name_shortened():
    long = "x" * 300
    err = OSError(errno.ENAMETOOLONG, "File name too long", long)
    text = name_too_long(err)
    assert text == f"{'x' * 60}...(300 characters): file name too long; pass a shorter path"
    assert report_error(err).exit_code == 2
    short = OSError(errno.ENAMETOOLONG, "File name too long", "abc")
    assert name_too_long(short) == "abc: file name too long; pass a shorter path"
    assert name_too_long(OSError(errno.ENOENT, "missing", long)) is None
    assert name_too_long(ValueError(long)) is None


def test_a_usage_error_names_its_option_and_can_be_renamed():
    err = UsageError("give a number", "--tokens")
    assert (str(err), err.option, err.detail) == (
        "--tokens: give a number",
        "--tokens",
        "give a number",
    )
    renamed = err.renamed("q.yaml: tokens")
    assert str(renamed) == "q.yaml: tokens: give a number" and renamed.detail == err.detail
    assert str(UsageError("bare")) == "bare"
