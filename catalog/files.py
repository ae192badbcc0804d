"""Reading the YAML and JSON files users hand the designer (catalogs, models, questions)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml


def read_text(path: Path, error: type[Exception], expected: str, prefix: str = "") -> str:
    """The UTF-8 text of ``path``; a missing, directory or unreadable file is one line of
    ``error`` naming it (after ``prefix``, e.g. the option) and saying to pass ``expected``."""
    where = f"{prefix}: {path}" if prefix else str(path)
    if not path.exists():
        raise error(f"{where}: file not found; pass {expected}")
    if path.is_dir():
        raise error(f"{where}: is a directory; pass {expected}")
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise error(
            f"{where}: cannot be read ({err.__class__.__name__}); pass a UTF-8 text file"
        ) from err


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's SafeLoader refusing a key given twice in one mapping (it keeps the last one
    silently; issue 20, 22)."""

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
    text = read_text(path, error, expected)
    is_json = path.suffix.lower() == ".json"
    try:
        if is_json:
            return json.loads(text, object_pairs_hook=_unique_pairs)
        return yaml.load(text, _UniqueKeyLoader)  # noqa: S506 (a SafeLoader)
    except _DuplicateKey as err:
        raise error(f"{path}: {err}") from err
    except json.JSONDecodeError as err:
        raise error(
            f"{path}: JSON syntax error at line {err.lineno}, column {err.colno}: {err.msg}; fix the syntax"
        ) from err
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or "invalid YAML"
        raise error(f"{path}: YAML syntax error{where}: {problem}; fix the syntax") from err
