"""The question, declared once: every field of optimize's question with its type, bounds,
unit, help, command-line flag, key in a saved answer and column in a sweep's CSV.

From this one declaration come the click options that optimize, compare and breakeven
share (``question_options``), the question file and a sweep's base and axes (``Question``
itself, validated by pydantic), and the ``question`` object of a saved answer
(``answer_question`` writes it, ``Question.from_answer`` reads it back). Turning a
question into a solver Scenario is ``designer.question.build.build_scenario``.

A new question field is one entry below: its annotation with a ``Meta`` and, where the
Scenario keeps it under another name, how the saved answer writes and reads it. The
facility constants and the planning assumptions take their bounds from the models that
hold them (catalog.specs.Facility, models.layout.Assumptions) through ``_facility`` and
``_assumption``.
"""

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args

import click
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from catalog.specs import FABRICS, Facility, NumbersNotBools
from designer.errors import UsageError
from designer.numbers import Days, Finite, InputPath, Quantity, WholeCount
from models.layout import Assumptions
from solvers import limits
from solvers.scenario import DEFAULT_HEADROOM, DEFAULT_MAX_VIRTUAL_STAGES, DEFAULT_RESERVED_GB

if TYPE_CHECKING:
    from solvers import Scenario

DEFAULT_MODEL = "llama2-70b"
DEFAULT_TOKENS = 2e12
EVIDENCE_CHOICES = ("measured", "thin", "any")  # models.evidence_rule.LEVELS
DEFAULT_EVIDENCE: Literal["measured"] = "measured"  # the level of a question that gives none
# The planning defaults for memory the tensors do not account for (README "Memory
# headroom") are the library's: solvers.scenario, where the Scenario takes them too.
HEADROOM_EVIDENCE = (
    "model error on measured Megatron-Core peaks 12.1% median (2 runs); "
    "9 of 149 published runs that ran refused at 5%, 16 at 12%: bench/memory_accuracy.py --published"
)
_SAME = object()  # Meta defaults: "as the field"


class GpuCap(click.ParamType):
    """NAME=N: at most N GPUs of type NAME."""

    name = "NAME=N"

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        gpu, sep, count = str(value).partition("=")
        if not sep or not gpu:
            self.fail(f"{value!r} is not NAME=N; e.g. h100-sxm=512", param, ctx)
        try:
            n = Quantity(integer=True, maximum=limits.MAX_GPUS).convert(count, param, ctx)
        except click.BadParameter as err:
            self.fail(f"{value!r}: N must be a positive whole number ({err.message})", param, ctx)
        return (gpu, n)


def gpu_cap_dict(pairs) -> dict[str, int]:
    """--gpu-cap's NAME=N pairs as one cap per GPU type; a type given two different caps is
    a usage error (the last one silently won); the same cap twice is one."""
    caps: dict[str, int] = {}
    for gpu, n in pairs.items() if isinstance(pairs, dict) else pairs:
        if caps.get(gpu, n) != n:
            raise UsageError(
                f"{gpu} is capped twice ({caps[gpu]:,} and {n:,}); give one cap per GPU type",
                "--gpu-cap",
            )
        caps[gpu] = n
    return caps


def _saved_precision(p: Any) -> str:
    """A saved answer's ``precisions`` as --precision ("any" for both); anything but a
    list of distinct precisions is refused (the text "bf16" was read as "any": more than
    one character)."""
    if not isinstance(p, list) or not p or len(set(p)) != len(p) or not set(p) <= {"bf16", "fp8"}:
        raise ValueError(f"precisions ({p!r}: give a list such as ['bf16'] or ['bf16', 'fp8'])")
    return "any" if len(p) > 1 else p[0]


