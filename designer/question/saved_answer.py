"""A saved answer (``optimize``/``explain --json``, ``compare --json``) read back (issue 33):
every plan field is validated like a question's (whole numbers in the decision space's
range, a known precision and recompute mode, finite numbers), so a hand-edited answer exits
2 with one line naming the field instead of reaching ZeroDivisionError or OverflowError; the
columns derived from the decisions (num_gpus, nodes, global_batch) and those every plan
holds alike (zero, sequence_parallel) must agree with them, and the ones the question fixes
(a dense model's ep and etp, the catalog's GPUs per server) with it, since the readers
re-evaluate the decisions and would otherwise ignore an edit to them silently; and
the catalog files the answer was made with are found by their content hash, so that an
answer read in another folder (or after its catalog changed) uses the same catalog or is
refused.

Keys the schema does not name (evidence, ranking, columns later issues add) are kept and
ignored: adding one to the answer needs no change here."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from catalog.files import MAX_DOCUMENT_BYTES, check_input
from designer.errors import UsageError
from models.evaluate import nodes_for
from models.layout import PRECISIONS, RECOMPUTE_MODES
from solvers import limits
from solvers.scenario import PRICINGS

if TYPE_CHECKING:
    from solvers import Scenario

Degree = Annotated[int, Field(ge=1, le=limits.MAX_GPUS)]
Count = Annotated[int, Field(ge=0, le=limits.MAX_GPUS)]
Quantity = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Fraction = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
Finite = Annotated[float, Field(allow_inf_nan=False)]
StrictFinite = Annotated[float, Field(strict=True, allow_inf_nan=False)]
Range = tuple[StrictFinite, StrictFinite | None]
"""A measured range: its low end and its high end (null: unbounded)."""


class _Saved(BaseModel):
    """A saved object's fields, typed as JSON gives them (``_typed``); keys it does not
    name are kept and ignored."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _typed(cls, value: Any, info: ValidationInfo) -> Any:
        """JSON gives numbers and booleans their own types: text or a boolean where a number
        belongs (or text where a boolean does) is refused. A results CSV's cells are all
        text (``context={"csv": True}``): an empty cell is no value there."""
        if info.context and info.context.get("csv"):
            return None if value == "" else value
        if info.field_name not in cls.model_fields:
            return value
        annotation = cls.model_fields[info.field_name].annotation
        kinds = {k for k in _kinds(annotation) if isinstance(k, type)}
        if Range in get_args(annotation) and not isinstance(value, list | None):
            raise ValueError("not a [low, high] pair of numbers")
        if _is_list(annotation):  # its items are typed by their own fields
            if not isinstance(value, list | None):
                raise ValueError("not a list; give [...]")
            return value
        if any(issubclass(k, BaseModel) for k in kinds) and not isinstance(value, dict | None):
            raise ValueError("not an object; give {...}")
        if isinstance(value, bool) and bool not in kinds and kinds & {int, float}:
            raise ValueError(f"{str(value).lower()} is not a number; give a number")
        if isinstance(value, str) and str not in kinds:
            raise ValueError("text where a number or true/false belongs; give it unquoted")
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if number and bool in kinds and not kinds & {int, float}:
            raise ValueError(f"{value!r} is not true or false; give true or false")
        return value


class SavedEvidence(_Saved):
    """A plan's ``evidence`` object (designer.output.formats.plan_evidence): the fields the
    report and the CSVs read."""

    status: str | None = None
    stack: str | None = None
    line: str | None = None
    basis: str | None = None
    runs: Annotated[int, Field(ge=0)] | None = None
    precision_runs: Annotated[int, Field(ge=0)] | None = None
    multi_server_runs: Annotated[int, Field(ge=0)] | None = None
    sources: list[Annotated[str, Field(strict=True)]] | None = None
    mape_pct: Finite | None = None
    worst_pct: Finite | None = None
    error_lo_pct: Finite | None = None
    error_hi_pct: Finite | None = None
    step_time_s_range: Range | None = None
    days_range: Range | None = None
    cost_usd_range: Range | None = None


