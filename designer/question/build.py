"""Turn a question (designer.question.fields) into a solver Scenario, translating bad input into
UsageError that names the option, or the question file and its field."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from catalog import CatalogError, load_catalog
from catalog.cloud import cloud_offers
from catalog.files import read_document
from catalog.names import unknown_name
from catalog.specs import DEFAULT_STACK, FABRICS
from designer.errors import UsageError
from designer.numbers import parse_days, parse_quantity
from designer.question.fields import (
    DEFAULT_EVIDENCE,
    DEFAULT_MODEL,
    DEFAULT_TOKENS,
    EVIDENCE_CHOICES,
    FLAG_FIELDS,
    META,
    QUESTION_FIELDS,
    AnswerKeyError,
    Question,
    answer_key,
    unknown_field,
)
from designer.question.given_plan import GivenPlan, evaluate_given, given_from_answer
from models import Assumptions, TransformerSpec, resolve_model
from models.batch_tokens import DEFAULT_MODEL as DEFAULT_BATCH_TOKENS_MODEL
from models.evidence_rule import RULE_TEXT, pair_evidence
from models.transformer import windowed_sequence_refusal
from solvers import FAMILIES, Scenario, SolveResult
from solvers.scenario import (
    DEFAULT_HEADROOM,
    DEFAULT_MAX_VIRTUAL_STAGES,
    DEFAULT_RESERVED_GB,
    MODEL_CEILING,
    model_ceiling_tokens,
)

if TYPE_CHECKING:
    from catalog import Catalog
    from solvers.plan import Config

__all__ = [
    "build_question",
    "build_scenario",
    "cached_catalog",
    "evaluate_config",
    "load_question_file",
    "scenario_from_options",
]
# the question's facility constants (their answer keys are under `facility`)
FACILITY_OPTIONS = tuple(n for n in QUESTION_FIELDS if answer_key(n).startswith("facility."))


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
    cloud_max_gpus: int | None = None,
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
    stack: str = DEFAULT_STACK,
    evidence: str | None = None,
    max_virtual_stages: int = DEFAULT_MAX_VIRTUAL_STAGES,
    no_failures: bool = False,
    checkpoint_every: float | None = None,
    failure_scale: float = 1.0,
    ep_in_domain: bool = False,
    cp_across_servers: bool = False,
    dispatcher: str = "alltoall",
    batch_tokens_model: str = DEFAULT_BATCH_TOKENS_MODEL,
    **facility: float | None,
) -> Scenario:
    """The Scenario a question asks (its fields, parsed; ``facility``: FACILITY_OPTIONS)."""
    spec = model if isinstance(model, TransformerSpec) else resolve_model(model)
    cat = _question_catalog(tuple(catalog_files), stack, facility)
    level = evidence or DEFAULT_EVIDENCE
    gpu_caps = _check_names(cat, gpus, gpu_caps or {}, nics, ignore, level, fabric)
    _check_limits(power_cap, max_racks, headroom)
    objective = _objective(objective, budget, deadline, max_gpus, gpu_caps)
    limits_ = (max_batch_tokens, min_batch_tokens)
    s, batch, precisions = _sequence(spec, tokens, seq_len, precision, batch_tokens_model, limits_)
    chosen, unmeasured = _searched_gpus(cat, gpus, precisions, (level, evidence is not None), stack)
    chosen = _fitting(cat, chosen, nics, fabric, precision, explicit=bool(gpus))
    planning = _planning(dp_overlap, memory_overhead, reserved_gb, headroom, cp_across_servers)
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
            budget_usd=budget,
            deadline_days=deadline,
            max_gpus=max_gpus,
            **_caps_and_rental(cat, chosen, gpu_caps, bool(gpus), pricing, cloud_max_gpus),
            power_cap_mw=power_cap,
            max_racks=max_racks,
            precisions=precisions,
            **batch,
            assumptions=planning,
            fabric=FABRICS[fabric],
            catalog_files=tuple(str(p) for p in catalog_files),
            stack=stack,
            evidence=level,
            unmeasured=unmeasured,
            max_virtual_stages=max_virtual_stages,
            **_goodput(no_failures, checkpoint_every, failure_scale),
            **_rules(ignore, ep_in_domain, dispatcher),
        )
    except CatalogError as err:
        raise UsageError(str(err)) from err


def _fitting(cat, chosen, nics, fabric: str, precision: str, explicit: bool):
    """The searched GPUs that have a fitting NIC on the fabric, the precision and a rack
    (_with_fitting_nics, _with_precision, _with_fitting_racks, in that order)."""
    chosen = _with_fitting_nics(cat, chosen, nics, FABRICS[fabric], explicit=explicit)
    chosen = _with_precision(cat, chosen, precision)
    return _with_fitting_racks(cat, chosen, explicit=explicit)


def _planning(
    dp_overlap: float, overhead: float, reserved_gb: float, headroom: float, cp_across: bool
):
    """The planning assumptions a question sets (models.layout.Assumptions)."""
    return Assumptions(
        dp_overlap=dp_overlap,
        memory_overhead_fraction=overhead,
        runtime_reserved_gb=reserved_gb,
        memory_headroom_fraction=headroom,
        cp_across_servers=cp_across,
    )


def check_window(spec: TransformerSpec, seq_len: int) -> None:
    """A sequence longer than the model's sliding window is a usage error naming --seq-len
    (models.transformer.windowed_sequence_refusal): optimize's questions and evaluate's."""
    windowed = windowed_sequence_refusal(spec, seq_len)
    if windowed is not None:
        raise UsageError(windowed, "--seq-len")


def _sequence(spec, tokens, seq_len, precision: str, model: str, limits_: tuple) -> tuple:
    """The sequence length, the Scenario's batch fields and the precisions searched: the
    ceiling (--max-batch-tokens, or the default of the batch-tokens model) checked against
    one sequence, the floor (--min-batch-tokens) against the ceiling and the model's cap."""
    ceiling, floor = limits_
    s = seq_len or spec.seq_len
    check_window(spec, s)
    # the default is the Scenario's (solvers.scenario.model_ceiling_tokens, clamped to the
    # CP-SAT model's limit): the CLI checks against it and hands on the sentinel
    model_cap = model_ceiling_tokens(model, spec, tokens, s)
    resolved = model_cap if ceiling is None else ceiling
    if resolved < s:
        raise UsageError(
            f"{resolved:,.0f} is below one sequence of {s:,} tokens", "--max-batch-tokens"
        )
    _check_floor(floor, resolved, None if model == "off" else model_cap)
    fields = dict(
        max_batch_tokens=MODEL_CEILING if ceiling is None else ceiling,
        min_batch_tokens=floor,
        batch_tokens_model=model,
    )
    return s, fields, ("bf16", "fp8") if precision == "any" else (precision,)


