"""The built-in model zoo and model spec files (designer YAML/JSON or Hugging Face config.json).

File formats are those of ../shared/CLI-CONTRACT.md, "Model spec files".

Mixture-of-experts models (models/data/moe_zoo.yaml, ``moe_zoo``) are catalogued apart
from ``zoo()``, the dense models; ``resolve_model`` reads both, and spec files and
config.json files of either kind (the optimizer chooses EP and ETP, solvers/space.py;
evaluate prices the given ones, models/expert.py).
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from catalog.files import read_document
from catalog.names import unknown_name
from models.errors import ModelError
from models.hf_config import hf_fields
from models.transformer import TransformerSpec


@cache
def _zoo_raw() -> dict[str, dict[str, Any]]:
    """The shipped zoo's fields, parsed once per process (a sweep resolves a model per
    scenario); zoo() builds fresh specs from them and never changes them."""
    text = (resources.files("models") / "data" / "zoo.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def _spec_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """An entry's spec fields: all but ``aliases`` (other names of the model, read by
    ``resolve_model`` only)."""
    return {k: v for k, v in fields.items() if k != "aliases"}


def zoo() -> dict[str, TransformerSpec]:
    """Every built-in model the designer plans, by name."""
    return {
        name: TransformerSpec(name=name, **_spec_fields(fields))
        for name, fields in _zoo_raw().items()
    }


@cache
def _moe_zoo_raw() -> dict[str, dict[str, Any]]:
    text = (resources.files("models") / "data" / "moe_zoo.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def moe_zoo() -> dict[str, TransformerSpec]:
    """The built-in mixture-of-experts models by name (planned and evaluated by name as the
    dense ones; apart from ``zoo()``, which the benchmarks draw dense models from)."""
    return {
        name: TransformerSpec(name=name, **_spec_fields(f)) for name, f in _moe_zoo_raw().items()
    }


RELEASE_WORDS = ("hf", "base", "instruct", "chat", "thinking")
"""Words of a Hugging Face repository name that name a release of the same architecture
(Llama-2-70b-hf, Nemotron-4-340B-Base, Kimi-K2-Instruct-0905, Qwen3-235B-A22B-Instruct-2507,
Mixtral-8x7B-Instruct-v0.1): ``name_key`` drops the first such word after the name's first
and all that follows it (a date or version)."""


def name_key(name: str) -> str:
    """What two spellings of one model name share: lower case, without an organisation
    prefix (``meta-llama/``), the separators ``-``, ``_``, ``.`` and spaces, or a release
    word and what follows it (``RELEASE_WORDS``): "Llama-3.1-405B" and "llama3.1-405b" are
    "llama31405b", "nemotron-4-340b" and "Nemotron-4-340B-Base" are "nemotron4340b"."""
    words = [w for w in re.split(r"[-_.\s]+", name.strip().lower().rsplit("/", 1)[-1]) if w]
    cut = next((i for i, w in enumerate(words) if i and w in RELEASE_WORDS), len(words))
    return "".join(words[:cut])


@cache
def zoo_names_by_key() -> dict[str, str]:
    """Every zoo name and alias (an entry's ``aliases``) by ``name_key``, to the zoo name.
    Two entries sharing a key is a data error (tests/test_models.py)."""
    out: dict[str, str] = {}
    for raw in (_zoo_raw(), _moe_zoo_raw()):
        for name, fields in raw.items():
            for other in (name, *fields.get("aliases", ())):
                key = name_key(other)
                if out.setdefault(key, name) != name:
                    raise ModelError(f"zoo: {other!r} names both {out[key]} and {name}")
    return out


def _validate(fields: dict[str, Any], origin: str) -> TransformerSpec:
    try:
        return TransformerSpec.model_validate(fields)
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        if first["type"] == "extra_forbidden":
            raise ModelError(
                f"{origin}: {loc}: unknown field; remove it or check its spelling"
            ) from err
        if first["type"] == "missing":
            raise ModelError(f"{origin}: {loc}: required field is missing; add it") from err
        msg = first["msg"].removeprefix("Value error, ")
        field = f"{loc}: " if loc else ""
        got = "" if not loc else f" (got {first.get('input')!r})"
        raise ModelError(f"{origin}: {field}{msg}{got}") from err


def from_hf_config(cfg: dict[str, Any], origin: str) -> TransformerSpec:
    """Translate a Hugging Face config.json (models/hf_config.py)."""
    return _validate(hf_fields(cfg, origin), origin)


def read_model_file(path: Path) -> TransformerSpec:
    """Read a designer YAML/JSON spec or a Hugging Face config.json."""
    origin = str(path)
    doc = read_document(path, ModelError, "a zoo name, a YAML/JSON spec file or a config.json")
    if doc is None:
        raise ModelError(f"{origin}: file is empty; give layers, hidden, heads, vocab, seq_len")
    if not isinstance(doc, dict):
        raise ModelError(f"{origin}: top level must be a mapping of fields")
    hf_keys = ("num_hidden_layers", "n_layer", "hidden_size", "n_embd", "model_type")
    if any(k in doc for k in (*hf_keys, "architectures")):  # (T5's has none of the four)
        return from_hf_config(doc, origin)
    fields = dict(doc)
    fields.setdefault("name", path.stem)
    return _validate(fields, origin)


# the name the planners' callers and tests use (once the planning read, which refused MoE)
load_model_file = read_model_file


def resolve_model(name_or_path: str, option: str = "--model") -> TransformerSpec:
    """A zoo name (dense or MoE), or a path to a spec file, or another spelling of a zoo
    name or one of its ``aliases`` (``name_key``; a file of that name wins); ``option``
    names the input in errors."""
    models = zoo()
    if not name_or_path.strip():  # (Path("") is the working directory)
        raise ModelError(
            f"{option}: empty; give a zoo name (designer models lists them), a YAML/JSON spec "
            "file or a config.json"
        )
    if name_or_path in models:
        return models[name_or_path]
    if name_or_path in _moe_zoo_raw():
        return moe_zoo()[name_or_path]
    path = Path(name_or_path)
    if path.suffix.lower() in {".yaml", ".yml", ".json"} or path.exists():
        return read_model_file(path)
    if "/" in name_or_path and path.parent.is_dir():  # a path to a file not there
        raise ModelError(f"{option}: {name_or_path}: no such file; give an existing spec file")
    known = zoo_names_by_key().get(name_key(name_or_path))
    if known is not None:  # another spelling or an alias ("llama3.1-405b", "Qwen/Qwen3-30B-A3B")
        return models[known] if known in models else moe_zoo()[known]
    raise ModelError(
        f"{option}: {unknown_name('model', name_or_path, [*models, *_moe_zoo_raw()])}, "
        "or a YAML/JSON spec file"
    )
