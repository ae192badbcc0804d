"""Errors the CLI turns into exit codes (ModelError and CatalogError are usage errors)."""


class UsageError(ValueError):
    """Bad input: exit code 2."""


class Infeasible(RuntimeError):
    """The question has no answer: exit code 1."""
