"""Reading the YAML and JSON files users hand the designer (catalogs, models, questions)."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml

MAX_DOCUMENT_BYTES = {"json": 64 * 2**20, "yaml": 8 * 2**20}
"""The largest model, catalog, question, saved-answer or study file read (issue 33): JSON 64
MiB (a saved answer holds its plans and explanation), YAML 8 MiB (PyYAML's pure-Python loader
reads about 1 MB a second). Larger files are refused before they are read."""
MAX_SCRIPT_BYTES = 2**20
"""The largest Megatron-LM launch script read (1 MiB; a script is a few kilobytes)."""
MAX_RESULTS_BYTES = 2**30
"""The largest results CSV read (1 GiB; 100,000 scenarios take about 60 MB)."""
MAX_NODES = 1_000_000
"""The most values (mappings, lists and scalars, an alias counted each time it is used) a
YAML or JSON document may hold: a YAML alias bomb (a 527-byte billion laughs) is refused
instead of expanded."""
MAX_DEPTH = 64
"""The deepest nesting of mappings and lists a document may have."""

_KINDS = {
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a directory",
}


def check_input(
    path: Path, error: type[Exception], expected: str, max_bytes: int, prefix: str = ""
) -> None:
    """``path`` is an existing regular file of at most ``max_bytes``, checked without opening
    it (a FIFO, a device such as /dev/urandom or a directory would hang the read or never
    end): one line of ``error`` naming the file and saying to pass ``expected`` otherwise."""
    where = f"{prefix}: {_shown(path)}" if prefix else _shown(path)
    try:
        info = os.stat(path)
    except FileNotFoundError as err:
        raise error(f"{where}: file not found; pass {expected}") from err
    except (OSError, ValueError) as err:  # a name too long, a NUL byte, a loop of links
        why = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise error(f"{where}: cannot be read ({why}); pass {expected}") from err
    kind = stat.S_IFMT(info.st_mode)
    if kind != stat.S_IFREG:
        what = _KINDS.get(kind, "not a regular file")
        if kind == stat.S_IFDIR:
            raise error(f"{where}: is a directory; pass {expected}")
        raise error(f"{where}: is {what}, not a regular file; pass {expected}")
    if info.st_size > max_bytes:
        raise error(
            f"{where}: {info.st_size:,} bytes, more than the {max_bytes:,} read; pass {expected}"
        )


def _shown(path: Path) -> str:
    """A path on one line (a newline in a file name would split the error message)."""
    text = str(path)
    return repr(text)[1:-1] if any(c in text for c in "\n\r\x00") else text


def read_text(
    path: Path,
    error: type[Exception],
    expected: str,
    prefix: str = "",
    max_bytes: int = MAX_DOCUMENT_BYTES["json"],
) -> str:
    """The UTF-8 text of ``path``; a missing, special (FIFO, device), directory, too large
    or unreadable file is one line of ``error`` naming it (after ``prefix``, e.g. the
    option) and saying to pass ``expected``."""
    check_input(path, error, expected, max_bytes, prefix)
    where = f"{prefix}: {_shown(path)}" if prefix else _shown(path)
    try:
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as err:
        raise error(f"{where}: cannot be read ({err.strerror or err}); pass {expected}") from err
    if len(data) > max_bytes:  # it grew after the check
        raise error(f"{where}: more than the {max_bytes:,} bytes read; pass {expected}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise error(
            f"{where}: cannot be read ({err.__class__.__name__}); pass a UTF-8 text file"
        ) from err


def _too_many(path: Path) -> str:
    """Why a document of more than MAX_NODES values is refused, and the fix: a JSON file
    (an answer of a million plan fields) has no aliases to blame."""
    if path.suffix.lower() == ".json":
        return f"holds more than {MAX_NODES:,} values; give fewer (e.g. a smaller --top)"
    return (
        f"expands to more than {MAX_NODES:,} values (YAML aliases repeat what they name); "
        "write the document out without aliases, or give fewer values"
    )


def check_size(doc: Any, path: Path, error: type[Exception]) -> None:
    """``doc`` (parsed) holds at most MAX_NODES values, an alias counted each time it is
    used, nested at most MAX_DEPTH deep: one line of ``error`` naming the file otherwise.
    The walk stops at the first limit passed, so a billion-laughs document costs little."""
    seen = 0
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        seen += 1
        if seen > MAX_NODES:
            raise error(f"{_shown(path)}: {_too_many(path)}")
        if isinstance(value, (dict, list)):
            if depth > MAX_DEPTH:
                raise error(f"{_shown(path)}: nested more than {MAX_DEPTH} levels deep; flatten it")
            items = value.values() if isinstance(value, dict) else value
            stack.extend((v, depth + 1) for v in items)


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's SafeLoader refusing a key given twice in one mapping (it keeps the last one
    silently; issue 20, 22)."""

    _depth = 0
    _sizes: dict[int, int]

    def compose_document(self) -> Any:
        self._sizes = {}
        return super().compose_document()  # type: ignore[no-untyped-call]

    def compose_node(self, parent: Any, index: Any) -> Any:
        """A node, refused past MAX_DEPTH levels (the composer recurses once a level: a
        document 100,000 deep took seconds to reach Python's recursion limit) or when it
        expands to more than MAX_NODES values, an alias counting what it names each time
        (a billion-laughs document is refused after reading its few hundred bytes)."""
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                self._refuse(f"nested more than {MAX_DEPTH} levels deep; flatten it")
            node = super().compose_node(parent, index)  # type: ignore[no-untyped-call]
        finally:
            self._depth -= 1
        if id(node) not in self._sizes:
            children = node.value if isinstance(node, yaml.SequenceNode) else []
            if isinstance(node, yaml.MappingNode):
                children = [n for pair in node.value for n in pair]
            self._sizes[id(node)] = 1 + sum(self._sizes.get(id(c), 1) for c in children)
        if self._sizes[id(node)] > MAX_NODES:
            self._refuse(
                f"expands to more than {MAX_NODES:,} values (YAML aliases repeat what they "
                "name); write the document out without aliases"
            )
        return node

    def _refuse(self, problem: str) -> None:
        raise yaml.composer.ComposerError(
            None,
            None,
            problem,
            self.peek_event().start_mark,  # type: ignore[no-untyped-call]
        )

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            try:
                again = key in seen
            except TypeError:  # an unhashable key: the base class says so
                continue
            if again:
                raise yaml.constructor.ConstructorError(
                    "while reading a mapping",
                    node.start_mark,
                    f"key {key!r} given twice; give each key once",
                    key_node.start_mark,
                )
            seen.add(key)
        return super().construct_mapping(node, deep)


