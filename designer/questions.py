"""Build a solver Scenario from the command line's options, translating bad input into UsageError."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from catalog import CatalogError, load_catalog
from catalog.files import read_document
from catalog.specs import DEFAULT_STACK, FABRICS
from designer.errors import Infeasible, UsageError
from designer.numbers import parse_days, parse_quantity
from models import Assumptions, ModelError, TransformerSpec, resolve_model
from models.moe import require_plannable
from solvers import FAMILIES, Scenario, SolveResult
from solvers.scenario import DEFAULT_MAX_BATCH_TOKENS

if TYPE_CHECKING:
    from solvers.plan import Config

DEFAULT_MODEL = "llama2-70b"
FACILITY_OPTIONS = ("pue", "usd_per_kwh", "rack_power_kw", "oversubscription", "lifetime_years")
DEFAULT_TOKENS = 2e12
EVIDENCE_CHOICES = ("measured", "any")
# Planning defaults for memory the tensors do not account for (README "Memory headroom").
# Reserved: CUDA context and cuBLAS/Transformer Engine workspaces (~0.5-1 GB) plus NCCL's
# buffers, measured at 544-688 MB per communicator on 4 x A100 (NVIDIA/nccl#964, 2023-08)
# and 1.6 GB for one communicator, ~6 GB for three or more with default channels
# (NVIDIA/nccl#864, 2023-06); a Megatron job holds TP, PP, DP and (with CP) CP groups.
DEFAULT_RESERVED_GB = 3.0
# Headroom: the PyTorch caching allocator's fragmentation (reserved but unallocated
# blocks) and peaks outside the model's count; 5% of the GPU kept free.
DEFAULT_HEADROOM = 0.05


_CATALOGS: dict[tuple[Any, tuple], Any] = {}


def cached_catalog(files: tuple[Path, ...]):
    """load_catalog(files), parsed once per process for the same files as they are on disk
    (keyed by path, size and modification time): a sweep asks for the same catalog in
    every scenario, and parsing its YAML cost about a quarter of a scenario's time. The
    catalog is immutable (questions derive changed copies)."""
    key = []
    for f in files:
        try:
            st = Path(f).stat()
            key.append((str(Path(f).resolve()), st.st_size, st.st_mtime_ns))
        except OSError:
            return load_catalog(list(files))  # the loader names the file and the fix
    k = (load_catalog, tuple(key))  # the loader too: a replaced one (tests) reads afresh
    if k not in _CATALOGS:
        if len(_CATALOGS) >= 32:
            _CATALOGS.clear()
        _CATALOGS[k] = load_catalog(list(files))
    return _CATALOGS[k]


def build_scenario(
    *,
    model: str | TransformerSpec = DEFAULT_MODEL,
    tokens: float = DEFAULT_TOKENS,
    seq_len: int | None = None,
    budget: float | None = None,
    deadline: float | None = None,
    objective: str | None = None,
    pricing: str = "capex",
    gpus: tuple[str, ...] = (),
    nics: tuple[str, ...] = (),
    catalog_files: tuple[Path, ...] = (),
    max_gpus: int | None = None,
    gpu_caps: dict[str, int] | None = None,
    max_batch_tokens: float | None = None,
    min_batch_tokens: float | None = None,
    precision: str = "bf16",
    ignore: tuple[str, ...] = (),
    dp_overlap: float = 0.0,
    memory_overhead: float = 0.0,
    reserved_gb: float = DEFAULT_RESERVED_GB,
    headroom: float = DEFAULT_HEADROOM,
    fabric: str = "any",
    power_cap: float | None = None,
    max_racks: int | None = None,
    pue: float | None = None,
    usd_per_kwh: float | None = None,
    rack_power_kw: float | None = None,
    oversubscription: float | None = None,
    lifetime_years: float | None = None,
    stack: str = DEFAULT_STACK,
    evidence: str = "measured",
) -> Scenario:
    spec = model if isinstance(model, TransformerSpec) else resolve_model(model)
    cat = cached_catalog(tuple(catalog_files))
    if evidence not in EVIDENCE_CHOICES:
        raise UsageError(f"--evidence: unknown value {evidence!r}; use measured or any")
    try:
        cat = cat.with_stack(stack)
    except CatalogError as err:
        raise UsageError(f"--stack: {err}") from err
    facility = {
        "pue": pue,
        "usd_per_kwh": usd_per_kwh,
        "rack_power_kw": rack_power_kw,
        "oversubscription": oversubscription,
        "lifetime_years": lifetime_years,
    }
    for name, value in facility.items():
        if value is not None:
            try:
                cat = cat.with_facility(**{name: value})
            except ValidationError as err:
                msg = err.errors()[0]["msg"]
                raise UsageError(f"--{name.replace('_', '-')}: {msg} (got {value!r})") from err
    if power_cap is not None and power_cap <= 0:
        raise UsageError(f"--power-cap: must be positive MW (got {power_cap!r})")
    if max_racks is not None and max_racks < 1:
        raise UsageError(f"--max-racks: must allow at least one rack (got {max_racks!r})")
    for g in gpus:
        if g not in cat.gpus:
            raise UsageError(f"--gpu: unknown GPU {g!r}; choose from {', '.join(sorted(cat.gpus))}")
    for g, cap in (gpu_caps or {}).items():
        if g not in cat.gpus:
            raise UsageError(
                f"--gpu-cap: unknown GPU {g!r}; choose from {', '.join(sorted(cat.gpus))}"
            )
        if int(cap) < 1:
            raise UsageError(f"--gpu-cap: {g}={cap} must allow at least one GPU")
    for n in nics:
        if n not in cat.nics:
            raise UsageError(f"--nic: unknown NIC {n!r}; choose from {', '.join(sorted(cat.nics))}")
    for f in ignore:
        if f not in FAMILIES:
            raise UsageError(
                f"--ignore: unknown constraint {f!r}; choose from {', '.join(FAMILIES)}"
            )
    if objective is None:
        objective = "time" if budget is not None or deadline is None else "cost"
    if objective == "time" and budget is None and max_gpus is None and not gpu_caps:
        raise UsageError(
            "--budget: the time objective needs a budget (or --max-gpus); e.g. --budget 30M"
        )
    if objective == "cost" and deadline is None:
        raise UsageError("--deadline: the cost objective needs a deadline; e.g. --deadline 90d")
    ceiling = DEFAULT_MAX_BATCH_TOKENS if max_batch_tokens is None else max_batch_tokens
    s = seq_len or spec.seq_len
    if ceiling < s:
        raise UsageError(
            f"--max-batch-tokens: {ceiling:,.0f} is below one sequence of {s:,} tokens"
        )
    if min_batch_tokens is not None and min_batch_tokens > ceiling:
        raise UsageError("--min-batch-tokens: the floor is above the ceiling (--max-batch-tokens)")
    if fabric not in FABRICS:
        raise UsageError(f"--fabric: unknown fabric {fabric!r}; use one of {', '.join(FABRICS)}")
    if not 0 <= headroom < 1:
        raise UsageError(f"--headroom: must be a fraction in [0, 1) (got {headroom!r})")
    precisions = ("bf16", "fp8") if precision == "any" else (precision,)
    unmeasured: frozenset[tuple[str, str]] = frozenset()
    if gpus:
        chosen = tuple(gpus)
    elif evidence == "any":
        chosen = tuple(cat.gpus)
    else:  # the GPUs, and precisions, with measured runs under the stack
        measured = {
            (g, p)
            for g, gpu_spec in cat.gpus.items()
            for p in precisions
            if gpu_spec.evidence is not None and p in gpu_spec.evidence.precisions
        }
        chosen = tuple(g for g in cat.gpus if any((g, p) in measured for p in precisions))
        unmeasured = frozenset((g, p) for g in chosen for p in precisions) - measured
        if not chosen:
            raise UsageError(
                f"--evidence: no catalog GPU has measured {'/'.join(precisions)} runs under "
                f"stack {stack}; pass --evidence any, --precision any or name GPUs with --gpu"
            )
    chosen = _with_fitting_nics(cat, chosen, nics, FABRICS[fabric], explicit=bool(gpus))
    if precision == "fp8":
        chosen = tuple(g for g in chosen if cat.gpu(g).dense_fp8_tflops is not None)
        if not chosen:
            raise UsageError("--precision: none of the chosen GPUs supports fp8")
    try:
        return Scenario(
            spec=spec,
            catalog=cat,
            tokens=tokens,
            seq_len=s,
            gpus=chosen,
            nics=tuple(nics) if nics else tuple(cat.nics),
            objective=objective,
            pricing=pricing,
            power_cap_mw=power_cap,
            max_racks=max_racks,
            budget_usd=budget,
            deadline_days=deadline,
            max_gpus=max_gpus,
            gpu_caps=tuple(sorted((g, int(c)) for g, c in (gpu_caps or {}).items())),
            max_batch_tokens=ceiling,
            min_batch_tokens=min_batch_tokens,
            precisions=precisions,
            assumptions=Assumptions(
                dp_overlap=dp_overlap,
                memory_overhead_fraction=memory_overhead,
                runtime_reserved_gb=reserved_gb,
                memory_headroom_fraction=headroom,
            ),
            fabric=FABRICS[fabric],
            disabled=frozenset(ignore),
            catalog_files=tuple(str(p) for p in catalog_files),
            stack=stack,
            evidence=evidence,
            unmeasured=unmeasured,
        )
    except CatalogError as err:
        raise UsageError(str(err)) from err


def _with_fitting_nics(cat, chosen, nics, fabric: str, explicit: bool) -> tuple[str, ...]:
    """The chosen GPUs whose servers take one of the question's NICs on its fabric; a GPU
    the user named that takes none is an error naming the options to change."""
    names = tuple(nics) if nics else None
    kept = tuple(g for g in chosen if cat.nics_for(cat.gpu(g), names, fabric))
    missing = [g for g in chosen if g not in kept]
    if missing and (explicit or not kept):
        g = cat.gpu(missing[0])
        takes = ", ".join(n.name for n in cat.nics_for(g)) or "none in the catalog"
        option = "--nic" if names else "--fabric"
        raise UsageError(
            f"{option}: no NIC of the question fits {g.name} servers"
            f"{'' if fabric == 'any' else f' on {fabric}'} (they take {takes}); "
            "change --nic or --fabric"
        )
    return kept


# ---------------------------------------------------------------- question and plan files
class QuestionFile(BaseModel):
    """A question in a file: optimize's options, with the same suffixes (30M, 2T, 90d)."""

    model_config = ConfigDict(extra="forbid")

    model: str | dict[str, Any] = DEFAULT_MODEL
    tokens: float | str = DEFAULT_TOKENS
    seq_len: int | None = Field(default=None, ge=1)
    budget: float | str | None = None
    deadline: float | str | None = None
    objective: Literal["time", "cost"] | None = None
    pricing: Literal["capex", "cloud", "tco"] = "capex"
    power_cap: float | None = Field(default=None, gt=0, description="MW")
    max_racks: int | str | None = None
    pue: float | None = Field(default=None, ge=1, le=5)
    usd_per_kwh: float | None = Field(default=None, ge=0, le=100)
    rack_power_kw: float | None = Field(default=None, gt=0, le=10_000)
    oversubscription: float | None = Field(default=None, ge=1, le=16)
    lifetime_years: float | None = Field(default=None, gt=0, le=50)
    gpus: list[str] = []
    nics: list[str] = []
    catalog: list[str] = []
    max_gpus: int | str | None = None
    gpu_caps: dict[str, int] = {}
    max_batch_tokens: float | str | None = None
    min_batch_tokens: float | str | None = None
    precision: Literal["bf16", "fp8", "any"] = "bf16"
    ignore: list[str] = []
    dp_overlap: float = Field(default=0.0, ge=0, le=1)
    memory_overhead: float = Field(default=0.0, ge=0, le=1)
    reserved_gb: float = Field(default=DEFAULT_RESERVED_GB, ge=0)
    headroom: float = Field(default=DEFAULT_HEADROOM, ge=0, lt=1)
    fabric: Literal["ib", "ethernet", "any"] = "any"
    stack: Literal["megatron-core", "vtrain-2022"] = "megatron-core"
    evidence: Literal["measured", "any"] = "measured"


