"""Rentable cloud capacity (issue 31 item 2): the rental terms and the largest block of
each GPU type one provider rents in one region (catalog/data/cloud.yaml, every number with
its source and date or marked [assumed]).

A plan rented under a term pays price_factor x the GPU's on-demand price
(``GPUSpec.cloud_usd_per_gpu_hour``) x GPUs x 24 x max(job days, the term's minimum days),
except that on demand (no minimum) the plan rents its GPU type's block: a block with a
published price of its own (``CloudBlock.usd_per_gpu_hour``: AWS's Capacity Blocks) is paid
at that price, not the single-server offer the catalog's on-demand price quotes, and a block
whose provider reserves it in whole lengths (``CloudBlock.billing``: AWS's days, then weeks,
up to 182 days; Lambda's weeks) is paid for the next length at or above the job's days, and
cannot be rented for longer than its longest. models/rental.py turns these into the price a
rented plan pays; solvers/cloud_terms.py chooses the term and keeps the cluster within the
block."""

from __future__ import annotations

import math
from functools import cache, lru_cache
from importlib import resources

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from catalog.errors import CatalogError

_DATE = r"^\d{4}-\d{2}(-\d{2})?$"


class CloudTerm(BaseModel):
    """A rental term: its minimum billed days and its price against on-demand."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(min_length=1)
    min_days: float = Field(ge=0, le=3650)
    price_factor: float = Field(gt=0, le=1)
    source: str = Field(min_length=1)
    date: str = Field(pattern=_DATE)


class Increment(BaseModel):
    """One stretch of a block's reservation lengths: ``step_days`` apart from the previous
    stretch's end (0 for the first) up to ``up_to_days`` (None: without end)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    up_to_days: int | None = Field(default=None, ge=1, le=3650)
    step_days: int = Field(ge=1, le=3650)


class BlockBilling(BaseModel):
    """The lengths a block is reserved in (paid up front: a job is billed the next length
    at or above its days) and the longest reservation (None: no limit published)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    increments: tuple[Increment, ...] = Field(min_length=1)
    max_days: int | None = Field(default=None, ge=1, le=3650)
    source: str = Field(min_length=1)
    date: str = Field(pattern=_DATE)

    @model_validator(mode="after")
    def _lengths(self) -> BlockBilling:
        start = 0
        for i, inc in enumerate(self.increments):
            last = i == len(self.increments) - 1
            if inc.up_to_days is None and not last:
                raise ValueError(f"increments[{i}]: only the last increment may omit up_to_days")
            if inc.up_to_days is not None:
                if inc.up_to_days <= start or (inc.up_to_days - start) % inc.step_days:
                    raise ValueError(
                        f"increments[{i}]: up_to_days must lie a whole number of step_days "
                        f"({inc.step_days}) past {start}"
                    )
                start = inc.up_to_days
        ends = self.increments[-1].up_to_days
        if self.max_days is not None and ends is not None and self.max_days > ends:
            raise ValueError(f"max_days {self.max_days} is past the last increment's {ends}")
        return self

    def steps(self) -> tuple[tuple[float, int], ...]:
        """(up_to_days, step_days) per increment, math.inf for the open last one."""
        return tuple(
            (math.inf if i.up_to_days is None else float(i.up_to_days), i.step_days)
            for i in self.increments
        )


class CloudBlock(BaseModel):
    """The largest block of one GPU type one provider rents in one region."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    provider: str = Field(min_length=1)
    region: str = Field(min_length=1)
    max_gpus: int = Field(ge=1, le=10_000_000)
    usd_per_gpu_hour: float | None = Field(
        default=None,
        gt=0,
        le=1000,
        description="the block's own on-demand price per GPU-hour, where its provider "
        "publishes one (its source says where)",
    )
    billing: BlockBilling | None = Field(
        default=None,
        description="the lengths its provider reserves it in, and the longest (None: billed "
        "by use, as the GPU's on-demand price)",
    )
    source: str = Field(min_length=1)
    date: str = Field(pattern=_DATE)


class CloudOffers(BaseModel):
    """The terms every GPU type is rented under and the blocks per GPU type."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    terms: tuple[CloudTerm, ...] = Field(min_length=1)
    default_max_gpus: int = Field(ge=1, le=10_000_000)
    default_source: str = Field(min_length=1)
    blocks: dict[str, CloudBlock] = {}

    def term(self, name: str) -> CloudTerm:
        """The term called ``name`` (a saved plan's, a rented plan's extras)."""
        return next(t for t in self.terms if t.name == name)

    def block_gpus(self, gpu: str) -> int:
        """The largest block of ``gpu`` one provider rents (the default without an entry)."""
        block = self.blocks.get(gpu)
        return block.max_gpus if block is not None else self.default_max_gpus

    def rentable_gpus(self, gpu: str, cloud_max_gpus: int | None) -> int:
        """The largest block a question may rent: --cloud-max-gpus, else block_gpus."""
        return cloud_max_gpus if cloud_max_gpus is not None else self.block_gpus(gpu)

    def block_usd_per_gpu_hour(self, gpu: str) -> float | None:
        """The published on-demand price of ``gpu``'s block (None: none published)."""
        block = self.blocks.get(gpu)
        return block.usd_per_gpu_hour if block is not None else None

    def block_billing(self, gpu: str) -> BlockBilling | None:
        """The lengths ``gpu``'s block is reserved in (None: billed by use)."""
        block = self.blocks.get(gpu)
        return None if block is None else block.billing

    def block_label(self, gpu: str) -> str:
        """Who rents the block, where (or that its size is assumed)."""
        block = self.blocks.get(gpu)
        if block is None:
            return "[assumed] the default block, catalog/data/cloud.yaml"
        return f"{block.provider}, {block.region}, {block.date}"


def shipped_on_demand_usd_per_gpu_hour(gpu: str) -> float | None:
    """The shipped catalog's on-demand price of ``gpu``, the price its block's own price is
    quoted beside (None: a GPU type the shipped catalog lacks)."""
    return _shipped_on_demand_prices().get(gpu)


@cache
def _shipped_on_demand_prices() -> dict[str, float]:
    """Every shipped GPU's on-demand price, the shipped catalog read once."""
    # lazy: catalog.loader reads every shipped YAML file; only a rented question asks
    from catalog.loader import load_catalog

    return {name: g.cloud_usd_per_gpu_hour for name, g in load_catalog().gpus.items()}


@lru_cache(maxsize=1)
def cloud_offers() -> CloudOffers:
    """The shipped catalog/data/cloud.yaml, validated (a CatalogError names the field)."""
    text = resources.files("catalog").joinpath("data", "cloud.yaml").read_text(encoding="utf-8")
    try:
        return CloudOffers.model_validate(yaml.safe_load(text))
    except ValueError as err:
        raise CatalogError(f"catalog/data/cloud.yaml: {err}") from err