def _caps_and_rental(
    cat, chosen, gpu_caps: dict[str, int], explicit: bool, pricing: str, cloud_max_gpus
) -> dict[str, Any]:
    """The Scenario's GPU caps (_cluster_caps) and rental fields: a question rents one block
    under a term (solvers/cloud_terms.py, issue 31 item 2), the block --cloud-max-gpus or
    the catalog's, which caps its GPU type."""
    rented = _blocks(pricing, cloud_max_gpus)
    return {
        "gpu_caps": _cluster_caps(cat, chosen, gpu_caps, explicit=explicit, rented=rented),
        "cloud_terms": True,
        "cloud_max_gpus": cloud_max_gpus,
    }


def _rules(ignore: tuple[str, ...], ep_in_domain: bool, dispatcher: str) -> dict[str, Any]:
    """The Scenario's families switched off, ep_domain's request and the MoE dispatcher."""
    return {"disabled": frozenset(ignore), "ep_in_domain": ep_in_domain, "dispatcher": dispatcher}


def _goodput(no_failures: bool, every_min: float | None, scale: float) -> dict[str, Any]:
    """The Scenario's failure fields (models/goodput.py): on unless --no-failures."""
    return {"no_failures": no_failures, "checkpoint_every_min": every_min, "failure_scale": scale}