@dataclass(frozen=True)
class Meta:
    """How one question field meets the world outside pydantic.

    ``flag``: its command-line option; ``param``: click's parameter name (default the
    field's); ``click_type``: the option's type when the annotation does not say it
    (suffixed numbers); ``cli_default``: the option's default when it differs from the
    field's; ``answer``: its key in a saved answer's ``question`` (``facility.pue`` for a
    nested one); ``save``/``load``: the value the answer writes from a Scenario and the
    question value read back from it (default: the Scenario attribute of that name, and
    the value itself); ``legacy``: the value for answers saved before the field existed."""

    flag: str
    unit: str = ""
    param: str | None = None
    click_type: Any = None
    cli_default: Any = _SAME
    metavar: str | None = None
    answer: str | None = None
    save: Callable[["Scenario"], Any] | None = None
    load: Callable[[Any], Any] | None = None
    legacy: Any = _SAME


# help of the facility flags (their bounds are the catalog's: catalog.specs.Facility)
FACILITY_HELP = {
    "pue": "Power usage effectiveness [default: the catalog's facility, 1.25].",
    "usd_per_kwh": "Electricity price for --pricing tco [default: 0.0826].",
    "rack_power_kw": "Power limit per rack [default: 42 kW].",
    "oversubscription": "Leaf down:up ratio of the fat tree [default: 1, non-blocking].",
    "lifetime_years": "--pricing tco charges capex x training time / lifetime, in years, "
    "at least 0.003 (about a day: less is no service life, and leaves the solver's 64-bit "
    "range) [default: all of it].",
}


def _bounds(info: Any) -> dict[str, Any]:
    """The numeric bounds (ge, gt, le, lt) of a pydantic field."""
    return {
        k: getattr(m, k) for m in info.metadata for k in ("ge", "gt", "le", "lt") if hasattr(m, k)
    }


def _facility(name: str, unit: str = "") -> Any:
    """A facility constant the question may override (default: the catalog's): the
    catalog's bounds, the flag named after it, its key under the answer's ``facility``."""
    info = Field(None, description=FACILITY_HELP[name], **_bounds(Facility.model_fields[name]))
    save = lambda s: getattr(s.catalog.facility, name)  # noqa: E731
    info.metadata.append(
        Meta("--" + name.replace("_", "-"), unit, answer=f"facility.{name}", save=save)
    )
    return info


# help of the planning-assumption flags
ASSUMPTION_HELP = {
    "--dp-overlap": "Fraction of the last backward that hides DP traffic.",
    "--memory-overhead": "Allocator fragmentation and temporaries, fraction of tensor memory.",
    "--reserved-gb": "Fixed GB per GPU for the CUDA context and NCCL buffers.",
    "--headroom": "Fraction of GPU memory a plan keeps free (0 with --reserved-gb 0: the "
    f"seed's rule; the default's evidence: {HEADROOM_EVIDENCE}).",
}


def _assumption(flag: str, attr: str, unit: str, default: float) -> Any:
    """A planning assumption (``attr`` of models.layout.Assumptions, with its bounds); answers
    saved before the reserved memory and the headroom were planned without them (0)."""
    info = Field(
        default, description=ASSUMPTION_HELP[flag], **_bounds(Assumptions.model_fields[attr])
    )
    save = lambda s: getattr(s.assumptions, attr)  # noqa: E731
    info.metadata.append(Meta(flag, unit, save=save, legacy=0.0))
    return info


def _fabric_name(s: "Scenario") -> str:
    return next(k for k, v in FABRICS.items() if v == s.fabric)


SuffixNumber = float | str  # a number, or text with the CLI's suffixes (30M, 2T)
# validators built on first use; NaN and infinities refused in every float field
_FIELD = ConfigDict(extra="forbid", defer_build=True, allow_inf_nan=False)


