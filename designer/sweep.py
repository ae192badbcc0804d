"""`designer sweep STUDY.yaml`: a base question and axes; the cross product, one CSV row per scenario.

Rows are written as they finish, so an interrupted sweep keeps its work and
``--resume`` skips every scenario whose id is already in the CSV. Scenarios
run in parallel on local processes (``--workers``), or on a Ray cluster with
``--executor ray`` (optional extra ``designer[ray]``).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import math
import multiprocessing
import os
import random
import re
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, TypeGuard

from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

from catalog.names import unknown_name
from catalog.specs import GPUSpec, NICSpec, NumbersNotBools
from designer.errors import Interrupted, UsageError
from designer.interrupts import leave_signals_to
from designer.output import formats as report
from designer.output import study_csv as results
from designer.output.files import check_paths as check_paths_of
from designer.pricing import gpu_price, price_field, with_prices
from designer.question.build import _read_document, build_question
from designer.question.fields import FLAG_FIELDS, META, QUESTION_FIELDS, Question, unknown_field
from solvers.limits import QuestionTooLarge

PRICE_AXIS = "price_scale"  # GPU or NIC name -> multiplier of its catalog price
AXIS_FIELDS = (*QUESTION_FIELDS, PRICE_AXIS)  # a sweep's axes: the question's fields


def _plain_ends(rng: Any, where: str = "") -> Any:
    """A [low, high] range whose ends are numbers: pydantic read ``true`` as 1 and ``"0.8"``
    as 0.8 (NumbersNotBools sees only a field's own value, not a range's ends)."""
    for end in rng if isinstance(rng, (list, tuple)) else ():
        if isinstance(end, bool):
            raise ValueError(f"{where}{str(end).lower()} is not a number; give a number")
        if isinstance(end, str):
            raise ValueError(f"{where}{end!r} is text, not a number; give the number unquoted")
    return rng


class Uncertainty(NumbersNotBools):
    """Monte-Carlo over prices: each scenario is run ``samples`` times with every listed GPU's
    price (purchase or hourly, by the question's pricing) scaled by a uniform draw."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    samples: int = Field(ge=1, le=100_000)
    seed: int = 0
    price_scale: dict[str, tuple[float, float]] = Field(
        default_factory=dict, description="GPU name -> [low, high] multipliers of its catalog price"
    )
    failure_scale: tuple[float, float] | None = Field(
        None,
        description="[low, high] multipliers of the question's interruption rates "
        "(--failure-scale; models/goodput.py)",
    )

    @field_validator("price_scale", mode="before")
    @classmethod
    def _plain_ranges(cls, ranges: Any) -> Any:
        if isinstance(ranges, dict):
            for name, rng in ranges.items():
                _plain_ends(rng, f"{name}: ")
        return ranges

    @field_validator("failure_scale", mode="before")
    @classmethod
    def _plain_failure_range(cls, rng: Any) -> Any:
        return _plain_ends(rng)

    @field_validator("price_scale")
    @classmethod
    def _ranges(cls, ranges: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
        for name, (low, high) in ranges.items():
            if not 0 < low <= high:
                raise ValueError(f"{name}: need 0 < low <= high (got [{low}, {high}])")
        return ranges

    @field_validator("failure_scale")
    @classmethod
    def _failure_range(cls, rng: tuple[float, float] | None) -> tuple[float, float] | None:
        if rng is not None and not 0 <= rng[0] <= rng[1]:
            raise ValueError(f"need 0 <= low <= high (got [{rng[0]}, {rng[1]}])")
        return rng

    @model_validator(mode="after")
    def _something_uncertain(self) -> Uncertainty:
        if not self.price_scale and self.failure_scale is None:
            raise ValueError("give at least one GPU price range or a failure_scale range")
        return self


class Study(NumbersNotBools):
    """A study file: the base question and the axes to sweep (each a non-empty list of values)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    base: Question = Field(default_factory=Question)
    axes: dict[str, list[Any]] = Field(
        description="question field -> values; the cross product is run"
    )
    explain: bool = Field(
        default=True,
        description="price the binding constraints, for the CSV's top_binding column (the "
        "contract's; false: left empty, about 4x faster)",
    )
    uncertainty: Uncertainty | None = None
    time_limit: float = Field(
        default=60.0, gt=0, description="solver time limit per scenario, seconds"
    )

    @field_validator("axes")
    @classmethod
    def _known_and_non_empty(cls, axes: dict[str, list[Any]]) -> dict[str, list[Any]]:
        if not axes:
            raise ValueError("give at least one axis")
        for name, values in axes.items():
            if name not in AXIS_FIELDS:
                raise ValueError(f"unknown axis {name!r}; use one of {', '.join(AXIS_FIELDS)}")
            if not values:
                raise ValueError(f"axis {name!r} is empty; give at least one value")
            seen: set[str] = set()
            for value in values:  # a repeated value would run twice under one scenario id
                key = json.dumps(value, sort_keys=True, default=str)
                if key in seen:
                    raise ValueError(f"axis {name!r} gives {value!r} twice; give each value once")
                seen.add(key)
        return axes


def schema() -> dict[str, Any]:
    return Study.model_json_schema()


def load_study(path: Path, yes: bool = True, limit: int | None = None) -> Study:
    """The study file, validated: its schema, its size (``check_size``: over ``limit``
    scenarios it needs ``yes``), then the base and every axis value."""
    doc = _read_document(path, "a study file (its format: designer sweep --schema)")
    try:
        study = Study.model_validate(doc)
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(x) for x in first["loc"] if not _UNION_TAG.match(str(x)))
        msg = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            msg = _unknown_study_field(first["loc"])
        elif first["loc"][0] == "base" and not isinstance(first.get("input"), dict):
            msg += f" (got {first.get('input')!r})"
        raise UsageError(f"{path}: {loc}: {msg}") from err
    check_size(study, yes, limit)  # before the per-value checks, which build questions
    _check_model_files(path, study)
    # every scenario must be a valid question: check the base and every axis value first
    for values in _cross(study):
        _check_scenario(path, study, values)
    _check_distinct(path, study)
    return study


def _unknown_study_field(loc: tuple) -> str:
    """Why a study's key is unknown and the fix: in ``base``, as a question file says it
    (designer.question.fields.unknown_field: ``gpu`` for ``gpus``, the study's own
    ``time_limit``); at the top level, a question field that belongs under ``base``."""
    name = str(loc[-1])
    if len(loc) == 2 and loc[0] == "base":
        return unknown_field(name, tuple(Study.model_fields))
    if len(loc) == 1 and (name in QUESTION_FIELDS or "--" + name.replace("_", "-") in FLAG_FIELDS):
        return "a question field: put it under base (or sweep it under axes)"
    return "unknown field; see designer sweep --schema"


SPEC_SUFFIXES = frozenset({".yaml", ".yml", ".json"})  # a model given as a spec file


def _is_spec_file(model: Any) -> TypeGuard[str]:
    """A model given as a spec file's path (not a zoo name, not a spec written inline)."""
    return isinstance(model, str) and Path(model).suffix.lower() in SPEC_SUFFIXES


def _check_model_files(path: Path, study: Study) -> None:
    """Every model spec file the study names is there, from the study's folder: one missing
    there was read from the working folder (as a question file's still is), and the study's
    hash, which reads the file beside the study, missed it (--resume kept stale rows).
    Exit 2 naming the field and the path tried."""
    given = [("axes.model", m) for m in study.axes.get("model", [])]
    if "model" not in study.axes:  # the axis replaces the base's model
        given.append(("base.model", study.base.model))
    for field, model in given:
        tried = path.parent / model if _is_spec_file(model) else None
        if tried is not None and not tried.exists():
            raise UsageError(
                f"no model spec file {tried} (a study's paths are relative to its folder, "
                f"{path.parent}); fix the path (got {model!r})",
                f"{path}: {field}",
            )


_UNION_TAG = re.compile(r"^(float|int|str|bool|none|(dict|list|tuple)\[.*\])$")
"""The member of a union pydantic names in an error's location (``budget.float``)."""


def _cross(study: Study) -> Iterator[dict[str, Any]]:
    """The scenarios that try every axis value once: the first combination, then each other
    value of one axis with the first of the rest (each value is checked with the base; errors
    that only a combination of values makes are the scenario's ``error`` row)."""
    first = {name: values[0] for name, values in study.axes.items()}
    yield first
    for name, values in study.axes.items():
        for value in values[1:]:
            yield {**first, name: value}


def _blame(path: Path, study: Study, values: dict[str, Any], field: str) -> tuple[str, str]:
    """``FILE: axes.FIELD`` or ``FILE: base.FIELD``, and the value given."""
    name = field.split(".")[0]
    value = values[name] if name in values else getattr(study.base, name, None)
    got = "" if "." in field else f" (got {value!r})"
    return f"{path}: {'axes' if name in values else 'base'}.{field}", got


def _check_scenario(path: Path, study: Study, values: dict[str, Any]) -> None:
    """A scenario is a question the designer can build (its numbers, model, catalog and GPU
    and NIC names valid), and its price multipliers name catalog entries: exit 2 naming the
    field and its value otherwise."""
    scales = values.get(PRICE_AXIS, {})
    if not isinstance(scales, dict) or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0
        for v in scales.values()
    ):
        raise UsageError(
            f"each value maps GPU names to positive multipliers (got {scales!r})",
            f"{path}: axes.{PRICE_AXIS}",
        )
    try:
        question = scenario_question(study, values)
    except ValidationError as err:
        first = err.errors()[0]
        where, got = _blame(path, study, values, str(first["loc"][0]))
        raise UsageError(first["msg"].removeprefix("Value error, ") + got, where) from err
    try:
        scenario = build_question(question, str(path), path.parent)
    except ValueError as err:  # UsageError, ModelError, CatalogError
        text = str(err)
        if not text.startswith(f"{path}: "):
            raise UsageError(text, str(path)) from err  # names another file (a catalog file)
        field, _, detail = text.removeprefix(f"{path}: ").partition(": ")
        where, got = _blame(path, study, values, field)
        raise UsageError(detail + ("" if got[6:-1] in detail else got), where) from err
    uncertain = study.uncertainty.price_scale if study.uncertainty else {}
    for name in dict.fromkeys([*scales, *uncertain]):
        if name not in scenario.catalog.gpus and name not in scenario.catalog.nics:
            where = f"axes.{PRICE_AXIS}" if name in scales else f"uncertainty.{PRICE_AXIS}"
            known = [*scenario.catalog.gpus, *scenario.catalog.nics]
            raise UsageError(unknown_name("GPU or NIC", name, known), f"{path}: {where}")
    _check_prices(path, scenario, scales, uncertain)


def _check_prices(
    path: Path, scenario, scales: dict[str, float], uncertain: dict[str, tuple[float, float]]
) -> None:
    """Every scaled price stays within the bounds a --catalog entry's price keeps: the axis's
    multiplier alone, then the uncertainty's lowest and highest draws times it (a draw lies
    between them). Exit 2 naming the field and the multipliers allowed."""
    for name, factor in scales.items():
        why = price_scale_error(scenario, name, float(factor))
        if why:
            raise UsageError(why, f"{path}: axes.{PRICE_AXIS}")
    for name, (low, high) in uncertain.items():
        other = float(scales.get(name, 1.0))
        why = price_scale_error(scenario, name, low, other) or price_scale_error(
            scenario, name, high, other
        )
        if why:
            raise UsageError(why, f"{path}: uncertainty.{PRICE_AXIS}")


def _price_bounds(scenario, name: str) -> tuple[str, float, float, float]:
    """The price field a multiplier of GPU or NIC ``name`` scales (a GPU's by the question's
    pricing), its catalog price, and the least and largest values the catalog allows it
    (catalog.specs, the bounds a --catalog override is held to)."""
    if name in scenario.catalog.gpus:
        field = price_field(scenario.pricing)
        price, info = gpu_price(scenario, name), GPUSpec.model_fields[field]
    else:
        field = "price_usd"
        price, info = scenario.catalog.nics[name].price_usd, NICSpec.model_fields[field]
    low = next((float(m.ge) for m in info.metadata if hasattr(m, "ge")), 0.0)
    high = next((float(m.le) for m in info.metadata if hasattr(m, "le")), math.inf)
    return field, float(price), low, high


def price_scale_error(scenario, name: str, factor: float, other: float = 1.0) -> str | None:
    """Why ``factor`` (times ``other``, the axis's multiplier under an uncertainty draw) cannot
    scale ``name``'s price, or None: the scaled price must stay within the catalog's bounds for
    that price, as an override's must (1e-15 divided by zero in the solver's bounds; 1e10 on a
    NIC overflowed its 64-bit sums, with advice about the wrong input)."""
    field, price, low, high = _price_bounds(scenario, name)
    scaled = price * factor * other
    if low <= scaled <= high:
        return None
    with_axis = f" (times {other:g} from axes.{PRICE_AXIS})" if other != 1.0 else ""
    least = _sig(low / (price * other), up=True)
    most = f"{_sig(high / (price * other), up=False):.3g}"
    allowed = f"from {least:.3g} to {most}" if least > 0 else f"up to {most}"
    return (
        f"{name} x {factor:g}{with_axis} sets its {field} to {scaled:g}, outside the "
        f"catalog's {low:g} to {high:g}; give {name} a multiplier {allowed}"
    )


def _sig(x: float, up: bool) -> float:
    """``x`` to three significant digits, rounded up or down, so that the range a message
    shows lies inside the range allowed."""
    if x <= 0:
        return 0.0  # a price the catalog allows to be free (a NIC)
    step = 10.0 ** (math.floor(math.log10(x)) - 2)
    return (math.ceil(x / step - 1e-9) if up else math.floor(x / step + 1e-9)) * step


NAME_LISTS = ("gpus", "nics", "ignore")  # sets of names: order and repeats do not matter


def _axis_key(study: Study, name: str, value: Any, base: Path = Path()) -> str:
    """An axis value as the scenario reads it (1M, 1000K and 1000000 one budget; 90d and
    2160h one deadline; {h100-sxm: 1} and {h100-sxm: 1.0} one price multiplier; [h200,
    h100-sxm] and [h100-sxm, h200, h200] one set of GPUs; q/a.yaml and ./q/a.yaml one file
    from ``base``, the study's folder), as text."""
    if name == PRICE_AXIS:
        return json.dumps({k: float(v) for k, v in value.items()}, sort_keys=True)
    parsed = scenario_question(study, {name: value}).model_dump()[name]
    if name in NAME_LISTS:
        parsed = sorted(set(parsed))
    elif name == "catalog":  # in order: a later file overrides an earlier one
        parsed = [str((base / c).resolve()) for c in parsed]
    elif name == "model" and _is_spec_file(parsed):
        parsed = str((base / parsed).resolve())
    click_type = META[name].click_type
    if isinstance(parsed, str) and hasattr(click_type, "value_of"):
        parsed = click_type.value_of(parsed)  # a suffixed number
    if isinstance(parsed, int) and not isinstance(parsed, bool):
        parsed = float(parsed)
    return json.dumps(parsed, sort_keys=True, default=str)


def _check_distinct(path: Path, study: Study) -> None:
    """No axis gives one value twice in two spellings (``[1M, 1000000]`` ran the scenario
    twice under two ids; the schema refuses the same text twice): exit 2 naming the axis."""
    for name, values in study.axes.items():
        seen: dict[str, Any] = {}
        for value in values:
            key = _axis_key(study, name, value, path.parent)
            if key in seen:
                raise UsageError(
                    f"{seen[key]!r} and {value!r} are the same value; give each value once",
                    f"{path}: axes.{name}",
                )
            seen[key] = value


def _question_values(values: dict[str, Any]) -> dict[str, Any]:
    """The axis values that are question fields (not the sample index or price multipliers)."""
    return {k: v for k, v in values.items() if k not in ("sample", PRICE_AXIS)}


def scenario_question(study: Study, values: dict[str, Any]) -> Question:
    """The base question with the scenario's axis values, validated (a copy with the values
    put in unvalidated kept a plain integer where the schema holds a float or text, and
    pydantic warned about it on every dump: issue 20, 22). ValidationError if invalid."""
    # the base's fields as written (exclude_unset): a field left out stays unset, as in a
    # question file (--evidence not given searches the named GPUs whatever their evidence)
    base = study.base.model_dump(exclude_unset=True)
    return Question.model_validate({**base, **_question_values(values)})


def scenarios(study: Study) -> Iterator[dict[str, Any]]:
    names = list(study.axes)
    for combo in itertools.product(*(study.axes[n] for n in names)):
        values = dict(zip(names, combo, strict=True))
        if study.uncertainty is None:
            yield values
        else:
            for k in range(study.uncertainty.samples):
                yield {**values, "sample": k}


MAX_SCENARIOS = 100_000  # a larger study asks for --yes (a 1000 x 1000 study runs for days)
MAX_SCENARIOS_EVER = 1_000_000
"""A study of more scenarios is refused even with --yes, before any is built (issue 33: the
run lists its scenarios, about 1 KB each; 10^12 of them exhausted the memory)."""


def scenario_count(study: Study) -> int:
    """How many scenarios (rows) the study runs: the axes' product, times the samples."""
    n = math.prod(len(values) for values in study.axes.values())
    return n * (study.uncertainty.samples if study.uncertainty is not None else 1)


def check_size(study: Study, yes: bool, limit: int | None = None) -> None:
    """Refuse (exit 2) a study over ``limit`` (MAX_SCENARIOS) scenarios unless --yes."""
    n = scenario_count(study)
    limit = MAX_SCENARIOS if limit is None else limit
    if n > MAX_SCENARIOS_EVER:
        raise UsageError(
            f"{n:,} scenarios, more than the {MAX_SCENARIOS_EVER:,} one study may run; "
            "narrow the axes or split the study into several files",
            "STUDY_FILE",
        )
    if n > limit and not yes:
        raise UsageError(
            f"{n:,} scenarios, more than {limit:,}: narrow the axes, or pass --yes "
            "(or a larger --max-scenarios) to run them all",
            "STUDY_FILE",
        )


def price_draws(study: Study, values: dict[str, Any]) -> dict[str, float]:
    """The sample's price multipliers: a deterministic function of the seed and the scenario, so
    every executor and every resume draws the same numbers."""
    u = study.uncertainty
    if u is None or "sample" not in values:
        return {}
    key = f"{u.seed}:{json.dumps(values, sort_keys=True, default=str)}"
    rng = random.Random(int(hashlib.sha256(key.encode()).hexdigest()[:16], 16))
    return {gpu: rng.uniform(low, high) for gpu, (low, high) in sorted(u.price_scale.items())}


def failure_draw(study: Study, values: dict[str, Any]) -> float | None:
    """The sample's failure-rate multiplier (uncertainty.failure_scale), from a stream of its
    own, so the price draws stay as they were."""
    u = study.uncertainty
    if u is None or u.failure_scale is None or "sample" not in values:
        return None
    key = f"{u.seed}:failures:{json.dumps(values, sort_keys=True, default=str)}"
    rng = random.Random(int(hashlib.sha256(key.encode()).hexdigest()[:16], 16))
    return rng.uniform(*u.failure_scale)


def _with_prices(scenario, scales: dict[str, float]):
    """GPU prices (purchase or hourly, by the pricing) and NIC prices times their multipliers."""
    cat = scenario.catalog
    gpus = {name: gpu_price(scenario, name) * k for name, k in scales.items() if name in cat.gpus}
    nics = {name: cat.nics[name].price_usd * k for name, k in scales.items() if name in cat.nics}
    for name in scales:
        if name not in gpus and name not in nics:
            known = [*cat.gpus, *cat.nics]
            raise UsageError("price_scale: " + unknown_name("GPU or NIC", name, known))
        why = price_scale_error(scenario, name, scales[name])  # a combination not checked ahead
        if why:
            raise UsageError(why, PRICE_AXIS)
    return with_prices(scenario, gpus, nics) if scales else scenario


def scenario_id(values: dict[str, Any]) -> str:
    text = json.dumps(values, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def run_one(study_json: str, values: dict[str, Any], origin: str) -> dict[str, Any]:
    """Solve one scenario (in a worker process); returns its CSV row."""
    # lazy: the solver stack (OR-Tools, numpy) loads in the workers that solve, not in
    # designer report, which reads a sweep's CSV through this module without solving
    from designer.compare import compare  # noqa: F401  (imports warm the worker)
    from solvers import solve_cpsat
    from solvers.explain import binding_constraints

    study = Study.model_validate_json(study_json)
    question = scenario_question(study, values)
    row: dict[str, Any] = {"scenario": scenario_id(values)}
    for k, v in values.items():  # an axis named like a plan column under its own column
        row[axis_column(k) if k in study.axes else k] = (
            json.dumps(v) if isinstance(v, (list, dict)) else v
        )
    scales = price_draws(study, values)
    for gpu, factor in values.get(PRICE_AXIS, {}).items():
        scales[gpu] = scales.get(gpu, 1.0) * float(factor)
    if scales:
        row["price_scales"] = json.dumps({k: round(v, 6) for k, v in scales.items()})
    try:
        scenario = _with_prices(build_question(question, origin, Path(origin).parent), scales)
        draw = failure_draw(study, values)
        if draw is not None:
            row["failure_draw"] = round(draw, 6)
            scenario = scenario.with_changes(failure_scale=scenario.failure_scale * draw)
        res = solve_cpsat(scenario, time_limit_s=study.time_limit)
    except (UsageError, QuestionTooLarge) as err:  # that scenario's error, not the study's
        row.update({"status": "error", "error": str(err)})
        return row
    row["status"] = res.status
    if res.best is not None:
        row.update(report._plain(res.best.as_dict(1)))
        row.update(report.evidence_row(report.plan_evidence(scenario, res.best)))
        if study.explain:
            binding = binding_constraints(
                scenario,
                res.best,
                res.candidates,
                time_limit_s=study.time_limit,
                plan_proved=res.status == "optimal",
            )
            row["top_binding"] = report.top_binding(binding)
    return row


PLAN_CSV_COLUMNS = frozenset([*report.CSV_COLUMNS, *report.EVIDENCE_COLUMNS])
"""The columns a scenario's plan fills (its evidence's too), named as optimize's CSV has them."""


def axis_column(name: str) -> str:
    """An axis's CSV column: its name, or ``axes.NAME`` when a plan column has that name
    (``precision``, ``evidence``, ``dispatcher``), so that both keep their values: the plan
    wrote over the axis's value, under two columns of one name."""
    return f"axes.{name}" if name in PLAN_CSV_COLUMNS else name


def columns(study: Study) -> list[str]:
    return [
        "scenario",
        *(axis_column(name) for name in study.axes),
        *(["sample", "price_scales"] if study.uncertainty else []),
        *(["failure_draw"] if study.uncertainty and study.uncertainty.failure_scale else []),
        "status",
        *report.CSV_COLUMNS,  # the plan's columns, rank first (1: the scenario's plan)
        "error",
        *report.EVIDENCE_COLUMNS,
    ]


def study_files(study: Study, origin: str) -> list[Path]:
    """The files a study reads besides itself: catalog files and model spec files, in the base
    and in the axes (relative paths from the study's folder)."""
    base = Path(origin).parent
    questions = [study.base.model_dump(), *({k: v} for k, vs in study.axes.items() for v in vs)]
    names: list[str] = []
    for q in questions:
        catalogs = q.get("catalog") or []
        names += [str(c) for c in catalogs] if isinstance(catalogs, list) else []
        model = q.get("model")
        if _is_spec_file(model):
            names.append(model)
    paths = [Path(n) if Path(n).is_absolute() else base / n for n in names]
    return list(dict.fromkeys(paths))


def digest(study: Study, origin: str) -> str:
    """The study's hash, written in every row's ``study`` column (designer.output.study_csv)."""
    return results.study_hash(study.model_dump_json(), study_files(study, origin))


def check_paths(study: Study, origin: str, csv_path: Path, plot: Path | None) -> None:
    """Before any scenario runs: the results CSV and the plot are writable, and neither is the
    study file, a file it reads, nor the other output (exit 2 naming both)."""
    inputs = {"STUDY_FILE": [Path(origin)], "the study's files": study_files(study, origin)}
    check_paths_of({"--csv": csv_path, "--plot": plot}, inputs)


def check_executor(executor: str, address: str | None) -> None:
    """Before any work: --address names a Ray cluster, so it needs --executor ray (the local
    executor ignored it, and the user believed the study ran on the cluster)."""
    if address is not None and executor != "ray":
        raise UsageError(
            "needs --executor ray (the local executor has no cluster to reach); add "
            "--executor ray or drop --address",
            "--address",
        )


def run_study(
    study: Study,
    origin: str,
    csv_path: Path,
    resume: bool,
    workers: int,
    executor: str = "local",
    address: str | None = None,
    progress: Callable[[int, int, float], None] | None = None,
) -> list[dict[str, Any]]:
    """Run every scenario not yet in ``csv_path`` (with ``resume``); rows appended as they finish,
    the file locked meanwhile (designer.output.study_csv)."""
    key = digest(study, origin)
    cols = [*columns(study), results.STUDY_COLUMN]
    study_json = study.model_dump_json(exclude_unset=True)  # the workers' base as written
    rows: list[dict[str, Any]] = []
    with results.open_results(csv_path, cols, key, resume) as out:
        todo = [v for v in scenarios(study) if scenario_id(v) not in out.done]
        start = time.perf_counter()
        run = _execute(study_json, todo, origin, workers, executor, address, out.fd)
        try:
            for row in run:
                results.append_row(out, row, key)
                rows.append(row)
                if progress:
                    progress(len(rows), len(todo), time.perf_counter() - start)
        except KeyboardInterrupt as err:  # SIGINT, or SIGTERM (designer.interrupts)
            run.close()  # the workers stopped before the lock is let go
            raise type(err)(
                f"{len(rows)} of {len(todo)} scenarios run and kept in {csv_path}; rerun "
                "with --resume to finish the study"
            ) from err
    return rows


def _execute(
    study_json: str,
    todo: list[dict[str, Any]],
    origin: str,
    workers: int,
    executor: str,
    address: str | None,
    locked_fd: int | None = None,
):
    if not todo:
        return
    if executor == "ray":
        try:
            import ray
        except ImportError as err:
            raise UsageError(
                "--executor: ray is not installed; pip install 'designer[ray]'"
            ) from err
        started_here = not ray.is_initialized()
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
        try:
            cpus = int(ray.cluster_resources().get("CPU", 1))
            yield from _ray_in_flight(ray, study_json, todo, origin, IN_FLIGHT_PER_WORKER * cpus)
        finally:
            if started_here and address is None:
                ray.shutdown()  # a local instance we started ourselves
        return
    if workers <= 1:
        for values in todo:
            yield run_one(study_json, values, origin)
        return
    with _pool(min(workers, len(todo)), locked_fd) as pool:  # no idle workers started
        try:
            yield from _in_flight(pool, study_json, todo, origin, IN_FLIGHT_PER_WORKER * workers)
        except BrokenProcessPool as err:  # a worker killed (a signal, out of memory)
            raise Interrupted(
                "a sweep worker died before its scenario finished (killed?); the rows "
                "written so far are kept: rerun with --resume to finish the study"
            ) from err
        except BaseException:  # a signal, or the sweep stopped: no worker outlives it
            _stop_workers(pool)
            raise


IN_FLIGHT_PER_WORKER = 4
"""Scenarios submitted to the local pool ahead of the results, per worker: submitting a
whole study at once held a work item per scenario (a 1,000,000-scenario study reached
2.4 GB and had written 15 rows after 25 s)."""


def _windowed(
    submit: Callable[[dict[str, Any]], Any],
    finished: Callable[[list[Any]], tuple[list[dict[str, Any]], list[Any]]],
    todo: list[dict[str, Any]],
    most: int,
) -> Iterator[dict[str, Any]]:
    """The rows of ``todo``'s scenarios as they finish, at most ``most`` submitted ahead of
    them: ``submit`` starts one scenario (a handle), ``finished`` waits for some of the
    running handles and returns their rows and the handles still running. At least one is
    in flight (a cluster reporting no CPU would otherwise run nothing)."""
    most = max(1, most)
    queued = iter(todo)
    running: list[Any] = []
    while True:
        running += [submit(values) for values in itertools.islice(queued, most - len(running))]
        if not running:
            return
        rows, running = finished(running)
        yield from rows


def _in_flight(
    pool: ProcessPoolExecutor, study_json: str, todo: list[dict[str, Any]], origin: str, most: int
) -> Iterator[dict[str, Any]]:
    """_windowed on the local pool."""

    def finished(running: list[Future]) -> tuple[list[dict[str, Any]], list[Any]]:
        done, rest = wait(running, return_when=FIRST_COMPLETED)
        return [fut.result() for fut in done], list(rest)

    def submit(values: dict[str, Any]) -> Future:
        return pool.submit(run_one, study_json, values, origin)

    return _windowed(submit, finished, todo, most)


def _ray_in_flight(
    ray: Any, study_json: str, todo: list[dict[str, Any]], origin: str, most: int
) -> Iterator[dict[str, Any]]:
    """_windowed on a ray cluster (a whole study was submitted at once), the study put in
    the object store once."""
    remote, study = ray.remote(run_one), ray.put(study_json)

    def finished(running: list[Any]) -> tuple[list[dict[str, Any]], list[Any]]:
        ready, rest = ray.wait(running, num_returns=1)
        return [ray.get(ready[0])], rest

    return _windowed(lambda values: remote.remote(study, values, origin), finished, todo, most)


def local_workers(requested: int | None, force: bool = False) -> tuple[int, str | None]:
    """The local worker processes, and a note when the request was capped: the cores by
    default, and no more than the cores unless forced (500 workers on 2 cores only
    thrash; issue 20)."""
    cores = os.cpu_count() or 1
    if requested is None:
        return cores, None
    if requested > cores and not force:
        return cores, f"--workers {requested} capped at this machine's {cores} cores (--force)"
    return requested, None


def _pool(workers: int, locked_fd: int | None) -> ProcessPoolExecutor:
    """Local workers (``_worker_init``); forked ones close their copy of the locked results
    file, so that a worker orphaned by a kill does not keep the lock."""
    if multiprocessing.get_start_method() != "fork":
        locked_fd = None
    init = (locked_fd, os.getpid())
    return ProcessPoolExecutor(workers, initializer=_worker_init, initargs=init)


def _worker_init(locked_fd: int | None, sweep_pid: int) -> None:
    """A worker leaves signals to the sweep (designer.interrupts.leave_signals_to: the
    sweep decides and stops its workers, and a worker dies with it)."""
    if locked_fd is not None:
        os.close(locked_fd)
    leave_signals_to(sweep_pid)


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """Cancel what has not started and end the workers now (SIGTERM, then SIGKILL to one
    that lingers), waiting for each: none is left running, none adopted by PID 1."""
    processes = list((getattr(pool, "_processes", None) or {}).values())  # public in 3.14
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in processes:
        with contextlib.suppress(ProcessLookupError, ValueError):
            proc.terminate()
    for proc in processes:
        proc.join(timeout=5)
        if proc.is_alive():
            proc.kill()
            proc.join(timeout=5)


def print_progress(done: int, total: int, elapsed: float) -> None:
    rate = done / elapsed if elapsed > 0 else 0.0
    eta = (total - done) / rate if rate > 0 else float("inf")
    width = 30
    filled = int(width * done / total) if total else width
    bar = "#" * filled + "-" * (width - filled)
    sys.stderr.write(f"\r[{bar}] {done}/{total} scenarios, {rate:.2f}/s, ETA {eta:,.0f} s ")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def outcome(n: int, csv_path: Path, stats: dict[str, dict[str, float]] | None) -> str:
    """What a sweep prints when its rows are written: how many ran and where, then the
    Monte-Carlo study's win shares (``summary``)."""
    line = f"{n} scenarios run, results in {csv_path}"
    return line if stats is None else f"{line}\n{report.summary_table(stats)}"


def summary(csv_path: Path) -> dict[str, dict[str, float]]:
    """Per GPU type: how often it wins (share of scenarios with a plan), days and cost percentiles."""
    rows = report.plan_rows(csv_path)
    out: dict[str, dict[str, float]] = {}
    for gpu in sorted({r["gpu"] for r in rows}):
        mine = [r for r in rows if r["gpu"] == gpu]
        days = sorted(float(r["time_to_train_days"]) for r in mine)
        cost = sorted(float(r["cost_usd"]) for r in mine)
        out[gpu] = {
            "wins": len(mine),
            "win_share": len(mine) / len(rows),
            "days_p10": _quantile(days, 0.1),
            "days_p50": _quantile(days, 0.5),
            "days_p90": _quantile(days, 0.9),
            "cost_p50": _quantile(cost, 0.5),
        }
    return out


def _quantile(values: list[float], q: float) -> float:
    if len(values) == 1:
        return values[0]
    pos = q * (len(values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (pos - lo)
