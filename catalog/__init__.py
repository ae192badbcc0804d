"""Hardware catalog: GPUs, servers, NICs and switches with sourced, dated numbers.

Holds the specs (``specs.py``, pydantic), the shipped YAML and its loader (``loader.py``,
``files.py``), the rentable blocks (``cloud.py``). May import: nothing of the project (the
bottom layer: catalog -> models -> solvers -> designer, tests/test_layers.py)."""

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