def _number(origin: str, field: str, value, days: bool = False, integer: bool = False):
    if value is None:
        return None
    try:
        out = parse_days(str(value)) if days else parse_quantity(str(value))
    except ValueError as err:
        msg = str(err).replace("use K, M, B or T", "use d or h") if days else str(err)
        raise UsageError(f"{origin}: {field}: {msg}") from err
    if out <= 0:
        raise UsageError(f"{origin}: {field}: must be positive (got {value!r})")
    if integer:
        if out != int(out):
            raise UsageError(f"{origin}: {field}: must be a whole number (got {value!r})")
        return int(out)
    return out


def _read_document(path: Path) -> Any:
    doc = read_document(path, UsageError, "a question file or optimize --json output")
    if not isinstance(doc, dict):
        raise UsageError(f"{path}: top level must be a mapping of fields")
    return doc


def _model_from(origin: str, value) -> str | TransformerSpec:
    if isinstance(value, dict):
        try:
            return require_plannable(TransformerSpec.model_validate(value), f"{origin}: model")
        except ValidationError as err:
            first = err.errors()[0]
            loc = ".".join(str(x) for x in first["loc"])
            field = f"model.{loc}" if loc else "model"
            raise UsageError(
                f"{origin}: {field}: {first['msg'].removeprefix('Value error, ')}"
            ) from err
    return value


