"""The command line's errors as ../shared/CLI-CONTRACT.md reports them: one line on stderr,
exit code 2 for bad usage or input, 1 for no answer (infeasible, stopped) or a bug."""

from __future__ import annotations

from typing import Any

import click

from catalog import CatalogError
from designer.errors import Infeasible, Interrupted, Unanswered, UsageError, name_too_long
from models import ModelError


class Reported(click.ClickException):
    """A bad-usage error as the contract reports it: one line on stderr, exit code 2."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        # one line whatever the message holds (a file name with a newline: issue 33)
        line = self.message.replace("\r", "\\r").replace("\n", "\\n")
        click.echo(f"designer: {line}", err=True)


class NoAnswer(Reported):
    """No answer (infeasible) or a bug: one line, exit code 1."""

    exit_code = 1


def report_error(err: Exception) -> Reported:
    """The contract's exit code and one-line message for an error."""
    if isinstance(err, Reported):
        return err
    if isinstance(err, click.ClickException):
        return Reported(f"error: {err.format_message()}".replace("\n", " "))
    if isinstance(err, (UsageError, ModelError, CatalogError)):
        return Reported(f"error: {err}")
    if isinstance(err, Unanswered):
        return NoAnswer(f"no answer: {err}")
    if isinstance(err, Infeasible):
        return NoAnswer(f"infeasible: {err}")
    if (too_long := name_too_long(err)) is not None:
        return Reported(f"error: {too_long}")
    if isinstance(err, Interrupted):
        return NoAnswer(f"stopped: {err}")
    # a bug: say so in one line unless debugging
    return NoAnswer(f"internal error: {err.__class__.__name__}: {err} (rerun with --debug)")
