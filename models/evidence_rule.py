"""The evidence rule: which (platform, precision) pairs may drive an answer (issue 30).

A pair is **measured** when its profile was checked on at least ``MIN_RUNS`` measured
runs in that precision, published by at least ``MIN_SOURCES`` independent
organisations, at least ``MIN_MULTI_SERVER_RUNS`` of them on more than one server;
**thin** with fewer; **extrapolated** with none. The last condition is about scale:
every plan the optimizer makes past one server runs over a scale-out network, and runs
that all fit in one server (MI355X's five FP8 runs: one 8-GPU benchmark) never checked
the model's cross-server terms on that platform. A vendor's own
figures count as one organisation however many documents carry them (NVIDIA's
repositories, papers and reports are one source; so are AMD's, Intel's), so a
platform is measured only once someone other than its maker, or a second party
beside it, has published runs the model was checked on. Each run's organisation is
recorded in ``bench/data/published/organisations.csv``; the catalog's ``measured:``
blocks keep the per-precision count (``catalog.specs.Evidence.sources``) and the runs past
one server (``Evidence.multi_server_runs``).

``--evidence measured`` (the default) searches the measured pairs only; ``thin``
adds the thin pairs; ``any`` every pair. An evidence block without recorded sources
(a catalog file written by hand), or whose sources do not add up to its runs, is judged
on its number of runs alone; a block that does not record its runs past one server is not
asked for one.
"""

from __future__ import annotations

from dataclasses import dataclass

from catalog.specs import Evidence

MIN_RUNS = 5
"""Runs in a precision a measured pair needs."""
MIN_SOURCES = 2
"""Independent organisations a measured pair's runs come from (first-party counts as one)."""
MIN_MULTI_SERVER_RUNS = 1
"""Runs on more than one server a measured pair needs (its scale-out network measured)."""
RULE_TEXT = (
    f"{MIN_RUNS}+ runs from {MIN_SOURCES}+ independent sources, one of them on more than one "
    "server, make a pair measured"
)
"""The rule in one clause, as the answers and errors state it."""
TIERS = ("measured", "thin", "extrapolated")
LEVELS: dict[str, tuple[str, ...]] = {
    "measured": ("measured",),
    "thin": ("measured", "thin"),
    "any": TIERS,
}
"""The tiers each ``--evidence`` level searches."""


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


@dataclass(frozen=True)
class PairEvidence:
    """The evidence behind one (GPU, precision) pair and its tier."""

    gpu: str
    precision: str
    runs: int
    sources: tuple[str, ...]  # the organisations, most runs first; empty when not recorded
    multi_server: int | None = None  # runs past one server; None: not recorded

    @property
    def recorded(self) -> bool:
        return bool(self.sources)

    @property
    def runs_needed(self) -> int:
        return max(0, MIN_RUNS - self.runs)

    @property
    def sources_needed(self) -> int:
        if self.runs and not self.recorded:
            return 0  # not recorded: judged on the runs alone
        return max(0, MIN_SOURCES - len(self.sources))

    @property
    def multi_server_needed(self) -> int:
        if self.multi_server is None or not self.runs:
            return 0
        return max(0, MIN_MULTI_SERVER_RUNS - self.multi_server)

    @property
    def tier(self) -> str:
        if self.runs == 0:
            return "extrapolated"
        short = self.runs_needed or self.sources_needed or self.multi_server_needed
        return "thin" if short else "measured"

    def admitted(self, level: str) -> bool:
        """Whether ``--evidence level`` searches this pair."""
        return self.tier in LEVELS[level]

    @property
    def summary(self) -> str:
        """``2 bf16 runs from 1 source (AMD)`` or ``no bf16 run``."""
        if self.runs == 0:
            return f"no {self.precision} run"
        text = _plural(self.runs, f"{self.precision} run")
        if self.recorded:
            text += f" from {_plural(len(self.sources), 'source')} ({', '.join(self.sources)})"
        if self.multi_server == 0:
            text += ", none on more than one server"
        return text

    @property
    def to_eligible(self) -> str:
        """What more evidence would make the pair measured, one clause."""
        if self.tier == "measured":
            return "it is eligible"
        if self.runs == 0:
            return (
                f"{_plural(MIN_RUNS, 'measured run')} from {MIN_SOURCES} independent sources, "
                "one of them on more than one server, would make it eligible"
            )
        others = f"a source other than {' and '.join(self.sources)}"
        scale = " on more than one server" if self.multi_server_needed else ""
        more = _plural(self.runs_needed, "more run")
        one = f", one of them{scale}," if scale else ""
        if self.runs_needed and self.sources_needed:
            return f"{more} from {others}{one} would make it eligible"
        if self.runs_needed:
            which = scale if self.runs_needed == 1 else one
            return f"{more}{which} would make it eligible"
        if self.sources_needed:
            runs = _plural(self.sources_needed, "run")
            return f"{runs}{scale} from {others} would make it eligible"
        return "a run on more than one server would make it eligible"


def detail_recorded(evidence: Evidence) -> bool:
    """Whether the block's per-precision detail (``sources``, ``bands``) describes its runs:
    the sources add up to ``runs``. A catalog file that overrides a GPU's runs inherits the
    shipped detail, which then no longer applies."""
    counted = sum(n for orgs in evidence.sources.values() for n in orgs.values())
    return bool(evidence.sources) and counted == evidence.runs


def pair_evidence(gpu: str, evidence: Evidence | None, precision: str) -> PairEvidence:
    """The pair's runs and organisations from a GPU's evidence block."""
    if evidence is None or precision not in evidence.precisions:
        return PairEvidence(gpu, precision, 0, ())
    by_org = evidence.sources.get(precision)
    if not by_org or not detail_recorded(evidence):
        # not recorded (or not the block's runs: a catalog file that changed the runs and
        # inherited the sources): judged on the block's runs alone
        return PairEvidence(gpu, precision, evidence.runs, ())
    orgs = tuple(sorted(by_org, key=lambda o: (-by_org[o], o)))
    multi = evidence.multi_server_runs.get(precision)
    return PairEvidence(gpu, precision, sum(by_org.values()), orgs, multi)