class Question(NumbersNotBools):
    """A design question: optimize's options, with the same suffixes (30M, 2T, 90d)."""

    model_config = _FIELD

    model: Annotated[
        str | dict[str, Any],
        Meta("--model", answer="model_spec", save=lambda s: s.spec.model_dump()),
        Field(description="Zoo name, YAML/JSON spec or HF config.json."),
    ] = DEFAULT_MODEL
    tokens: Annotated[
        SuffixNumber,
        Meta(
            "--tokens",
            "tokens",
            click_type=Quantity(maximum=limits.MAX_TOKENS, minimum=limits.MIN_TOKENS),
            cli_default="2T",
            legacy=KeyError,
        ),
        Field(description="Training tokens (2T, 300B, ...)."),
    ] = DEFAULT_TOKENS
    seq_len: Annotated[
        int | None,
        Meta("--seq-len", "tokens"),
        Field(
            ge=1,
            le=int(limits.MAX_BATCH_TOKENS),
            description="Sequence length [default: the model's].",
        ),
    ] = None
    budget: Annotated[
        SuffixNumber | None,
        Meta(
            "--budget",
            "USD",
            click_type=Quantity(maximum=limits.MAX_BUDGET_USD),
            answer="budget_usd",
        ),
        Field(description="Budget in USD (30M, 1.5B, ...)."),
    ] = None
    deadline: Annotated[
        SuffixNumber | None,
        Meta(
            "--deadline",
            "days",
            click_type=Days(maximum=limits.MAX_DEADLINE_DAYS),
            answer="deadline_days",
        ),
        Field(description="Deadline (90d, 36h, or days)."),
    ] = None
    objective: Annotated[
        Literal["time", "cost"] | None,
        Meta("--objective"),
        Field(
            description="time (fastest under the budget) or cost (cheapest by the deadline) "
            "[default: time with a budget, else cost]."
        ),
    ] = None
    pricing: Annotated[
        Literal["capex", "cloud", "tco"],
        Meta("--pricing"),
        Field(
            description="capex: buy the cluster; cloud: rent GPU-hours; tco: capex (or its share "
            "over --lifetime-years) plus energy over the training time."
        ),
    ] = "capex"
    power_cap: Annotated[
        float | None,
        Meta("--power-cap", "MW", metavar="MW", answer="power_cap_mw"),
        Field(
            gt=0,
            le=limits.MAX_POWER_CAP_MW,
            description="Facility power cap in MW (IT nameplate x PUE).",
        ),
    ] = None
    max_racks: Annotated[
        int | str | None,
        Meta("--max-racks", "racks", click_type=Quantity(True, limits.MAX_RACKS)),
        Field(description="Cap on the number of racks."),
    ] = None
    # the facility constants a question may override, with the catalog's bounds
    pue: float | None = _facility("pue")
    usd_per_kwh: float | None = _facility("usd_per_kwh", "USD/kWh")
    rack_power_kw: float | None = _facility("rack_power_kw", "kW")
    oversubscription: float | None = _facility("oversubscription")
    lifetime_years: float | None = _facility("lifetime_years", "years")
    gpus: Annotated[
        list[str],
        Meta("--gpu"),
        Field(description="Allowed GPU types (repeatable) [default: the whole catalog]."),
    ] = []
    nics: Annotated[
        list[str],
        Meta("--nic"),
        Field(description="Allowed NIC types (repeatable) [default: all]."),
    ] = []
    catalog: Annotated[
        list[str],
        Meta(
            "--catalog",
            param="catalog_files",
            click_type=InputPath(),
            answer="catalog_files",
        ),
        Field(
            description="YAML file of entries that add to or override the built-in catalog "
            "(repeatable)."
        ),
    ] = []
    max_gpus: Annotated[
        int | str | None,
        Meta("--max-gpus", "GPUs", click_type=Quantity(True, limits.MAX_GPUS)),
        Field(description="Cap on the number of GPUs."),
    ] = None
    cloud_max_gpus: Annotated[
        int | str | None,
        Meta("--cloud-max-gpus", "GPUs", click_type=Quantity(True, limits.MAX_GPUS), legacy=None),
        Field(
            description="--pricing cloud: the largest block one provider rents, overriding "
            "the catalog's per GPU type (catalog/data/cloud.yaml). It sizes the block, not its "
            "price: a plan pays its GPU type's block rate and billing whatever size it rents (on "
            "demand, AWS Capacity Blocks' $4.916 per H100-hour, reserved in 1-day then 7-day "
            "lengths up to 182 days), the only price the catalog has for renting that many GPUs."
        ),
    ] = None
    gpu_caps: Annotated[
        dict[str, int],
        Meta("--gpu-cap", "GPUs", click_type=GpuCap(), save=lambda s: dict(s.gpu_caps)),
        Field(description="Availability: at most N GPUs of a type, as NAME=N (repeatable)."),
    ] = {}
    max_batch_tokens: Annotated[
        SuffixNumber | None,
        Meta("--max-batch-tokens", "tokens", click_type=Quantity(maximum=limits.MAX_BATCH_TOKENS)),
        Field(
            description="Global batch ceiling in tokens [default: 3 critical batches of "
            "--batch-tokens-model; 16M with it off]."
        ),
    ] = None
    min_batch_tokens: Annotated[
        SuffixNumber | None,
        Meta("--min-batch-tokens", "tokens", click_type=Quantity(maximum=limits.MAX_BATCH_TOKENS)),
        Field(description="Global batch floor in tokens."),
    ] = None
    precision: Annotated[
        Literal["bf16", "fp8", "any"],
        Meta(
            "--precision",
            answer="precisions",
            save=lambda s: list(s.precisions),
            load=lambda p: _saved_precision(p),
        ),
        Field(
            description="Training precision; 'any' lets the optimizer use fp8 where the GPU has it."
        ),
    ] = "bf16"
    ignore: Annotated[
        list[str],
        Meta("--ignore", answer="ignored_constraints", save=lambda s: sorted(s.disabled)),
        Field(description="Switch a constraint family off (repeatable), e.g. tp_bandwidth."),
    ] = []
    stack: Annotated[
        # catalog.specs.STACKS (a test checks)
        Literal["megatron-core", "vtrain-2022", "pytorch-fsdp2"],
        Meta("--stack"),
        Field(description="Software stack whose calibrated profile predicts the step time."),
    ] = "megatron-core"
    # not given (the option left at its default, the field absent): --gpu's GPUs are
    # searched whatever their evidence (designer.question.build._searched_gpus)
    evidence: Annotated[
        Literal["measured", "thin", "any"],
        Meta("--evidence", cli_default=None),
        Field(
            description="Search the GPU/precision pairs with measured runs (5+ runs from 2+ "
            "independent sources, one past one server), those and the thin ones (fewer), or "
            "any (marked) [default: measured; GPUs named with --gpu are searched whatever "
            "their evidence unless --evidence is given]."
        ),
    ] = DEFAULT_EVIDENCE
    # planning assumptions (models.layout.Assumptions, with its bounds)
    dp_overlap: float = _assumption("--dp-overlap", "dp_overlap", "fraction", 0.0)
    memory_overhead: float = _assumption(
        "--memory-overhead", "memory_overhead_fraction", "fraction", 0.0
    )
    reserved_gb: float = _assumption(
        "--reserved-gb", "runtime_reserved_gb", "GB", DEFAULT_RESERVED_GB
    )
    headroom: float = _assumption(
        "--headroom", "memory_headroom_fraction", "fraction", DEFAULT_HEADROOM
    )
    max_virtual_stages: Annotated[
        int,
        Meta("--max-virtual-stages", "virtual stages", legacy=DEFAULT_MAX_VIRTUAL_STAGES),
        Field(
            ge=1,
            le=128,
            description="Largest virtual-stage (interleaving) count searched per pipeline "
            "rank; 8 or more finds faster plans for models of 100+ layers and takes longer "
            f"to solve [default: {DEFAULT_MAX_VIRTUAL_STAGES}].",
        ),
    ] = DEFAULT_MAX_VIRTUAL_STAGES
    fabric: Annotated[
        Literal["ib", "ethernet", "any"],
        Meta("--fabric", save=_fabric_name),
        Field(description="Scale-out fabric: InfiniBand, Ethernet (RoCE) or either."),
    ] = "any"
    # failures, checkpoints and restarts (models/goodput.py; README "Goodput"); answers saved
    # before them were ideal plans (legacy: no failures)
    no_failures: Annotated[
        bool,
        Meta("--no-failures", legacy=True),
        Field(
            description="Plan as if nothing ever failed (the ideal time and cost) instead of "
            "the expected run with failures, checkpoints and restarts."
        ),
    ] = False
    checkpoint_every: Annotated[
        float | None,
        Meta("--checkpoint-every", "min", metavar="MIN", answer="checkpoint_every_min"),
        Field(
            ge=0.01,
            le=1e6,
            description="Checkpoint every MIN minutes of training [default: Young's optimum "
            "interval, sqrt(2 x snapshot time x mean time between failures)].",
        ),
    ] = None
    failure_scale: Annotated[
        float,
        Meta("--failure-scale", "x", legacy=1.0),
        Field(
            ge=0,
            le=1e4,
            description="The catalog's interruption rates times this (a study axis; 0: no "
            "failures but the same checkpoint model).",
        ),
    ] = 1.0
    # expert parallelism (solvers/families/ep_domain.py; README "Mixture-of-experts")
    ep_in_domain: Annotated[
        bool,
        Meta("--ep-in-domain", legacy=False),
        Field(
            description="Keep a mixture-of-experts plan's EP group inside one scale-up domain "
            "(the token all-to-all never crosses the NICs); a dense model is unchanged."
        ),
    ] = False
    # context parallelism across servers (solvers/families/tp_domain.py; README "Limits as
    # real clusters run them"); answers saved before the option planned with it allowed
    cp_across_servers: Annotated[
        bool,
        Meta("--cp-across-servers", save=lambda s: s.assumptions.cp_across_servers, legacy=True),
        Field(
            description="Let context parallelism leave the scale-up domain, its ring "
            "attention over the NICs (TP stays inside; Llama 3 ran CP 16 across servers) "
            "[default: TP x CP inside one scale-up domain, the tp_domain rule]."
        ),
    ] = False
    dispatcher: Annotated[
        Literal["alltoall", "deepep"],
        Meta("--dispatcher", legacy="alltoall"),
        Field(
            description="A mixture-of-experts plan's token dispatcher: alltoall (Megatron-Core's "
            "all-to-all: every routed copy sent) or deepep (its flex dispatcher with DeepEP: a "
            "token crosses the NICs once per remote scale-up domain); a dense model is "
            "unchanged."
        ),
    ] = "alltoall"

    # tokens that depend on the batch (models/batch_tokens.py; README "Tokens that depend
    # on the batch"); answers saved before it planned without (legacy: off)
    batch_tokens_model: Annotated[
        Literal["deepseek", "off"],  # models.batch_tokens.MODELS (a test checks)
        Meta("--batch-tokens-model", legacy="off"),
        Field(
            description="Past the critical batch (DeepSeek LLM's fit of the compute) a plan "
            "needs more tokens (McCandlish et al. 2018); 'off': the tokens do not depend on "
            "the batch and the ceiling is 16M."
        ),
    ] = "deepseek"

    @field_validator(
        *("tokens", "budget", "deadline", "max_racks", "max_gpus", "cloud_max_gpus"),
        *("max_batch_tokens", "min_batch_tokens"),
        mode="before",
    )
    @classmethod
    def _suffixed(cls, value: Any, info: ValidationInfo) -> Any:
        """A suffixed number (30M, 90d) is checked as its option checks it: a positive finite
        number, whole where it counts things; kept as written (the questions parse it).
        Before pydantic's own parsing: a JSON or YAML 1e19 reached the int parser first
        ("Unable to parse input string as an integer, exceeded maximum size")."""
        if value is not None:
            META[str(info.field_name)].click_type.value_of(value)
        return value

    @field_validator("gpu_caps")
    @classmethod
    def _gpu_caps(cls, caps: dict[str, int]) -> dict[str, int]:
        """Each cap a whole number of GPUs the decision space holds (--gpu-cap's check)."""
        for n in caps.values():
            Quantity(integer=True, maximum=limits.MAX_GPUS).value_of(n)
        return caps

    # ------------------------------------------------------------ the saved answer
    @classmethod
    def from_answer(cls, saved: dict[str, Any]) -> "Question":
        """The question a saved answer's ``question`` object asked (``answer_question``'s
        inverse); absent keys (answers saved before the field) take their ``legacy`` value.
        A null is the field's own null (no budget, the model's sequence length) where the
        field has one; elsewhere it is refused (AnswerKeyError), since skipping it read a
        hand-edited ``tokens: null`` as the default 2T. KeyError, TypeError or ValueError on
        a malformed object."""
        values: dict[str, Any] = {}
        for name, meta in META.items():
            key = answer_key(name)
            found, value = _lookup(saved, key)
            if name == "model" and not found:
                key = "model"  # answers saved before the spec: the model's name
                found, value = _lookup(saved, key)
            if not found:
                if meta.legacy is KeyError:
                    raise KeyError(key)
                if meta.legacy is not _SAME:
                    values[name] = meta.legacy
                continue
            if value is None and name not in NULLABLE:
                default = cls.model_fields[name].default
                raise AnswerKeyError(
                    key, f"null where a value belongs (null would read as the default, {default!r})"
                )
            if value is not None:
                values[name] = meta.load(value) if meta.load else value
        return cls.model_validate(values)

    # ------------------------------------------------------------ the command line
    @classmethod
    def from_options(cls, params: dict[str, Any]) -> "Question":
        """The question from click's parameters (``question_options``); a model given as a
        TransformerSpec (optimize --from-megatron) is kept as its fields."""
        values: dict[str, Any] = {}
        for name, meta in META.items():
            value = params.get(meta.param or name)
            if isinstance(value, BaseModel):
                value = value.model_dump()
            elif name == "gpu_caps":
                value = gpu_cap_dict(value or ())
            elif isinstance(value, tuple):
                value = [str(v) for v in value]
            if value is not None:
                values[name] = value
        try:
            return cls.model_validate(values)
        except ValidationError as err:
            first = err.errors()[0]
            raise UsageError(first["msg"], META[str(first["loc"][0])].flag) from err


