"""The training workload: transformer specs, the model zoo and the analytic performance model.

Holds the transformer spec and zoo (``transformer.py``, ``zoo.py``, ``hf_config.py``), the
performance model (``evaluate.py`` over ``step.py``, ``memory.py``, ``pipeline.py``,
``expert.py``, ``comm.py``, ``flops.py``), the cluster around the GPUs (``fabric.py``,
``cost.py``), goodput (``goodput.py``) and the evidence behind a prediction
(``evidence_range.py``, ``evidence_rule.py``). May import: catalog/ only.

The performance model (``Evaluation``, ``Hardware``, ``evaluate``: numpy) is imported on
first use (PEP 562), so that listing the zoo does not load it."""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from models.errors import ModelError
from models.layout import Assumptions, Layout
from models.transformer import TransformerSpec
from models.zoo import moe_zoo, resolve_model, zoo

if TYPE_CHECKING:
    from models.evaluate import Evaluation, Hardware, evaluate

_LAZY = ("Evaluation", "Hardware", "evaluate")


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module = importlib.import_module("models.evaluate")  # binds `evaluate` (below)
        return getattr(module, name)
    raise AttributeError(f"module 'models' has no attribute {name!r}")


class _Package(types.ModuleType):
    """``models.evaluate`` names the function, as when this package imported it eagerly:
    the import system binds a loaded submodule to the package's attribute of its name."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "evaluate" and isinstance(value, types.ModuleType):
            value = value.evaluate
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


__all__ = [
    "Assumptions",
    "Evaluation",
    "Hardware",
    "Layout",
    "ModelError",
    "TransformerSpec",
    "evaluate",
    "moe_zoo",
    "resolve_model",
    "zoo",
]