def stack_catalog(files: tuple[Path, ...], stack: str) -> Catalog:
    """The catalog (with the override files) under the profiles of ``stack``."""
    cat = cached_catalog(files)  # a bad file: CatalogError naming it
    try:
        return cat.with_stack(stack)
    except CatalogError as err:
        raise UsageError(str(err), "--stack") from err


def _question_catalog(files: tuple[Path, ...], stack: str, facility: dict[str, Any]) -> Catalog:
    """The catalog under the question's stack, with its facility overrides."""
    cat = stack_catalog(files, stack)
    for name, value in facility.items():
        if name not in FACILITY_OPTIONS:
            raise TypeError(f"build_scenario() got an unexpected keyword argument {name!r}")
        if value is not None:
            try:
                cat = cat.with_facility(**{name: value})
            except ValidationError as err:
                msg = err.errors()[0]["msg"]
                raise UsageError(f"{msg} (got {value!r})", META[name].flag) from err
    return cat


def _check_names(cat, gpus, gpu_caps, nics, ignore, evidence: str, fabric: str) -> dict:
    """Every name the question gives is in the catalog (or among the choices); the GPU caps."""
    if evidence not in EVIDENCE_CHOICES:
        raise UsageError(
            f"unknown value {evidence!r}; use {', '.join(EVIDENCE_CHOICES)}", "--evidence"
        )
    for g in gpus:
        if g not in cat.gpus:
            raise UsageError(unknown_name("GPU", g, cat.gpus), "--gpu")
    for g, cap in gpu_caps.items():
        if g not in cat.gpus:
            raise UsageError(unknown_name("GPU", g, cat.gpus), "--gpu-cap")
        if int(cap) < 1:
            raise UsageError(f"{g}={cap} must allow at least one GPU", "--gpu-cap")
    for n in nics:
        if n not in cat.nics:
            raise UsageError(unknown_name("NIC", n, cat.nics), "--nic")
    for f in ignore:
        if f not in FAMILIES:
            raise UsageError(unknown_name("constraint", f, FAMILIES), "--ignore")
    if fabric not in FABRICS:
        raise UsageError(f"unknown fabric {fabric!r}; use one of {', '.join(FABRICS)}", "--fabric")
    return gpu_caps


def _check_limits(power_cap: float | None, max_racks: int | None, headroom: float) -> None:
    if power_cap is not None and power_cap <= 0:
        raise UsageError(f"must be positive MW (got {power_cap!r})", "--power-cap")
    if max_racks is not None and max_racks < 1:
        raise UsageError(f"must allow at least one rack (got {max_racks!r})", "--max-racks")
    if not 0 <= headroom < 1:
        raise UsageError(f"must be a fraction in [0, 1) (got {headroom!r})", "--headroom")


def _objective(objective, budget, deadline, max_gpus, gpu_caps) -> str:
    """The objective asked, or the default: time with a budget, else cost; and its limit."""
    if objective is None:
        objective = "time" if budget is not None or deadline is None else "cost"
    if objective == "time" and budget is None and max_gpus is None and not gpu_caps:
        raise UsageError(
            "the time objective needs a budget (or --max-gpus); e.g. --budget 30M", "--budget"
        )
    if objective == "cost" and deadline is None:
        raise UsageError("the cost objective needs a deadline; e.g. --deadline 90d", "--deadline")
    return objective


def _check_floor(min_batch_tokens, ceiling: float, model_cap: float | None) -> None:
    """The batch floor at most the ceiling and the batch-tokens model's largest batch."""
    if min_batch_tokens is None:
        return
    if min_batch_tokens > ceiling:
        raise UsageError(
            "the floor is above the ceiling (--max-batch-tokens)", "--min-batch-tokens"
        )
    if model_cap is not None and min_batch_tokens > model_cap:
        raise UsageError(
            f"the floor is above the batch-tokens model's largest batch, {model_cap:,.0f} "
            "tokens (3 critical batches); lower it or pass --batch-tokens-model off",
            "--min-batch-tokens",
        )


