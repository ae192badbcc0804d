"""Goodput: the expected wall time of a training run with failures, checkpoints and restarts.

A synchronous job stops at any failure of any of its GPUs or servers; it then loses the
work since its last checkpoint and the restart (detect, reschedule, reload). Failures are
a Poisson process whose rate grows with the cluster: lambda = G x r_gpu + N x r_server
per hour (N servers of G / N GPUs), the per-GPU and per-server rates of the platform
(catalog ``failures``: Dubey et al. 2024, "The Llama 3 Herd of Models", Table 5: 419
unexpected interruptions in 54 days on 16,384 H100; Kokolis et al. 2024, "Revisiting
Reliability in Large-Scale Machine Learning Research Clusters", arXiv 2410.21680: the
mean time to failure M = 1 / lambda falls inversely with the job's GPU count).

First-order model (Young 1974, "A first order approximation to the optimum checkpoint
interval", CACM 17(9); Daly 2006, "A higher order estimate of the optimum checkpoint
interval for restart dumps", FGCS 22(3), eq. 1 to first order): with a checkpoint every
tau seconds of training that blocks for delta seconds, the wall time per second of
training is 1 + delta / tau + lambda (tau / 2 + R): the checkpoints' blocking time, and
per failure half an interval of lost work plus the restart R. The interval that
minimises it is Young's tau = sqrt(2 delta M).

Checkpoints: the model state (weights and optimizer, models/memory.py's bytes per
parameter) is saved fully parallel (each of the G GPUs writes 1/G of it: Megatron-LM's
``--ckpt-fully-parallel-save``) and asynchronously (Megatron-LM ``--async-save``,
PyTorch DCP ``async_save``): training blocks only for the copy of a GPU's shard to host
memory, delta = S / (G x snapshot bandwidth); the write to storage runs behind it at the
storage bandwidth per server, so the interval is at least S / (N x storage bandwidth),
and a restart reloads the state at the same rate. With those, delta / tau and
lambda tau / 2 are constants of the platform and the overhead is

    overhead(G) = x / G + a + c x G

(``Coefficients``): x = 0 with Young's interval; the CP-SAT model encodes exactly this
form (solvers/cpsat/goodput.py). Valid while the overhead is small (first order).

The interval has a floor F (catalog ``checkpoint_interval_floor_min``): a run saves at
iteration boundaries (Megatron-LM ``--save-interval`` and torchtitan
``checkpoint.interval`` count steps), so the interval is at least one step and at least
the snapshot and the storage write; Young's t1 / G falls below any such floor on large
plans (4-48 s on this catalog's). The interval is max(t1 / G, F), and since the lost
fraction is convex in tau with its minimum at Young's, the floored run loses the fixed
interval's x' / G + a' + c' G (tau = F) from G* = t1 / F GPUs up, Young's a + c G below:
two pieces of the same form, the second never below the first (so Young's form stays a
lower bound of both; solvers/screen/bounds.py reads it), both solvers read them from
``coefficients(floored)`` and ``floor_gpus()``."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

SECONDS_PER_HOUR = 3600.0


def young_interval_s(delta_s: float, mtbf_s: float) -> float:
    """Young's (1974) first-order optimum checkpoint interval, sqrt(2 delta M)."""
    return math.sqrt(2.0 * delta_s * mtbf_s)


def lost_fraction(delta_s: float, interval_s: float, rate_per_s: float, restart_s: float) -> float:
    """Wall time lost per second of training, first order (Young 1974; Daly 2006):
    delta / tau (checkpoint blocking) + lambda (tau / 2 + R) (lost work and restart)."""
    return delta_s / interval_s + rate_per_s * (interval_s / 2.0 + restart_s)


def expected_failures(rate_per_s: float, wall_s: float) -> float:
    """Expected interruptions in ``wall_s`` seconds of a Poisson process of rate lambda."""
    return rate_per_s * wall_s


