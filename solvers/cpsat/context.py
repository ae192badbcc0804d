"""What the parts of the CP-SAT model share while it is built (solvers/cpsat/model.py).

Each part (the choices, scale, NICs, servers, time, cluster and cost) sets the
fields it defines; the constraint families (solvers/families/) read them in their
``encode`` hook, after every part has run."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from ortools.sat.python import cp_model

from catalog.specs import GPUSpec, NICSpec
from models.step import StepCoefficients
from models.units import days_from_seconds
from solvers.intmath import hi, selected

if TYPE_CHECKING:  # read by the annotations only: the context stays on the second floor
    from solvers.cpsat.cluster import ClusterTerms
    from solvers.decisions import Shape
    from solvers.scenario import PreparedQuestion, Scenario
    from solvers.screen.bounds import BoundTerms
    from solvers.space import Candidate

IntVar = cp_model.IntVar


class Bounds(NamedTuple):
    """Each candidate's DP range and objective lower bound (solvers/screen/bounds.py; prune's)."""

    dp_ranges: list[tuple[int, int]]
    lower_bounds: list[float]


@dataclass
class GpuTime:
    """GPU-time per trained sequence, G x T' (in ``unit_s / scale`` GPU-seconds), rounded up,
    and a lower bound of it over the shapes."""

    var: IntVar
    scale: int
    lo: int


# The build's stages in the order solvers/cpsat/model.py runs them, each with the fields of
# BuildContext it sets first (a later stage may rewrite one: add_batch_tokens and add_goodput
# inflate per_seq and gpu_time, add_purchase_cost adds to capex_expr). A stage reads only the
# inputs and the fields of the stages before it; tests/test_cpsat_context.py checks that each
# named function sets its fields and that every field is named once.
STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("model._choices", ("x", "shapes", "enforce", "gpus", "gpu_names", "gpu_lit", "nics")),
    ("purchases.add_purchase_choices", ("spare_lits", "storage_lits")),
    ("model._scale", ("ceiling_seq", "gpu_cap", "dp_max", "m_max", "dp", "m")),
    (
        "model._nics",
        ("counts_of", "fits_of", "nic_lits", "nics_per_node", "nic_count", "node_bw"),
    ),
    ("model._batch", ("w", "b_sel", "global_batch")),
    ("model._servers", ("num_gpus", "nodes", "cf", "r_dp", "r_pp")),
    ("model._build", ("least_per_gpu",)),  # TCO: bounds.prepare_bounds' least rates
    ("model._time", ("goodput_room",)),
    ("time.add_time", ("unit_s", "k_scale", "per_seq", "days_per_unit", "gpu_time")),
    ("goodput.add_goodput", ("ideal_per_seq",)),
    ("cost.add_cluster", ("cluster", "nics_total", "capex_expr")),
    ("purchases.add_purchase_cost", ("purchase_hi_cents",)),
    ("cost.add_cost", ("cost_expr", "per_cent", "coef", "gt_of", "min_gt_per_gpu", "gpu_days")),
    ("gpu_time_cap.tco_rates", ("tco",)),  # TCO: on first ask (goodput or cost)
    ("model._cuts", ("lbs",)),
)


@dataclass
class BuildContext:
    """The model under construction and the variables its parts have defined so far: the
    inputs (the fields up to ``terms``), then what each stage sets (STAGES says which)."""

    md: cp_model.CpModel
    scenario: Scenario
    candidates: list[Candidate]
    coarsen: float  # the time unit's coarsening (build retries coarser on overflow)
    cost_cap_usd: float | None
    given_bounds: Bounds | None
    # what the parts read of the question, computed once per solve (Scenario.prepare), and
    # the bounds' terms (bounds.prepare_bounds: least rates per GPU, DP limits)
    prepared: PreparedQuestion
    terms: BoundTerms
    # Each part sets its fields (the part named in each comment; solvers/cpsat/model.py);
    # fields of one part may sit in another's group, so that like declarations stay apart.
    # _choices: a literal per shape, GPU type and NIC type offered, the families' literals
    x: list[IntVar] = field(init=False)
    shapes: list[Shape] = field(init=False)
    enforce: dict[str, IntVar] = field(init=False)
    gpus: dict[str, GPUSpec] = field(init=False)
    gpu_names: list[str] = field(init=False)
    gpu_lit: dict[str, IntVar] = field(init=False)
    nics: list[NICSpec] = field(init=False)
    cf: list[StepCoefficients] = field(init=False)  # _servers: each shape's coefficients
    # _scale: the batch ceiling in sequences, DP degree d and micro-batches per step m
    ceiling_seq: int | None = field(init=False)
    gpu_cap: int = field(init=False)
    dp_max: int = field(init=False)
    m_max: int = field(init=False)
    dp: IntVar = field(init=False)
    m: IntVar = field(init=False)
    # _nics: counts and NIC types each GPU type's server takes, NICs per server, bandwidth
    counts_of: dict[str, tuple[int, ...]] = field(init=False)
    nics_per_node: IntVar = field(init=False)
    node_bw: IntVar = field(init=False)
    fits_of: dict[str, set[str]] = field(init=False)
    nic_lits: dict[str, IntVar] = field(init=False)
    # _batch: W = m d, the micro-batch b, the global batch b W
    w: IntVar = field(init=False)
    b_sel: IntVar = field(init=False)
    global_batch: IntVar = field(init=False)
    nic_count: dict[str, IntVar] = field(init=False)  # _nics: NICs of each type
    # _servers: G, servers, the regimes (DP group in one server, job in one server)
    num_gpus: IntVar = field(init=False)
    nodes: IntVar = field(init=False)
    r_dp: IntVar = field(init=False)
    r_pp: IntVar = field(init=False)
    cluster: ClusterTerms | None = None  # add_cluster: fabric, racks, power
    # add_time: the unit, T' (scaled by k_scale), days per unit of T', G x T'
    unit_s: float = field(init=False)
    k_scale: int = field(init=False)
    per_seq: IntVar = field(init=False)
    days_per_unit: float = field(init=False)
    gpu_time: GpuTime = field(init=False)
    # solvers/cpsat/goodput.py: with failures, per_seq and gpu_time are the expected values
    goodput_room: int = 1  # the expected time's most times the ideal (int64 headroom)
    ideal_per_seq: IntVar | None = None
    # solvers/cpsat/purchases.py: a literal per hot spare and storage option (none: no
    # decision), the most their price adds to the capex
    spare_lits: dict[float, IntVar] = field(default_factory=dict)
    storage_lits: dict[float, IntVar] = field(default_factory=dict)
    purchase_hi_cents: int = 0
    # add_cluster and add_cost
    capex_expr: Any = None
    nics_total: IntVar | None = None
    cost_expr: Any = None
    per_cent: int = 1  # cost units per cent
    # cloud: cents per GPU-time unit (solvers/cpsat/gpu_time_cap.py cloud_cents_per_unit,
    # once per build: the goodput's GPU-time cap and the cost read it)
    coef: dict[str, float] = field(default_factory=dict)
    # TCO: the rates per GPU-time unit (solvers/cpsat/gpu_time_cap.py tco_rates), once per
    # build, read by the goodput's GPU-time cap and by the cost; None until first asked
    tco: Any = None
    gt_of: dict[str, IntVar] = field(default_factory=dict)  # cloud: GPU-time per GPU type
    # cloud under a term with a minimum: the GPU-time units each GPU is billed at least
    # (cost.billed_gpu_time; the budget bounds GPUs by it), else 0
    min_gt_per_gpu: int = 0
    # cloud, a block reserved in lengths (models.rental.Billing): the whole GPU-days a plan of
    # each such GPU type pays, GPUs x its length (cost._billed_gpu_days); others by use
    gpu_days: dict[str, IntVar] = field(default_factory=dict)
    lbs: list[float] = field(default_factory=list)  # per candidate, objective lower bounds
    # solvers/cpsat/model.py, for add_cost's TCO: the least capex (USD) and IT power (W) per
    # GPU of each type (solvers/screen/bounds.py least_per_gpu), in the order of ``gpus``
    least_per_gpu: list[tuple[float, float]] = field(default_factory=list)

    def sel(self, values: Iterable[Any]) -> cp_model.LinearExpr:
        """The chosen candidate's value: sum_i x_i * value_i."""
        return selected(self.x, values)

    @staticmethod
    def hi(var: IntVar) -> int:
        return hi(var)

    def bounded(self, name: str, values: Iterable[Any]) -> IntVar:
        """A variable equal to the chosen candidate's value, bounded by the values."""
        vals = [int(v) for v in values]
        var = self.md.new_int_var(min(0, min(vals)), max(0, max(vals)), name)
        self.md.add(var == self.sel(vals))
        return var


def gpu_days_per_unit(ctx: BuildContext) -> float:
    """GPU-days to train per unit of the GPU-time per sequence (add_time's unit and scale)."""
    return days_from_seconds(ctx.unit_s / ctx.gpu_time.scale * ctx.prepared.sequences)
