"""Build a solver Scenario from the command line's options, translating bad input into UsageError."""

from __future__ import annotations

from pathlib import Path

from catalog import CatalogError, load_catalog
from designer.errors import UsageError
from models import Assumptions, resolve_model
from solvers import FAMILIES, Scenario
from solvers.scenario import DEFAULT_MAX_BATCH_TOKENS

DEFAULT_MODEL = "llama2-70b"
DEFAULT_TOKENS = 2e12


def build_scenario(
    *,
    model: str = DEFAULT_MODEL,
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
    max_batch_tokens: float | None = None,
    min_batch_tokens: float | None = None,
    precision: str = "bf16",
    ignore: tuple[str, ...] = (),
    dp_overlap: float = 0.0,
) -> Scenario:
    spec = resolve_model(model)
    cat = load_catalog(list(catalog_files))
    for g in gpus:
        if g not in cat.gpus:
            raise UsageError(f"--gpu: unknown GPU {g!r}; choose from {', '.join(sorted(cat.gpus))}")
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
    if objective == "time" and budget is None and max_gpus is None:
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
    precisions = ("bf16", "fp8") if precision == "any" else (precision,)
    chosen = tuple(gpus) if gpus else tuple(cat.gpus)
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
            budget_usd=budget,
            deadline_days=deadline,
            max_gpus=max_gpus,
            max_batch_tokens=ceiling,
            min_batch_tokens=min_batch_tokens,
            precisions=precisions,
            assumptions=Assumptions(dp_overlap=dp_overlap),
            disabled=frozenset(ignore),
        )
    except CatalogError as err:
        raise UsageError(str(err)) from err
