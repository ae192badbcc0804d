"""Errors the CLI turns into exit codes (ModelError and CatalogError are usage errors)."""

from __future__ import annotations

import errno


class UsageError(ValueError):
    """Bad input: exit code 2. ``option`` names the input at fault (a flag such as
    ``--gpu``, or ``FILE: field``) as data, and ``detail`` says what is wrong and the fix;
    ``str(err)`` is the one line the CLI prints: ``option: detail``."""

    def __init__(self, detail: str, option: str | None = None) -> None:
        self.option = option
        self.detail = detail
        super().__init__(f"{option}: {detail}" if option else detail)

    def renamed(self, option: str) -> UsageError:
        """The same error, blamed on another name for the input (a question file's field)."""
        return UsageError(self.detail, option)


class Infeasible(RuntimeError):
    """The question has no answer: exit code 1."""


class FormatRefused(Infeasible):
    """A launch emitter's refusal whose fix names the option that picks the format, written
    ``{option}`` in its text: optimize's --emit unless the command running it says another
    (export's --format: designer.launch.emit.emit), so the fix never names an option the
    command does not have."""

    OPTION = "{option}"

    def __init__(self, text: str) -> None:
        self.text = text
        super().__init__(self.for_option("--emit"))

    def for_option(self, option: str) -> str:
        """The refusal with ``option`` as the option that picks the format."""
        return self.text.replace(self.OPTION, option)


class Unanswered(Infeasible):
    """No plan found and none proved impossible (the time limit ran out first): exit code 1,
    reported as 'no answer', not 'infeasible'."""


class Interrupted(RuntimeError):
    """The work stopped before its end (a worker killed): exit code 1, and what to do next."""


def name_too_long(err: BaseException) -> str | None:
    """The one line for a path the file system refused as too long (a stat anywhere, issue
    33), the name shortened; None for any other error."""
    if not isinstance(err, OSError) or err.errno != errno.ENAMETOOLONG:
        return None
    name = str(err.filename or "")
    shown = name if len(name) <= 80 else f"{name[:60]}...({len(name):,} characters)"
    return f"{shown}: file name too long; pass a shorter path"
