"""Load the shipped catalog and merge user override files into it.

An override file has the same shape as the shipped data: top-level keys
``gpus``, ``nics`` and ``switches``, each a mapping from entry name to fields,
and ``facility``, a mapping of fields. Fields of an existing entry are merged
(nested mappings too); a new entry must be complete.
"""

from __future__ import annotations

import copy
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from catalog.catalog import Catalog
from catalog.errors import CatalogError
from catalog.files import read_document
from catalog.specs import Facility, GPUSpec, NICSpec, SwitchSpec

SECTIONS: dict[str, type[BaseModel]] = {"gpus": GPUSpec, "nics": NICSpec, "switches": SwitchSpec}
FACILITY = "facility"
MAX_ENTRIES = 128
"""The most GPUs, NICs or switches a catalog holds, shipped entries and overrides
together (the shipped one has 16 GPU types): every GPU type is a solve's dimension, and a
--catalog file of 1,000 copies of one GPU made optimize take 50 s and 1.3 GB, 3,000
minutes and 3.7 GB, past any --time-limit; 128 takes about 8 s."""
_SHIPPED = ("gpus.yaml", "network.yaml")
# The shipped files are parsed with libyaml where PyYAML has it (the same documents, about
# ten times faster: every command and most tests load the catalog); override files keep
# the pure-Python loader, whose error messages name the line and column.
SHIPPED_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml(path: Path) -> Any:
    """Parse a catalog override file, turning every failure into a one-line CatalogError."""
    return read_document(path, CatalogError, "an existing YAML file")


def _deep_merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def format_validation_error(origin: str, prefix: str, err: ValidationError) -> str:
    """First pydantic error as 'origin: prefix.field: message (got value)'."""
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"])
    field = f"{prefix}.{loc}" if loc else prefix
    kind = first["type"]
    if kind == "extra_forbidden":
        return f"{origin}: {field}: unknown field; remove it or check its spelling"
    if kind == "missing":
        return f"{origin}: {field}: required field is missing; add it"
    got = first.get("input")
    got_text = "" if isinstance(got, dict) else f" (got {got!r})"
    return f"{origin}: {field}: {first['msg'].removeprefix('Value error, ')}{got_text}"


def _merge_document(raw: dict[str, dict[str, Any]], doc: Any, origin: str) -> None:
    names = ", ".join((*SECTIONS, FACILITY))
    if doc is None:
        raise CatalogError(f"{origin}: file is empty; give at least one of {names}")
    if not isinstance(doc, dict):
        raise CatalogError(f"{origin}: top level must be a mapping with keys {names}")
    for section, entries in doc.items():
        if section == FACILITY:
            if not isinstance(entries, dict):
                raise CatalogError(f"{origin}: {FACILITY}: must be a mapping of fields")
            raw[FACILITY] = {**raw.get(FACILITY, {}), **entries}
            continue
        if section not in SECTIONS:
            raise CatalogError(f"{origin}: {section}: unknown section; use one of {names}")
        if not isinstance(entries, dict):
            raise CatalogError(f"{origin}: {section}: must be a mapping from entry name to fields")
        for name, fields in entries.items():
            if not isinstance(fields, dict):
                raise CatalogError(f"{origin}: {section}.{name}: must be a mapping of fields")
            name = str(name)
            merged = _deep_merge(raw[section].get(name, {}), fields)
            merged["name"] = name
            raw[section][name] = merged


def _build(raw: dict[str, dict[str, Any]], origins: dict[tuple[str, str], str]) -> Catalog:
    built: dict[str, dict[str, Any]] = {s: {} for s in SECTIONS}
    for section, cls in SECTIONS.items():
        for name, fields in raw[section].items():
            try:
                built[section][name] = cls.model_validate(fields)
            except ValidationError as err:
                origin = origins.get((section, name), "catalog")
                raise CatalogError(
                    format_validation_error(origin, f"{section}.{name}", err)
                ) from err
    for nic in built["nics"].values():
        if nic.switch not in built["switches"]:
            origin = origins.get(("nics", nic.name), "catalog")
            raise CatalogError(
                f"{origin}: nics.{nic.name}.switch: unknown switch {nic.switch!r}; "
                f"use one of {', '.join(sorted(built['switches']))}"
            )
    for gpu in built["gpus"].values():
        for name in gpu.server.nics or ():
            if name not in built["nics"]:
                origin = origins.get(("gpus", gpu.name), "catalog")
                raise CatalogError(
                    f"{origin}: gpus.{gpu.name}.server.nics: unknown NIC {name!r}; "
                    f"use one of {', '.join(sorted(built['nics']))}"
                )
    try:
        facility = Facility.model_validate(raw.get(FACILITY, {}))
    except ValidationError as err:
        origin = origins.get((FACILITY, ""), "catalog")
        raise CatalogError(format_validation_error(origin, FACILITY, err)) from err
    return Catalog(
        gpus=built["gpus"], nics=built["nics"], switches=built["switches"], facility=facility
    )


def _record_origins(origins: dict[tuple[str, str], str], doc: dict[str, Any], origin: str) -> None:
    for section in doc:
        if section == FACILITY:
            origins[(FACILITY, "")] = origin
            continue
        for name in doc[section]:
            origins[(section, str(name))] = origin


def load_catalog(overrides: list[Path] | tuple[Path, ...] = ()) -> Catalog:
    """The shipped catalog with each override file merged in order."""
    raw: dict[str, dict[str, Any]] = {s: {} for s in SECTIONS}
    origins: dict[tuple[str, str], str] = {}
    data_dir = resources.files("catalog") / "data"
    for fname in _SHIPPED:
        origin = f"catalog/data/{fname}"
        doc = yaml.load(data_dir.joinpath(fname).read_text(encoding="utf-8"), SHIPPED_LOADER)
        _merge_document(raw, doc, origin)
        _record_origins(origins, doc, origin)
    for path in overrides:
        path = Path(path)
        doc = read_yaml(path)
        _merge_document(raw, doc, str(path))
        _record_origins(origins, doc, str(path))
        for section, entries in raw.items():
            if section in SECTIONS and len(entries) > MAX_ENTRIES:
                raise CatalogError(
                    f"{path}: {section}: the catalog would hold {len(entries):,} entries, more "
                    f"than {MAX_ENTRIES} (the shipped ones included); keep the ones the question "
                    "compares, or study prices with a sweep's price_scale"
                )
    return _build(raw, origins)
