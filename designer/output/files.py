"""Output files that cannot destroy inputs or half-write: every output path is checked before
the work starts (its folder exists and is writable, it is not a folder, it is not an input or
another output), and whole-file outputs are written to a temporary file in the same folder and
renamed into place, so that a crash or a full disk leaves the old file or the new one, never a
mix. Special files (``/dev/stdout``, a FIFO) are written directly."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from catalog.files import read_document
from designer.errors import UsageError


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file (links and ``..`` resolved, hard links too)."""
    if _real(a) == _real(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def check_writable(path: Path, option: str) -> None:
    """A file ``option`` may write: its folder exists and is writable, it is not a folder, and
    an existing file is writable. Exit 2 naming the path otherwise."""
    try:
        _check_writable(path, option)
    except OSError as err:  # a name too long for the file system
        raise _os_error(path, err, option) from err


def _check_writable(path: Path, option: str) -> None:
    target = _real(path)
    if target.is_dir():
        raise UsageError(f"{path} is a folder; pass a file path", option)
    folder = target.parent
    if not folder.is_dir():
        raise UsageError(f"cannot write {path}: folder {folder} does not exist", option)
    if target.exists():
        if not os.access(target, os.W_OK):
            raise UsageError(f"cannot write {path}: the file is read-only; pass another", option)
        if not _regular(target):
            return  # /dev/stdout, a FIFO: written in place
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"cannot write {path}: folder {folder} is read-only; pass another", option)


def check_paths(outputs: dict[str, Path | None], inputs: dict[str, list[Path]]) -> None:
    """Every output writable, none the same file as an input or as another output: exit 2
    naming both options otherwise. ``outputs``: option -> path; ``inputs``: option -> paths."""
    given = [(opt, p) for opt, p in outputs.items() if p is not None]
    for i, (opt, path) in enumerate(given):
        if str(path) == "-":  # the shell's 'standard output' idiom: not a file to create
            raise UsageError(
                "'-' would write a file named '-', not standard output; give a file name "
                "(--json prints the answer on standard output)",
                opt,
            )
        for other_opt, other in given[:i]:
            if same_file(path, other):
                raise UsageError(
                    f"{path} is also {other_opt}'s output; pass two different files", opt
                )
        for in_opt, paths in inputs.items():
            for p in paths:
                if same_file(path, p):
                    raise UsageError(
                        f"{path} is the {in_opt} input; writing it would destroy it, "
                        "pass another file",
                        opt,
                    )
        check_writable(path, opt)
        if opt == "--plot":
            _check_plot_suffix(path)


PLOT_SUFFIXES = (".png", ".svg")
"""The formats --plot writes (designer.output.plots; matplotlib picks it by the suffix)."""


def _check_plot_suffix(path: Path) -> None:
    """A --plot path names a format it writes: checked with the other outputs, before the
    work (--plot out.txt ran the whole sweep, then matplotlib refused 'txt')."""
    formats = " or ".join(PLOT_SUFFIXES)
    if not path.suffix:
        raise UsageError(f"{path} has no suffix; name a {formats} file", "--plot")
    if path.suffix.lower() not in PLOT_SUFFIXES:
        raise UsageError(f"{path} is a {path.suffix} file; name a {formats} file", "--plot")


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return True  # absent: created as a regular file


def _os_error(path: Path, err: OSError, option: str) -> UsageError:
    return UsageError(f"cannot write {path} ({err.strerror or err}); pass a writable path", option)


