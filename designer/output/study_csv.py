"""A sweep's results file: a CSV that knows its study, locked while a sweep writes it.

Every row ends with a ``study`` column, a hash of the whole study (its base, axes and other
settings, the content of every file it reads: catalog files, model spec files, and the
designer's version), so the file stays a plain CSV for pandas and ``csv`` readers while
``--resume`` can tell its own rows from another study's. A sweep holds an exclusive
``fcntl.flock`` on the CSV from before it reads the file until its last row is written; a
second sweep on the same file exits 2 at once (the lock dies with its process, SIGKILL
included). Nothing is truncated or appended until the file is recognised as a results file of
this study (or is empty, or, without ``--resume``, a results file of any study).
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import hashlib
import io
import os
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import IO, Any

from catalog.files import MAX_RESULTS_BYTES, check_input
from designer.errors import UsageError
from designer.output.cells import read_row, text_row

STUDY_COLUMN = "study"


def designer_version() -> str:
    try:
        return version("designer")
    except PackageNotFoundError:  # a source checkout that is not installed
        return "unknown"


def _file_digest(path: Path) -> str:
    try:
        check_input(path, OSError, "a regular file", MAX_RESULTS_BYTES)
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "unreadable"  # the scenario reports it; the hash only needs to be stable


def study_hash(study_json: str, files: list[Path]) -> str:
    """The hash of a study: its settings (JSON), the content of the files it reads, in order,
    and the designer's version (16 hex digits)."""
    h = hashlib.sha256()
    for part in (designer_version(), study_json, *(_file_digest(f) for f in files)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


@dataclass
class Opened:
    """A results file open for appending: its handle, columns and the finished scenarios."""

    fh: IO[str]
    fd: int
    columns: list[str]
    done: set[str]


def _not_results(path: Path, why: str) -> UsageError:
    return UsageError(
        f"{path} {why}; pass another --csv (or remove the file)",
        "--csv",
    )


def _parse(path: Path, data: bytes, columns: list[str], digest: str, resume: bool) -> set[str]:
    """The finished scenarios of an existing results file; UsageError for a file that is not
    a results file (or, with ``resume``, not of this study)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise _not_results(path, "is not a text file") from err
    header = text.split("\n", 1)[0].rstrip("\r")
    head = next(csv.reader([header]), [])
    if not head or head[0] != "scenario" or "status" not in head:
        raise _not_results(path, "is not a designer sweep results file")
    if head[-1] != STUDY_COLUMN or not _marked(text):
        raise _not_results(
            path, "was not written by designer sweep (no study column with its hash)"
        )
    if not resume:
        return set()  # a results file of any study: the new sweep replaces it
    if head != columns:
        raise _not_results(path, "holds another study's columns")
    complete = text[: text.rfind("\n") + 1]  # a row cut off by a kill (no newline) runs again
    try:
        return _done(path, complete, digest)
    except csv.Error as err:
        raise _not_results(path, f"is not a CSV the sweep can read ({err})") from err


def _marked(text: str) -> bool:
    """The marker of a sweep's results file: its first row (if any) ends with a study hash
    of 16 hex digits in the ``study`` column (issue 33: a user's CSV whose header happens to
    start ``scenario,status`` is never replaced)."""
    lines = text.split("\n", 2)
    if len(lines) < 2 or not lines[1].strip():
        return True  # the header alone: a sweep killed before its first row
    last = lines[1].rstrip("\r").rpartition(",")[2]
    return len(last) == 16 and all(c in "0123456789abcdef" for c in last)


def _done(path: Path, complete: str, digest: str) -> set[str]:
    """The scenarios with a row in ``complete`` (every row of this study)."""
    done: set[str] = set()
    for raw in csv.DictReader(io.StringIO(complete, newline="")):
        row = read_row(raw)
        if row.get(STUDY_COLUMN) != digest:
            raise _not_results(
                path, f"holds results of another study (hash {row.get(STUDY_COLUMN)!r})"
            )
        if row.get("scenario") and row.get("status"):
            done.add(row["scenario"])
    return done


def _lock(fd: int, path: Path) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as err:
        raise UsageError(
            f"another sweep is writing {path}; wait for it to finish or pass another --csv",
            "--csv",
        ) from err


@contextlib.contextmanager
def open_results(path: Path, columns: list[str], digest: str, resume: bool) -> Iterator[Opened]:
    """The results file, locked, recognised, and open for appending rows (its header written
    when it is new, empty or replaced; a row cut off by a kill dropped)."""
    if os.path.lexists(path):  # a FIFO or /dev/zero would hang or never end the read
        check_input(
            path,
            UsageError,
            "a regular file (the sweep reads and appends to it)",
            MAX_RESULTS_BYTES,
            "--csv",
        )
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as err:
        raise UsageError(
            f"cannot write {path} ({err.strerror}); pass a writable path", "--csv"
        ) from err
    with os.fdopen(fd, "r+b") as raw:
        _lock(fd, path)
        data = raw.read()
        done = _parse(path, data, columns, digest, resume) if data else set()
        keep = data[: data.rfind(b"\n") + 1] if resume else b""
        raw.seek(len(keep))
        raw.truncate()
        fh = io.TextIOWrapper(raw, encoding="utf-8", newline="", write_through=True)
        try:
            if not keep:
                csv.writer(fh, lineterminator="\n").writerow(columns)
            yield Opened(fh, fd, columns, done)
        finally:
            fh.detach()


def append_row(opened: Opened, row: dict[str, Any], digest: str) -> None:
    writer = csv.DictWriter(
        opened.fh, fieldnames=opened.columns, extrasaction="ignore", lineterminator="\n"
    )
    writer.writerow(text_row({**row, STUDY_COLUMN: digest}))
    opened.fh.flush()