def load_question_file(path: Path) -> tuple[Scenario, Config | None]:
    """A question file, or a saved optimize --json answer (its question and first plan)."""
    doc = _read_document(path)
    origin = str(path)
    if "question" in doc and "plans" in doc:
        return _from_answer(doc, origin)
    try:
        q = QuestionFile.model_validate(doc)
    except ValidationError as err:
        first = err.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else "question"
        if first["type"] == "extra_forbidden":
            raise UsageError(
                f"{origin}: {field}: unknown field; use optimize's option names"
            ) from err
        got = first.get("input")
        raise UsageError(f"{origin}: {field}: {first['msg']} (got {got!r})") from err
    return build_question(q, origin, path.parent), None


OPTION_TO_FIELD = {
    "--model": "model",
    "--gpu": "gpus",
    "--nic": "nics",
    "--ignore": "ignore",
    "--budget": "budget",
    "--deadline": "deadline",
    "--max-batch-tokens": "max_batch_tokens",
    "--min-batch-tokens": "min_batch_tokens",
    "--precision": "precision",
    "--catalog": "catalog",
    "--stack": "stack",
    "--evidence": "evidence",
}


def build_question(q: QuestionFile, origin: str, base: Path) -> Scenario:
    """A Scenario from a validated question (file paths relative to ``base``); errors name the
    file and its field rather than a command-line option."""
    try:
        return _build_question(q, origin, base)
    except (UsageError, ModelError) as err:
        text = str(err)
        option, _, rest = text.partition(": ")
        if option in OPTION_TO_FIELD:
            raise UsageError(f"{origin}: {OPTION_TO_FIELD[option]}: {rest}") from err
        raise UsageError(text) from err