@contextlib.contextmanager
def atomic_path(path: Path, option: str) -> Iterator[Path]:
    """A temporary path in ``path``'s folder (same suffix) to write; renamed onto ``path`` when
    the block ends without error, removed otherwise. A special file is written directly."""
    target = _real(path)
    if not _regular(target):
        try:
            yield target
        except OSError as err:
            raise _os_error(path, err, option) from err
        return
    try:
        fd, tmp = tempfile.mkstemp(
            dir=target.parent, prefix=f".{target.name}.", suffix=f".tmp{target.suffix}"
        )
        os.close(fd)
    except OSError as err:
        raise _os_error(path, err, option) from err
    try:
        yield Path(tmp)
        _keep_mode(target, Path(tmp))
        os.replace(tmp, target)
    except OSError as err:
        raise _os_error(path, err, option) from err
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _keep_mode(target: Path, tmp: Path) -> None:
    """The new file gets the old one's permissions, or the umask's for a new file (mkstemp
    creates 0600)."""
    try:
        mode = stat.S_IMODE(target.stat().st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    os.chmod(tmp, mode)


def write_atomic(path: Path, text: str, option: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (exit 2 naming the path on an OS error)."""
    with atomic_path(path, option) as tmp:
        with open(tmp, "w", encoding="utf-8", newline="") as fh:
            _write(fh, text)


def _write(fh: IO[str], text: str) -> None:
    fh.write(text)
    fh.flush()
    with contextlib.suppress(OSError, ValueError):
        os.fsync(fh.fileno())


def save_with(path: Path, save: Callable[[Path], None], option: str) -> None:
    """Call ``save(tmp)`` (a library that writes a file itself, such as matplotlib) and rename
    the result into place."""
    with atomic_path(path, option) as tmp:
        save(tmp)


OUTPUT_PARAMS = ("csv_file", "bom_file", "plot_file", "html_file", "xlsx_file")
"""click parameters naming files a command writes."""
INPUT_PARAMS = (
    *("model", "model_name", "catalog_files", "from_megatron"),
    *("study_file", "file", "plan_file"),
)
"""click parameters naming files a command reads (a model or Megatron argument only when it
is an existing file)."""


def check_command_paths(ctx) -> None:
    """Before a command runs: its output options (``OUTPUT_PARAMS``) are writable and name
    none of its input files nor each other (a click context, its parameters parsed)."""
    outputs: dict[str, Path | None] = {}
    inputs: dict[str, list[Path]] = {}
    for param in ctx.command.params:
        value = ctx.params.get(param.name)
        if value is None or value == ():
            continue
        flag = param.opts[0] if param.param_type_name == "option" else param.human_readable_name
        if param.name in OUTPUT_PARAMS:
            outputs[flag] = Path(value)
        elif param.name in INPUT_PARAMS:
            paths = [Path(str(v)) for v in (value if isinstance(value, tuple) else (value,))]
            inputs[flag] = [p for p in paths if _is_file(p)]
            for p in list(inputs[flag]):
                read_by = f"{flag} (read by {p}, a question, saved answer or study)"
                inputs[read_by] = indirect_inputs(p)
    check_paths(outputs, inputs)


_SPEC_SUFFIXES = (".yaml", ".yml", ".json")


def indirect_inputs(path: Path) -> list[Path]:
    """The files ``path`` makes a command read (issue 33: an output must not replace them
    either): a question's model file and catalog files (relative to its folder, or to the
    working folder, as the model is looked up), a saved answer's catalog files (by name from
    the working folder and at the absolute paths it saved, ``catalog_paths``) and its model
    file, a study's in its base and axes, and a results CSV's study file beside it
    (STUDY.yaml) with its files. A file that cannot be read names none: the command itself
    reports it."""
    if path.suffix.lower() == ".csv":
        studies = [path.with_suffix(s) for s in (".yaml", ".yml") if _is_file(path.with_suffix(s))]
        return [*studies, *(p for s in studies for p in indirect_inputs(s))]
    if path.suffix.lower() not in _SPEC_SUFFIXES:
        return []
    try:
        doc = read_document(path, UsageError, "a file")
    except UsageError:
        return []
    if not isinstance(doc, dict):
        return []
    if isinstance(doc.get("question"), dict):  # a saved answer
        q = doc["question"]
        return [*_named(q, "catalog_files", Path()), *_named(q, "catalog_paths", Path())]
    questions = [doc]
    if isinstance(doc.get("base"), dict):  # a study
        questions = [doc["base"]]
        for values in (doc.get("axes") or {}).values() if isinstance(doc.get("axes"), dict) else []:
            questions += [{"model": v} for v in values or [] if isinstance(v, str)]
            questions += [{"catalog": v} for v in values or [] if isinstance(v, list)]
    return [p for q in questions for p in _named(q, "catalog", path.parent)]


def _named(question: dict, catalog_key: str, base: Path) -> list[Path]:
    """The model file and catalog files a question names, resolved against ``base``; the
    model also against the working folder, where a name without a spec suffix is read
    (models.zoo.resolve_model): whichever of them is a file."""
    names = question.get(catalog_key) or []
    names = [str(n) for n in names] if isinstance(names, list) else []
    paths = [Path(n) if Path(n).is_absolute() else base / n for n in names]
    model = question.get("model")
    if isinstance(model, str) and model.strip():
        paths += [base / model, Path(model)]
    return [p for p in dict.fromkeys(paths) if _is_file(p)]


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):  # a Megatron command line is no path
        return False
