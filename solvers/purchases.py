"""Hot spare servers and checkpoint storage as purchase decisions (issue 18 item 4): the
options both solvers choose from, per GPU type (models/goodput.py with_purchases for the
time, models/cost.py purchases_cents for the price).

A plan buys one option of each: spares per 100 servers from the facility's
``hot_spare_options_per_100_servers`` and storage GB/s per server from
``checkpoint_storage_options_gb_per_s_per_server``. Only a question with failures on,
priced by purchase (capex or TCO), decides them; an ideal or a rented (cloud) plan keeps
no spares and the facility's storage, exactly as before the decision. Options that cannot
be better than a cheaper one are left out (the same list in both solvers, so that they
agree): a spare count absorbing no more failures than a smaller one (at the failure
rates in effect: models/goodput.py spare_cover_per_100), every spare count
when the hot restart is no shorter than the plain one, and storage slower than the
facility's (it buys nothing and only slows the write and the reload)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from models.evaluate import Evaluation
from models.goodput import with_purchases

if TYPE_CHECKING:
    from solvers.decisions import Config
    from solvers.scenario import Scenario


def decides_purchases(scenario: Scenario, gpu: str) -> bool:
    """Whether the plan on ``gpu`` chooses spares and storage (failures on, purchased;
    Scenario.decides_purchases)."""
    return scenario.decides_purchases(gpu)


def spare_options(scenario: Scenario, gpu: str) -> list[float]:
    """Spares per 100 servers a plan on ``gpu`` may buy, 0 first (Scenario.spare_options)."""
    return scenario.spare_options(gpu)


def storage_options(scenario: Scenario, gpu: str) -> list[float]:
    """Checkpoint storage GB/s per server a plan on ``gpu`` may have, the facility's first
    (Scenario.storage_options)."""
    return scenario.storage_options(gpu)


def purchased(ev: Evaluation, spares_per_100: float, storage_gb_per_s: float | None) -> Evaluation:
    """The evaluation of a plan with the spares and storage it buys (None: the facility's
    storage): the failure model with them (models/goodput.py with_purchases) and the
    cluster's BOM lines (models/cost.py Cluster); the same evaluation when it buys nothing."""
    if spares_per_100 == 0 and storage_gb_per_s is None:
        return ev
    fac = ev.cluster.facility
    storage = storage_gb_per_s or fac.checkpoint_storage_gb_per_s_per_server
    model = ev.failure_model
    if model is not None:
        model = with_purchases(model, fac, spares_per_100, storage)
    cluster = replace(ev.cluster, spares_per_100=spares_per_100, storage_gb_per_s=storage)
    extra = {**ev.extra, "failure_model_before_purchases": ev.failure_model}
    return replace(ev, cluster=cluster, failure_model=model, extra=extra)


def purchase_columns(ev: Evaluation, config: Config) -> dict[str, Any]:
    """The plan's columns of the decisions: spares per 100 and bought, storage per server
    (null for the ideal model, which writes no checkpoints)."""
    storage = config.storage_gb_per_s
    if storage is None and ev.failure_model is not None:
        storage = ev.cluster.facility.checkpoint_storage_gb_per_s_per_server
    return {
        "hot_spares_per_100": config.spares_per_100,
        "hot_spare_servers": ev.cluster.spare_servers,
        "checkpoint_storage_gb_per_s_per_server": storage,
    }