class SavedPlan(_Saved):
    """One plan of a saved answer: the fields the designer reads back (solvers.plan's
    ``as_dict`` writes them, every column of solvers.columns.PLAN_COLUMNS typed here:
    the report types a results CSV's cells by these fields)."""

    rank: Annotated[int, Field(ge=1)] | None = None
    gpu: str = Field(min_length=1)
    tp: Degree
    cp: Degree
    pp: Degree
    vp: Degree
    dp: Degree
    ep: Degree = 1
    etp: Degree = 1
    micro_batch: Degree
    grad_accum: Annotated[int, Field(ge=1, le=int(limits.MAX_BATCH_TOKENS))]
    recompute: Literal[RECOMPUTE_MODES]  # type: ignore[valid-type]
    precision: Literal[PRECISIONS]  # type: ignore[valid-type]
    nic: str = Field(min_length=1)
    nics_per_node: Degree
    first_stage_layers: Count | None = None
    last_stage_layers: Count | None = None
    embedding_in_split: bool = False
    loss_in_split: bool = False
    hot_spares_per_100: Annotated[float, Field(ge=0, le=100, allow_inf_nan=False)] | None = None
    checkpoint_storage_gb_per_s_per_server: Quantity | None = None
    num_gpus: Degree | None = None
    nodes: Degree | None = None
    gpus_per_node: Degree | None = None
    global_batch: Annotated[int, Field(ge=1)] | None = None
    sequence_parallel: bool | None = None
    zero: Annotated[int, Field(ge=0, le=3)] | None = None  # ZeRO stages 0-3
    step_time_s: Quantity | None = None
    time_to_train_days: Quantity | None = None
    cost_usd: Quantity | None = None
    mfu: Quantity | None = None
    memory_gb_per_gpu: Quantity | None = None
    ideal_time_days: Quantity | None = None
    goodput: Fraction | None = None
    failures_expected: Quantity | None = None
    checkpoint_interval_min: Quantity | None = None
    hot_spare_servers: Annotated[int, Field(ge=0)] | None = None
    cloud_term: str | None = None
    effective_tokens: Quantity | None = None
    critical_batch_tokens: Quantity | None = None
    dispatcher: str | None = None
    evidence: SavedEvidence | None = None

    @property
    def decided_gpus(self) -> int:
        """The GPUs the plan's degrees take (num_gpus, where saved, must equal it)."""
        return self.tp * self.pp * self.dp * self.cp


def _kinds(annotation: Any) -> set[Any]:
    """The plain types an annotation admits (through Annotated, Optional, Literal)."""
    if get_origin(annotation) is Literal:
        return {type(a) for a in get_args(annotation)}
    args = get_args(annotation)
    if not args:
        return {annotation}
    return set().union(*(_kinds(a) for a in args)) if get_origin(annotation) else {annotation}


def _is_list(annotation: Any) -> bool:
    """Whether an annotation (through Optional) admits only a list."""
    if get_origin(annotation) is list:
        return True
    args = [a for a in get_args(annotation) if a is not type(None)]
    return get_origin(annotation) is not Annotated and len(args) == 1 and _is_list(args[0])


def column_kind(column: str) -> type | None:
    """A results CSV column's type (int, float or bool) as the schema reads it, or None for
    text: a plan column (solvers.columns.PLAN_COLUMNS) by its SavedPlan field, an evidence
    column (designer.output.formats.EVIDENCE_COLUMNS) by its SavedEvidence field: ``evidence``
    its status, ``evidence_runs`` its runs, ``days_lo`` and ``days_hi`` the ends of its
    ``days_range``. designer.report.study types a CSV's cells by it."""
    if column in SavedPlan.model_fields:
        annotation = SavedPlan.model_fields[column].annotation
    else:
        key = "status" if column == "evidence" else column.removeprefix("evidence_")
        if column.endswith(("_lo", "_hi")) and f"{column[:-3]}_range" in SavedEvidence.model_fields:
            key = f"{column[:-3]}_range"
        if key not in SavedEvidence.model_fields:
            return None
        annotation = SavedEvidence.model_fields[key].annotation
    kinds = _kinds(annotation)
    return next((k for k in (bool, int, float) if k in kinds), None)


class SavedBinding(_Saved):
    """A binding constraint of the answer (solvers.explain's ``as_dict``)."""

    constraint: str = Field(min_length=1)
    binding: bool | None = None
    decided: bool | None = None
    exact: bool | None = None
    detail: str | None = None
    relaxation: str | None = None
    unit: str | None = None
    slack: Finite | None = None
    improvement_if_relaxed: Finite | None = None
    improvement_pct: Finite | None = None


class SavedBomLine(_Saved):
    item: str = Field(min_length=1)
    quantity: Annotated[int, Field(ge=0)]
    unit_usd: Quantity
    extended_usd: Quantity
    source: str | None = None