META: dict[str, Meta] = {
    name: next(m for m in info.metadata if isinstance(m, Meta))
    for name, info in Question.model_fields.items()
}
"""Every question field's Meta, in declaration order."""
FLAG_FIELDS = {meta.flag: name for name, meta in META.items()}
"""Command-line flag -> question field (errors from a file name its field)."""
QUESTION_FIELDS = tuple(META)
"""The question's fields: the question file's keys, the sweep's axes and CSV columns."""
# optimize's options that say how a command answers, not what it asks: no question field
# (the commands that read a question file, explain and report, take --time-limit)
ANSWERING_OPTIONS = {
    "time_limit": "--time-limit",
    "explain": "--explain",
    "no_explain": "--no-explain",
    "json": "--json",
    "csv": "--csv",
    "csv_file": "--csv",
    "top": "--top",
    "top_k": "--top",
    "solver": "--solver",
    "emit": "--emit",
    "from_megatron": "--from-megatron",
    "bom": "--bom",
    "plot": "--plot",
}


def evidence_spares(params: dict[str, Any]) -> bool:
    """Whether the command line's question (click's parameters) names GPUs and leaves
    --evidence out: its GPUs are searched whatever their evidence (the option's help)."""
    return bool(params.get("gpus")) and params.get("evidence") is None


