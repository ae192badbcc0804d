"""What a cluster costs and draws: bill of materials, power, racks and energy.

Capex is the bill of materials: GPUs, server overhead (host, chassis, scale-up
switches), scale-out NICs, the fat tree's switches (models/fabric.py), two
transceivers and one cable per link, and racks. A cluster that is one scale-up
domain (one server, or an NVL72 rack's 18 trays: models/scaleup.py domain_servers)
has no fat tree, so no switches, links or switch power; its NICs are bought and
draw power all the same, as the server configuration ships them (catalog
``nic_counts``: four per NVL72 tray, fixed on the tray). Every unit price is rounded up
to the cent once (``usd_to_cents_up``), so the BOM total equals the plan's
capex to the cent and both solvers compute the same integers.

Power (rule of thumb in ../shared/reference/hardware/NOTES.md, section 3:
node IT load = GPUs x TDP + host + network): server nameplate = GPUs x TDP +
host power + its scale-out NICs (each with its transceiver); IT power adds
the switches; facility power = IT x PUE (PUE to 0.001). Racks: a server, as
configured, fills a rack up to its physical ``servers_per_rack`` and the
rack's power limit. Energy (``--pricing tco``):
facility power x the average draw fraction (Epoch AI: 75%) x training hours x
$/kWh.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from catalog.specs import Facility, GPUSpec, NICSpec, SwitchSpec
from models.fabric import FabricSize, fabric_counts, size_fabric
from models.scaleup import domain_servers

TIER_NAMES = ("leaf", "spine", "core")


def usd_to_cents_up(usd: float) -> int:
    """A unit price in whole cents, rounded up (the solvers' integer currency)."""
    return int(math.ceil(round(usd * 100.0, 6)))


def pue_milli(facility: Facility) -> int:
    """PUE in thousandths (the solvers' integer form)."""
    return int(round(facility.pue * 1000))


def server_power_w(gpu: GPUSpec) -> int:
    """Nameplate watts of one server without its scale-out NICs: GPUs x TDP + host."""
    return math.ceil(gpu.server.gpus_per_server * gpu.tdp_w + gpu.server.host_power_w - 1e-9)


def nic_power_w(nic: NICSpec) -> int:
    return math.ceil(nic.power_w - 1e-9)


def switch_power_w(switch: SwitchSpec) -> int:
    return math.ceil(switch.power_w - 1e-9)


def servers_per_rack(gpu: GPUSpec, facility: Facility, nic_w: int = 0) -> int:
    """Servers per rack: the physical limit, and as many as the rack's power allows (>= 1),
    for servers drawing ``server_power_w(gpu) + nic_w`` (their NICs)."""
    limit_kw = gpu.server.rack_power_kw or facility.rack_power_kw
    by_power = math.floor(limit_kw * 1000 / (server_power_w(gpu) + nic_w) + 1e-9)
    return max(1, min(gpu.server.servers_per_rack, by_power))


def link_cents(nic: NICSpec) -> int:
    """One link: a transceiver at each end and a cable."""
    return 2 * usd_to_cents_up(nic.transceiver_usd) + usd_to_cents_up(nic.cable_usd)


def facility_power_w(it_power_w, facility: Facility):
    """IT power x PUE (to 0.001); works on numpy arrays."""
    return it_power_w * pue_milli(facility) / 1000.0


def energy_usd(it_power_w, facility: Facility, days):
    """Electricity over ``days`` of training at the average draw; works on numpy arrays."""
    kwh = facility_power_w(it_power_w, facility) * facility.power_draw_fraction * days * 24 / 1000
    return kwh * facility.usd_per_kwh


def tco_usd(capex_usd, it_power_w, facility: Facility, days):
    """Capex (or the job's share of it over the facility's lifetime) plus energy."""
    life = facility.lifetime_years
    share = 1.0 if life is None else days / (365.0 * life)
    return capex_usd * share + energy_usd(it_power_w, facility, days)


def bought_gpus(gpu: GPUSpec, num_gpus):
    """GPUs bought for a job on ``num_gpus``: whole purchase units (an NVL72 rack is sold
    as 72 GPUs; catalog ServerSpec.purchase_unit_servers); works on numpy arrays."""
    unit = gpu.server.purchase_unit_gpus
    return -(-num_gpus // unit) * unit


@dataclass(frozen=True)
class ClusterTotals:
    """Capex (cents), IT power (W) and racks of clusters of many sizes (numpy arrays)."""

    capex_cents: np.ndarray
    it_power_w: np.ndarray
    racks: np.ndarray


def cluster_totals(
    gpu: GPUSpec,
    nic: NICSpec,
    switch: SwitchSpec,
    facility: Facility,
    num_gpus,
    nics_per_node: int,
) -> ClusterTotals:
    """The bill of materials' totals for each GPU count at once (the exhaustive solver's
    form of ``Cluster``; tests/test_fabric.py checks that both agree)."""
    num_gpus = bought_gpus(gpu, np.asarray(num_gpus, dtype=np.int64))
    servers = -(-num_gpus // gpu.server.gpus_per_server)
    _, switches, links = fabric_counts(
        servers, nics_per_node, switch.ports, facility.oversubscription, domain_servers(gpu)
    )
    nics_w = nics_per_node * nic_power_w(nic)
    racks = -(-servers // servers_per_rack(gpu, facility, nics_w))
    it_w = servers * (server_power_w(gpu) + nics_w) + switches * switch_power_w(switch)
    capex = (
        num_gpus * usd_to_cents_up(gpu.price_usd)
        + servers
        * (
            usd_to_cents_up(gpu.server.overhead_usd)
            + nics_per_node * usd_to_cents_up(nic.price_usd)
        )
        + switches * usd_to_cents_up(switch.price_usd)
        + links * link_cents(nic)
        + racks * usd_to_cents_up(facility.rack_usd)
    )
    return ClusterTotals(capex, it_w, racks)


def tier_name(tier: int, tiers: int) -> str:
    if tiers == 1:
        return "switch"
    if tiers <= 3:
        return TIER_NAMES[tier]
    return TIER_NAMES[0] if tier == 0 else f"tier-{tier + 1}"


def spare_servers(servers, per_100: float):
    """Hot spare servers bought at ``per_100`` per 100 training servers, rounded up (whole
    servers; arrays too); exact for per-100 figures to a thousandth."""
    milli = round(per_100 * 1000)
    return -(-np.asarray(servers, dtype=np.int64) * milli // 100_000)


def server_usd(gpu: GPUSpec) -> float:
    """One whole server of the plan's GPU type, the price of a hot spare: its GPUs and the
    server (host, chassis, scale-up switches); its NICs are not bought (a spare takes the
    failed server's place in the fabric: first order)."""
    return gpu.server.gpus_per_server * gpu.price_usd + gpu.server.overhead_usd


def storage_upgrade_usd(facility: Facility, storage_gb_per_s: float) -> float:
    """Per training server, the checkpoint storage bought above the facility's own
    (``checkpoint_storage_gb_per_s_per_server``, part of the site as before the decision,
    not charged) at ``storage_usd_per_gb_per_s``; a slower option buys nothing."""
    extra = storage_gb_per_s - facility.checkpoint_storage_gb_per_s_per_server
    return max(0.0, extra) * facility.storage_usd_per_gb_per_s


def purchases_cents(gpu: GPUSpec, facility: Facility, servers, spares_per_100, storage_gb_per_s):
    """The hot spares' and the checkpoint storage's price in cents (issue 18 item 4), each
    unit rounded up to the cent as the BOM lines are (arrays of server counts too)."""
    servers = np.asarray(servers, dtype=np.int64)
    spare = spare_servers(servers, spares_per_100) * usd_to_cents_up(server_usd(gpu))
    return spare + servers * usd_to_cents_up(storage_upgrade_usd(facility, storage_gb_per_s))


@dataclass(frozen=True)
class BomLine:
    item: str
    quantity: int
    unit_usd: float  # rounded up to the cent
    source: str

    @property
    def extended_cents(self) -> int:
        return self.quantity * usd_to_cents_up(self.unit_usd)

    @property
    def extended_usd(self) -> float:
        return self.extended_cents / 100.0

    def as_dict(self) -> dict[str, object]:
        return {
            "item": self.item,
            "quantity": self.quantity,
            "unit_usd": usd_to_cents_up(self.unit_usd) / 100.0,
            "extended_usd": self.extended_usd,
            "source": self.source,
        }


@dataclass(frozen=True)
class Cluster:
    """The hardware of one plan: servers, fabric, racks, power."""

    gpu: GPUSpec
    nic: NICSpec
    switch: SwitchSpec
    facility: Facility
    num_gpus: int
    nics_per_node: int
    # issue 18 item 4: the hot spares and checkpoint storage the plan buys (0: none, the
    # facility's storage: the ideal plan and the plan before the decision)
    spares_per_100: float = 0.0
    storage_gb_per_s: float = 0.0

    @property
    def spare_servers(self) -> int:
        return int(spare_servers(self.servers, self.spares_per_100))

    @property
    def bought_gpus(self) -> int:
        """GPUs bought: the job's, rounded up to whole purchase units."""
        return int(bought_gpus(self.gpu, self.num_gpus))

    @property
    def servers(self) -> int:
        return math.ceil(self.bought_gpus / self.gpu.server.gpus_per_server)

    @cached_property
    def fabric(self) -> FabricSize:
        return size_fabric(
            self.servers,
            self.nics_per_node,
            self.switch.ports,
            self.facility.oversubscription,
            domain_servers(self.gpu),
        )

    @cached_property
    def _totals(self) -> ClusterTotals:
        return cluster_totals(
            self.gpu, self.nic, self.switch, self.facility, [self.num_gpus], self.nics_per_node
        )

    @property
    def racks(self) -> int:
        return int(self._totals.racks[0])

    @property
    def it_power_w(self) -> int:
        return int(self._totals.it_power_w[0])

    @property
    def facility_power_w(self) -> float:
        return float(facility_power_w(self.it_power_w, self.facility))

    def energy_usd(self, days: float) -> float:
        """Electricity over ``days`` of training at the average draw."""
        return float(energy_usd(self.it_power_w, self.facility, days))

    def bom(self) -> list[BomLine]:
        """One line per item; quantities from the fabric and rack rules."""
        g, n, sw = self.gpu, self.nic, self.switch
        fabric = self.fabric
        lines = [
            BomLine(f"GPU {g.name}", self.bought_gpus, g.price_usd, g.price_source),
            BomLine(
                f"server overhead ({g.server.gpus_per_server}-GPU server: host, chassis, "
                "scale-up switches)",
                self.servers,
                g.server.overhead_usd,
                g.server.overhead_source,
            ),
        ]
        if not n.integrated:  # ports on the accelerator are not bought
            lines.append(
                BomLine(
                    f"NIC {n.name}", self.servers * self.nics_per_node, n.price_usd, n.price_source
                )
            )
        for t, count in enumerate(fabric.switches_per_tier):
            name = tier_name(t, fabric.tiers)  # "switch" alone in a one-tier fabric
            label = f"switch {sw.name}" if name == "switch" else f"{name} switch {sw.name}"
            lines.append(BomLine(label, count, sw.price_usd, sw.price_source))
        for t, count in enumerate(fabric.links_per_tier):
            lower = "server" if t == 0 else tier_name(t - 1, fabric.tiers)
            upper = tier_name(t, fabric.tiers) if fabric.tiers > 1 else "switch"
            lines.append(
                BomLine(
                    f"cable {lower}-{upper} ({n.name} links)",
                    count,
                    n.cable_usd,
                    n.link_price_source,
                )
            )
        if fabric.links:
            lines.append(
                BomLine(
                    f"transceiver ({n.name} links, two per link)",
                    2 * fabric.links,
                    n.transceiver_usd,
                    n.link_price_source,
                )
            )
        lines.append(BomLine("rack", self.racks, self.facility.rack_usd, self.facility.rack_source))
        lines.extend(self._purchase_lines())
        return [line for line in lines if line.quantity > 0]

    def _purchase_lines(self) -> list[BomLine]:
        """Hot spare servers and checkpoint storage (models/goodput.py with_purchases)."""
        fac, g = self.facility, self.gpu
        upgrade = storage_upgrade_usd(fac, self.storage_gb_per_s)
        base = fac.checkpoint_storage_gb_per_s_per_server
        return [
            BomLine(
                f"hot spare server ({self.spares_per_100:g} per 100: {g.server.gpus_per_server} "
                f"x {g.name} and the server)",
                self.spare_servers,
                server_usd(g),
                fac.hot_spare_source,
            ),
            BomLine(
                f"checkpoint storage per server ({self.storage_gb_per_s:g} GB/s, "
                f"{base:g} GB/s of it the facility's)",
                self.servers if upgrade > 0 else 0,
                upgrade,
                fac.storage_price_source,
            ),
        ]

    @cached_property
    def capex_cents(self) -> int:
        return sum(line.extended_cents for line in self.bom())

    @property
    def capex_usd(self) -> float:
        return self.capex_cents / 100.0

    def tco_usd(self, days: float) -> float:
        """Capex (or the job's share of it over the facility's lifetime) plus energy."""
        return float(tco_usd(self.capex_usd, self.it_power_w, self.facility, days))