class SavedBom(_Saved):
    """The best plan's bill of materials (designer.output.formats.bom_dict)."""

    lines: list[SavedBomLine]
    total_usd: Quantity
    it_kw: Quantity | None = None
    facility_kw: Quantity | None = None
    racks: Annotated[int, Field(ge=0)] | None = None
    fabric_tiers: Annotated[int, Field(ge=0)] | None = None
    switches: Annotated[int, Field(ge=0)] | None = None
    links: Annotated[int, Field(ge=0)] | None = None


class SavedObjective(_Saved):
    name: str | None = None
    value: Finite | None = None
    unit: str | None = None


class SavedFix(_Saved):
    constraint: str
    change: str


class SavedCore(_Saved):
    """One of several conflicts: its constraint families and their smallest fixes."""

    constraints: list[Annotated[str, Field(strict=True)]]
    fixes: list[SavedFix] = []


class SavedConflict(_Saved):
    """An infeasible question's conflict: the constraint families and their smallest fixes."""

    constraints: list[Annotated[str, Field(strict=True)]]
    fixes: list[SavedFix] = []
    # false: one of the explanation's tests ran out of --time-limit (solvers.explain)
    complete: Annotated[bool, Field(strict=True)] = True
    # several conflicts, each needing a change, in the order their fixes apply
    # (solvers.explain.Conflict.cores)
    cores: list[SavedCore] = []


class SavedAlternative(_Saved):
    """A plan beyond the evidence rule (designer.alternatives.as_dicts)."""

    gpu: str = Field(min_length=1)
    tier: str | None = None
    gain_pct: Finite | None = None
    sentence: str
    plan: SavedPlan


class SavedAnswer(_Saved):
    """An answer's fields besides its question and plans (validated where they are read:
    designer.question.build and check_plans): what ``designer report`` shows of it."""

    explanation: str | None = None
    objective: SavedObjective | None = None
    binding: list[SavedBinding] | None = None
    bom: SavedBom | None = None
    conflict: SavedConflict | None = None
    alternatives: list[SavedAlternative] | None = None


Price = Annotated[float, Field(gt=0, allow_inf_nan=False)]
"""A GPU's price: a positive finite number (a catalog price of 0 divided by zero)."""


class SavedBreakeven(_Saved):
    """A ``breakeven --json`` result (designer.output.breakeven_doc.breakeven_dict) besides
    its plans: what ``designer report`` reads of it."""

    gpu: str = Field(min_length=1)
    against: str = Field(min_length=1)
    pricing: Literal[PRICINGS]  # type: ignore[valid-type]
    catalog_price_usd: Price
    breakeven_price_usd: Price | None = None
    wins_at_catalog_price: bool | None = None
    wins_across_search: bool | None = None
    block_usd_per_gpu_hour: Quantity | None = None
    objective: SavedObjective | None = None
    against_status: str | None = None


BREAKEVEN_PLANS = ("gpu", "against")
"""The keys of a breakeven result's ``plans``: the candidate's plan at the break-even price
and the rival's (each null where that side has none)."""


def check_breakeven(doc: dict[str, Any], origin: str) -> None:
    """A saved ``breakeven --json`` result as the report reads it, validated as the other
    saved answers are: its top-level fields (SavedBreakeven) and every plan (saved_plan);
    UsageError naming ``origin`` and the field, one line."""
    try:
        SavedBreakeven.model_validate(doc)
    except ValidationError as err:
        raise UsageError(first_error(err, origin, sep=": ", command="breakeven")) from err
    plans = doc.get("plans")
    if not isinstance(plans, dict):
        raise UsageError(
            f"{origin}: plans: not an object with the {' and '.join(BREAKEVEN_PLANS)} plans; "
            "regenerate with breakeven --json"
        )
    for side in BREAKEVEN_PLANS:
        if side not in plans:
            raise UsageError(
                f"{origin}: plans.{side}: missing (null where that side has no plan); "
                "regenerate with breakeven --json"
            )
    sides = [(f"plans.{k}", plans[k]) for k in BREAKEVEN_PLANS]
    for where, p in [*sides, ("lowest_price_plan", doc.get("lowest_price_plan"))]:
        if p is not None:
            saved_plan(p, f"{origin}: {where}", command="breakeven")


