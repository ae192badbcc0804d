"""Shared fixtures and the ``slow`` marker.

Helper functions the test modules share are in helpers.py (a plain module: test modules
import it, never each other or this file)."""

from __future__ import annotations

import signal

import pytest
from click.testing import CliRunner

from catalog import Catalog, load_catalog
from designer.question.build import build_scenario
from models.transformer import TransformerSpec
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


@pytest.fixture(scope="session")
def runner() -> CliRunner:
    return CliRunner()


# --- the slow marker -------------------------------------------------------------------------
# Tests marked ``slow`` (the heavy differential, conflict and property tests) run only with
# --run-slow: README's test command and .ci/run pass it, a plain ``python -m pytest -q`` skips
# them and says how many it skipped.


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--run-slow", action="store_true", help="also run the tests marked slow (as CI does)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="slow: run with --run-slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


TCO_QUESTION = dict(
    model="llama2-70b", tokens=2e12, deadline=90.0, pricing="tco", lifetime_years=4.0
)


@pytest.fixture(scope="module")
def tco():
    return build_scenario(**TCO_QUESTION)


@pytest.fixture(autouse=True)
def _sigint_handler_kept():
    """Reinstall Python's SIGINT handler after each test. A plain ``cp_model.CpSolver()``
    installs OR-Tools' own handler in C for its solve and leaves SIGINT at its default
    action afterwards, unseen by ``signal.getsignal``; a later test that sends SIGINT
    (tests/test_interrupts.py) then killed the whole run (exit 130). Tests use
    ``solvers.stop.stoppable_solver()``; this keeps one that does not from ending the run."""
    yield
    signal.signal(signal.SIGINT, signal.getsignal(signal.SIGINT))