def _searched_gpus(cat, gpus, precisions, evidence: tuple[str, bool], stack: str):
    """The GPUs to search and the (GPU, precision) pairs to skip: the named ones, or every
    GPU for sale (``Catalog.gpus_for_sale``), or those of them whose pairs the evidence rule
    admits at ``--evidence`` (models.evidence_rule: measured, or measured and thin).
    ``evidence``: (the level, whether the question gave it): named GPUs are searched
    whatever their evidence unless the question gave a level, which then keeps out their
    pairs below it as it does the catalog's."""
    level, given = evidence
    if gpus and not given:
        return tuple(gpus), frozenset()
    if level == "any":
        return (tuple(gpus) or cat.gpus_for_sale()), frozenset()
    pool = (
        {g: cat.gpu(g) for g in gpus}
        if gpus
        else {g: spec for g, spec in cat.gpus.items() if spec.for_sale}
    )
    admitted = {
        (g, p)
        for g, gpu_spec in pool.items()
        for p in precisions
        if pair_evidence(g, gpu_spec.evidence, p).admitted(level)
    }
    chosen = tuple(g for g in pool if any((g, p) in admitted for p in precisions))
    if not chosen:
        wider = "--evidence thin or any" if level == "measured" else "--evidence any"
        runs = f"{level} {'/'.join(precisions)} runs under stack {stack} ({RULE_TEXT})"
        if gpus:
            raise UsageError(
                f"none of the GPUs named ({', '.join(gpus)}) has {runs}; pass {wider}, or "
                "leave --evidence out to search the named GPUs whatever their evidence",
                "--evidence",
            )
        raise UsageError(
            f"no catalog GPU has {runs}; pass {wider}, --precision any or name GPUs with --gpu",
            "--evidence",
        )
    return chosen, frozenset((g, p) for g in chosen for p in precisions) - admitted


def _cluster_caps(
    cat,
    chosen: tuple[str, ...],
    gpu_caps: dict[str, int],
    explicit: bool,
    rented: Callable[[str], int] | None = None,
) -> tuple[tuple[str, int], ...]:
    """The question's GPU caps (the Scenario's sorted pairs) and, in a whole-catalog search
    (no GPU named), each chosen GPU's ``max_cluster_gpus``: a consumer card stays in one
    server unless named with --gpu. Renting, each type's largest rentable block
    (``rented``: solvers.cloud_terms.block_gpus) is a cap too, so the max_gpus family
    prices it as it binds (a block 10% larger would save 0.8 of 9.45 days on the $30M
    cloud question, which the answer never said) and --ignore max_gpus lifts it."""
    caps = {g: int(c) for g, c in gpu_caps.items()}
    for g in () if explicit else chosen:
        limit = cat.gpu(g).max_cluster_gpus
        if limit is not None:
            caps[g] = min(caps.get(g, limit), limit)
    if rented is not None:
        for g in chosen:
            block = rented(g)
            caps[g] = min(caps.get(g, block), block)
    return tuple(sorted(caps.items()))


def _blocks(pricing: str, cloud_max_gpus: int | None) -> Callable[[str], int] | None:
    """Each GPU type's largest rentable block when renting (--cloud-max-gpus, else the
    catalog's: catalog/data/cloud.yaml), else None."""
    if pricing != "cloud":
        return None
    return lambda gpu: cloud_offers().rentable_gpus(gpu, cloud_max_gpus)


def _with_precision(cat, chosen: tuple[str, ...], precision: str) -> tuple[str, ...]:
    """The chosen GPUs that train in the precision (fp8 needs fp8 tensor cores)."""
    if precision == "fp8":
        chosen = tuple(g for g in chosen if cat.gpu(g).dense_fp8_tflops is not None)
        if not chosen:
            raise UsageError("none of the chosen GPUs supports fp8", "--precision")
    return chosen


def _with_fitting_nics(cat, chosen, nics, fabric: str, explicit: bool) -> tuple[str, ...]:
    """The chosen GPUs whose servers take one of the question's NICs on its fabric; a GPU
    the user named that takes none is an error naming the options to change."""
    names = tuple(nics) if nics else None
    kept = tuple(g for g in chosen if cat.nics_for(cat.gpu(g), names, fabric))
    missing = [g for g in chosen if g not in kept]
    if missing and (explicit or not kept):
        g = cat.gpu(missing[0])
        takes = ", ".join(n.name for n in cat.nics_for(g)) or "none in the catalog"
        raise UsageError(
            f"no NIC of the question fits {g.name} servers"
            f"{'' if fabric == 'any' else f' on {fabric}'} (they take {takes}); "
            "change --nic or --fabric",
            "--nic" if names else "--fabric",
        )
    return kept


