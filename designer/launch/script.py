"""The launch command inside a shell script (a Slurm batch file or a run_*.sh).

Backslash continuations are joined; `NAME=value` lines, bash arrays `NAME=( ... )`
(Megatron-LM's examples keep their flags in arrays) and the `#SBATCH --nodes` and
`--gpus-per-node` header are collected, and `$NAME`, `${NAME}`, `${NAME:-default}`
and `${NAME[@]}` are substituted in the command; a variable the script does not set
expands to nothing, as in bash (``script_command`` says which, and where). Anything else
a shell would do (arithmetic, command substitution) is left as written. Of the lines that
launch something (``command_rank``), the first that runs a ``pretrain_*.py`` is the
command; without one, the first launcher line (torchrun, ``python -m
torch.distributed.run``, ``srun ... torchrun``, deepspeed), then the first ``python X.py
--flags`` line.
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
LAUNCHERS = ("torchrun", "torch.distributed.run", "torch.distributed.launch", "deepspeed")
SCHEDULERS = ("srun", "mpirun", "mpiexec")  # run the launcher (or python) on every node
PYTHON = re.compile(r"^python[\d.]*$")
WRAPPERS = ("exec", "nohup", "time", "env")  # words a launch line may start with
ENV_WORD = re.compile(r"^[A-Za-z_]\w*=")  # NAME=value before the command
# what an unset variable expands to until the words are split: nothing, once they are
# (script_command drops it and says where it stood)
UNSET = re.compile(r"@@unset:([A-Za-z_]\w*)@@")
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
    ``budget`` (characters left for a whole script's expansions, decremented) runs out.
    A variable neither ``scalars`` nor ``arrays`` holds is unset: bash expands it to
    nothing (an unset ``"${NAME[@]}"`` to no word at all), so it becomes UNSET's marker,
    which ``unset_words`` removes once the words are split."""
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
        return scalars.get(name, f"@@unset:{name}@@")  # a scalar is a one-element array

    def braced(m: re.Match) -> str:
        name, default = m.group(1), m.group(2)
        if name in scalars and (default is None or UNSET.sub("", scalars[name])):
            return scalars[name]  # ${NAME:-x} takes x when NAME is empty, too
        if name in arrays:
            return " ".join(shlex.quote(x) for x in arrays[name])
        return default if default is not None else f"@@unset:{name}@@"

    def plain(m: re.Match) -> str:
        name = m.group(1)
        if name in scalars:
            return scalars[name]
        if name in arrays:  # $ARR is its first element in bash
            return shlex.quote(arrays[name][0]) if arrays[name] else ""
        return f"@@unset:{name}@@"

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


def command_rank(words: list[str]) -> int | None:
    """How surely a line's words launch Megatron-LM, or None when they launch nothing: 0
    runs a ``pretrain_*.py``, 1 a launcher (LAUNCHERS: torchrun, ``python -m
    torch.distributed.run``, deepspeed, under srun or not), 2 ``python X.py --flags``
    (``tools/preprocess_data.py`` too, so a pretrain line after it wins). The first word,
    past environment assignments and WRAPPERS, must run a program: ``echo "launching
    torchrun"`` launches nothing."""
    i = 0
    while i < len(words) and (words[i] in WRAPPERS or ENV_WORD.match(words[i])):
        i += 1
    names = [w.rsplit("/", 1)[-1] for w in words[i:]]
    if not names:
        return None
    first = names[0]
    if not (first in LAUNCHERS or first in SCHEDULERS or PYTHON.match(first)
            or first.endswith(".py")):  # fmt: skip
        return None
    if any(n.startswith("pretrain_") and n.endswith(".py") for n in names):
        return 0
    if any(n in LAUNCHERS for n in names):
        return 1
    if any(n.endswith(".py") for n in names) and any(w.startswith("--") for w in words):
        return 2
    return None


SEPARATORS = ("&&", "||", ";", "|", "&")  # between the commands of one line
REDIRECT = re.compile(r"^\d*(?:>>?|<)(?:&\d+)?(.*)$")  # > log, 2>&1, >>log, < in


def _segments(words: list[str]) -> list[list[str]]:
    """The commands of one line (``cd /opt/Megatron-LM && torchrun ...``, ``... | tee
    log``), each without its redirections (``> train.log 2>&1``)."""
    out: list[list[str]] = [[]]
    skip = False
    for w in words:
        if skip:
            skip = False
        elif w in SEPARATORS:
            out.append([])
        elif (r := REDIRECT.match(w)) is not None:
            skip = not r.group(1) and not w.endswith(("&1", "&2"))  # its target is next
        else:
            out[-1].append(w)
    return [seg for seg in out if seg]


def is_command(line: str) -> bool:
    """A line that launches something command_rank ranks."""
    return command_rank(_words(line)) is not None


def _may_launch(line: str) -> bool:
    """A quick test before a line is expanded: it names a launcher or a .py file."""
    return ".py" in line or any(name in line for name in (*LAUNCHERS, *SCHEDULERS))


def unset_words(words: list[str]) -> tuple[list[str], list[tuple[int, str]]]:
    """The words with unset variables expanded to nothing (a word that was only one is
    dropped), and (the index the dropped word stood at, the variable) of each word dropped."""
    out: list[str] = []
    dropped: list[tuple[int, str]] = []
    for w in words:
        whole = UNSET.fullmatch(w)
        if whole:
            dropped.append((len(out), whole.group(1)))
        else:
            out.append(UNSET.sub("", w))
    return out, dropped


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
    found = script_command(text)
    return None if found is None else found[0]


def script_command(text: str) -> tuple[list[str], list[tuple[int, str]]] | None:
    """The launch command's words, variables substituted, and the unset variables dropped
    from them (``unset_words``); None when the script has none (command_rank)."""
    best = _ranked_command(text)
    return None if best is None else unset_words(best)


def _ranked_command(text: str) -> list[str] | None:
    """The best-ranked launch line's words (command_rank; the first of equal rank), unset
    variables still marked."""
    text = re.sub(r"\\\r?\n", " ", text)
    scalars: dict[str, str] = {}
    arrays: dict[str, list[str]] = {}
    pending: tuple[str, list[str]] | None = None  # an array still open across lines
    budget = [2 * MAX_EXPANDED_CHARS]  # characters all expansions of the script may add
    best: tuple[int, list[str]] | None = None

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
        if _may_launch(line):
            for words in _segments(_words(sub(line, scalars, arrays))):
                rank = command_rank(unset_words(words)[0])  # an unset $LAUNCHER is nothing
                if rank is not None and (best is None or rank < best[0]):
                    best = (rank, words)
            if best is not None and best[0] == 0:
                break
    return None if best is None else best[1]