@dataclass(frozen=True)
class FailureModel:
    """One platform's failure and checkpoint constants for one model (bytes, rates, times)."""

    per_gpu_hour: float  # GPU-caused interruptions per GPU-hour
    per_server_hour: float  # other interruptions per server-hour
    gpus_per_server: int
    restart_s: float  # detect, reschedule, reinitialise (the reload is added)
    checkpoint_bytes: float  # the whole model state S
    snapshot_bytes_per_s_per_gpu: float
    storage_bytes_per_s_per_server: float
    fixed_interval_s: float | None = None  # --checkpoint-every; None: Young's optimum
    interval_floor_s: float = 0.0  # the least interval Young's optimum is raised to

    @property
    def rate_per_gpu_s(self) -> float:
        """Interruptions per GPU-second, server causes spread over the server's GPUs."""
        return (self.per_gpu_hour + self.per_server_hour / self.gpus_per_server) / SECONDS_PER_HOUR

    def storage_s_times_g(self) -> float:
        """G x (the time to write or reload the state at N x the storage bandwidth)."""
        return self.checkpoint_bytes * self.gpus_per_server / self.storage_bytes_per_s_per_server

    def _young_s_times_g(self) -> float:
        """G x Young's interval, never shorter than the storage write (t1: tau = t1 / G)."""
        # sqrt(2 S / (B r)) taken as sqrt(2 S / B) / sqrt(r): a tiny rate (a study's
        # failure scale near 0) would overflow the quotient to infinity
        young_g = math.sqrt(2.0 * self.checkpoint_bytes / self.snapshot_bytes_per_s_per_gpu)
        young_g /= math.sqrt(self.rate_per_gpu_s)
        return max(young_g, self.storage_s_times_g())

    def interval_s(self, num_gpus: Any) -> Any:
        """The checkpoint interval (seconds of training): --checkpoint-every, or Young's
        optimum, never shorter than the storage write of the last checkpoint nor than the
        floor (module docstring)."""
        if self.fixed_interval_s is not None:
            return self.fixed_interval_s + 0.0 * num_gpus
        if self.rate_per_gpu_s <= 0:
            return math.inf + 0.0 * num_gpus
        young = self._young_s_times_g() / num_gpus
        floored = young < self.interval_floor_s  # scalars and arrays alike (no numpy here)
        return young + floored * (self.interval_floor_s - young)

    def floor_gpus(self) -> float | None:
        """G* = t1 / F: from this many GPUs up the floor sets the interval (None: never, with
        a fixed interval, no failures or no floor)."""
        if self.fixed_interval_s is not None or self.rate_per_gpu_s <= 0:
            return None
        if self.interval_floor_s <= 0:
            return None
        return self._young_s_times_g() / self.interval_floor_s

    def coefficients(self, floored: bool = False) -> tuple[float, float, float]:
        """(x, a, c) of overhead(G) = x / G + a + c G (module docstring): Young's interval
        (t1 / G), or with ``floored`` the floor's (valid from floor_gpus() GPUs up)."""
        r, s = self.rate_per_gpu_s, self.checkpoint_bytes
        reload_g = self.storage_s_times_g()  # G x reload time
        if r <= 0:
            return 0.0, 0.0, 0.0
        tau = self.fixed_interval_s
        if tau is None and floored and self.floor_gpus() is not None:
            tau = self.interval_floor_s
        if tau is not None:
            x = s / (self.snapshot_bytes_per_s_per_gpu * tau)
            return x, r * reload_g, r * (tau / 2.0 + self.restart_s)
        t1 = self._young_s_times_g()  # tau = t1 / G
        a = s / (self.snapshot_bytes_per_s_per_gpu * t1) + r * t1 / 2.0 + r * reload_g
        return 0.0, a, r * self.restart_s

    def overhead(self, num_gpus: Any) -> Any:
        """Wall time lost per second of training on ``num_gpus`` GPUs (arrays too); equal to
        lost_fraction with delta = S / (G snapshot bandwidth), lambda = r G, the restart
        plus the reload and the interval of interval_s."""
        x, a, c = self.coefficients()
        young = x / num_gpus + a + c * num_gpus
        g_star = self.floor_gpus()
        if g_star is None:
            return young
        xf, af, cf = self.coefficients(floored=True)
        at_floor = xf / num_gpus + af + cf * num_gpus
        return young + (num_gpus >= g_star) * (at_floor - young)


@dataclass(frozen=True)
class Goodput:
    """A plan's expected run: ideal and expected days, the useful fraction, failures."""

    ideal_days: float
    overhead: float
    failures_expected: float
    checkpoint_interval_min: float | None

    @property
    def days(self) -> float:
        return self.ideal_days * (1.0 + self.overhead)

    @property
    def goodput(self) -> float:
        return 1.0 / (1.0 + self.overhead)

    @property
    def lost_days(self) -> float:
        return self.days - self.ideal_days


