"""The catalog container: GPUs, NICs and switches by name."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TypeVar

from catalog.errors import CatalogError
from catalog.names import unknown_name
from catalog.specs import Facility, GPUSpec, NICSpec, SwitchSpec

_T = TypeVar("_T")


@dataclass(frozen=True)
class Catalog:
    gpus: dict[str, GPUSpec]
    nics: dict[str, NICSpec]
    switches: dict[str, SwitchSpec]
    facility: Facility

    def gpu(self, name: str) -> GPUSpec:
        return _entry("GPU", self.gpus, name)

    def gpus_for_sale(self) -> tuple[str, ...]:
        """The GPUs a question searches when it names none (``GPUSpec.for_sale``)."""
        return tuple(name for name, g in self.gpus.items() if g.for_sale)

    def nic(self, name: str) -> NICSpec:
        return _entry("NIC", self.nics, name)

    def switch_for(self, nic: NICSpec) -> SwitchSpec:
        return self.switches[nic.switch]

    def fabric_of(self, nic: NICSpec) -> str:
        """'infiniband' or 'ethernet': the fabric of the switch the NIC plugs into."""
        return self.switch_for(nic).fabric

    def nic_fits(self, gpu: GPUSpec, nic: NICSpec) -> bool:
        """Whether ``gpu``'s server can take ``nic``: a server with a fixed NIC list takes
        only those; otherwise any card (not ports integrated on another accelerator) whose
        PCIe generation the server's slots run at or above."""
        listed = gpu.server.nics
        if listed is not None:
            return nic.name in listed
        return not nic.integrated and nic.pcie_gen <= gpu.host_pcie_gen

    def nics_for(self, gpu: GPUSpec, names=None, fabric: str = "any") -> list[NICSpec]:
        """The catalog NICs (of ``names``, default all) that fit ``gpu``'s server, on
        ``fabric`` ('any', 'infiniband' or 'ethernet')."""
        pool = [self.nic(n) for n in names] if names is not None else list(self.nics.values())
        return [
            n
            for n in pool
            if self.nic_fits(gpu, n) and (fabric == "any" or self.fabric_of(n) == fabric)
        ]

    def with_stack(self, stack: str) -> Catalog:
        """The same catalog with every GPU under the profile of ``stack``."""
        gpus = {}
        for name, gpu in self.gpus.items():
            if stack not in gpu.stacks:
                raise CatalogError(
                    f"gpus.{name}: no profile for stack {stack!r}; add stacks.{stack} or use "
                    f"one of {', '.join(sorted(gpu.stacks))}"
                )
            gpus[name] = gpu.with_stack(stack)
        return replace(self, gpus=gpus)

    def with_facility(self, **changes) -> Catalog:
        """The same catalog with some facility constants changed (validated)."""
        data = self.facility.model_dump() | changes
        return replace(self, facility=Facility.model_validate(data))


def _entry(kind: str, table: dict[str, _T], name: str) -> _T:
    """``table[name]``, or a CatalogError that lists the names there are."""
    try:
        return table[name]
    except KeyError:
        raise CatalogError(unknown_name(kind, name, table)) from None
