"""The catalog container: GPUs, NICs and switches by name."""

from __future__ import annotations

from dataclasses import dataclass

from catalog.errors import CatalogError
from catalog.specs import GPUSpec, NICSpec, SwitchSpec


@dataclass(frozen=True)
class Catalog:
    gpus: dict[str, GPUSpec]
    nics: dict[str, NICSpec]
    switches: dict[str, SwitchSpec]

    def gpu(self, name: str) -> GPUSpec:
        try:
            return self.gpus[name]
        except KeyError:
            raise CatalogError(
                f"unknown GPU {name!r}; choose one of {', '.join(sorted(self.gpus))}"
            ) from None

    def nic(self, name: str) -> NICSpec:
        try:
            return self.nics[name]
        except KeyError:
            raise CatalogError(
                f"unknown NIC {name!r}; choose one of {', '.join(sorted(self.nics))}"
            ) from None

    def switch_for(self, nic: NICSpec) -> SwitchSpec:
        return self.switches[nic.switch]

    def nic_cost_usd(self, nic: NICSpec) -> float:
        """One NIC with its share of switch ports and optics (capex per NIC)."""
        port = self.switch_for(nic).price_per_port_usd
        return nic.price_usd + nic.switch_ports_per_nic * port + nic.optics_usd_per_nic