def check_answer(doc: dict[str, Any], origin: str) -> list[tuple[str, SavedPlan]]:
    """A whole saved answer (optimize, explain or compare --json) as the report reads it:
    its plans (check_plans) and its paragraph, objective, binding constraints, bill of
    materials, conflict and alternatives; UsageError naming ``origin`` and the field."""
    checked = check_plans(doc, origin)
    try:
        SavedAnswer.model_validate(doc)
    except ValidationError as err:
        raise UsageError(first_error(err, origin, sep=": ")) from err
    return checked


def saved_plan(p: Any, where: str, csv: bool = False, command: str = "optimize") -> SavedPlan:
    """``p`` validated (``csv``: a results CSV's row, every cell text); UsageError naming
    ``where`` and the field, one line, saying to regenerate it with ``command --json``."""
    if not isinstance(p, dict):
        raise UsageError(f"{where}: not a plan object; regenerate with {command} --json")
    try:
        v = SavedPlan.model_validate(p, context={"csv": csv})
    except ValidationError as err:
        raise UsageError(first_error(err, where, command=command)) from err
    _consistent(v, where, command)
    return v


def _consistent(v: SavedPlan, where: str, command: str = "optimize") -> None:
    """The plan's derived columns, where present, as its decisions make them (nodes, which
    takes the catalog's server, in ``check_against_question``), and ZeRO and
    sequence parallelism as every plan of the designer has them (solvers.decisions: ZeRO-1,
    Megatron-Core's distributed optimizer; sequence parallelism exactly when TP > 1): the
    readers re-evaluate the decisions, so an edited column would be ignored silently.
    UsageError naming ``where`` and the field, one line."""
    checks: list[tuple[str, Any, Any, str]] = [
        (
            "zero",
            v.zero,
            1,
            "{saved} is not 1: the designer plans ZeRO-1 (the distributed optimizer) only, "
            "and the plan's memory and time assume it",
        ),
        (
            "sequence_parallel",
            v.sequence_parallel,
            v.tp > 1,
            "{saved} is not {implied}: a plan uses sequence parallelism exactly when "
            "tp > 1 (tp {tp})",
        ),
        ("num_gpus", v.num_gpus, v.decided_gpus, "{saved} is not tp x pp x dp x cp = {implied}"),
        (
            "global_batch",
            v.global_batch,
            v.micro_batch * v.dp * v.grad_accum,
            "{saved} is not micro_batch x dp x grad_accum = {implied}",
        ),
    ]
    for field, saved, implied, says in checks:
        if saved is not None and implied is not None and saved != implied:
            detail = says.format(saved=json.dumps(saved), implied=json.dumps(implied), tp=v.tp)
            raise UsageError(
                f"{detail}; fix it or regenerate with {command} --json", f"{where}.{field}"
            )


def check_against_question(plans: list[tuple[str, SavedPlan]], scenario: Scenario) -> None:
    """Every plan's fields the question fixes (``plans``: check_plans's, each with where
    it stands): expert parallelism only on a model with experts (build_plan ignores ep on
    a dense model, so an edited one would be ignored silently), and the GPUs per server
    and the servers of the GPU's catalog server. Plans whose GPU the catalog lacks are
    left to the reader that names it. UsageError, one line."""
    for where, v in plans:
        for field in ("ep", "etp"):
            if getattr(v, field) > 1 and not scenario.spec.is_moe:
                raise UsageError(
                    f"{getattr(v, field)} is not 1: {scenario.spec.name} has no experts to "
                    "parallelize; fix it or regenerate with optimize --json",
                    f"{where}.{field}",
                )
        gpu = scenario.catalog.gpus.get(v.gpu)
        if gpu is None:
            continue  # an unknown GPU: named where its plan is read
        per_node = gpu.server.gpus_per_server
        if v.gpus_per_node not in (None, per_node):
            raise UsageError(
                f"{v.gpus_per_node} is not {per_node}, the GPUs of a {v.gpu} server in the "
                "catalog; fix it or regenerate with optimize --json",
                f"{where}.gpus_per_node",
            )
        nodes = nodes_for(v.decided_gpus, gpu)
        if v.nodes not in (None, nodes):
            raise UsageError(
                f"{v.nodes} is not num_gpus / gpus_per_node rounded up = {nodes} ({per_node} "
                f"GPUs per {v.gpu} server); fix it or regenerate with optimize --json",
                f"{where}.nodes",
            )


