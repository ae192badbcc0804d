"""The catalog container: GPUs, NICs and switches by name."""

from __future__ import annotations

from dataclasses import dataclass, replace

from catalog.errors import CatalogError
from catalog.specs import Facility, GPUSpec, NICSpec, SwitchSpec


@dataclass(frozen=True)
class Catalog:
    gpus: dict[str, GPUSpec]
    nics: dict[str, NICSpec]
    switches: dict[str, SwitchSpec]
    facility: Facility

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
