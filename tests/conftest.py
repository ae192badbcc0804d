"""Shared fixtures and the ``slow`` marker.

Helper functions the test modules share are in helpers.py (a plain module: test modules
import it, never each other or this file)."""

from __future__ import annotations

import pytest

from catalog import Catalog, load_catalog
from models.spec import TransformerSpec
from models.zoo import zoo


@pytest.fixture(scope="session")
def cat() -> Catalog:
    """The shipped catalog (a frozen dataclass; tests derive changed copies from it)."""
    return load_catalog()


@pytest.fixture(scope="session")
def catalog(cat: Catalog) -> Catalog:
    """The shipped catalog under the name some modules use."""
    return cat


@pytest.fixture(scope="session")
def models() -> dict[str, TransformerSpec]:
    """Every built-in model by name."""
    return zoo()