def _with_fitting_racks(cat, chosen, explicit: bool) -> tuple[str, ...]:
    """The chosen GPUs one of whose servers fits the power limit of its rack (the server
    type's own rack, or the facility's: models.cost.servers_per_rack, which would otherwise
    put a server alone in a rack it overloads; issue 20, 21: 10 kW in a 1 W rack). A GPU the
    user named that does not fit, or none fitting, is an error naming --rack-power-kw."""
    # lazy: models.cost loads numpy; commands that never solve do not
    from models.cost import server_power_w

    def limit_kw(g: str) -> float:
        return cat.gpu(g).server.rack_power_kw or cat.facility.rack_power_kw

    kept = tuple(g for g in chosen if server_power_w(cat.gpu(g)) <= limit_kw(g) * 1000)
    missing = [g for g in chosen if g not in kept]
    if missing and (explicit or not kept):
        g = min(missing, key=lambda name: server_power_w(cat.gpu(name)))
        need = server_power_w(cat.gpu(g)) / 1000
        raise UsageError(
            f"one {g} server draws {need:,.1f} kW (without its NICs), more than a "
            f"{limit_kw(g):g} kW rack holds; give at least {need:,.1f}",
            "--rack-power-kw",
        )
    return kept


# ---------------------------------------------------------------- question to Scenario
def _number(option: str, value, days: bool = False, integer: bool = False):
    """A suffixed number from a question (30M, 90d); errors name ``option``."""
    if value is None:
        return None
    try:
        out = parse_days(str(value)) if days else parse_quantity(str(value))
    except ValueError as err:
        raise UsageError(str(err), option) from err
    if out <= 0:
        raise UsageError(f"must be positive (got {value!r})", option)
    if integer:
        if out != int(out):
            raise UsageError(f"must be a whole number (got {value!r})", option)
        return int(out)
    return out


def _model_from(option: str, value, base: Path) -> str | TransformerSpec:
    """The question's model: a spec given inline, or a zoo name or spec file (relative to
    ``base``)."""
    if isinstance(value, dict):
        try:
            return TransformerSpec.model_validate(value)
        except ValidationError as err:
            first = err.errors()[0]
            loc = ".".join(str(x) for x in first["loc"])
            raise UsageError(
                first["msg"].removeprefix("Value error, "), f"{option}.{loc}" if loc else option
            ) from err
    if Path(value).suffix.lower() in {".yaml", ".yml", ".json"}:
        if not Path(value).is_absolute() and (base / value).exists():
            value = str(base / value)
    return resolve_model(value, option)


def question_kwargs(q: Question, base: Path, model_option: str = "--model") -> dict[str, Any]:
    """build_scenario's keyword arguments for a question (suffixed numbers parsed, file paths
    relative to ``base``); errors name the command-line option."""
    fields = q.model_dump()
    kw = {k: v for k, v in fields.items() if k not in ("catalog", "model")}
    if "evidence" not in q.model_fields_set:  # not given: named GPUs searched whatever
        kw["evidence"] = None
    kw["model"] = _model_from(model_option, q.model, base)
    kw["catalog_files"] = tuple(Path(c) if Path(c).is_absolute() else base / c for c in q.catalog)
    for name in ("tokens", "budget", "max_batch_tokens", "min_batch_tokens"):
        kw[name] = _number(META[name].flag, fields[name])
    kw["deadline"] = _number("--deadline", q.deadline, days=True)
    for name in ("max_gpus", "max_racks"):
        kw[name] = _number(META[name].flag, fields[name], integer=True)
    for name in ("gpus", "nics", "ignore"):
        kw[name] = tuple(fields[name])
    return kw


def scenario_from_options(params: dict[str, Any]) -> Scenario:
    """The Scenario of the command line's question options (designer.question.fields)."""
    return build_scenario(**question_kwargs(Question.from_options(params), Path()))