def unknown_field(name: str, study_fields: tuple[str, ...] = ()) -> str:
    """Why ``name`` is no question field, and the fix: the field an option's name maps to
    (``gpu``: the field of --gpu is ``gpus``), a study's own setting (``study_fields``: a
    sweep's base asked for one), an option that is not part of the question
    (``time_limit``), or a close field name."""
    flag = "--" + name.replace("_", "-")
    if name not in META and flag in FLAG_FIELDS:
        return f"unknown field; did you mean {FLAG_FIELDS[flag]}? (the field of {flag})"
    if name in study_fields:
        return f"not a question field: {name} is the study's, at its top level beside base"
    if name in ANSWERING_OPTIONS:
        option = ANSWERING_OPTIONS[name]
        fix = "give --time-limit on the command line" if option == "--time-limit" else "drop it"
        return (
            f"not allowed in a question: {option} says how a command answers, not what it "
            f"asks; {fix}"
        )
    close = difflib.get_close_matches(name, QUESTION_FIELDS, n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    return f"unknown field; {hint}use optimize's option names"


NULLABLE = frozenset(
    name for name, info in Question.model_fields.items() if type(None) in get_args(info.annotation)
)
"""The fields whose null is a value (no budget, no cap, the catalog's facility constant):
the keys a saved answer may hold null."""


def answer_key(name: str) -> str:
    """The field's key in a saved answer's ``question`` (dotted: nested)."""
    return META[name].answer or name


class AnswerKeyError(ValueError):
    """A key of a saved answer's ``question`` that cannot be read back (a hand-edited
    answer): ``key`` as the answer writes it (dotted: nested) and ``detail``, what is wrong
    with it; the reader names the file and the key."""

    def __init__(self, key: str, detail: str) -> None:
        self.key, self.detail = key, detail
        super().__init__(f"{key}: {detail}")


def _lookup(doc: dict[str, Any], key: str) -> tuple[bool, Any]:
    """Whether the answer's ``question`` holds ``key`` (dotted: nested), and its value; a
    nesting object absent (an older answer) holds nothing, one that is not a mapping (null
    included: it would read every field under it as the catalog's) is refused."""
    for part in key.split(".")[:-1]:
        if part not in doc:
            return False, None
        doc = doc[part]
        if not isinstance(doc, dict):  # a hand-edited answer (issue 33)
            got = "null" if doc is None else repr(doc)
            raise AnswerKeyError(part, f"{got} is not a mapping of fields")
    last = key.split(".")[-1]
    return last in doc, doc.get(last)


def answer_question(s: "Scenario") -> dict[str, Any]:
    """A saved answer's ``question``: every question field under its answer key, as the
    Scenario holds it, plus the model's name and size and the (GPU, precision) pairs the
    search skipped for want of measured runs."""
    out: dict[str, Any] = {"model": s.spec.name, "params": s.spec.params()}
    for name, meta in META.items():
        key = answer_key(name)
        value = meta.save(s) if meta.save else getattr(s, key)
        if "." in key:
            head, tail = key.split(".", 1)
            out.setdefault(head, {})[tail] = value
        else:
            out[key] = list(value) if isinstance(value, tuple) else value
    out["unmeasured"] = sorted([g, p] for g, p in s.unmeasured)
    # lazy: designer.question.saved_answer's schema (~10 ms) loads with the answer, not at start-up
    from designer.question.saved_answer import catalog_record  # the catalog files' paths and hashes

    out.update(catalog_record(s.catalog_files))
    return out


# ---------------------------------------------------------------- click options
def _click_type(name: str, meta: Meta) -> Any:
    """The option's type: the Meta's, or the annotation's choices or numeric bounds."""
    if meta.click_type is not None:
        return meta.click_type
    info = Question.model_fields[name]
    args = getattr(info.annotation, "__args__", ())
    literal = next(
        (a for a in (info.annotation, *args) if getattr(a, "__origin__", None) is Literal), None
    )
    if literal is not None:
        return click.Choice(literal.__args__)
    bounds = {
        k: getattr(m, k) for m in info.metadata for k in ("ge", "gt", "le", "lt") if hasattr(m, k)
    }
    if int in (info.annotation, *args):
        return WholeCount(min=bounds.get("ge"))
    if float in (info.annotation, *args):
        return Finite(
            min=bounds.get("ge", bounds.get("gt")),
            max=bounds.get("le", bounds.get("lt")),
            min_open="gt" in bounds,
            max_open="lt" in bounds,
        )
    return None


def field_option(name: str, help: str | None = None) -> Callable:
    """The click option of one question field (``help`` where a command says more)."""
    meta, info = META[name], Question.model_fields[name]
    if info.annotation is bool:  # an on/off flag (--no-failures)
        return click.option(
            meta.flag, meta.param or name, is_flag=True, default=None, help=help or info.description
        )
    multiple = info.annotation in (list[str], dict[str, int])
    default = info.default if meta.cli_default is _SAME else meta.cli_default
    return click.option(
        meta.flag,
        meta.param or name,
        type=_click_type(name, meta),
        multiple=multiple,
        default=None if multiple else default,
        show_default=not multiple and default is not None,
        metavar=meta.metavar,
        help=help or info.description,
    )


def question_options(f: Callable) -> Callable:
    """Click options for every question field, in declaration order."""
    for name in reversed(QUESTION_FIELDS):
        f = field_option(name)(f)
    return f
