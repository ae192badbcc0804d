"""Values written into an emitted shell script (Slurm, Megatron-LM's torchrun line), made
safe for where they land (issue 33): a name from a model, catalog or question file may hold
``$(...)``, backticks, quotes or a newline, and the user runs the script.

A comment gets one line of text (a newline would end the comment and start a command); a
name used as a path component or job name keeps only ``[A-Za-z0-9._-]`` (a strict pattern,
so it is inert inside or outside quotes); any other word goes through ``shlex.quote``."""

from __future__ import annotations

import re
import shlex

_LINE_BREAKS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")
_NOT_WORD = re.compile(r"[^A-Za-z0-9._-]")


def comment_text(text: str) -> str:
    """``text`` on one line: every control character or line separator becomes a space."""
    return _LINE_BREAKS.sub(" ", text)


def safe_word(name: str) -> str:
    """``name`` as a path component or job name: each character outside ``[A-Za-z0-9._-]``
    becomes ``-``; a leading ``-`` or ``.`` (an option, a hidden or parent folder) gets a
    ``x`` before it, and nothing left is ``model``."""
    word = _NOT_WORD.sub("-", name)
    if not word.strip("-."):
        return "model"
    return "x" + word if word[0] in "-." else word


def quoted(value: str) -> str:
    """A word the shell reads back as ``value`` exactly."""
    return shlex.quote(value)
