"""Errors of the workload layer; messages name the file, field or option."""


class ModelError(ValueError):
    """Bad model or layout input; ``str(err)`` is one line naming what is wrong and the fix."""