def first_error(err: ValidationError, where: str, sep: str = ".", command: str = "optimize") -> str:
    """The first of pydantic's errors on one line: where.field: message (got value), and
    to fix it or regenerate it with ``command --json``; a list's item as ``field[i]``."""
    first = err.errors()[0]
    loc = "".join(f"[{x}]" if isinstance(x, int) else f".{x}" for x in first["loc"])
    loc = loc.removeprefix(".")
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"] == "model_type":  # a list's item that is no object (pydantic names the class)
        msg = "not an object; give {...}"
    got = repr(first.get("input"))
    got = got if len(got) <= 60 else got[:57] + "..."
    return f"{where}{sep}{loc}: {msg} (got {got}); fix it or regenerate with {command} --json"


def has_plan(p: Any) -> bool:
    """Whether an entry of an answer's ``plans`` holds a plan (a compare result's row for a
    GPU type without one has its ``status`` and no ``num_gpus``)."""
    return not (isinstance(p, dict) and p.get("num_gpus") in (None, "") and "status" in p)


def check_plans(doc: dict[str, Any], origin: str) -> list[tuple[str, SavedPlan]]:
    """Every plan of an answer validated (a compare result's rows without a plan skipped),
    each with where it stands (``origin: plans[i]``)."""
    plans = doc.get("plans")
    if not isinstance(plans, list):
        raise UsageError(f"{origin}: plans: not a list; regenerate with optimize --json")
    checked = []
    for i, p in enumerate(plans):
        where = f"{origin}: plans[{i}]"
        if not has_plan(p):  # compare: a GPU type without a plan, its row checked alone
            try:
                SavedPlanless.model_validate(p)
            except ValidationError as err:
                raise UsageError(first_error(err, where, command="compare")) from err
            continue
        checked.append((where, saved_plan(p, where)))
    return checked


class SavedPlanless(_Saved):
    """A compare result's row for a GPU type without a plan
    (designer.output.compare_doc.compare_dict): the report names its GPU and status (a row
    without ``gpu`` was a KeyError, a number there a TypeError)."""

    rank: Annotated[int, Field(ge=1)] | None = None
    gpu: str = Field(min_length=1)
    status: str = Field(min_length=1)
    top_binding: str | None = None
    evidence: SavedEvidence | None = None


# ---------------------------------------------------------------- the catalog files it used
CATALOG_HASHES = "catalog_sha256"
CATALOG_PATHS = "catalog_paths"


def file_sha256(path: Path) -> str | None:
    """The file's SHA-256, or None when it is not a readable regular file."""
    try:
        check_input(path, OSError, "a file", MAX_DOCUMENT_BYTES["json"])
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def catalog_record(files: tuple[str, ...] | list[str]) -> dict[str, list[Any]]:
    """What an answer keeps of its catalog files besides their names: each one's absolute
    path and content hash."""
    paths = [Path(f).resolve() for f in files]
    return {
        CATALOG_PATHS: [str(p) for p in paths],
        CATALOG_HASHES: [file_sha256(p) for p in paths],
    }


def saved_catalogs(question: dict[str, Any], origin: str) -> list[str] | None:
    """The catalog files to read an answer's question with: for each file it names, the
    one with the content it was made with (where it was saved, else the name in the working
    folder); None for an answer saved without hashes (read as before). UsageError, one line,
    when no file has that content."""
    names, hashes = question.get("catalog_files"), question.get(CATALOG_HASHES)
    if CATALOG_HASHES not in question:
        return None  # saved before issue 33
    if not isinstance(hashes, list) or not isinstance(names, list) or len(hashes) != len(names):
        raise UsageError(
            f"{origin}: question.{CATALOG_HASHES}: not one hash per catalog file; regenerate "
            "with optimize --json"
        )
    where = question.get(CATALOG_PATHS)
    where = where if isinstance(where, list) and len(where) == len(names) else names
    chosen = []
    for i, (name, saved, digest) in enumerate(zip(names, where, hashes, strict=True)):
        found = next(
            (
                str(c)
                for c in dict.fromkeys((Path(str(saved)), Path(str(name))))
                if file_sha256(c) == digest
            ),
            None,
        )
        if found is None:
            raise UsageError(
                f"{origin}: question.catalog_files[{i}]: {name} is not the catalog file "
                "this answer was made with (its content differs); restore it, or re-run "
                "optimize with the catalog as it is now"
            )
        chosen.append(found)
    return chosen
