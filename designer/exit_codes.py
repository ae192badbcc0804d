"""The command line's errors as ../shared/CLI-CONTRACT.md reports them: one line on stderr,
exit code 2 for bad usage or input, 1 for no answer (infeasible, stopped) or a bug."""

from __future__ import annotations

import re
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


def _command_usage(err: click.UsageError) -> str | None:
    """A group's missing or unknown command as one line naming the fix (click printed a bare
    `designer`'s whole help squashed into one error line, and `designer bogus` without the
    commands there are); None for any other usage error."""
    ctx = err.ctx
    group = ctx.command if ctx is not None else None
    if ctx is None or not isinstance(group, click.Group):
        return None
    text = err.format_message()
    no_args = getattr(click.exceptions, "NoArgsIsHelpError", None)  # click 8.2+
    if (no_args is not None and isinstance(err, no_args)) or text == "Missing command.":
        return f"no command given; run {ctx.command_path} --help for the commands"
    unknown = re.match(r"No such command '(.*)'\.", text, re.DOTALL)
    if unknown is None:
        return None
    where = f" in {ctx.command_path}" if ctx.parent is not None else ""  # a subgroup's
    close = text[unknown.end() :].strip()  # click's "Did you mean ...?" for a near miss
    close = close[:1].lower() + close[1:] + " " if close else ""
    commands = ", ".join(group.list_commands(ctx))
    return f"No such command {unknown.group(1)!r}{where}; {close}commands: {commands}"


def report_error(err: Exception) -> Reported:
    """The contract's exit code and one-line message for an error."""
    if isinstance(err, Reported):
        return err
    if isinstance(err, click.UsageError) and (line := _command_usage(err)) is not None:
        return Reported(f"error: {line}")
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