def _build_question(q: QuestionFile, origin: str, base: Path) -> Scenario:
    model = _model_from(origin, q.model)
    if isinstance(model, str) and Path(model).suffix.lower() in {".yaml", ".yml", ".json"}:
        if not Path(model).is_absolute() and (base / model).exists():
            model = str(base / model)
    return build_scenario(
        model=model,
        tokens=_number(origin, "tokens", q.tokens),
        seq_len=q.seq_len,
        budget=_number(origin, "budget", q.budget),
        deadline=_number(origin, "deadline", q.deadline, days=True),
        objective=q.objective,
        pricing=q.pricing,
        power_cap=q.power_cap,
        max_racks=_number(origin, "max_racks", q.max_racks, integer=True),
        pue=q.pue,
        usd_per_kwh=q.usd_per_kwh,
        rack_power_kw=q.rack_power_kw,
        oversubscription=q.oversubscription,
        lifetime_years=q.lifetime_years,
        gpus=tuple(q.gpus),
        nics=tuple(q.nics),
        catalog_files=tuple(
            (base / c) if not Path(c).is_absolute() else Path(c) for c in q.catalog
        ),
        max_gpus=_number(origin, "max_gpus", q.max_gpus, integer=True),
        gpu_caps=dict(q.gpu_caps),
        max_batch_tokens=_number(origin, "max_batch_tokens", q.max_batch_tokens),
        min_batch_tokens=_number(origin, "min_batch_tokens", q.min_batch_tokens),
        precision=q.precision,
        ignore=tuple(q.ignore),
        dp_overlap=q.dp_overlap,
        memory_overhead=q.memory_overhead,
        reserved_gb=q.reserved_gb,
        headroom=q.headroom,
        fabric=q.fabric,
        stack=q.stack,
        evidence=q.evidence,
    )