def goodput(model: FailureModel, num_gpus: int, ideal_days: float) -> Goodput:
    """The expected run of ``ideal_days`` of training on ``num_gpus`` GPUs."""
    over = float(model.overhead(num_gpus))
    wall_s = ideal_days * (1.0 + over) * 86400.0
    interval = float(model.interval_s(num_gpus))
    return Goodput(
        ideal_days=ideal_days,
        overhead=over,
        failures_expected=expected_failures(model.rate_per_gpu_s * num_gpus, wall_s),
        checkpoint_interval_min=interval / 60.0 if math.isfinite(interval) else None,
    )


def spare_cover_per_100(model: FailureModel, facility: Any) -> float:
    """Hot spares per 100 servers that absorb every failure: the servers in repair, by
    Little's law (J. D. C. Little 1961, "A proof for the queuing formula L = lambda W",
    Operations Research 9(3)), L = 100 x lambda x W per 100 servers with lambda the
    interruptions per server-hour at the rates in effect (the platform's times the
    question's failure scale: rate_per_gpu_s x GPUs per server) and W the facility's
    ``hot_spare_repair_hours``; never fewer than the facility's
    ``hot_spares_per_100_servers``, the pool it sizes with margin for its own rates (2
    against the 1.1 Little's law gives at H100's 1x rates: catalog hot_spare_source).
    At 20x H100's rates L = 22.7 per 100, so 2 per 100 absorb 8.8% of the failures."""
    per_server_hour = model.rate_per_gpu_s * model.gpus_per_server * SECONDS_PER_HOUR
    in_repair = 100.0 * per_server_hour * facility.hot_spare_repair_hours
    return max(facility.hot_spares_per_100_servers, in_repair)


def absorbed_fraction(spares_per_100: float, covering_per_100: float) -> float:
    """The share of failures a hot spare absorbs: all of them once the pool covers the
    servers in repair (``covering_per_100``: spare_cover_per_100), proportionally fewer
    below (a pool of half the cover is free for about half the failures; first order)."""
    if spares_per_100 <= 0 or covering_per_100 <= 0:
        return 0.0
    return min(1.0, spares_per_100 / covering_per_100)


def with_purchases(
    model: FailureModel, facility: Any, spares_per_100: float, storage_gb_per_s: float
) -> FailureModel:
    """The failure model of a plan that buys ``spares_per_100`` hot spare servers per 100
    and ``storage_gb_per_s`` of checkpoint storage per server (issue 18 item 4): a failure
    a spare absorbs (absorbed_fraction of spare_cover_per_100, the cover at ``model``'s
    rates) restarts in ``hot_spare_restart_min`` (never longer than the plain restart),
    the others as before; the write and the reload run at the bought storage.
    The overhead keeps the form x / G + a + c G: the spares move c, the storage a (the
    reload and, when the write bounds the interval, the interval)."""
    f = absorbed_fraction(spares_per_100, spare_cover_per_100(model, facility))
    hot_s = min(model.restart_s, facility.hot_spare_restart_min * 60.0)
    return replace(
        model,
        restart_s=f * hot_s + (1.0 - f) * model.restart_s,
        storage_bytes_per_s_per_server=storage_gb_per_s * 1e9,
    )


def failure_model(
    gpu: Any,
    facility: Any,
    params: float,
    bytes_per_param: float,
    scale: float = 1.0,
    interval_min: float | None = None,
) -> FailureModel:
    """The FailureModel of a catalog GPU (its ``failures`` or the facility's default) for a
    model of ``params`` parameters with ``bytes_per_param`` of checkpointed state, its
    rates times ``scale`` (a study's failure-rate axis)."""
    rates = gpu.failures or facility.failures
    per_gpu, per_server = (rates.per_gpu_hour, rates.per_server_hour) if rates else (0.0, 0.0)
    return FailureModel(
        per_gpu_hour=per_gpu * scale,
        per_server_hour=per_server * scale,
        gpus_per_server=gpu.server.gpus_per_server,
        restart_s=facility.restart_min * 60.0,
        checkpoint_bytes=params * bytes_per_param,
        snapshot_bytes_per_s_per_gpu=facility.checkpoint_snapshot_gb_per_s_per_gpu * 1e9,
        storage_bytes_per_s_per_server=facility.checkpoint_storage_gb_per_s_per_server * 1e9,
        fixed_interval_s=None if interval_min is None else interval_min * 60.0,
        interval_floor_s=facility.checkpoint_interval_floor_min * 60.0,
    )
