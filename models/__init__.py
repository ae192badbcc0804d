"""The training workload: transformer specs, the model zoo and the analytic performance model."""

from models.errors import ModelError
from models.evaluate import Evaluation, Hardware, evaluate
from models.layout import Assumptions, Layout
from models.spec import TransformerSpec
from models.zoo import resolve_model, zoo

__all__ = [
    "Assumptions",
    "Evaluation",
    "Hardware",
    "Layout",
    "ModelError",
    "TransformerSpec",
    "evaluate",
    "resolve_model",
    "zoo",
]