def _from_answer(doc: dict[str, Any], origin: str) -> tuple[Scenario, Config | None]:
    from solvers.plan import Config
    from solvers.space import Shape

    q, plans = doc["question"], doc["plans"]
    if not isinstance(q, dict) or not isinstance(plans, list):
        raise UsageError(f"{origin}: question/plans: not an optimize --json answer")
    try:
        precisions = q.get("precisions") or ["bf16"]
        scenario = build_scenario(
            model=_model_from(origin, q.get("model_spec") or q["model"]),
            tokens=float(q["tokens"]),
            seq_len=q.get("seq_len"),
            budget=q.get("budget_usd"),
            deadline=q.get("deadline_days"),
            objective=q.get("objective"),
            pricing=q.get("pricing", "capex"),
            power_cap=q.get("power_cap_mw"),
            max_racks=q.get("max_racks"),
            **{k: v for k, v in (q.get("facility") or {}).items() if k in FACILITY_OPTIONS},
            gpus=tuple(q.get("gpus") or ()),
            nics=tuple(q.get("nics") or ()),
            catalog_files=tuple(Path(c) for c in q.get("catalog_files") or ()),
            max_gpus=q.get("max_gpus"),
            max_batch_tokens=q.get("max_batch_tokens"),
            min_batch_tokens=q.get("min_batch_tokens"),
            precision="any" if len(precisions) > 1 else precisions[0],
            ignore=tuple(q.get("ignored_constraints") or ()),
            dp_overlap=float(q.get("dp_overlap") or 0.0),
            memory_overhead=float(q.get("memory_overhead") or 0.0),
            reserved_gb=float(q.get("reserved_gb") or 0.0),
            # answers saved before the headroom and the fabric choice were planned without them
            headroom=float(q.get("headroom") or 0.0),
            fabric=str(q.get("fabric") or "any"),
            gpu_caps=dict(q.get("gpu_caps") or {}),
            stack=str(q.get("stack") or DEFAULT_STACK),
            evidence=str(q.get("evidence") or "measured"),
        )
    except (KeyError, TypeError, ValueError) as err:
        raise UsageError(
            f"{origin}: question: missing or bad field ({err}); regenerate with optimize --json"
        ) from err
    if not plans:
        return scenario, None
    p = plans[0]
    try:
        shape = Shape(
            p["gpu"],
            int(p["tp"]),
            int(p["cp"]),
            int(p["pp"]),
            int(p["vp"]),
            int(p["micro_batch"]),
            str(p["recompute"]),
            str(p["precision"]),
            (  # the pipeline split (absent from answers saved before uneven splits)
                int(p.get("first_stage_layers") or 0),
                int(p.get("last_stage_layers") or 0),
                bool(p.get("embedding_in_split", False)),
                bool(p.get("loss_in_split", False)),
            ),
        )
        config = Config(
            shape, str(p["nic"]), int(p["nics_per_node"]), int(p["dp"]), int(p["grad_accum"])
        )
    except (KeyError, TypeError, ValueError) as err:
        raise UsageError(f"{origin}: plans[0]: missing or bad field ({err})") from err
    return scenario, config


def evaluate_config(scenario: Scenario, config: Config) -> SolveResult:
    """A given plan as a one-plan result, re-evaluated; violations make it 'infeasible'."""
    from solvers.plan import build_plan

    start = time.perf_counter()
    plan = build_plan(scenario, config)
    if not plan.feasible:
        broken = "; ".join(f"{v.constraint}: {v.detail}" for v in plan.violations)
        raise Infeasible(f"the saved plan breaks the question: {broken}")
    return SolveResult(
        status="feasible",
        solver="given plan",
        wall_s=time.perf_counter() - start,
        gap=None,
        plans=[plan],
        objective_name="time_to_train" if scenario.objective == "time" else "cost",
        objective_unit="days" if scenario.objective == "time" else "USD",
    )
