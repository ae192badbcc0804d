"""The launch command inside a shell script (a Slurm batch file or a run_*.sh).

Backslash continuations are joined; `NAME=value` lines, bash arrays `NAME=( ... )`
(Megatron-LM's examples keep their flags in arrays) and the `#SBATCH --nodes` and
`--gpus-per-node` header are collected, and `$NAME`, `${NAME}`, `${NAME:-default}`
and `${NAME[@]}` are substituted in the command. Anything else a shell would do
(arithmetic, command substitution) is left as written.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable

ASSIGNMENT = re.compile(r"^(?:export\s+|local\s+|declare\s+(?:-\w+\s+)*)?([A-Za-z_]\w*)=(.*)$")
SBATCH = re.compile(r"^#SBATCH\s+(.*)$")
ARRAY_REF = re.compile(r'"?\$\{([A-Za-z_]\w*)\[[@*]\]\}"?')
BRACED = re.compile(r"\$\{([A-Za-z_]\w*)(?::-([^}]*))?\}")
PLAIN = re.compile(r"\$([A-Za-z_]\w*)")
LAUNCHERS = ("torchrun", "torch.distributed.run", "torch.distributed.launch")
# A launch script's command expands to a few kilobytes; variables that double themselves
# (A2="$A1 $A1" ...) would grow without bound, so expansion stops past this size.
MAX_EXPANDED_CHARS = 100_000


class ExpansionTooLarge(ValueError):
    """A variable's expansion passed MAX_EXPANDED_CHARS."""


def substitute(
    text: str,
    scalars: dict[str, str],
    arrays: dict[str, list[str]],
    budget: list[int] | None = None,
) -> str:
    """``text`` with its variables substituted; ExpansionTooLarge as soon as the text passes
    MAX_EXPANDED_CHARS (checked at every substitution, not after a pass: issue 33), or as
    ``budget`` (characters left for a whole script's expansions, decremented) runs out."""
    size = [len(text)]
    left = [MAX_EXPANDED_CHARS * 10] if budget is None else budget

    def grown(old: str, new: str) -> str:
        size[0] += len(new) - len(old)
        left[0] -= max(0, len(new) - len(old))
        if size[0] > MAX_EXPANDED_CHARS or left[0] < 0:
            raise ExpansionTooLarge(
                f"the script's variables expand past {MAX_EXPANDED_CHARS:,} characters"
            )
        return new

    def array(m: re.Match) -> str:
        name = m.group(1)
        if name in arrays:
            return " ".join(shlex.quote(x) for x in arrays[name])
        return m.group(0)

    def braced(m: re.Match) -> str:
        name, default = m.group(1), m.group(2)
        if name in scalars:
            return scalars[name]
        if name in arrays:
            return " ".join(shlex.quote(x) for x in arrays[name])
        return default if default is not None else m.group(0)

    def plain(m: re.Match) -> str:
        name = m.group(1)
        if name in scalars:
            return scalars[name]
        if name in arrays:  # $ARR is its first element in bash
            return shlex.quote(arrays[name][0]) if arrays[name] else ""
        return m.group(0)

    def checked(replace: Callable[[re.Match], str]) -> Callable[[re.Match], str]:
        return lambda m: grown(m.group(0), replace(m))

    for pattern, replace in ((ARRAY_REF, array), (BRACED, braced), (PLAIN, plain)):
        text = pattern.sub(checked(replace), text)
    return text


def _words(text: str) -> list[str]:
    try:
        return shlex.split(text, comments=True)
    except ValueError:  # unbalanced quotes: fall back to whitespace
        return text.split()


def _sbatch(line: str, scalars: dict[str, str]) -> None:
    words = _words(SBATCH.match(line).group(1))  # type: ignore[union-attr]
    for i, w in enumerate(words):
        name, _, value = w.partition("=")
        if not value and i + 1 < len(words) and not words[i + 1].startswith("-"):
            value = words[i + 1]
        if name in ("--nodes", "-N") and value:
            scalars.setdefault("SLURM_NNODES", value)
            scalars.setdefault("SLURM_JOB_NUM_NODES", value)
        elif name == "--gpus-per-node" and value:
            scalars.setdefault("SLURM_GPUS_PER_NODE", value.rpartition(":")[2])


def is_command(line: str) -> bool:
    """A line that launches Megatron-LM: torchrun or python ... something.py with flags."""
    words = line.split()
    if not words:
        return False
    if any(launcher in line for launcher in LAUNCHERS):
        return True
    return any(w.endswith(".py") for w in words) and "--" in line


def _array_end(text: str) -> tuple[str, bool]:
    """The text up to the ``)`` that closes an array, and whether it closed: a ``)`` inside
    quotes, a ``$(...)`` or a comment does not (issue 33: ``--num-layers $(echo 80)`` ended
    the array, and the flags after it went missing)."""
    depth, quote = 0, ""
    for i, c in enumerate(text):
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or text[i - 1].isspace()):
            return text[:i], False
        elif c == "(" and text[i - 1 : i] == "$":
            depth += 1
        elif c == ")" and depth:
            depth -= 1
        elif c == ")":
            return text[:i], True
    return text, False


def command_from_script(text: str) -> list[str] | None:
    """The launch command's words, variables substituted; None when the script has none."""
    text = re.sub(r"\\\r?\n", " ", text)
    scalars: dict[str, str] = {}
    arrays: dict[str, list[str]] = {}
    pending: tuple[str, list[str]] | None = None  # an array still open across lines
    budget = [2 * MAX_EXPANDED_CHARS]  # characters all expansions of the script may add

    def sub(text: str, scalars: dict[str, str], arrays: dict[str, list[str]]) -> str:
        return substitute(text, scalars, arrays, budget)

    for raw in text.splitlines():
        line = raw.strip()
        if pending is not None:  # one line of an open array: its words, comments dropped
            name, parts = pending
            body, closed = _array_end(line)
            parts += _words(sub(body, scalars, arrays))
            if closed:
                arrays[name] = parts
                pending = None
            continue
        if SBATCH.match(line):
            _sbatch(line, scalars)
            continue
        if not line or line.startswith("#"):
            continue
        m = ASSIGNMENT.match(line)
        if m:
            name, value = m.group(1), m.group(2).strip()
            if value.startswith("("):
                body, closed = _array_end(value[1:])
                if closed:
                    arrays[name] = _words(sub(body, scalars, arrays))
                else:
                    pending = (name, _words(sub(body, scalars, arrays)))
                continue
            if value[:1] not in ("'", '"') and len(value.split()) > 1:
                line = value.split(None, 1)[1]  # VAR=x command ...: an environment prefix
            else:
                if not value.startswith(("$(", "`")):  # command substitution: not resolved
                    scalars[name] = " ".join(_words(sub(value, scalars, arrays)))
                continue
        if is_command(line):
            return _words(sub(line, scalars, arrays))
    return None