def build_question(q: Question, origin: str, base: Path) -> Scenario:
    """A Scenario from a validated question (file paths relative to ``base``); errors name the
    file and its field rather than a command-line option."""
    try:
        return build_scenario(**question_kwargs(q, base, f"{origin}: model"))
    except UsageError as err:
        if err.option in FLAG_FIELDS:
            raise err.renamed(f"{origin}: {FLAG_FIELDS[err.option]}") from err
        raise


# ---------------------------------------------------------------- question and plan files
def _read_document(path: Path, expected: str = "a question file or optimize --json output") -> Any:
    """A question, answer or study file's mapping; ``expected`` names the kind to pass."""
    doc = read_document(path, UsageError, expected)
    if not isinstance(doc, dict):
        raise UsageError(f"{path}: top level must be a mapping of fields")
    return doc


# fields every `designer evaluate --json` analysis has and no question or answer file does
EVALUATE_KEYS = frozenset({"layout", "step_time_s", "breakdown_s", "memory_gb"})


def load_question_file(path: Path) -> tuple[Scenario, GivenPlan | None]:
    """A question file, or a saved optimize --json answer (its question and first plan,
    with the term it rents under and what its solve proved)."""
    doc = _read_document(path)
    origin = str(path)
    if ("question" in doc and "plans" in doc) or isinstance(doc.get("plans"), list):
        return _from_answer(doc, origin)  # a plans list without its question: named there
    if "breakeven_price_usd" in doc:  # read as a question, it blamed its objective
        raise UsageError(
            "a `designer breakeven --json` result, which saves a price and two plans but no "
            "question; pass a saved optimize/compare --json answer or a question file "
            "(designer report shows a breakeven result)",
            origin,
        )
    if EVALUATE_KEYS <= doc.keys():  # read as a question, it blamed the analysis' evidence
        raise UsageError(
            "a `designer evaluate --json` analysis, which holds no question or plan to "
            "re-solve; pass a question file or a saved optimize/compare --json answer",
            origin,
        )
    if "question" in doc:  # an answer's shape (a question file has no such field)
        raise UsageError(
            "missing: a saved optimize --json answer holds its plans there; regenerate it",
            f"{origin}: plans",
        )
    try:
        q = Question.model_validate(doc)
    except ValidationError as err:
        first = err.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else "question"
        if first["type"] == "extra_forbidden":  # gpu for gpus, time_limit: say which
            raise UsageError(unknown_field(field), f"{origin}: {field}") from err
        got = first.get("input")
        raise UsageError(
            f"{first['msg'].removeprefix('Value error, ')} (got {got!r})", f"{origin}: {field}"
        ) from err
    return build_question(q, origin, path.parent), None


