"""Hardware catalog: GPUs, servers, NICs and switches with sourced, dated numbers."""

from catalog.catalog import Catalog
from catalog.errors import CatalogError
from catalog.loader import load_catalog
from catalog.specs import Calibration, GPUSpec, NICSpec, ServerSpec, SwitchSpec

__all__ = [
    "Calibration",
    "Catalog",
    "CatalogError",
    "GPUSpec",
    "NICSpec",
    "ServerSpec",
    "SwitchSpec",
    "load_catalog",
]
