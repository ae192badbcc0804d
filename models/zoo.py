"""The built-in model zoo and model spec files (designer YAML/JSON or Hugging Face config.json).

File formats are those of ../shared/CLI-CONTRACT.md, "Model spec files".

Mixture-of-experts models (models/data/moe_zoo.yaml, ``moe_zoo``) are catalogued with
their parameter counts but kept out of ``zoo()``, the models the designer plans: a zoo
name, spec file or config.json that uses experts, latent attention or multi-token
prediction is refused by ``resolve_model`` / ``load_model_file`` (models.moe.
require_plannable) for planning until issue 17 models them end to end; evaluate reads
them (``resolve_model(..., plan=False)``) with its --ep and --etp (models/expert.py).
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from catalog.files import read_document
from models.errors import ModelError
from models.hf_config import hf_fields, moe_keys
from models.moe import require_plannable
from models.spec import TransformerSpec


@cache
def _zoo_raw() -> dict[str, dict[str, Any]]:
    """The shipped zoo's fields, parsed once per process (a sweep resolves a model per
    scenario); zoo() builds fresh specs from them and never changes them."""
    text = (resources.files("models") / "data" / "zoo.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def zoo() -> dict[str, TransformerSpec]:
    """Every built-in model the designer plans, by name."""
    return {name: TransformerSpec(name=name, **fields) for name, fields in _zoo_raw().items()}


@cache
def _moe_zoo_raw() -> dict[str, dict[str, Any]]:
    text = (resources.files("models") / "data" / "moe_zoo.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def moe_zoo() -> dict[str, TransformerSpec]:
    """The built-in mixture-of-experts models by name: counted, not planned yet."""
    return {name: TransformerSpec(name=name, **f) for name, f in _moe_zoo_raw().items()}


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


def load_model_file(path: Path) -> TransformerSpec:
    """Read a designer YAML/JSON spec or a Hugging Face config.json that the designer
    can plan (a MoE, MLA or MTP model is refused naming its key: models.moe)."""
    return read_model_file(path, plan=True)


def read_model_file(path: Path, plan: bool = False) -> TransformerSpec:
    """Read a designer YAML/JSON spec or a Hugging Face config.json; with ``plan``,
    refuse a model the designer cannot plan yet."""
    origin = str(path)
    doc = read_document(path, ModelError, "a zoo name, a YAML/JSON spec file or a config.json")
    if doc is None:
        raise ModelError(f"{origin}: file is empty; give layers, hidden, heads, vocab, seq_len")
    if not isinstance(doc, dict):
        raise ModelError(f"{origin}: top level must be a mapping of fields")
    if any(k in doc for k in ("num_hidden_layers", "n_layer", "hidden_size", "n_embd")):
        spec = from_hf_config(doc, origin)
        return require_plannable(spec, origin, moe_keys(doc)) if plan else spec
    fields = dict(doc)
    fields.setdefault("name", path.stem)
    spec = _validate(fields, origin)
    return require_plannable(spec, origin) if plan else spec


def resolve_model(name_or_path: str, option: str = "--model", plan: bool = True) -> TransformerSpec:
    """A zoo name, or a path to a spec file; ``option`` names the input in errors. With
    ``plan`` (the default) a model the designer cannot plan is refused
    (models.moe.require_plannable); evaluate reads with ``plan=False``."""
    models = zoo()
    if name_or_path in models:
        return models[name_or_path]
    if name_or_path in _moe_zoo_raw():
        spec = moe_zoo()[name_or_path]
        return require_plannable(spec, f"{option} {name_or_path}") if plan else spec
    path = Path(name_or_path)
    if path.suffix.lower() in {".yaml", ".yml", ".json"} or path.exists():
        return read_model_file(path, plan=plan)
    raise ModelError(
        f"{option}: unknown model {name_or_path!r}; use a zoo name ({', '.join(sorted(models))}) "
        "or a YAML/JSON spec file"
    )