def _from_answer(doc: dict[str, Any], origin: str) -> tuple[Scenario, GivenPlan | None]:
    """A saved answer's Scenario (its question, with the GPU and precision pairs the search
    skipped, read with the catalog files it was made with) and its first plan, every plan
    validated (designer.question.saved_answer)."""
    # lazy: designer.question.saved_answer's schema (~10 ms) loads with a saved answer, not at start-up
    from designer.question.saved_answer import (
        check_against_question,
        check_plans,
        first_error,
        saved_catalogs,
    )

    if "question" not in doc:  # read as a question file, it blamed the answer's `objective`
        raise UsageError(
            "missing: a saved optimize --json answer holds the question it answers there; "
            "regenerate it with optimize --json",
            f"{origin}: question",
        )
    q, plans = doc["question"], doc["plans"]
    if not isinstance(q, dict) or not isinstance(plans, list):
        raise UsageError(f"{origin}: question/plans: not an optimize --json answer")
    checked = check_plans(doc, origin)
    try:
        question = Question.from_answer(q)
    except ValidationError as err:
        raise UsageError(first_error(err, f"{origin}: question")) from err
    except AnswerKeyError as err:  # a null where the field has none, say
        raise UsageError(
            f"{err.detail}; fix it or regenerate with optimize --json",
            f"{origin}: question.{err.key}",
        ) from err
    except (KeyError, TypeError, ValueError) as err:
        raise UsageError(
            f"{origin}: question: missing or bad field {err}; regenerate with optimize --json"
        ) from err
    catalogs = saved_catalogs(q, origin)
    if catalogs is not None:
        question = question.model_copy(update={"catalog": catalogs})
    kw = question_kwargs(question, Path(), f"{origin}: model")
    # the answer's GPUs are those it searched (its skipped pairs read below): searched
    # whatever their evidence, as the level it was asked at is kept
    level, kw["evidence"] = kw["evidence"], None
    try:
        scenario = build_scenario(**kw).with_changes(evidence=level or DEFAULT_EVIDENCE)
    except (KeyError, TypeError, ValueError) as err:  # UsageError and ModelError included
        raise UsageError(
            f"{origin}: question: {' '.join(str(err).split())}; regenerate with optimize --json"
        ) from err
    if "unmeasured" in q:  # answers saved before it: every searched pair counts as measured
        pairs = q["unmeasured"]
        if not isinstance(pairs, list) or not all(
            isinstance(x, list) and len(x) == 2 and all(isinstance(y, str) for y in x)
            for x in pairs
        ):
            raise UsageError(
                f"{origin}: question.unmeasured: {pairs!r} is not a list of [gpu, precision] "
                "pairs; regenerate with optimize --json"
            )
        scenario = scenario.with_changes(unmeasured=frozenset(tuple(x) for x in pairs))
    check_against_question(checked, scenario)
    return scenario, _first_plan(doc, scenario, origin)


def _first_plan(doc: dict[str, Any], scenario: Scenario, origin: str) -> GivenPlan | None:
    """The answer's first plan (a compare result's first row with one: check_plans skips
    the rest), its names checked against the catalog it was made with; None where no row
    has a plan (an infeasible answer, or a compare where no GPU type answers)."""
    # lazy: designer.question.saved_answer's schema loads with a saved answer, not at start-up
    from designer.question.saved_answer import has_plan

    i = next((j for j, p in enumerate(doc["plans"]) if has_plan(p)), None)
    if i is None:
        return None
    where = f"{origin}: plans[{i}]"
    config = _saved_config(doc["plans"][i], where)
    cat = scenario.catalog
    for field, name, names in (("gpu", config.shape.gpu, cat.gpus), ("nic", config.nic, cat.nics)):
        if name not in names:
            raise UsageError(
                f"{unknown_name(field.upper(), name, names)}; fix it or regenerate with "
                "optimize --json",
                f"{where}.{field}",
            )
    return given_from_answer({**doc, "plans": doc["plans"][i:]}, config, origin)


def _saved_config(p: dict[str, Any], where: str, csv: bool = False) -> Config:
    """A saved plan entry (validated: UsageError naming ``where`` and the field; ``csv``: a
    results CSV's row, its cells text) as a Config."""
    # lazy: the plans (numpy) and the saved answer's schema load with a saved plan;
    # commands that never solve do not load them
    from designer.question.saved_answer import saved_plan
    from solvers.plan import Config
    from solvers.space import Shape

    v = saved_plan(p, where, csv)
    shape = Shape(
        v.gpu,
        v.tp,
        v.cp,
        v.pp,
        v.vp,
        v.micro_batch,
        v.recompute,
        v.precision,
        (  # the pipeline split (absent from answers saved before uneven splits)
            v.first_stage_layers or 0,
            v.last_stage_layers or 0,
            v.embedding_in_split,
            v.loss_in_split,
        ),
        v.ep,  # expert parallelism (absent before issue 17: dense)
        v.etp,
    )
    return Config(
        shape,
        v.nic,
        v.nics_per_node,
        v.dp,
        v.grad_accum,
        v.hot_spares_per_100 or 0.0,  # absent before issue 18 item 4
        v.checkpoint_storage_gb_per_s_per_server,
    )


def evaluate_config(scenario: Scenario, config: Config) -> SolveResult:
    """A given plan as a one-plan result, re-evaluated; violations make it 'infeasible'
    (designer.question.given_plan: a saved answer's plan, with its term and its proof)."""
    return evaluate_given(scenario, GivenPlan(config))