# YAML 1.2 floats without a dot or without the exponent's sign (4e3, 1e30, 1.0e300):
# PyYAML implements YAML 1.1, which reads them as text, so ``seq_len: 4e3`` was refused as
# "text, not a number; give the number unquoted" although it was unquoted
_YAML12_FLOAT = re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")
_UniqueKeyLoader.add_implicit_resolver(  # type: ignore[no-untyped-call]
    "tag:yaml.org,2002:float", _YAML12_FLOAT, list("-+0123456789")
)


class _DuplicateKey(ValueError):
    pass


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refusing a key given twice (json keeps the last one silently)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(f"key {key!r} given twice; give each key once")
        out[key] = value
    return out


def read_document(path: Path, error: type[Exception], expected: str) -> Any:
    """Parse ``path`` (JSON when it ends in .json, YAML otherwise). Every failure is one
    line of ``error`` naming the file and the fix; ``expected`` says what file to pass."""
    is_json = path.suffix.lower() == ".json"
    text = read_text(path, error, expected, max_bytes=MAX_DOCUMENT_BYTES[_kind(is_json)])
    try:
        if is_json:
            doc = json.loads(text, object_pairs_hook=_unique_pairs)
        else:
            doc = yaml.load(text, _UniqueKeyLoader)  # noqa: S506 (a SafeLoader)
    except RecursionError as err:
        raise error(f"{_shown(path)}: nested too deeply to read; flatten it") from err
    except _DuplicateKey as err:
        raise error(f"{_shown(path)}: {err}") from err
    except json.JSONDecodeError as err:
        raise error(
            f"{_shown(path)}: JSON syntax error at line {err.lineno}, column {err.colno}: {err.msg}; fix the syntax"
        ) from err
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or "invalid YAML"
        if "flatten it" in problem or "without aliases" in problem:
            raise error(f"{_shown(path)}: {problem}") from err
        raise error(f"{_shown(path)}: YAML syntax error{where}: {problem}; fix the syntax") from err
    except ValueError as err:  # an integer past Python's 4,300 digits
        raise error(
            f"{_shown(path)}: holds a number of more than 4,300 digits; write it shorter"
            if "digits" in str(err)
            else f"{_shown(path)}: cannot be read ({err}); fix the file"
        ) from err
    if is_json:  # a YAML document was measured as it was composed
        check_size(doc, path, error)
    return doc


def _kind(is_json: bool) -> str:
    return "json" if is_json else "yaml"
